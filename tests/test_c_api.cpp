#include <gtest/gtest.h>

#include <string>

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
  EXPECT_NE(out.find("Paris"), std::string::npos) << out;
  tessera_session_free(s);
  tessera_model_free(m);
}
