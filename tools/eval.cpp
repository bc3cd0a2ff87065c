#include "eval.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/output_file.h"
#include "models/requantized_source.h"
#include "runtime/eval.h"
#include "runtime/eval_layers.h"
#include "runtime/eval_vision.h"

namespace tessera::cli {

void add_eval_options(CLI::App* sub, EvalArgs& e) {
  sub->add_option("-f,--file", e.file, "the text to score (e.g. /usr/share/common-licenses/GPL-3, Debian's base-files)");
  sub->add_option("--image", e.images, "instead of a text: screenshots (repeat the flag) through the vision tower and the text model")
      ->allow_extra_args(false);
  sub->add_option("--mmproj", e.mmproj, "--image: the model's vision tower (llama.cpp mmproj GGUF)");
  sub->add_option("--reference-mmproj", e.reference_mmproj, "--image: the reference's vision tower (default: --mmproj)");
  sub->add_flag("--reference-fp32-vision", e.reference_fp32_vision,
                "--image: the reference's vision tower in fp32 (the reference numerics), the model's as the flags say");
  sub->add_option("-p,--prompt", e.question, "--image: the question after the image");
  sub->add_option("--vision-max-pixels", e.max_pixels, "--image, Qwen3-VL: resize each image to at most this many pixels")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 26));
  sub->add_option("--reference", e.reference,
                  "the same model at a higher precision (GGUF or Hugging Face directory): KL divergence and top-token agreement");
  sub->add_option("--chunks", e.chunks, "score at most this many chunks")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--reference-cache-type", e.reference_cache_type,
                  "the reference's KV cache type (default: --cache-type's), e.g. f16 against a model evaluated with --cache-type q8")
      ->check(CLI::IsMember(kv_type_choices()));
  sub->add_flag("--reference-f32-activations", e.reference_f32_activations,
                "the reference's quantized matrices on fp32 activations (the model's as the flags say): with the model file "
                "itself as the reference, the cost of the default 8-bit activations alone");
  sub->add_flag("--per-layer", e.per_layer,
                "with --reference: after each layer, the hidden states' relative L2 distance from the reference's (mean, 99%, max)");
  sub->add_option("--requantize", e.requantize,
                  "the model's weights requantized at load to this layout (a GGUF model): a4g64 or a4g32 (MLX's affine 4-bit, "
                  "groups of 64 / 32) or a convert type; the tensors `tessera convert --type` would quantize");
  sub->add_option("--json", e.json, "also write the figures as JSON to this file");
}

namespace {

// `tessera eval --image`: runtime/eval_vision.h over each screenshot.
int cmd_eval_vision(CommonArgs& a, const EvalArgs& e) {
  if (!e.file.empty()) fail("pass either -f TEXT or --image, not both");
  if (e.mmproj.empty()) fail("--image needs the vision tower: pass --mmproj MMPROJ.gguf");
  if (!e.reference_cache_type.empty() || e.chunks >= 0 || e.reference_f32_activations)
    fail("--chunks, --reference-cache-type and --reference-f32-activations are for a text (-f)");
  if (e.reference.empty() && e.reference_mmproj.empty() && !e.reference_fp32_vision)
    fail("--image needs a reference: --reference, --reference-mmproj or --reference-fp32-vision");
  std::vector<std::pair<std::string, ImageRGB>> images;
  for (const std::string& path : e.images) images.emplace_back(std::filesystem::path(path).filename().string(), load_image(path));
  HfModel model = load_any(a, e.mmproj);
  CommonArgs ra = a;
  if (!e.reference.empty()) ra.model = e.reference;
  if (e.reference_fp32_vision) ra.bf16_vision = ra.f16_vision = false, ra.fp32_vision = true;
  HfModel ref = load_any(ra, e.reference_mmproj.empty() ? e.mmproj : e.reference_mmproj);
  const VlmParts mp{model.text.get(), nullptr, model.qwen_vision.get()}, rp{ref.text.get(), nullptr, ref.qwen_vision.get()};
  VlmParts m = mp, r = rp;
  std::unique_ptr<Idefics3Vision> mv, rv;
  if (model.qwen_vision) vision_options(a, *model.qwen_vision);
  if (ref.qwen_vision) vision_options(ra, *ref.qwen_vision);
  if (model.vision) mv = vision_options(a, std::move(model.vision)), m.smolvlm = mv.get();
  if (ref.vision) rv = vision_options(ra, std::move(ref.vision)), r.smolvlm = rv.get();
  const VisionEvalStats st = evaluate_vision(m, r, images, e.question, session_options(a), e.max_pixels);
  std::printf("| image | tiles | image tokens | encoder rel. error | connector rel. error | next-token KL | same top |\n|---|---|---|---|---|---|---|\n");
  for (const VisionEvalImage& i : st.images)
    std::printf("| %s | %d | %d | %s | %.3e | %.3e | %s |\n", i.name.c_str(), i.tiles, i.image_tokens,
                i.encoder_err < 0 ? "-" : format("%.3e", i.encoder_err).c_str(), i.connector_err, i.kld, i.same_top ? "yes" : "no");
  std::printf("\nencoder rel. error max %s; connector rel. error mean %.3e, max %.3e; next-token KL mean %.3e, max %.3e; same top %.1f%%\n",
              st.encoder_err_max < 0 ? "-" : format("%.3e", st.encoder_err_max).c_str(), st.connector_err_mean, st.connector_err_max,
              st.kld_mean, st.kld_max, 100 * st.same_top);
  flush_stdout();
  if (!e.json.empty()) {
    std::string j = "{\"images\": [";
    for (size_t k = 0; k < st.images.size(); ++k) {
      const VisionEvalImage& i = st.images[k];
      j += format("%s{\"name\": \"%s\", \"tiles\": %d, \"image_tokens\": %d, \"encoder_err\": %.6e, \"connector_err\": %.6e, "
                  "\"kld\": %.6e, \"same_top\": %s}",
                  k ? ", " : "", json_escape(i.name).c_str(), i.tiles, i.image_tokens, i.encoder_err, i.connector_err, i.kld,
                  i.same_top ? "true" : "false");
    }
    j += format("], \"encoder_err_max\": %.6e, \"connector_err_mean\": %.6e, \"connector_err_max\": %.6e, \"kld_mean\": %.6e, "
                "\"kld_max\": %.6e, \"same_top\": %.4f}\n",
                st.encoder_err_max, st.connector_err_mean, st.connector_err_max, st.kld_mean, st.kld_max, st.same_top);
    write_output_file(e.json, j);
  }
  return 0;
}

}  // namespace

int cmd_eval(CommonArgs& a, const EvalArgs& e, int chunk) {
  check_output_path(e.json);
  std::optional<RequantizeTarget> requant;
  if (!e.requantize.empty()) requant = requantize_target_from_name(e.requantize);
  if (!e.images.empty()) {
    if (requant) fail("--requantize is for a text (-f)");
    return cmd_eval_vision(a, e);
  }
  if (e.file.empty()) fail("pass the text to score with -f TEXT (or screenshots with --image)");
  if (!e.mmproj.empty() || !e.reference_mmproj.empty() || e.reference_fp32_vision || e.max_pixels)
    fail("--mmproj, --reference-mmproj, --reference-fp32-vision and --vision-max-pixels go with --image");
  if (!e.reference_cache_type.empty() && e.reference.empty()) fail("--reference-cache-type needs --reference");
  if (e.reference_f32_activations && e.reference.empty()) fail("--reference-f32-activations needs --reference");
  const std::string text = read_text_file(e.file);
  a.ctx = chunk;
  std::unique_ptr<LlamaModel> model;
  int64_t requant_bytes = 0;  // the size a file of the requantized layouts would have
  if (requant) {
    if (a.model.empty()) a.model = default_model_path();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(a.model, ec)) fail("--requantize needs a GGUF model file: '%s' is not one", a.model.c_str());
    model = LlamaModel::load(a.model, [&](const GgufFile& f) {
      auto src = std::make_shared<RequantizedSource>(f, *requant, a.threads > 0 ? cap_threads(a.threads) : 0);
      requant_bytes = static_cast<int64_t>(std::filesystem::file_size(a.model)) + src->size_change();
      return src;
    });
  } else {
    model = load(a);
  }
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
    if (e.reference_f32_activations) ro.q8_activations = false;
    rs = std::make_unique<Session>(*ref, ro);
  }
  if (e.per_layer && !rs) fail("--per-layer needs --reference");
  std::unique_ptr<LayerDivergenceProbe> probe;
  if (e.per_layer) probe = std::make_unique<LayerDivergenceProbe>(s, *rs, chunk);
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
  std::vector<LayerDivergence> layers;
  if (probe) {
    layers = probe->results();
    std::printf("\n| layer | mean rel. L2 | 99%% | max |\n|---|---|---|---|\n");
    for (size_t l = 0; l < layers.size(); ++l)
      std::printf("| %zu | %.5f | %.5f | %.5f |\n", l, layers[l].mean, layers[l].p99, layers[l].max);
  }
  flush_stdout();
  if (!e.json.empty()) {
    std::string j = format("{\"model\": \"%s\", \"text\": \"%s\", \"chunk\": %d, \"chunks\": %d, \"scored\": %lld, \"ppl\": %.6f, \"ppl_err\": %.6f",
                           json_escape(a.model).c_str(), json_escape(e.file).c_str(), chunk, st.chunks, static_cast<long long>(st.scored),
                           st.ppl, st.ppl_err);
    if (requant) j += format(", \"requantize\": \"%s\", \"bytes\": %lld", json_escape(e.requantize).c_str(), static_cast<long long>(requant_bytes));
    if (st.has_reference)
      j += format(", \"reference\": \"%s\", \"ref_ppl\": %.6f, \"ref_ppl_err\": %.6f, \"kld_mean\": %.8f, \"kld_err\": %.8f, \"kld_median\": %.8f, "
                  "\"kld_p99\": %.8f, \"kld_max\": %.8f, \"same_top\": %.6f",
                  json_escape(e.reference).c_str(), st.ref_ppl, st.ref_ppl_err, st.kld_mean, st.kld_err, st.kld_median, st.kld_p99,
                  st.kld_max, st.same_top);
    if (!layers.empty()) {
      j += ", \"layers\": [";
      for (size_t l = 0; l < layers.size(); ++l)
        j += format("%s{\"mean\": %.6e, \"p99\": %.6e, \"max\": %.6e}", l ? ", " : "", layers[l].mean, layers[l].p99, layers[l].max);
      j += "]";
    }
    write_output_file(e.json, j + "}\n");
  }
  return 0;
}

}  // namespace tessera::cli
