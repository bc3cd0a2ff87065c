// OpenAI's chat-completions request, read as hostile input, and the JSON the server answers with
// (completion, stream chunk, error). Only what the engine can honour is accepted; anything else
// is an ApiError naming the field, with the HTTP status OpenAI's API uses for it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/generate.h"
#include "runtime/sampler.h"

namespace tessera::serve {

// An error answered as {"error": {"message", "type", "param", "code"}} with `status`.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string type, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
};
// 400 invalid_request_error about `param`.
[[noreturn]] void bad_request(const std::string& param, const std::string& message);

struct RequestLimits {
  int max_tokens = 4096;           // the most a request may ask for
  int64_t max_image_pixels = int64_t{1} << 24;  // per decoded image (16 Mpx)
  size_t max_image_bytes = 32u << 20;           // per base64-decoded image
  int max_stop = 4;                // stop sequences, as OpenAI allows
};

// One parsed request. Images are kept as their decoded bytes (PNG/JPEG, checked later by the
// image decoder); `image_at` is the index in `messages` of the message that carried it.
struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;  // text of each message (image parts removed)
  std::vector<uint8_t> image;         // at most one image per request
  int image_at = -1;
  bool wants_screen = false;          // a {"type": "screen"} part (the live visual memory)
  int max_tokens = 256;
  SamplerOptions sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses and validates a request body. `model_id` is the one model this server serves.
ChatRequest parse_chat_request(const std::string& body, const std::string& model_id, const RequestLimits& limits);

// Decodes standard base64 (padding optional, no whitespace inside); nullopt-like: throws
// ApiError 400 on a bad character or a truncated quantum, or when the result would exceed max_bytes.
std::vector<uint8_t> decode_base64(const std::string& text, size_t max_bytes, const std::string& param);

// Text generated so far, released up to the point where no stop sequence can still begin: a
// stop sequence found cuts the text there and ends the generation.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds a piece; returns the text that is now safe to emit. stopped() turns true when a stop
  // sequence was found (the text before it has been returned, the rest dropped).
  std::string add(const std::string& piece);
  std::string flush();  // at the end of generation: whatever was held back
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

struct Usage {
  int prompt_tokens = 0, completion_tokens = 0, reused_tokens = 0;
  double queue_ms = 0, vision_ms = 0, prefill_ms = 0, decode_ms = 0;
  bool screen = false, screen_current = false;  // a screen part: was the visual memory ready?
  double screen_staleness_ms = 0;                // how far behind the screen it was when asked
};

nlohmann::json usage_json(const Usage& u);
nlohmann::json error_json(const ApiError& e);
nlohmann::json completion_json(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                               const std::string& finish_reason, const Usage& u);
// A stream chunk: delta {"role"} (role non-empty), {"content"} (content non-empty) or {} with a
// finish reason; or, with usage, the final usage chunk (no choices).
nlohmann::json chunk_json(const std::string& id, int64_t created, const std::string& model, const std::string& role,
                          const std::string& content, const std::string& finish_reason);
nlohmann::json usage_chunk_json(const std::string& id, int64_t created, const std::string& model, const Usage& u);

}  // namespace tessera::serve
