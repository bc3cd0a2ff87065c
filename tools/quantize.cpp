#include "quantize.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/output_file.h"
#include "formats/json_input.h"
#include "models/gguf_convert.h"
#include "runtime/eval.h"
#include "runtime/mixed_precision.h"

namespace tessera::cli {

namespace {

// "1107409984", "1056M", "2G": bytes, with an optional binary K, M or G
uint64_t parse_size(const std::string& s) {
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  uint64_t mul = 1;
  if (p != end && p + 1 == end) mul = *p == 'K' ? 1ull << 10 : *p == 'M' ? 1ull << 20 : *p == 'G' ? 1ull << 30 : 0;
  if (ec != std::errc() || p == s.data() || (p != end && (p + 1 != end || mul == 0)) || v == 0 || v > (1ull << 50) / mul)
    fail("--max-size '%s': use a number of bytes, optionally with K, M or G (e.g. 1107409984 or 1056M)", s.c_str());
  return v * mul;
}

std::vector<DType> parse_types(const std::string& list) {
  std::vector<DType> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string name = list.substr(pos, comma - pos);
    DType t;
    try {
      t = convert_type_from_name(name);
    } catch (const Error&) {
      fail("--types: unknown type '%s' (block types: q8_0, q4_0, q4_1, q5_0, q5_1, q3_k, q4_k, q5_k, q6_k)", name.c_str());
    }
    if (info(t).block_elems <= 1) fail("--types: %s is not a quantized type (the reference's own type is always a candidate)", name.c_str());
    out.push_back(t);
    pos = comma + 1;
  }
  return out;
}

double bits_per_weight(uint64_t bytes, const Sensitivity& s) { return 8.0 * static_cast<double>(bytes) / static_cast<double>(s.total_elements); }

void print_plan(const Sensitivity& s, const MixPlan& p) {
  std::printf("| group | tensors | type | bytes | predicted KL increase |\n|---|---|---|---|---|\n");
  for (size_t g = 0; g < s.groups.size(); ++g) {
    const MixCandidate& c = s.groups[g].candidates[p.choice[g]];
    std::printf("| %s | %zu | %s | %llu | %.6f |\n", s.groups[g].name.c_str(), s.groups[g].tensors.size(), c.name().c_str(),
                static_cast<unsigned long long>(c.bytes), c.dkl);
  }
}

}  // namespace

void add_quantize_options(CLI::App* sub, QuantizeArgs& q) {
  sub->add_option("-o,--output", q.output, "the mixed-precision GGUF to write")->required();
  auto* kld = sub->add_option("--max-kld", q.max_kld, "the fewest bytes whose mean KL divergence from the reference is at most this (nats)")
                  ->check(CLI::Range(0.0, 100.0));
  auto* size = sub->add_option("--max-size", q.max_size, "the least KL divergence in a file of at most this many bytes (K, M, G: binary)");
  auto* bpw = sub->add_option("--max-bpw", q.max_bpw, "the least KL divergence at most this many bits per weight (all tensors' bytes over all weights)")
                  ->check(CLI::Range(0.5, 64.0));
  kld->excludes(size, bpw);
  size->excludes(bpw);
  sub->add_option("-f,--file", q.file, "calibration text (default /usr/share/common-licenses/GPL-3, Debian's base-files)");
  sub->add_option("--calib-chunks", q.calib_chunks, "chunks of -c tokens of the text to measure on (default 1)")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--types", q.types, "candidate types, comma-separated (default q4_k,q5_k,q6_k,q8_0; the reference's own type is one too)");
  sub->add_option("--layer-bands", q.layer_bands,
                  "0 (default): a sensitivity per tensor; N: per kind of matrix over N bands of layers (fewer measurements on a large model)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--sensitivity", q.sensitivity, "reuse the sensitivities saved by --save-sensitivity instead of measuring them");
  sub->add_option("--save-sensitivity", q.save_sensitivity, "write the measured sensitivities as JSON to this file");
}

int cmd_quantize(CommonArgs& a, const QuantizeArgs& q, int chunk) {
  if (q.max_kld < 0 && q.max_size.empty() && q.max_bpw < 0) fail("pass a budget: --max-kld K, --max-size BYTES or --max-bpw B");
  const uint64_t max_size = q.max_size.empty() ? 0 : parse_size(q.max_size);
  const std::vector<DType> types = parse_types(q.types);
  check_output_path(q.output);
  check_output_path(q.save_sensitivity);
  if (!q.sensitivity.empty() && !q.save_sensitivity.empty()) fail("--sensitivity reuses saved figures: --save-sensitivity has nothing new to write");
  if (a.model.empty()) a.model = default_model_path();
  std::error_code ec;
  if (std::filesystem::is_directory(a.model, ec)) fail("quantize needs a GGUF reference, not a directory ('%s')", a.model.c_str());
  if (std::filesystem::equivalent(a.model, q.output, ec)) fail("the output '%s' is the reference itself", q.output.c_str());
  const std::string text = read_text_file(q.file);
  const nlohmann::json saved = q.sensitivity.empty() ? nlohmann::json() : read_json_file(q.sensitivity);
  a.ctx = chunk;
  auto model = load(a);
  auto file = GgufFile::open(a.model);
  Sensitivity sens = mix_groups(*file, types, q.layer_bands);
  sens.model = a.model;
  sens.text = q.file;
  sens.cache_type = a.cache_type;
  if (!q.sensitivity.empty()) sensitivity_from_json(saved, sens, q.sensitivity);
  // the file's bytes beyond its tensors (metadata, and at most 32 bytes of alignment per tensor)
  uint64_t ref_tensor_bytes = 0;
  for (const GgufTensor& t : file->tensors()) ref_tensor_bytes += t.n_bytes;
  const uint64_t overhead = std::filesystem::file_size(a.model, ec) - ref_tensor_bytes + 32 * file->tensors().size();
  MixBudget budget;
  if (q.max_kld >= 0) budget.max_kld = q.max_kld;
  if (max_size > 0) {
    if (max_size <= overhead) fail("--max-size %llu is smaller than the file's metadata", static_cast<unsigned long long>(max_size));
    budget.max_bytes = max_size - overhead;
  }
  if (q.max_bpw > 0) budget.max_bytes = static_cast<uint64_t>(q.max_bpw * static_cast<double>(sens.total_elements) / 8.0);
  if (budget.max_bytes > 0) search_mix(sens, budget);  // a size no mix fits fails now, before the measurements
  const std::vector<int32_t> tokens = model->tokenizer().encode(text, true);
  if (tokens.size() < static_cast<size_t>(chunk)) fail("the text is %zu tokens, shorter than one chunk of %d (lower -c)", tokens.size(), chunk);
  EvalOptions eo;
  eo.n_ctx = chunk;
  eo.chunks = q.calib_chunks;
  // the reference runs as llama.cpp would: its own weights, f16 KV cache; its log-probabilities are kept
  SessionOptions ro = session_options(a);
  ro.kv_type = DType::F16;
  const double t0 = now_seconds();
  ReferenceLogprobs ref;
  {
    Session rs(*model, ro);
    if (rs.n_ctx() < chunk) fail("chunks of %d tokens do not fit the model's context of %d (lower -c)", chunk, rs.n_ctx());
    ref = reference_logprobs(rs, tokens, eo);
  }
  std::fprintf(stderr, "quantize: reference log-probabilities over %d chunk(s) of %d tokens in %.1f s\n", ref.chunks, chunk, now_seconds() - t0);
  size_t measured = 0;
  for (const MixGroup& g : sens.groups) measured += g.candidates.size() - 1;
  if (q.sensitivity.empty()) {
    std::fprintf(stderr, "quantize: measuring %zu groups, %zu variants (each group alone in each type)\n", sens.groups.size(), measured);
    Session s(*model, session_options(a));
    size_t done = 0;
    measure_sensitivity(sens, *file, *model, s, ref, tokens, [&](const MixGroup& g, const MixCandidate& c, double sec) {
      std::fprintf(stderr, "[%zu/%zu] %s as %s: KL +%.6f (%.1f s)\n", ++done, measured, g.name.c_str(), c.name().c_str(), c.dkl, sec);
    });
    if (!q.save_sensitivity.empty()) write_output_file(q.save_sensitivity, sensitivity_to_json(sens).dump(1) + "\n");
  }
  MixPlan plan = search_mix(sens, budget);
  EvalStats st;
  for (int round = 0;; ++round) {
    print_plan(sens, plan);
    std::printf("plan: %llu tensor bytes (%.3f bits per weight), predicted mean KLD %.6f (base %.6f)\n",
                static_cast<unsigned long long>(plan.bytes), bits_per_weight(plan.bytes, sens), plan.predicted_kld, sens.base_kld);
    flush_stdout();
    convert_gguf(*file, plan_main_type(sens, plan, *file), q.output, plan_overrides(sens, plan, *file));
    // measure what was written, against the cached reference
    CommonArgs oa = a;
    oa.model = q.output;
    auto out = load(oa);
    Session os(*out, session_options(a));
    st = evaluate(os, ref, tokens);
    std::printf("wrote %s: %llu bytes; mean KLD predicted %.6f, measured %.6f +/- %.6f over %d chunk(s) of %d\n", q.output.c_str(),
                static_cast<unsigned long long>(std::filesystem::file_size(q.output, ec)), plan.predicted_kld, st.kld_mean, st.kld_err,
                st.chunks, chunk);
    flush_stdout();
    if (q.max_kld < 0 || st.kld_mean <= q.max_kld || round == 1) break;
    // one correction: the budget tightened by how far the additive prediction fell short
    budget.max_kld = q.max_kld * plan.predicted_kld / st.kld_mean;
    std::printf("measured above --max-kld %g: searching again for a predicted %.6f\n", q.max_kld, budget.max_kld);
    try {
      plan = search_mix(sens, budget);
    } catch (const Error& e) {  // the first file stays
      std::fprintf(stderr, "quantize: note: no second plan (%s)\n", e.what());
      break;
    }
  }
  if (q.max_kld >= 0 && st.kld_mean > q.max_kld)
    std::fprintf(stderr, "quantize: note: the measured KL divergence %.6f is above --max-kld %g after one correction\n", st.kld_mean, q.max_kld);
  return 0;
}

}  // namespace tessera::cli
