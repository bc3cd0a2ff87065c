#include "runtime/eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tessera {

size_t log_softmax(const float* logits, size_t n, double* out) {
  size_t top = 0;
  for (size_t i = 1; i < n; ++i)
    if (logits[i] > logits[top]) top = i;
  const double mx = logits[top];
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(logits[i]) - lse;
  return top;
}

namespace {

struct Moments {  // running sum and sum of squares
  double s = 0, s2 = 0;
  int64_t n = 0;
  void add(double x) { s += x, s2 += x * x, ++n; }
  double mean() const { return n ? s / static_cast<double>(n) : 0; }
  // the standard error of the mean (llama-perplexity's: sqrt(var / (n - 1)))
  double err() const {
    if (n < 2) return 0;
    const double var = s2 / static_cast<double>(n) - mean() * mean();
    return var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) : 0;
  }
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// A chunk's tokens, its first replaced by BOS where the tokenizer adds one.
std::vector<int32_t> chunk_tokens(const Session& s, const std::vector<int32_t>& tokens, int n, int k) {
  std::vector<int32_t> toks(tokens.begin() + static_cast<std::ptrdiff_t>(k) * n, tokens.begin() + static_cast<std::ptrdiff_t>(k + 1) * n);
  if (s.model().config().add_bos && s.model().tokenizer().bos() >= 0) toks[0] = s.model().tokenizer().bos();
  return toks;
}

// The chunks of n tokens the text holds (at most opt.chunks), after checking the sessions fit them.
int chunk_count(const Session& model, const Session* reference, const std::vector<int32_t>& tokens, const EvalOptions& opt) {
  const int n = opt.n_ctx;
  if (n < 4) fail("eval: chunks of %d tokens are too short (at least 4)", n);
  if (n > model.n_ctx() || (reference && n > reference->n_ctx()))
    fail("eval: chunks of %d tokens do not fit the session's context (%d)", n, model.n_ctx());
  const size_t V = static_cast<size_t>(model.model().config().n_vocab);
  if (reference && static_cast<size_t>(reference->model().config().n_vocab) != V)
    fail("eval: the reference has %d tokens in its vocabulary, the model %zu: not the same model", reference->model().config().n_vocab, V);
  int chunks = static_cast<int>(tokens.size() / static_cast<size_t>(n));
  if (opt.chunks >= 0) chunks = std::min(chunks, opt.chunks);
  if (chunks < 1) fail("eval: the text is %zu tokens, shorter than one chunk of %d (lower -c)", tokens.size(), n);
  return chunks;
}

// The reference's scored rows of one chunk: log-probabilities (float), top tokens, NLL.
void reference_chunk(Session& reference, const std::vector<int32_t>& toks, float* lp_out, uint32_t* top, double* nll) {
  const size_t n = toks.size(), first = n / 2, V = static_cast<size_t>(reference.model().config().n_vocab);
  std::vector<double> lp(V);
  reference.truncate(0);
  reference.eval(toks, nullptr, 0, nullptr, first, [&](size_t i, const float* logits) {
    if (i + 1 >= n) return;
    const size_t r = i - first;
    top[r] = static_cast<uint32_t>(log_softmax(logits, V, lp.data()));
    nll[r] = -lp[static_cast<size_t>(toks[i + 1])];
    std::transform(lp.begin(), lp.end(), lp_out + r * V, [](double x) { return static_cast<float>(x); });
  });
}

// The model over `chunks` chunks of n tokens, against the reference's rows that ref_rows(k,
// toks) points at for chunk k (empty: no reference).
using RefRows = std::function<void(int k, const std::vector<int32_t>& toks, const float*& lp, const uint32_t*& top, const double*& nll)>;
EvalStats score(Session& model, const std::vector<int32_t>& tokens, int n, int chunks, const RefRows& ref_rows,
                const std::function<void(const EvalStats&)>& progress) {
  const size_t V = static_cast<size_t>(model.model().config().n_vocab);
  const int first = n / 2;  // rows [first, n - 1) predict the next token
  std::vector<double> lp(V), kld;
  Moments nll, ref_nll, kl;
  int64_t same = 0;
  EvalStats st;
  st.has_reference = static_cast<bool>(ref_rows);
  for (int k = 0; k < chunks; ++k) {
    const std::vector<int32_t> toks = chunk_tokens(model, tokens, n, k);
    const float* ref_lp = nullptr;
    const uint32_t* ref_top = nullptr;
    const double* ref_row_nll = nullptr;
    if (ref_rows) {
      ref_rows(k, toks, ref_lp, ref_top, ref_row_nll);
      for (int r = 0; r < n - 1 - first; ++r) ref_nll.add(ref_row_nll[r]);
    }
    model.truncate(0);
    model.eval(toks, nullptr, 0, nullptr, static_cast<size_t>(first), [&](size_t i, const float* logits) {
      if (i + 1 >= static_cast<size_t>(n)) return;
      const size_t r = i - static_cast<size_t>(first);
      const size_t top = log_softmax(logits, V, lp.data());
      nll.add(-lp[static_cast<size_t>(toks[i + 1])]);
      if (!ref_lp) return;
      const float* q = ref_lp + r * V;
      double d = 0;
      for (size_t j = 0; j < V; ++j) d += std::exp(static_cast<double>(q[j])) * (static_cast<double>(q[j]) - lp[j]);
      kl.add(d);
      kld.push_back(d);
      same += top == ref_top[r];
    });
    st.chunks = k + 1;
    st.scored = nll.n;
    st.ppl = std::exp(nll.mean());
    st.ppl_err = nll.err() * st.ppl;
    if (st.has_reference) {
      st.ref_ppl = std::exp(ref_nll.mean());
      st.ref_ppl_err = ref_nll.err() * st.ref_ppl;
      st.kld_mean = kl.mean();
      st.kld_err = kl.err();
      st.same_top = static_cast<double>(same) / static_cast<double>(kl.n);
    }
    if (progress) progress(st);
  }
  if (st.has_reference) {
    st.kld_median = quantile(kld, 0.5);
    st.kld_p99 = quantile(kld, 0.99);
    st.kld_max = *std::max_element(kld.begin(), kld.end());
  }
  return st;
}

}  // namespace

EvalStats evaluate(Session& model, Session* reference, const std::vector<int32_t>& tokens, const EvalOptions& opt,
                   const std::function<void(const EvalStats&)>& progress) {
  const int n = opt.n_ctx, chunks = chunk_count(model, reference, tokens, opt);
  if (!reference) return score(model, tokens, n, chunks, {}, progress);
  // one chunk of the reference at a time, just before the model's
  const size_t rows = static_cast<size_t>(n - 1 - n / 2), V = static_cast<size_t>(model.model().config().n_vocab);
  std::vector<float> lp(rows * V);
  std::vector<uint32_t> top(rows);
  std::vector<double> nll(rows);
  return score(model, tokens, n, chunks, [&](int, const std::vector<int32_t>& toks, const float*& l, const uint32_t*& t, const double*& x) {
    reference_chunk(*reference, toks, lp.data(), top.data(), nll.data());
    l = lp.data(), t = top.data(), x = nll.data();
  }, progress);
}

ReferenceLogprobs reference_logprobs(Session& reference, const std::vector<int32_t>& tokens, const EvalOptions& opt) {
  ReferenceLogprobs r;
  r.n_ctx = opt.n_ctx;
  r.chunks = chunk_count(reference, nullptr, tokens, opt);
  r.n_vocab = static_cast<size_t>(reference.model().config().n_vocab);
  const size_t rows = static_cast<size_t>(r.n_ctx - 1 - r.n_ctx / 2);
  r.lp.resize(static_cast<size_t>(r.chunks) * rows * r.n_vocab);
  r.top.resize(static_cast<size_t>(r.chunks) * rows);
  r.nll.resize(static_cast<size_t>(r.chunks) * rows);
  for (int k = 0; k < r.chunks; ++k) {
    const size_t row0 = static_cast<size_t>(k) * rows;
    reference_chunk(reference, chunk_tokens(reference, tokens, r.n_ctx, k), &r.lp[row0 * r.n_vocab], &r.top[row0], &r.nll[row0]);
  }
  return r;
}

EvalStats evaluate(Session& model, const ReferenceLogprobs& ref, const std::vector<int32_t>& tokens) {
  EvalOptions opt;
  opt.n_ctx = ref.n_ctx;
  opt.chunks = ref.chunks;
  if (chunk_count(model, nullptr, tokens, opt) != ref.chunks) fail("eval: the text holds fewer chunks than the reference's log-probabilities");
  if (static_cast<size_t>(model.model().config().n_vocab) != ref.n_vocab)
    fail("eval: the reference has %zu tokens in its vocabulary, the model %d: not the same model", ref.n_vocab, model.model().config().n_vocab);
  const size_t rows = static_cast<size_t>(ref.n_ctx - 1 - ref.n_ctx / 2);
  return score(model, tokens, ref.n_ctx, ref.chunks, [&](int k, const std::vector<int32_t>&, const float*& l, const uint32_t*& t, const double*& x) {
    const size_t row0 = static_cast<size_t>(k) * rows;
    l = &ref.lp[row0 * ref.n_vocab], t = &ref.top[row0], x = &ref.nll[row0];
  }, {});
}

}  // namespace tessera
