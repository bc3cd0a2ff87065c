#include "eval.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/output_file.h"
#include "runtime/eval.h"

namespace tessera::cli {

void add_eval_options(CLI::App* sub, EvalArgs& e) {
  sub->add_option("-f,--file", e.file, "the text to score (e.g. /usr/share/common-licenses/GPL-3, Debian's base-files)")->required();
  sub->add_option("--reference", e.reference,
                  "the same model at a higher precision (GGUF or Hugging Face directory): KL divergence and top-token agreement");
  sub->add_option("--chunks", e.chunks, "score at most this many chunks")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--reference-cache-type", e.reference_cache_type,
                  "the reference's KV cache type (default: --cache-type's), e.g. f16 against a model evaluated with --cache-type q8")
      ->check(CLI::IsMember(kv_type_choices()));
  sub->add_option("--json", e.json, "also write the figures as JSON to this file");
}

int cmd_eval(CommonArgs& a, const EvalArgs& e, int chunk) {
  check_output_path(e.json);
  if (!e.reference_cache_type.empty() && e.reference.empty()) fail("--reference-cache-type needs --reference");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(e.file, ec)) fail("cannot read the text '%s' (not a regular file)", e.file.c_str());
  if (std::filesystem::file_size(e.file, ec) > (size_t{256} << 20)) fail("the text '%s' is over 256 MiB", e.file.c_str());
  std::ifstream in(e.file, std::ios::binary);
  if (!in) fail("cannot read the text '%s'", e.file.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) fail("the text '%s' is empty", e.file.c_str());
  a.ctx = chunk;
  auto model = load(a);
  std::unique_ptr<LlamaModel> ref;
  if (!e.reference.empty()) {
    CommonArgs ra = a;
    ra.model = e.reference;
    ref = load(ra);
  }
  // llama-perplexity tokenizes the whole text once, special-token text included
  const std::vector<int32_t> tokens = model->tokenizer().encode(text, true);
  if (ref && ref->tokenizer().encode(text, true) != tokens) fail("the reference tokenizes the text differently: not the same model");
  Session s(*model, session_options(a));
  std::unique_ptr<Session> rs;
  if (ref) {
    SessionOptions ro = session_options(a);
    if (!e.reference_cache_type.empty()) ro.kv_type = kv_type_from_name(e.reference_cache_type);
    rs = std::make_unique<Session>(*ref, ro);
  }
  if (s.n_ctx() < chunk) fail("eval: chunks of %d tokens do not fit the model's context of %d (lower -c)", chunk, s.n_ctx());
  if (tokens.size() < static_cast<size_t>(chunk))
    fail("eval: the text is %zu tokens, shorter than one chunk of %d (lower -c)", tokens.size(), chunk);
  EvalOptions o;
  o.n_ctx = chunk;
  o.chunks = e.chunks;
  std::fprintf(stderr, "eval: %zu tokens, chunks of %d, scoring the second half of each\n", tokens.size(), chunk);
  const EvalStats st = evaluate(s, rs.get(), tokens, o, [&](const EvalStats& p) {
    std::fprintf(stderr, "[%d] PPL %.4f%s\n", p.chunks, p.ppl, p.has_reference ? format(", mean KLD %.6f", p.kld_mean).c_str() : "");
  });
  std::printf("chunks %d, predictions scored %lld\n", st.chunks, static_cast<long long>(st.scored));
  std::printf("PPL(model)      %.4f +/- %.5f\n", st.ppl, st.ppl_err);
  if (st.has_reference) {
    std::printf("PPL(reference)  %.4f +/- %.5f\n", st.ref_ppl, st.ref_ppl_err);
    std::printf("Mean KLD        %.6f +/- %.6f\n", st.kld_mean, st.kld_err);
    std::printf("Median KLD      %.6f\n99.0%% KLD       %.6f\nMaximum KLD     %.6f\n", st.kld_median, st.kld_p99, st.kld_max);
    std::printf("Same top p      %.3f %%\n", 100.0 * st.same_top);
  }
  flush_stdout();
  if (!e.json.empty()) {
    std::string j = format("{\"model\": \"%s\", \"text\": \"%s\", \"chunk\": %d, \"chunks\": %d, \"scored\": %lld, \"ppl\": %.6f, \"ppl_err\": %.6f",
                           json_escape(a.model).c_str(), json_escape(e.file).c_str(), chunk, st.chunks, static_cast<long long>(st.scored),
                           st.ppl, st.ppl_err);
    if (st.has_reference)
      j += format(", \"reference\": \"%s\", \"ref_ppl\": %.6f, \"ref_ppl_err\": %.6f, \"kld_mean\": %.8f, \"kld_err\": %.8f, \"kld_median\": %.8f, "
                  "\"kld_p99\": %.8f, \"kld_max\": %.8f, \"same_top\": %.6f",
                  json_escape(e.reference).c_str(), st.ref_ppl, st.ref_ppl_err, st.kld_mean, st.kld_err, st.kld_median, st.kld_p99,
                  st.kld_max, st.same_top);
    write_output_file(e.json, j + "}\n");
  }
  return 0;
}

}  // namespace tessera::cli
