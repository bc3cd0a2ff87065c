#include "runtime/eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tessera {

namespace {

// log softmax of one row of logits, in double; returns the index of the largest logit
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

}  // namespace

EvalStats evaluate(Session& model, Session* reference, const std::vector<int32_t>& tokens, const EvalOptions& opt,
                   const std::function<void(const EvalStats&)>& progress) {
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
  const int first = n / 2, scored = n - 1 - first;  // rows [first, n - 1) predict the next token
  const LlamaConfig& c = model.model().config();
  std::vector<float> ref_lp(reference ? static_cast<size_t>(scored) * V : 0);
  std::vector<size_t> ref_top(static_cast<size_t>(scored));
  std::vector<double> lp(V), kld;
  Moments nll, ref_nll, kl;
  int64_t same = 0;
  EvalStats st;
  st.has_reference = reference != nullptr;
  for (int k = 0; k < chunks; ++k) {
    std::vector<int32_t> toks(tokens.begin() + static_cast<std::ptrdiff_t>(k) * n, tokens.begin() + static_cast<std::ptrdiff_t>(k + 1) * n);
    if (c.add_bos && model.model().tokenizer().bos() >= 0) toks[0] = model.model().tokenizer().bos();
    const auto next = [&](size_t row) { return static_cast<size_t>(toks[row + 1]); };
    if (reference) {
      reference->truncate(0);
      reference->eval(toks, nullptr, 0, nullptr, static_cast<size_t>(first), [&](size_t i, const float* logits) {
        if (i + 1 >= static_cast<size_t>(n)) return;
        const size_t r = i - static_cast<size_t>(first);
        ref_top[r] = log_softmax(logits, V, lp.data());
        ref_nll.add(-lp[next(i)]);
        std::transform(lp.begin(), lp.end(), ref_lp.begin() + static_cast<std::ptrdiff_t>(r * V), [](double x) { return static_cast<float>(x); });
      });
    }
    model.truncate(0);
    model.eval(toks, nullptr, 0, nullptr, static_cast<size_t>(first), [&](size_t i, const float* logits) {
      if (i + 1 >= static_cast<size_t>(n)) return;
      const size_t r = i - static_cast<size_t>(first);
      const size_t top = log_softmax(logits, V, lp.data());
      nll.add(-lp[next(i)]);
      if (!reference) return;
      const float* q = &ref_lp[r * V];
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
    if (reference) {
      st.ref_ppl = std::exp(ref_nll.mean());
      st.ref_ppl_err = ref_nll.err() * st.ref_ppl;
      st.kld_mean = kl.mean();
      st.kld_err = kl.err();
      st.same_top = static_cast<double>(same) / static_cast<double>(kl.n);
    }
    if (progress) progress(st);
  }
  if (reference) {
    st.kld_median = quantile(kld, 0.5);
    st.kld_p99 = quantile(kld, 0.99);
    st.kld_max = *std::max_element(kld.begin(), kld.end());
  }
  return st;
}

}  // namespace tessera
