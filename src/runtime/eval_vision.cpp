#include "runtime/eval_vision.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "models/qwen3vl/qwen3vl.h"
#include "models/smolvlm/idefics3.h"
#include "models/smolvlm/preprocess.h"
#include "runtime/eval.h"

namespace tessera {

namespace {

// |a - b| / |b| in the L2 norm, in double
double rel_err(const float* a, const float* b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    d += e * e, r += static_cast<double>(b[i]) * b[i];
  }
  return r > 0 ? std::sqrt(d / r) : std::sqrt(d);
}

// KL(p || q) of two rows of logits (p the reference's), and whether their argmaxes agree
double next_token_kl(const std::vector<float>& ref, const std::vector<float>& model, bool& same_top) {
  if (ref.size() != model.size()) fail("eval: the reference has %zu logits, the model %zu: not the same vocabulary", ref.size(), model.size());
  std::vector<double> p(ref.size()), q(model.size());
  const size_t top_p = log_softmax(ref.data(), ref.size(), p.data()), top_q = log_softmax(model.data(), model.size(), q.data());
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
  same_top = top_p == top_q;
  return std::max(0.0, kl);
}

// The last row's logits after a prompt with image embeddings (and, for Qwen3-VL, its positions).
std::vector<float> last_logits(const LlamaModel& text, const SessionOptions& so, const std::vector<int32_t>& tokens,
                               const std::vector<float>& emb, const std::vector<MropePos>* positions) {
  SessionOptions o = so;
  o.n_ctx = std::max(o.n_ctx, static_cast<int>(tokens.size()) + 1);
  Session s(text, o);
  std::vector<float> out;
  s.eval(tokens, emb.data(), emb.size() / static_cast<size_t>(text.config().n_embd_inp()), positions, tokens.size() - 1,
         [&](size_t, const float* row) { out.assign(row, row + text.config().n_vocab); });
  if (out.empty()) fail("eval: the prompt produced no logits");
  return out;
}

// SmolVLM: each tile through both encoders and connectors, then the prompt through both text models.
VisionEvalImage smolvlm_image(const VlmParts& m, const VlmParts& r, const ImageRGB& image, const std::string& question,
                              const SessionOptions& so, ThreadPool& pool) {
  const Idefics3Vision& mv = *m.smolvlm;
  const Idefics3Vision& rv = *r.smolvlm;
  const PreprocessedImage pm = preprocess_idefics3(image, mv.preprocess_config(), &pool);
  const PreprocessedImage pr = preprocess_idefics3(image, rv.preprocess_config(), &pool);
  if (pm.tiles.size() != pr.tiles.size() || pm.rows != pr.rows || pm.cols != pr.cols)
    fail("eval: the two vision towers cut the image into different tiles (%zu and %zu)", pm.tiles.size(), pr.tiles.size());
  const SiglipConfig& c = mv.config();
  if (c.n_patches() != rv.config().n_patches() || c.hidden != rv.config().hidden || c.text_hidden != rv.config().text_hidden)
    fail("eval: the two vision towers have different shapes");
  const size_t S = static_cast<size_t>(c.image_size), enc_n = static_cast<size_t>(c.n_patches()) * c.hidden;
  const size_t out_n = static_cast<size_t>(c.tokens_per_tile()) * c.text_hidden;
  std::vector<float> chw(3 * S * S), em(enc_n), er(enc_n), cm, cr;
  VisionEvalImage res;
  res.tiles = static_cast<int>(pm.tiles.size());
  res.encoder_err = 0;
  for (size_t t = 0; t < pm.tiles.size(); ++t) {
    tile_to_chw(pm.tiles[t], mv.preprocess_config(), chw.data());
    mv.encode_tile(chw.data(), em.data(), pool);
    tile_to_chw(pr.tiles[t], rv.preprocess_config(), chw.data());
    rv.encode_tile(chw.data(), er.data(), pool);
    res.encoder_err = std::max(res.encoder_err, rel_err(em.data(), er.data(), enc_n));
    cm.resize(cm.size() + out_n), cr.resize(cr.size() + out_n);
    mv.connector(em.data(), cm.data() + cm.size() - out_n, pool);
    rv.connector(er.data(), cr.data() + cr.size() - out_n, pool);
  }
  res.connector_err = rel_err(cm.data(), cr.data(), cm.size());
  res.image_tokens = static_cast<int>(cm.size() / static_cast<size_t>(c.text_hidden));
  // the prompt as Idefics3::build lays it out, with each side's embeddings
  const Idefics3 vm(*m.text, mv), vr(*r.text, rv);
  const std::vector<int32_t> tm = vm.tokenize_with_slots(vm.prompt_text(pm.rows, pm.cols, question));
  const std::vector<int32_t> tr = vr.tokenize_with_slots(vr.prompt_text(pr.rows, pr.cols, question));
  if (tm != tr) fail("eval: the two text models tokenize the prompt differently: not the same model");
  res.kld = next_token_kl(last_logits(*r.text, so, tr, cr, nullptr), last_logits(*m.text, so, tm, cm, nullptr), res.same_top);
  return res;
}

// Qwen3-VL: the whole image through both towers (merger and DeepStack rows), then both text models.
VisionEvalImage qwen_image(const VlmParts& m, const VlmParts& r, const ImageRGB& image, const std::string& question,
                           const SessionOptions& so, ThreadPool& pool, int64_t max_pixels) {
  const Qwen3VL qm(*m.text, *m.qwen), qr(*r.text, *r.qwen);
  const Qwen3VLPrompt pm = qm.build(image, question, pool, max_pixels);
  const Qwen3VLPrompt pr = qr.build(image, question, pool, max_pixels);
  if (pm.tokens != pr.tokens || pm.embeddings.size() != pr.embeddings.size())
    fail("eval: the two models lay out the image prompt differently (patch grids %dx%d and %dx%d)", pm.grid_w, pm.grid_h, pr.grid_w,
         pr.grid_h);
  VisionEvalImage res;
  res.tiles = 1;
  res.image_tokens = pm.grid_h * pm.grid_w / (m.qwen->config().merge * m.qwen->config().merge);
  res.connector_err = rel_err(pm.embeddings.data(), pr.embeddings.data(), pm.embeddings.size());
  res.kld = next_token_kl(last_logits(*r.text, so, pr.tokens, pr.embeddings, &pr.positions),
                          last_logits(*m.text, so, pm.tokens, pm.embeddings, &pm.positions), res.same_top);
  return res;
}

}  // namespace

VisionEvalStats evaluate_vision(const VlmParts& model, const VlmParts& reference,
                                const std::vector<std::pair<std::string, ImageRGB>>& images, const std::string& question,
                                const SessionOptions& options, int64_t max_pixels) {
  if (!model.text || !reference.text) fail("eval: a text model is missing");
  const bool smol = model.smolvlm && reference.smolvlm, qwen = model.qwen && reference.qwen;
  if (!smol && !qwen) fail("eval: the model and the reference need vision towers of the same family");
  if (model.text->config().n_vocab != reference.text->config().n_vocab)
    fail("eval: the reference has %d tokens in its vocabulary, the model %d: not the same model", reference.text->config().n_vocab,
         model.text->config().n_vocab);
  if (images.empty()) fail("eval: no images");
  ThreadPool pool(options.n_threads > 0 ? options.n_threads : 1);
  VisionEvalStats st;
  for (const auto& [name, image] : images) {
    VisionEvalImage r = smol ? smolvlm_image(model, reference, image, question, options, pool)
                             : qwen_image(model, reference, image, question, options, pool, max_pixels);
    r.name = name;
    st.encoder_err_max = std::max(st.encoder_err_max, r.encoder_err);
    st.connector_err_mean += r.connector_err / static_cast<double>(images.size());
    st.connector_err_max = std::max(st.connector_err_max, r.connector_err);
    st.kld_mean += r.kld / static_cast<double>(images.size());
    st.kld_max = std::max(st.kld_max, r.kld);
    st.same_top += (r.same_top ? 1.0 : 0.0) / static_cast<double>(images.size());
    st.images.push_back(std::move(r));
  }
  return st;
}

}  // namespace tessera
