#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "test_util.h"

TEST(CApi, ErrorsComeBackAsNullAndAMessage) {
  EXPECT_EQ(tessera_model_load("/nonexistent/model.gguf"), nullptr);
  EXPECT_NE(std::string(tessera_last_error()).find("cannot open"), std::string::npos);
  EXPECT_EQ(tessera_model_load(nullptr), nullptr);
  EXPECT_EQ(tessera_session_new(nullptr, 128, 1), nullptr);
}

TEST(CApi, LoadTokenizeGenerate) {
  tessera_model* m = tessera_model_load(tessera::test::model_path().c_str());
  ASSERT_NE(m, nullptr) << tessera_last_error();
  int32_t ids[16];
  EXPECT_EQ(tessera_tokenize(m, "Hello world", 0, ids, 16), 2);
  EXPECT_EQ(ids[0], 19556);
  EXPECT_EQ(tessera_tokenize(m, "Hello world", 0, ids, 1), -1);
  tessera_session* s = tessera_session_new(m, 256, 2);
  ASSERT_NE(s, nullptr) << tessera_last_error();
  tessera_generate_params p = tessera_default_params();
  p.n_predict = 12;
  std::string out;
  const int n = tessera_generate(s, "What is the capital of France?", &p,
                                 [](const char* piece, size_t len, void* user) { static_cast<std::string*>(user)->append(piece, len); }, &out);
  EXPECT_GT(n, 0) << tessera_last_error();
  // the default 8-bit activations answer as llama.cpp does on this file (its answer begins
  // "L'Étoile, la Marseillaise,"); SessionParams has the fp32 path's "Paris"
  EXPECT_EQ(out.rfind("L'Étoile, la Mars", 0), 0u) << out;
  tessera_session_free(s);
  tessera_model_free(m);
}

// Every CLI session option through the C API: fp32 activations (the default is 8-bit) and a q8
// KV cache answer the same question; bad options are one-line errors.
TEST(CApi, SessionParams) {
  tessera_model* m = tessera_model_load(tessera::test::model_path().c_str());
  ASSERT_NE(m, nullptr) << tessera_last_error();
  tessera_session_params sp = tessera_default_session_params();
  EXPECT_EQ(sp.n_ctx, 4096);
  EXPECT_EQ(sp.q8_activations, 1);
  sp.n_ctx = 256;
  sp.n_threads = 2;
  sp.q8_activations = 0;
  sp.cache_type = "q8";
  tessera_session* s = tessera_session_new_with(m, &sp);
  ASSERT_NE(s, nullptr) << tessera_last_error();
  tessera_generate_params p = tessera_default_params();
  p.n_predict = 12;
  std::string out;
  EXPECT_GT(tessera_generate(s, "What is the capital of France?", &p,
                             [](const char* piece, size_t len, void* user) { static_cast<std::string*>(user)->append(piece, len); },
                             &out),
            0)
      << tessera_last_error();
  EXPECT_NE(out.find("Paris"), std::string::npos) << out;
  tessera_session_free(s);
  for (const char* q4 : {"q4", "q4_0"}) {  // the 4-bit cache, by either name
    sp.cache_type = q4;
    s = tessera_session_new_with(m, &sp);
    ASSERT_NE(s, nullptr) << q4 << ": " << tessera_last_error();
    tessera_session_free(s);
  }
  sp.cache_type = "int4";
  EXPECT_EQ(tessera_session_new_with(m, &sp), nullptr);
  EXPECT_NE(std::string(tessera_last_error()).find("cache_type 'int4'"), std::string::npos);
  sp.cache_type = "f16";
  sp.n_batch = 0;
  EXPECT_EQ(tessera_session_new_with(m, &sp), nullptr);
  EXPECT_EQ(tessera_session_new_with(m, nullptr), nullptr);
  tessera_model_free(m);
  EXPECT_EQ(tessera_vision_use_q8_activations(nullptr), -1);
  tessera_vision* v = tessera_vision_load(tessera::test::source_path("tests/fixtures/vision/tiny/mmproj.gguf").c_str());
  ASSERT_NE(v, nullptr) << tessera_last_error();
  EXPECT_EQ(tessera_vision_use_q8_activations(v), 0);  // an f32 mmproj: nothing to switch
  EXPECT_EQ(tessera_vision_use_bf16_gemm(nullptr), -1);
  const int switched = tessera_vision_use_bf16_gemm(v);  // 14 layers with AMX bf16, else -1 and an error
  if (switched < 0) EXPECT_NE(std::string(tessera_last_error()).find("AMX"), std::string::npos);
  else EXPECT_EQ(switched, 14);
  tessera_vision_free(v);
  v = tessera_vision_load(tessera::test::source_path("tests/fixtures/vision/tiny/mmproj.gguf").c_str());
  EXPECT_EQ(tessera_vision_use_f16_gemm(nullptr), -1);
  const int f16 = tessera_vision_use_f16_gemm(v);  // 14 layers with AVX512-FP16, else -1 and an error
  if (f16 < 0) EXPECT_NE(std::string(tessera_last_error()).find("FP16"), std::string::npos);
  else EXPECT_EQ(f16, 14);
  tessera_vision_free(v);
  v = tessera_vision_load(tessera::test::source_path("tests/fixtures/vision/tiny/mmproj.gguf").c_str());
  EXPECT_EQ(tessera_vision_quantize_q8_0(nullptr, 0), -1);
  EXPECT_EQ(tessera_vision_quantize_q8_0(v, -1), -1);
  EXPECT_NE(std::string(tessera_last_error()).find("negative"), std::string::npos);
  EXPECT_EQ(tessera_vision_quantize_q8_0(v, 2), 13);  // all but the patch embedding (as convert --type q8_0)
  EXPECT_EQ(tessera_vision_quantize_q8_0(v, 0), 0);
  tessera_vision_free(v);
}

// A screen capturer's path: a raw RGBA frame in memory, no files.
TEST(CApi, AskAboutARawFrame) {
  const std::string tiny = tessera::test::source_path("tests/fixtures/vision/tiny/");
  tessera_model* m = tessera_model_load((tiny + "text.gguf").c_str());
  ASSERT_NE(m, nullptr) << tessera_last_error();
  tessera_vision* v = tessera_vision_load((tiny + "mmproj.gguf").c_str());
  ASSERT_NE(v, nullptr) << tessera_last_error();
  EXPECT_EQ(tessera_vision_load("/nonexistent.gguf"), nullptr);
  tessera_session* s = tessera_session_new(m, 2048, 2);
  std::vector<uint8_t> px(640 * 360 * 4);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7 % 251);
  tessera_frame f{px.data(), 640, 360, 4, 640 * 4};
  tessera_generate_params p = tessera_default_params();
  p.n_predict = 4;
  tessera_image_timings t{};
  EXPECT_EQ(tessera_ask_image(s, v, &f, "What is the user doing?", &p, nullptr, nullptr, &t), 4) << tessera_last_error();
  EXPECT_EQ(t.tiles, 13);
  EXPECT_GT(t.prompt_tokens, 832);
  tessera_frame bad{px.data(), 0, 360, 4, 0};
  EXPECT_EQ(tessera_ask_image(s, v, &bad, "x", &p, nullptr, nullptr, nullptr), -1);
  EXPECT_NE(std::string(tessera_last_error()).find("zero size"), std::string::npos);
  tessera_session_free(s);
  tessera_vision_free(v);
  tessera_model_free(m);
}

// The watcher through the C API: a repeated frame reuses every tile and the prompt's KV.
TEST(CApi, WatchFrames) {
  const std::string tiny = tessera::test::source_path("tests/fixtures/vision/tiny/");
  tessera_model* m = tessera_model_load((tiny + "text.gguf").c_str());
  tessera_vision* v = tessera_vision_load((tiny + "mmproj.gguf").c_str());
  ASSERT_NE(m, nullptr);
  ASSERT_NE(v, nullptr);
  tessera_session* s = tessera_session_new(m, 2048, 2);
  tessera_watch_options o = tessera_default_watch_options();
  o.n_predict = 3;
  tessera_watcher* w = tessera_watcher_new(s, v, &o);
  ASSERT_NE(w, nullptr) << tessera_last_error();
  std::vector<uint8_t> px(1280 * 720 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 13 % 241);
  tessera_frame f{px.data(), 1280, 720, 3, 1280 * 3};
  std::string a1, a2;
  auto collect = [](const char* piece, size_t len, void* user) { static_cast<std::string*>(user)->append(piece, len); };
  tessera_watch_result r1{}, r2{};
  ASSERT_EQ(tessera_watch_frame(w, &f, collect, &a1, &r1), 0) << tessera_last_error();
  ASSERT_EQ(tessera_watch_frame(w, &f, collect, &a2, &r2), 0) << tessera_last_error();
  EXPECT_EQ(r1.tiles_changed, r1.tiles);
  EXPECT_EQ(r2.tiles_changed, 0);
  EXPECT_EQ(r2.tokens_reused, r2.prompt_tokens);  // the same frame: the previous result as is
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(tessera_watch_frame(w, nullptr, nullptr, nullptr, nullptr), -1);
  tessera_watcher_free(w);
  tessera_session_free(s);
  tessera_vision_free(v);
  tessera_model_free(m);
}

// Profiling through the C API: a generate call shows up as prefill and decode phases with ops.
TEST(CApi, ProfileReport) {
  tessera_model* m = tessera_model_load(tessera::test::model_path().c_str());
  ASSERT_NE(m, nullptr);
  tessera_session* s = tessera_session_new(m, 256, 2);
  tessera_profile_start(1);
  tessera_generate_params p = tessera_default_params();
  p.n_predict = 3;
  ASSERT_GE(tessera_generate(s, "Hello", &p, nullptr, nullptr), 0);
  tessera_profile_stop();
  const size_t n = tessera_profile_report(nullptr, 0, nullptr, 2);
  std::string report(n + 1, '\0');
  tessera_profile_report(report.data(), report.size(), nullptr, 2);
  EXPECT_NE(report.find("\"phase\": \"prefill\""), std::string::npos);
  EXPECT_NE(report.find("\"phase\": \"decode\""), std::string::npos);
  EXPECT_NE(report.find("matmul"), std::string::npos);
  const size_t t = tessera_profile_trace(nullptr, 0);
  std::string trace(t + 1, '\0');
  tessera_profile_trace(trace.data(), trace.size());
  EXPECT_NE(trace.find("traceEvents"), std::string::npos);
  tessera_session_free(s);
  tessera_model_free(m);
}
