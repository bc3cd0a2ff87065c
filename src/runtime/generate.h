// Prompt building (chat template) and the generation loop with streaming and timings.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tessera {

struct ChatMessage {
  std::string role, content;
};

// Renders messages with the model's ChatML template (as Hugging Face's apply_chat_template
// does for SmolLM2, including its default system prompt when the template has one), or Gemma's
// <start_of_turn> turns when its template or vocabulary has them.
std::string apply_chat_template(const LlamaModel& model, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt);

struct GenerateStats {
  int prompt_tokens = 0, generated_tokens = 0;
  double prompt_seconds = 0, generate_seconds = 0;
  bool stopped_by_eog = false;
  bool stopped_by_context = false;  // n_predict not reached: the context filled up
  bool stopped_by_caller = false;   // `stop` returned true (a stop sequence, a deadline, a client gone)
  int draft_accepted = 0;           // answer tokens whose K/V and logits came from the prompt's pass (draft)
  double prompt_tps() const { return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0; }
  double generate_tps() const { return generate_seconds > 0 ? generated_tokens / generate_seconds : 0; }
};

// Evaluates `prompt` (appended to what the session already holds), then samples up to
// n_predict tokens, calling on_piece with each token's text as soon as it is known.
// Stops at an end-of-generation token (which is evaluated into the cache, so a chat can go on).
// `embeddings` fills the prompt's kEmbeddingSlot positions (image features, n_embd_inp() floats
// each); `positions`, one per prompt token, their multimodal rotary positions (Qwen3-VL).
// `draft`: a guess of the answer (a watcher's previous answer to the same question), evaluated
// in the prompt's pass; each sampled token is checked against it and, while they agree, taken
// with its logits from that pass; the first disagreement ends it (its unused positions are
// dropped) and decoding goes on token by token. Exact: every kernel is batch-invariant, so a
// row's logits are bitwise those of decoding token by token, and the answer is the same. The
// pass's time counts as prompt time.
GenerateStats generate(Session& session, const std::vector<int32_t>& prompt, int n_predict,
                       Sampler& sampler, const std::function<void(const std::string&)>& on_piece,
                       std::vector<int32_t>* out_tokens = nullptr,
                       const std::vector<float>* embeddings = nullptr,
                       std::vector<float>* prompt_logits = nullptr,  // the logits after the prompt
                       const std::function<bool()>* stop = nullptr,  // asked after each token: end now?
                       const std::vector<MropePos>* positions = nullptr,
                       const std::vector<int32_t>* draft = nullptr);

}  // namespace tessera
