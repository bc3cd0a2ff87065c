#include "serve/chat_request.h"

#include <array>
#include <cmath>

#include "core/error.h"
#include "formats/json_input.h"

namespace tessera::serve {

using nlohmann::json;

void bad_request(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_request_error", message, param);
}

namespace {

double number(const json& j, const char* key, double lo, double hi, double fallback, bool lo_open = false) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const json& v = j[key];
  if (!v.is_number()) bad_request(key, std::string("'") + key + "' must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x > hi || (lo_open ? x <= lo : x < lo))
    bad_request(key, std::string("'") + key + "' is out of range: " + v.dump());
  return x;
}

// The text of a message's content: a string, or an array of parts ({"type": "text", "text"},
// {"type": "image_url", "image_url": {"url": "data:..."}}, {"type": "screen"}).
std::string content_text(const json& content, size_t index, ChatRequest& r, const RequestLimits& limits) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request(where, "'" + where + "' must be a string or an array of parts");
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const json& part = content[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad_request(pw, "each content part must be an object with a string 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) bad_request(pw + ".text", "a text part needs a string 'text'");
      if (!text.empty()) text += "\n";
      text += part["text"].get<std::string>();
    } else if (type == "image_url") {
      const json* u = part.contains("image_url") ? &part["image_url"] : nullptr;
      if (!u || !u->is_object() || !u->contains("url") || !(*u)["url"].is_string())
        bad_request(pw + ".image_url", "an image_url part needs {\"url\": \"data:image/png;base64,...\"}");
      const std::string url = (*u)["url"].get<std::string>();
      // only inline images: a URL or a path would let a request read the network or the disk
      if (url.rfind("data:", 0) != 0)
        bad_request(pw + ".image_url.url", "only data: URIs (base64 PNG or JPEG) are accepted, not URLs or paths");
      const size_t comma = url.find(',');
      if (comma == std::string::npos || url.substr(0, comma).find(";base64") == std::string::npos)
        bad_request(pw + ".image_url.url", "the data: URI must be base64 (data:image/png;base64,...)");
      const std::string media = url.substr(5, url.find_first_of(";,", 5) - 5);
      if (media != "image/png" && media != "image/jpeg" && media != "image/jpg")
        bad_request(pw + ".image_url.url", "the image must be image/png or image/jpeg, not '" + media + "'");
      if (!r.image.empty() || r.wants_screen) bad_request(pw, "one image (or the screen) per request");
      r.image = decode_base64(url.substr(comma + 1), limits.max_image_bytes, pw + ".image_url.url");
      r.image_at = static_cast<int>(index);
    } else if (type == "screen") {
      if (!r.image.empty() || r.wants_screen) bad_request(pw, "one image (or the screen) per request");
      r.wants_screen = true;
      r.image_at = static_cast<int>(index);
    } else {
      bad_request(pw + ".type", "unsupported content part type '" + type + "' (text, image_url or screen)");
    }
  }
  return text;
}

}  // namespace

std::vector<uint8_t> decode_base64(const std::string& s, size_t max_bytes, const std::string& param) {
  static const auto table = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(a[i])] = static_cast<int8_t>(i);
    return t;
  }();
  size_t n = s.size();
  while (n > 0 && s[n - 1] == '=') --n;
  if (s.size() - n > 2) bad_request(param, "the base64 image has too much padding");
  if (n % 4 == 1) bad_request(param, "the base64 image is truncated");
  const size_t out_size = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
  if (out_size > max_bytes)
    throw ApiError(413, "invalid_request_error",
                   "the image is " + std::to_string(out_size) + " bytes, over the limit of " + std::to_string(max_bytes),
                   param);
  std::vector<uint8_t> out;
  out.reserve(out_size);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const int8_t v = table[static_cast<uint8_t>(s[i])];
    if (v < 0) bad_request(param, "the image is not valid base64 (a byte at offset " + std::to_string(i) + ")");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  return out;
}

ChatRequest parse_chat_request(const std::string& body, const std::string& model_id, const RequestLimits& limits) {
  json j;
  try {
    j = parse_json(reinterpret_cast<const uint8_t*>(body.data()), body.size(), "the request body");
  } catch (const Error& e) {
    bad_request("", e.what());
  }
  if (!j.is_object()) bad_request("", "the request body must be a JSON object");
  ChatRequest r;
  if (!j.contains("model") || !j["model"].is_string()) bad_request("model", "'model' is required (a string; GET /v1/models lists it)");
  r.model = j["model"].get<std::string>();
  if (r.model != model_id)
    throw ApiError(404, "invalid_request_error", "the model '" + r.model + "' does not exist (this server has '" + model_id + "')",
                   "model", "model_not_found");
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
    bad_request("messages", "'messages' must be a non-empty array");
  const json& msgs = j["messages"];
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad_request(where + ".role", "each message needs a string 'role'");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      bad_request(where + ".role", "unsupported role '" + role + "' (system, developer, user or assistant)");
    if (!m.contains("content")) bad_request(where + ".content", "each message needs 'content'");
    const std::string text = content_text(m["content"], i, r, limits);
    if (r.image_at == static_cast<int>(i) && role != "user") bad_request(where, "images go in a user message");
    r.messages.push_back({role == "developer" ? "system" : role, text});
  }
  if (r.messages.back().role != "user") bad_request("messages", "the last message must be the user's");
  if (r.image_at >= 0 && r.image_at != static_cast<int>(r.messages.size()) - 1)
    bad_request("messages", "an image (or the screen) must be in the last user message");

  const char* tok_key = j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (j.contains(tok_key) && !j[tok_key].is_null()) {
    if (!j[tok_key].is_number_integer()) bad_request(tok_key, std::string("'") + tok_key + "' must be an integer");
    const int64_t v = j[tok_key].get<int64_t>();
    if (v < 1 || v > limits.max_tokens)
      bad_request(tok_key, std::string("'") + tok_key + "' must be in [1, " + std::to_string(limits.max_tokens) + "], got " +
                               std::to_string(v));
    r.max_tokens = static_cast<int>(v);
  }
  r.sampling.temperature = static_cast<float>(number(j, "temperature", 0.0, 2.0, 1.0));
  r.sampling.top_p = static_cast<float>(number(j, "top_p", 0.0, 1.0, 1.0, /*lo_open=*/true));
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_integer()) bad_request("seed", "'seed' must be an integer");
    r.sampling.seed = j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>() : static_cast<uint64_t>(j["seed"].get<int64_t>());
  }
  if (j.contains("n") && !j["n"].is_null() && j["n"] != 1) bad_request("n", "only n = 1 is supported");
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      for (const json& x : s) {
        if (!x.is_string()) bad_request("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad_request("stop", "'stop' must be a string or an array of strings");
    }
    if (static_cast<int>(r.stop.size()) > limits.max_stop)
      bad_request("stop", "at most " + std::to_string(limits.max_stop) + " stop sequences");
    for (const std::string& x : r.stop)
      if (x.empty()) bad_request("stop", "a stop sequence must not be empty");
  }
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) bad_request("stream", "'stream' must be a boolean");
    r.stream = j["stream"].get<bool>();
  }
  if (j.contains("stream_options") && j["stream_options"].is_object() && j["stream_options"].contains("include_usage"))
    r.include_usage = j["stream_options"]["include_usage"].is_boolean() && j["stream_options"]["include_usage"].get<bool>();
  return r;
}

std::string StopMatcher::add(const std::string& piece) {
  if (stopped_) return "";
  held_ += piece;
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // hold back the longest suffix that is a prefix of a stop sequence
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return stopped_ ? "" : out;
}

json usage_json(const Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.reused_tokens}}},
          {"timings",
           {{"queue_ms", u.queue_ms}, {"vision_ms", u.vision_ms}, {"prefill_ms", u.prefill_ms}, {"decode_ms", u.decode_ms}}}};
  if (u.screen) j["screen"] = {{"memory_current", u.screen_current}, {"staleness_ms", u.screen_staleness_ms}};
  return j;
}

json error_json(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

json completion_json(const std::string& id, int64_t created, const std::string& model, const std::string& text,
                     const std::string& finish_reason, const Usage& u) {
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices",
           json::array({{{"index", 0},
                         {"message", {{"role", "assistant"}, {"content", text}}},
                         {"finish_reason", finish_reason}}})},
          {"usage", usage_json(u)}};
}

json chunk_json(const std::string& id, int64_t created, const std::string& model, const std::string& role,
                const std::string& content, const std::string& finish_reason) {
  json delta = json::object();
  if (!role.empty()) delta["role"] = role;
  if (!content.empty()) delta["content"] = content;
  json choice = {{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}};
  if (!finish_reason.empty()) choice["finish_reason"] = finish_reason;
  return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}, {"choices", json::array({choice})}};
}

json usage_chunk_json(const std::string& id, int64_t created, const std::string& model, const Usage& u) {
  return {{"id", id},        {"object", "chat.completion.chunk"}, {"created", created},
          {"model", model},  {"choices", json::array()},          {"usage", usage_json(u)}};
}

}  // namespace tessera::serve
