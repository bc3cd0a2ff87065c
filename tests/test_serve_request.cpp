// The server's request layer (src/serve/chat_request.h): parsing and its refusals, base64, stop
// sequences held back across pieces, and the response JSON in OpenAI's shapes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>

#include "core/preempt.h"
#include "models/llama/llama.h"
#include "runtime/session.h"
#include "serve/chat_request.h"
#include "test_util.h"

using namespace tessera;
using namespace tessera::serve;

namespace {

int status_of(const std::string& body, const std::string& model = "m") {
  try {
    parse_chat_request(body, model, RequestLimits{});
  } catch (const ApiError& e) {
    return e.status;
  }
  return 200;
}

std::string b64(const std::string& raw) {
  const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= raw.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(raw[i]) << 16 | static_cast<uint8_t>(raw[i + 1]) << 8 | static_cast<uint8_t>(raw[i + 2]);
    for (int k = 3; k >= 0; --k) out += a[(v >> (6 * k)) & 63];
  }
  if (raw.size() - i == 1) {
    const uint32_t v = static_cast<uint8_t>(raw[i]) << 16;
    out += std::string{a[v >> 18], a[(v >> 12) & 63]} + "==";
  } else if (raw.size() - i == 2) {
    const uint32_t v = static_cast<uint8_t>(raw[i]) << 16 | static_cast<uint8_t>(raw[i + 1]) << 8;
    out += std::string{a[v >> 18], a[(v >> 12) & 63], a[(v >> 6) & 63]} + "=";
  }
  return out;
}

}  // namespace

TEST(ServeRequest, ParsesOpenAIFields) {
  const ChatRequest r = parse_chat_request(R"({"model": "m", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "max_completion_tokens": 7, "temperature": 0, "top_p": 0.5, "seed": 18446744073709551615,
      "stop": "x", "stream": true, "stream_options": {"include_usage": true}})",
                                           "m", RequestLimits{});
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.seed, UINT64_MAX);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.stream && r.include_usage);
}

TEST(ServeRequest, RefusesWithOpenAIStatuses) {
  EXPECT_EQ(status_of("{"), 400);
  EXPECT_EQ(status_of("null"), 400);
  EXPECT_EQ(status_of(R"({"model": "other", "messages": [{"role": "user", "content": "hi"}]})"), 404);
  EXPECT_EQ(status_of(R"({"model": 5, "messages": [{"role": "user", "content": "hi"}]})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2.5})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_p": 1.5})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": [""]})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": 1})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "audio"}]}]})"), 400);
  // images: inline data only, one per request, in the last user message
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/gif;base64,AAAA"}}]}]})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "screen"}, {"type": "screen"}]}]})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "screen"}]}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]})"), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "screen"}]}]})"), 200);
}

TEST(ServeRequest, Base64RoundTripsAndRefusesDamage) {
  std::mt19937 rng(5);
  for (size_t n = 0; n < 70; ++n) {
    std::string raw(n, '\0');
    for (char& c : raw) c = static_cast<char>(rng());
    const std::vector<uint8_t> back = decode_base64(b64(raw), 1 << 20, "x");
    ASSERT_EQ(std::string(back.begin(), back.end()), raw) << n;
    std::string unpadded = b64(raw);
    while (!unpadded.empty() && unpadded.back() == '=') unpadded.pop_back();
    ASSERT_EQ(decode_base64(unpadded, 1 << 20, "x").size(), n);
  }
  EXPECT_THROW(decode_base64("QUJD!", 100, "x"), ApiError);
  EXPECT_THROW(decode_base64("QUJDR", 100, "x"), ApiError);  // a lone sixth of a quantum
  EXPECT_THROW(decode_base64("QQ===", 100, "x"), ApiError);
  try {
    decode_base64(std::string(4000, 'A'), 1000, "x");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 413);  // sized before decoding
  }
}

TEST(ServeRequest, StopSequencesAreHeldBackAcrossPieces) {
  StopMatcher m({"END", "xy"});
  std::string out;
  for (const char* p : {"hello E", "N", "d and x", "z then E", "ND more"}) out += m.add(p);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "hello ENd and xz then ");
  EXPECT_EQ(m.flush(), "");
  StopMatcher none({"zzz"});
  std::string all = none.add("abz");
  all += none.add("z");
  EXPECT_FALSE(none.stopped());
  EXPECT_EQ(all + none.flush(), "abzz");  // the held "zz" comes out at the end
}

TEST(ServeRequest, ResponsesHaveOpenAIShapes) {
  Usage u;
  u.prompt_tokens = 3;
  u.completion_tokens = 2;
  const auto c = completion_json("id", 1, "m", "hi", "stop", u);
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(c["usage"]["total_tokens"], 5);
  const auto k = chunk_json("id", 1, "m", "", "x", "");
  EXPECT_EQ(k["object"], "chat.completion.chunk");
  EXPECT_TRUE(k["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(k["choices"][0]["delta"]["content"], "x");
  const auto e = error_json(ApiError(404, "invalid_request_error", "no", "model", "model_not_found"));
  EXPECT_EQ(e["error"]["code"], "model_not_found");
  EXPECT_EQ(e["error"]["param"], "model");
}

// Cooperative preemption (core/preempt.h): a raised flag stops an armed thread's forward pass at
// the next layer boundary with the session as it was, and nothing else is affected.
TEST(Preemption, ForwardStopsAtALayerAndLeavesTheSessionAsItWas) {
  const auto model = LlamaModel::load(test::model_path());
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  Session s(*model, so);
  const std::vector<int32_t> tokens = model->tokenizer().encode("The screen shows a terminal", false);
  std::atomic<bool> flag{true};
  {
    PreemptionScope armed(&flag);
    EXPECT_THROW(s.eval(tokens), Preempted);
    EXPECT_EQ(s.n_past(), 0);
    flag = false;
    s.eval(tokens);  // armed but not raised: runs
  }
  EXPECT_EQ(s.n_past(), static_cast<int>(tokens.size()));
  std::vector<float> got(s.logits(), s.logits() + model->config().n_vocab);
  Session fresh(*model, so);
  flag = true;  // raised, but this thread is no longer armed
  fresh.eval(tokens);
  ASSERT_EQ(std::memcmp(got.data(), fresh.logits(), got.size() * sizeof(float)), 0);
}

// Inside a parallel_for: on an armed thread, a flag raised while chunks run skips the rest and
// the call throws once the running ones are done (a question waits for one chunk, not a whole
// GEMM); the same pool then runs every chunk for an unarmed caller.
TEST(Preemption, ParallelForStopsBetweenChunks) {
  ThreadPool pool(2);
  std::atomic<bool> flag{false};
  std::atomic<int64_t> covered{0};
  const auto work = [&](int64_t a, int64_t b) {
    flag = true;  // raised by the first chunk to run (as a request arriving mid-GEMM)
    covered += b - a;
  };
  {
    PreemptionScope armed(&flag);
    EXPECT_THROW(pool.parallel_for(1 << 20, 1, work), Preempted);
  }
  EXPECT_GT(covered.load(), 0);
  EXPECT_LT(covered.load(), int64_t{1} << 20);
  covered = 0;
  pool.parallel_for(1 << 20, 1, work);  // unarmed: the raised flag changes nothing
  EXPECT_EQ(covered.load(), int64_t{1} << 20);
}
