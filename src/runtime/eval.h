// Quality of a model over a text, and against a reference model (the same model at a higher
// precision): llama-perplexity's method, so the figures can be set side by side with its
// `--kl-divergence` output. The text's tokens are cut into chunks of n_ctx; each chunk is
// evaluated from an empty cache (its first token replaced by BOS where the tokenizer adds one)
// and the predictions of its second half are scored: positions n_ctx/2 .. n_ctx-2, each
// predicting the next token of the chunk.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/session.h"

namespace tessera {

// log softmax of one row of n logits, in double, into out; returns the index of the largest logit
// (the first, on ties).
size_t log_softmax(const float* logits, size_t n, double* out);

struct EvalOptions {
  int n_ctx = 512;   // tokens per chunk
  int chunks = -1;   // at most this many chunks (< 0: as many as the text holds)
};

struct EvalStats {
  int chunks = 0;
  int64_t scored = 0;               // predictions scored
  double ppl = 0, ppl_err = 0;      // exp(mean negative log-likelihood), and its standard error
  // against a reference
  bool has_reference = false;
  double ref_ppl = 0, ref_ppl_err = 0;
  double kld_mean = 0, kld_err = 0;  // KL(reference || model) per prediction, nats
  double kld_median = 0, kld_p99 = 0, kld_max = 0;
  double same_top = 0;               // fraction of predictions whose most likely token agrees
};

// `tokens`: the whole text. `reference` may be null. The sessions must hold n_ctx positions;
// their caches are overwritten. `progress` (may be empty) is called after each chunk with the
// statistics so far. Throws Error when the text is shorter than one chunk, or when the two
// models' vocabularies differ in size.
EvalStats evaluate(Session& model, Session* reference, const std::vector<int32_t>& tokens, const EvalOptions& opt,
                   const std::function<void(const EvalStats&)>& progress = {});

// The reference's log-probabilities over every scored position, computed once and kept (as
// float) so that many variants of a model can be scored against them without running the
// reference again (runtime/mixed_precision.h). chunks * (n_ctx/2 - 1) rows of n_vocab.
struct ReferenceLogprobs {
  int n_ctx = 0, chunks = 0;
  size_t n_vocab = 0;
  std::vector<float> lp;
  std::vector<uint32_t> top;  // each row's most likely token
  std::vector<double> nll;    // each row's negative log-likelihood of the next token
};
ReferenceLogprobs reference_logprobs(Session& reference, const std::vector<int32_t>& tokens, const EvalOptions& opt);
// evaluate(model, reference, ...) with the reference's side taken from `ref` (its chunks and n_ctx);
// `tokens` must be the text `ref` was computed on.
EvalStats evaluate(Session& model, const ReferenceLogprobs& ref, const std::vector<int32_t>& tokens);

}  // namespace tessera
