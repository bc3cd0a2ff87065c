#include "tessera/tessera.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "image/image.h"
#include "models/smolvlm/idefics3.h"
#include "models/llama/llama.h"
#include "models/open_model.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "watch/watcher.h"
#include "profile/profiler.h"

struct tessera_model {
  std::unique_ptr<tessera::LlamaModel> model;
};
struct tessera_session {
  std::unique_ptr<tessera::Session> session;
};
struct tessera_vision {
  std::unique_ptr<tessera::Idefics3Vision> vision;
};
struct tessera_watcher {
  std::string question;
  std::unique_ptr<tessera::Watcher> watcher;
};

namespace {
thread_local std::string g_error;

tessera::SamplerOptions sampler_options(const tessera_generate_params* p) {
  tessera::SamplerOptions so;
  so.temperature = p->temperature;
  so.top_k = p->top_k;
  so.top_p = p->top_p;
  so.min_p = p->min_p;
  so.repeat_penalty = p->repeat_penalty;
  so.seed = p->seed;
  return so;
}

template <typename F>
auto guarded(F&& f, decltype(f()) on_error) -> decltype(f()) {
  try {
    g_error.clear();
    return f();
  } catch (const std::bad_alloc&) {
    g_error = "out of memory";
  } catch (const std::exception& e) {
    g_error = e.what();
  }
  return on_error;
}
}  // namespace

extern "C" {

const char* tessera_last_error(void) { return g_error.c_str(); }

tessera_generate_params tessera_default_params(void) {
  tessera_generate_params p{};
  p.n_predict = 256;
  p.temperature = 0.0f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.0f;
  p.seed = 0;
  p.chat = 1;
  return p;
}

tessera_model* tessera_model_load(const char* path) {
  return guarded([&]() -> tessera_model* {
    if (!path) tessera::fail("model path is NULL");
    return new tessera_model{tessera::open_model(path).text};  // a GGUF file or a Hugging Face directory
  }, nullptr);
}

void tessera_model_free(tessera_model* model) { delete model; }

tessera_session* tessera_session_new(const tessera_model* model, int n_ctx, int n_threads) {
  return guarded([&]() -> tessera_session* {
    if (!model) tessera::fail("model is NULL");
    tessera::SessionOptions o;
    o.n_ctx = n_ctx;
    o.n_threads = n_threads;
    return new tessera_session{std::make_unique<tessera::Session>(*model->model, o)};
  }, nullptr);
}

tessera_session_params tessera_default_session_params(void) {
  const tessera::SessionOptions o;
  return tessera_session_params{o.n_ctx, o.n_threads, o.n_batch, "f16", o.q8_activations ? 1 : 0};
}

tessera_session* tessera_session_new_with(const tessera_model* model, const tessera_session_params* params) {
  return guarded([&]() -> tessera_session* {
    if (!model || !params) tessera::fail("model or params is NULL");
    if (params->n_ctx < 1 || params->n_batch < 1 || params->n_batch > 8192 || params->n_threads < 0 || params->n_threads > 1024)
      tessera::fail("session params out of range (n_ctx %d, n_batch %d, n_threads %d)", params->n_ctx, params->n_batch,
                    params->n_threads);
    const std::string kv = params->cache_type ? params->cache_type : "f16";
    tessera::SessionOptions o;
    o.n_ctx = params->n_ctx;
    o.n_threads = params->n_threads;
    o.n_batch = params->n_batch;
    try {
      o.kv_type = tessera::kv_type_from_name(kv);
    } catch (const tessera::Error&) {  // named as the C API's field
      tessera::fail("cache_type '%s' is not one of %s", kv.c_str(), tessera::kv_type_names().c_str());
    }
    o.q8_activations = params->q8_activations != 0;
    return new tessera_session{std::make_unique<tessera::Session>(*model->model, o)};
  }, nullptr);
}

void tessera_session_free(tessera_session* session) { delete session; }

int tessera_tokenize(const tessera_model* model, const char* text, int parse_special, int32_t* ids, int max_ids) {
  return guarded([&]() -> int {
    if (!model || !text) tessera::fail("model or text is NULL");
    const auto v = model->model->tokenizer().encode(text, parse_special != 0);
    if (static_cast<int64_t>(v.size()) > max_ids) tessera::fail("%zu tokens do not fit in %d ids", v.size(), max_ids);
    for (size_t i = 0; i < v.size(); ++i) ids[i] = v[i];
    return static_cast<int>(v.size());
  }, -1);
}

int tessera_generate(tessera_session* session, const char* prompt, const tessera_generate_params* params,
                     tessera_piece_fn on_piece, void* user) {
  return guarded([&]() -> int {
    if (!session || !prompt || !params) tessera::fail("session, prompt or params is NULL");
    const tessera::LlamaModel& m = session->session->model();
    std::string text = prompt;
    if (params->chat) text = tessera::apply_chat_template(m, {{"user", text}}, true);
    const auto ids = m.tokenizer().encode(text, params->chat != 0);
    tessera::Sampler sampler(sampler_options(params));
    const auto st = tessera::generate(*session->session, ids, params->n_predict, sampler, [&](const std::string& p) {
      if (on_piece) on_piece(p.data(), p.size(), user);
    });
    return st.generated_tokens;
  }, -1);
}

tessera_vision* tessera_vision_load(const char* path) {
  return guarded([&]() -> tessera_vision* {
    if (!path) tessera::fail("mmproj path is NULL");
    return new tessera_vision{tessera::Idefics3Vision::load_mmproj(path)};
  }, nullptr);
}

void tessera_vision_free(tessera_vision* vision) { delete vision; }

int tessera_vision_use_q8_activations(tessera_vision* vision) {
  return guarded([&]() -> int {
    if (!vision) tessera::fail("vision is NULL");
    return vision->vision->use_q8_activations();
  }, -1);
}

int tessera_vision_quantize_q8_0(tessera_vision* vision, int n_threads) {
  return guarded([&]() -> int {
    if (!vision) tessera::fail("vision is NULL");
    if (n_threads < 0) tessera::fail("n_threads %d is negative", n_threads);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    tessera::ThreadPool pool(n_threads > 0 ? std::min(n_threads, cores) : cores);
    return vision->vision->quantize_to_q8_0(pool);
  }, -1);
}

int tessera_vision_use_bf16_gemm(tessera_vision* vision) {
  return guarded([&]() -> int {
    if (!vision) tessera::fail("vision is NULL");
    return vision->vision->use_bf16_gemm();
  }, -1);
}

int tessera_vision_use_f16_gemm(tessera_vision* vision) {
  return guarded([&]() -> int {
    if (!vision) tessera::fail("vision is NULL");
    return vision->vision->use_f16_gemm();
  }, -1);
}

int tessera_ask_image(tessera_session* session, const tessera_vision* vision, const tessera_frame* frame,
                      const char* question, const tessera_generate_params* params, tessera_piece_fn on_piece,
                      void* user, tessera_image_timings* timings) {
  return guarded([&]() -> int {
    if (!session || !vision || !frame || !question || !params) tessera::fail("an argument is NULL");
    const tessera::ImageRGB img = tessera::image_from_raw(frame->pixels, frame->width, frame->height, frame->channels, frame->stride);
    tessera::Session& s = *session->session;
    tessera::Idefics3 vlm(s.model(), *vision->vision);
    tessera::VisionTimings tm;
    tessera::ImagePrompt p = vlm.build(img, question, s.pool(), &tm);
    tessera::Sampler sampler(sampler_options(params));
    const auto st = tessera::generate(s, p.tokens, params->n_predict, sampler, [&](const std::string& piece) {
      if (on_piece) on_piece(piece.data(), piece.size(), user);
    }, nullptr, &p.embeddings);
    if (timings) {
      timings->preprocess_ms = tm.preprocess_s * 1e3;
      timings->encode_ms = tm.encode_total() * 1e3;
      timings->connector_ms = tm.connector_s * 1e3;
      timings->prefill_ms = st.prompt_seconds * 1e3;
      timings->decode_ms = st.generate_seconds * 1e3;
      timings->tiles = p.tiles;
      timings->prompt_tokens = st.prompt_tokens;
      timings->generated_tokens = st.generated_tokens;
    }
    return st.generated_tokens;
  }, -1);
}

tessera_watch_options tessera_default_watch_options(void) {
  tessera_watch_options o{};
  o.question = "What is the user working on?";
  o.n_predict = 16;
  o.reuse = 1;
  o.cache_mb = 256;
  o.approx_global = -1;
  o.approx_kv = -1;
  return o;
}

tessera_watcher* tessera_watcher_new(tessera_session* session, const tessera_vision* vision, const tessera_watch_options* o) {
  return guarded([&]() -> tessera_watcher* {
    if (!session || !vision || !o || !o->question) tessera::fail("an argument is NULL");
    tessera::WatchOptions wo;
    wo.question = o->question;
    wo.n_predict = o->n_predict;
    wo.reuse = o->reuse != 0;
    wo.cache_bytes = o->cache_mb << 20;
    wo.approx_global = o->approx_global;
    wo.approx_kv = o->approx_kv;
    tessera::Session& s = *session->session;
    auto w = std::make_unique<tessera_watcher>();
    w->question = o->question;
    w->watcher = std::make_unique<tessera::Watcher>(s.model(), *vision->vision, s, wo);
    return w.release();
  }, nullptr);
}

void tessera_watcher_free(tessera_watcher* watcher) { delete watcher; }

int tessera_watch_frame(tessera_watcher* watcher, const tessera_frame* frame, tessera_piece_fn on_piece, void* user,
                        tessera_watch_result* result) {
  return guarded([&]() -> int {
    if (!watcher || !frame) tessera::fail("an argument is NULL");
    const tessera::ImageRGB img = tessera::image_from_raw(frame->pixels, frame->width, frame->height, frame->channels, frame->stride);
    const tessera::FrameResult r = watcher->watcher->process(img);
    if (on_piece) on_piece(r.answer.data(), r.answer.size(), user);
    if (result) {
      result->tiles = r.tiles;
      result->tiles_changed = r.tiles_encoded;
      result->prompt_tokens = r.prompt_tokens;
      result->tokens_reused = r.tokens_reused;
      result->tokens_recomputed = r.tokens_recomputed;
      result->preprocess_ms = r.preprocess_ms;
      result->encode_ms = r.encode_ms;
      result->prefill_ms = r.prefill_ms;
      result->decode_ms = r.decode_ms;
      result->total_ms = r.total_ms;
    }
    return 0;
  }, -1);
}

void tessera_profile_start(int trace) { tessera::prof::start(trace != 0); }
void tessera_profile_stop(void) { tessera::prof::stop(); }

namespace {
size_t copy_out(const std::string& s, char* buf, size_t size) {
  if (buf && size > 0) {
    const size_t n = std::min(size - 1, s.size());
    std::memcpy(buf, s.data(), n);
    buf[n] = 0;
  }
  return s.size();
}
}  // namespace

size_t tessera_profile_report(char* buf, size_t size, const char* probe_json, int threads) {
  const tessera::prof::Peaks peaks = probe_json ? tessera::prof::load_peaks(probe_json, threads) : tessera::prof::Peaks{};
  return copy_out(tessera::prof::report_json(peaks), buf, size);
}

size_t tessera_profile_trace(char* buf, size_t size) { return copy_out(tessera::prof::trace_json(), buf, size); }

}  // extern "C"
