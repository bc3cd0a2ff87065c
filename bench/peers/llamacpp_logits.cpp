// llamacpp_logits: dump teacher-forced logits from the peer llama.cpp build.
//
// Our own small driver over the public libllama C API (include/llama.h); it is
// compiled by bench/peers/build_llamacpp.sh against .peers/llama.cpp-build.
//
// Usage:
//   llamacpp_logits -m MODEL.gguf -f TEXT.txt [-o OUT.json] [-t THREADS]
//                   [--model-sha256 HEX] [--llama-commit STR] [--top K] [--add-special]
//   llamacpp_logits -m MODEL.gguf -f TEXT.txt --tokenize-only [--parse-special]
//
// Logits mode: the file's bytes (verbatim, no trimming) are tokenized with
// add_special=false, parse_special=false, then evaluated teacher-forced in a
// single llama_decode call (n_batch = n_ctx >= n_tokens) with logits requested
// for every position. --add-special tokenizes with add_special=true (the model's
// BOS, for models such as Gemma that need it). Position i holds the distribution predicting token i+1
// (the last position predicts the token after the text).
//
// Output JSON (one position per line):
//   {"model_sha256_hint": ..., "llama_cpp_settings": {...}, "n_vocab": N,
//    "tokens": [...], "positions": [{"top": [[id, logit], ...]}, ...],
//    "logsumexp": [...]}
// Top-k is sorted by logit descending, ties by id ascending. logsumexp is over
// the full vocabulary, computed in double.
//
// Tokenize-only mode prints the ids as a JSON list on stdout
// (add_special=false, parse_special as given) and loads the vocab only.

#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> g_log_fa;  // captured log lines mentioning flash_attn / KV types

void log_cb(enum ggml_log_level level, const char * text, void * /*user*/) {
    if (text && (std::strstr(text, "flash_attn") || std::strstr(text, "Flash Attention") ||
                 std::strstr(text, "K (f") || std::strstr(text, "type_k") || std::strstr(text, "n_ubatch"))) {
        std::string s(text);
        while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
        g_log_fa.push_back(s);
    }
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
        std::fputs(text, stderr);
    }
}

std::string json_escape(const std::string & s) {
    std::string out;
    for (unsigned char c : s) {
        switch (c) {
            case '"':  out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                    out += buf;
                } else {
                    out += (char) c;
                }
        }
    }
    return out;
}

std::string fmt_float(double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", v);
    return buf;
}

[[noreturn]] void usage(const char * argv0) {
    std::fprintf(stderr,
                 "usage: %s -m MODEL.gguf -f TEXT.txt [-o OUT.json] [-t THREADS] [--top K]\n"
                 "          [--model-sha256 HEX] [--llama-commit STR] [--add-special]\n"
                 "       %s -m MODEL.gguf -f TEXT.txt --tokenize-only [--parse-special]\n",
                 argv0, argv0);
    std::exit(2);
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool parse_special,
                                  bool add_special = false) {
    int32_t n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_special, parse_special);
    if (n < 0) n = 0;  // positive return on an empty buffer means 0 tokens
    std::vector<llama_token> toks(n);
    if (n > 0) {
        const int32_t got =
            llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), n, add_special, parse_special);
        if (got != n) {
            std::fprintf(stderr, "tokenize failed (%d vs %d)\n", got, n);
            std::exit(1);
        }
    }
    return toks;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string model_path, text_path, out_path, sha_hint, llama_commit = "unknown";
    int n_threads = 2;
    int top_k = 10;
    bool tokenize_only = false;
    bool parse_special = false;
    bool add_special = false;  // --add-special: the model's BOS/EOS as its tokenizer adds them
    bool kv_f32 = false;      // --kv-f32: f32 K/V cache instead of the f16 default
    std::string fa = "auto";  // --fa on|off|auto

    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(argv[0]);
            return argv[++i];
        };
        if (a == "-m") model_path = next();
        else if (a == "-f") text_path = next();
        else if (a == "-o") out_path = next();
        else if (a == "-t") n_threads = std::atoi(next().c_str());
        else if (a == "--top") top_k = std::atoi(next().c_str());
        else if (a == "--model-sha256") sha_hint = next();
        else if (a == "--llama-commit") llama_commit = next();
        else if (a == "--tokenize-only") tokenize_only = true;
        else if (a == "--parse-special") parse_special = true;
        else if (a == "--add-special") add_special = true;
        else if (a == "--kv-f32") kv_f32 = true;
        else if (a == "--fa") fa = next();
        else usage(argv[0]);
    }
    if (model_path.empty() || text_path.empty()) usage(argv[0]);

    std::string text;
    {
        std::ifstream in(text_path, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "cannot read %s\n", text_path.c_str());
            return 1;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    }

    llama_log_set(log_cb, nullptr);
    llama_backend_init();

    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = 0;
    mparams.vocab_only = tokenize_only;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mparams);
    if (!model) {
        std::fprintf(stderr, "failed to load %s\n", model_path.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    const std::vector<llama_token> toks = tokenize(vocab, text, tokenize_only ? parse_special : false, add_special);

    if (tokenize_only) {
        std::printf("[");
        for (size_t i = 0; i < toks.size(); ++i) std::printf(i ? ", %d" : "%d", toks[i]);
        std::printf("]\n");
        llama_model_free(model);
        llama_backend_free();
        return 0;
    }

    const int n_tok = (int) toks.size();
    if (n_tok == 0) {
        std::fprintf(stderr, "empty text\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(vocab);

    llama_context_params cparams = llama_context_default_params();
    const uint32_t n_ctx = (uint32_t) ((n_tok + 255) / 256 * 256);
    cparams.n_ctx = n_ctx;
    cparams.n_batch = n_ctx;  // whole text in one llama_decode call
    // n_ubatch left at its default; K/V type and flash attention as asked (defaults: f16, auto)
    if (kv_f32) {
        cparams.type_k = GGML_TYPE_F32;
        cparams.type_v = GGML_TYPE_F32;
    }
    cparams.flash_attn_type = fa == "on"  ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                            : fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                          : LLAMA_FLASH_ATTN_TYPE_AUTO;
    cparams.n_threads = n_threads;
    cparams.n_threads_batch = n_threads;
    cparams.no_perf = true;

    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        std::fprintf(stderr, "failed to create context\n");
        return 1;
    }

    llama_batch batch = llama_batch_init(n_tok, 0, 1);
    for (int i = 0; i < n_tok; ++i) {
        batch.token[i] = toks[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_tok;
    if (llama_decode(ctx, batch) != 0) {
        std::fprintf(stderr, "llama_decode failed\n");
        return 1;
    }

    std::vector<std::vector<std::pair<int, float>>> tops(n_tok);
    std::vector<double> lse(n_tok);
    std::vector<int> idx(n_vocab);
    for (int i = 0; i < n_tok; ++i) {
        const float * lg = llama_get_logits_ith(ctx, i);
        if (!lg) {
            std::fprintf(stderr, "no logits for position %d\n", i);
            return 1;
        }
        double mx = -INFINITY;
        for (int v = 0; v < n_vocab; ++v) mx = std::max(mx, (double) lg[v]);
        double s = 0.0;
        for (int v = 0; v < n_vocab; ++v) s += std::exp((double) lg[v] - mx);
        lse[i] = mx + std::log(s);

        std::iota(idx.begin(), idx.end(), 0);
        const int k = std::min(top_k, n_vocab);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
            return lg[a] != lg[b] ? lg[a] > lg[b] : a < b;
        });
        for (int j = 0; j < k; ++j) tops[i].emplace_back(idx[j], lg[idx[j]]);
    }

    // ---- write JSON
    FILE * out = out_path.empty() ? stdout : std::fopen(out_path.c_str(), "wb");
    if (!out) {
        std::fprintf(stderr, "cannot write %s\n", out_path.c_str());
        return 1;
    }
    std::string hint = sha_hint;
    if (hint.empty()) {
        std::ifstream f(model_path, std::ios::binary | std::ios::ate);
        const std::string base = model_path.substr(model_path.find_last_of('/') + 1);
        hint = base + ":size=" + std::to_string((long long) f.tellg());
    }
    const uint32_t n_ctx_real = llama_n_ctx(ctx);
    std::string fa_log;
    for (const auto & l : g_log_fa) fa_log += (fa_log.empty() ? "" : " | ") + l;

    std::fprintf(out, "{\n");
    std::fprintf(out, "\"model_sha256_hint\": \"%s\",\n", json_escape(hint).c_str());
    std::fprintf(out,
                 "\"llama_cpp_settings\": {\"llama_cpp_commit\": \"%s\", \"n_ctx\": %u, \"n_batch\": %u, "
                 "\"n_ubatch\": %u, \"n_threads\": %d, \"type_k\": \"%s\", \"type_v\": \"%s\", "
                 "\"flash_attn_type\": \"%s\", \"backend\": \"CPU\", \"add_special\": %s, "
                 "\"parse_special\": false, \"single_decode_call\": true, \"log\": \"%s\"},\n",
                 json_escape(llama_commit).c_str(), n_ctx_real, llama_n_batch(ctx), llama_n_ubatch(ctx), n_threads,
                 kv_f32 ? "f32" : "f16", kv_f32 ? "f32" : "f16", llama_flash_attn_type_name(cparams.flash_attn_type), add_special ? "true" : "false",
                 json_escape(fa_log).c_str());
    std::fprintf(out, "\"text_file\": \"%s\",\n",
                 json_escape(text_path.substr(text_path.find_last_of('/') + 1)).c_str());
    std::fprintf(out, "\"n_vocab\": %d,\n", n_vocab);
    std::fprintf(out, "\"n_tokens\": %d,\n", n_tok);
    std::fprintf(out, "\"tokens\": [");
    for (int i = 0; i < n_tok; ++i) std::fprintf(out, i ? ", %d" : "%d", toks[i]);
    std::fprintf(out, "],\n\"positions\": [\n");
    for (int i = 0; i < n_tok; ++i) {
        std::fprintf(out, "{\"top\": [");
        for (size_t j = 0; j < tops[i].size(); ++j) {
            std::fprintf(out, "%s[%d, %s]", j ? ", " : "", tops[i][j].first, fmt_float(tops[i][j].second).c_str());
        }
        std::fprintf(out, "]}%s\n", i + 1 < n_tok ? "," : "");
    }
    std::fprintf(out, "],\n\"logsumexp\": [");
    for (int i = 0; i < n_tok; ++i) std::fprintf(out, "%s%s", i ? ", " : "", fmt_float(lse[i]).c_str());
    std::fprintf(out, "]\n}\n");
    if (out != stdout) std::fclose(out);

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
