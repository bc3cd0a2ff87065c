#include "tessera/tessera.h"

#include <memory>
#include <new>
#include <string>

#include "core/error.h"
#include "models/llama.h"
#include "runtime/generate.h"
#include "runtime/session.h"

struct tessera_model {
  std::unique_ptr<tessera::LlamaModel> model;
};
struct tessera_session {
  std::unique_ptr<tessera::Session> session;
};

namespace {
thread_local std::string g_error;

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
    return new tessera_model{tessera::LlamaModel::load(path)};
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
    tessera::SamplerOptions so;
    so.temperature = params->temperature;
    so.top_k = params->top_k;
    so.top_p = params->top_p;
    so.min_p = params->min_p;
    so.repeat_penalty = params->repeat_penalty;
    so.seed = params->seed;
    tessera::Sampler sampler(so);
    const auto st = tessera::generate(*session->session, ids, params->n_predict, sampler, [&](const std::string& p) {
      if (on_piece) on_piece(p.data(), p.size(), user);
    });
    return st.generated_tokens;
  }, -1);
}

}  // extern "C"
