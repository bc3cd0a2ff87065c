#include "runtime/generate.h"

#include "profile/profiler.h"

#include <chrono>

#include "core/error.h"

namespace tessera {

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

// Gemma's turns, as its template renders them: BOS (the tokenizer's add_bos_token), a system
// message folded into the first user turn, the assistant called "model", contents trimmed.
static std::string gemma_chat(const LlamaModel& model, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  const auto trim = [](const std::string& t) {
    const size_t a = t.find_first_not_of(" \t\n\r"), b = t.find_last_not_of(" \t\n\r");
    return a == std::string::npos ? std::string() : t.substr(a, b - a + 1);
  };
  const Tokenizer& tok = model.tokenizer();
  std::string out = model.config().add_bos && tok.bos() >= 0 ? tok.text(tok.bos()) : std::string();
  std::string prefix;
  size_t i = 0;
  if (!messages.empty() && messages[0].role == "system") prefix = trim(messages[i++].content) + "\n\n";
  for (bool first = true; i < messages.size(); ++i, first = false) {
    const ChatMessage& m = messages[i];
    out += "<start_of_turn>" + (m.role == "assistant" ? std::string("model") : m.role) + "\n" + (first ? prefix : "") +
           trim(m.content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string apply_chat_template(const LlamaModel& model, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) {
  const std::string tmpl = model.chat_template();
  if (tmpl.find("<start_of_turn>") != std::string::npos || (tmpl.empty() && model.tokenizer().find("<start_of_turn>") >= 0))
    return gemma_chat(model, messages, add_generation_prompt);
  if (!tmpl.empty() && tmpl.find("<|im_start|>") == std::string::npos)
    fail("the model's chat template is not ChatML; use --raw to pass a prompt as is");
  // Default system prompt, when the template inserts one for conversations without it.
  std::string default_system;
  const std::string marker = "<|im_start|>system\n";
  const size_t a = tmpl.find(marker);
  if (a != std::string::npos && tmpl.find("!= 'system'") != std::string::npos) {
    const size_t b = tmpl.find("<|im_end|>", a);
    if (b != std::string::npos) default_system = tmpl.substr(a + marker.size(), b - a - marker.size());
  }
  std::string out;
  if (!default_system.empty() && (messages.empty() || messages[0].role != "system"))
    out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

GenerateStats generate(Session& session, const std::vector<int32_t>& prompt, int n_predict,
                       Sampler& sampler, const std::function<void(const std::string&)>& on_piece,
                       std::vector<int32_t>* out_tokens, const std::vector<float>* embeddings,
                       std::vector<float>* prompt_logits, const std::function<bool()>* stop,
                       const std::vector<MropePos>* positions, const std::vector<int32_t>* draft) {
  const Tokenizer& tok = session.model().tokenizer();
  const int n_vocab = session.model().config().n_vocab;
  GenerateStats st;
  if (prompt.empty()) fail("the prompt is empty");
  if (session.n_past() + static_cast<int>(prompt.size()) > session.n_ctx())
    fail("the prompt (%zu tokens) does not fit in the context (%d tokens, %d already used)",
         prompt.size(), session.n_ctx(), session.n_past());
  for (int32_t t : prompt)
    if (t >= 0) sampler.accept(t);
  // Draft verification: the prompt and the draft go through the model in one pass. `ahead`
  // holds draft tokens in the cache after the last emitted one, `rows` the logits after each;
  // `logits` is what the next token is sampled from. The first token the sampler picks against
  // the draft ends it: its positions are dropped and decoding goes on token by token.
  const float* logits = nullptr;
  std::vector<int32_t> ahead;
  std::vector<float> rows, first_row;
  size_t ahead_at = 0;
  const auto drop_ahead = [&] {
    session.truncate(session.n_past() - static_cast<int>(ahead.size() - ahead_at));
    ahead.clear();
    ahead_at = 0;
  };
  double t0 = now();
  {
    prof::PhaseScope phase(prof::Phase::Prefill);
    const size_t room = static_cast<size_t>(session.n_ctx() - session.n_past()) - prompt.size();
    const size_t k = draft ? std::min({draft->size(), static_cast<size_t>(std::max(n_predict, 0)), room}) : 0;
    const size_t E = static_cast<size_t>(session.model().config().n_embd_inp());
    const float* emb = embeddings ? embeddings->data() : nullptr;
    const size_t n_emb = embeddings ? embeddings->size() / E : 0;
    if (k > 0) {
      std::vector<int32_t> batch = prompt;
      batch.insert(batch.end(), draft->begin(), draft->begin() + static_cast<std::ptrdiff_t>(k));
      std::vector<MropePos> pos;
      if (positions) {  // the draft's text continues after the prompt's largest position
        pos = *positions;
        int32_t top = 0;
        for (const MropePos& p : pos) top = std::max({top, p.t, p.h, p.w});
        for (size_t j = 0; j < k; ++j) {
          const int32_t q = top + 1 + static_cast<int32_t>(j);
          pos.push_back({q, q, q});
        }
      }
      first_row.resize(static_cast<size_t>(n_vocab));
      rows.resize(k * static_cast<size_t>(n_vocab));
      const size_t last = prompt.size() - 1;
      session.eval(batch, emb, n_emb, positions ? &pos : nullptr, last, [&](size_t i, const float* l) {
        std::copy(l, l + n_vocab, i == last ? first_row.data() : &rows[(i - last - 1) * static_cast<size_t>(n_vocab)]);
      });
      ahead.assign(draft->begin(), draft->begin() + static_cast<std::ptrdiff_t>(k));
      logits = first_row.data();
    } else {
      if (embeddings || positions) session.eval(prompt, emb, n_emb, positions);
      else session.eval(prompt);
      logits = session.logits();
    }
  }
  st.prompt_tokens = static_cast<int>(prompt.size());
  st.prompt_seconds = now() - t0;
  if (prompt_logits) prompt_logits->assign(logits, logits + n_vocab);

  t0 = now();
  std::vector<int32_t> one(1);  // the token to evaluate, without a vector per step
  std::string pending;  // bytes of an incomplete UTF-8 sequence
  for (int i = 0; i < n_predict; ++i) {
    int32_t next;
    {
      prof::PhaseScope phase(prof::Phase::Sample);
      prof::OpScope op("sample", "", float_rows_cost(1, n_vocab));
      next = sampler.sample(logits, n_vocab);
    }
    if (out_tokens) out_tokens->push_back(next);
    const bool eog = tok.is_eog(next);
    if (ahead_at < ahead.size() && ahead[ahead_at] == next) {  // evaluated with the prompt
      logits = &rows[ahead_at * static_cast<size_t>(n_vocab)];
      ++ahead_at;
      ++st.draft_accepted;
    } else if (session.n_past() - static_cast<int>(ahead.size() - ahead_at) < session.n_ctx()) {
      prof::PhaseScope phase(prof::Phase::Decode);
      drop_ahead();  // the draft went another way (or is used up): decode on alone
      one[0] = next;
      session.eval(one);
      logits = session.logits();
    } else if (!eog) {
      st.stopped_by_context = true;  // the sampled token has no room: it is not emitted
      break;
    }
    if (eog) {
      st.stopped_by_eog = true;
      break;
    }
    ++st.generated_tokens;
    pending += tok.token_to_piece(next);
    // emit complete UTF-8 characters only
    size_t cut = pending.size();
    for (size_t k = 1; k <= std::min<size_t>(3, pending.size()); ++k) {
      const unsigned char ch = static_cast<unsigned char>(pending[pending.size() - k]);
      if ((ch & 0xc0) == 0xc0) {  // lead byte: is its sequence complete?
        const size_t need = (ch >> 5) == 6 ? 2 : (ch >> 4) == 14 ? 3 : 4;
        if (k < need) cut = pending.size() - k;
        break;
      }
      if ((ch & 0x80) == 0) break;
    }
    if (cut > 0) {
      on_piece(pending.substr(0, cut));
      pending.erase(0, cut);
    }
    if (stop && (*stop)()) {
      st.stopped_by_caller = true;
      break;
    }
  }
  drop_ahead();  // the cache holds what decoding token by token would have left
  if (!pending.empty()) on_piece(pending);
  st.generate_seconds = now() - t0;
  return st;
}

}  // namespace tessera
