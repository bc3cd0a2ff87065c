#include "runtime/mixed_precision.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "kernels/quantize.h"

namespace tessera {

namespace {

const GgufTensor& tensor(const GgufFile& f, const std::string& name) {
  for (const GgufTensor& t : f.tensors())
    if (t.name == name) return t;
  fail("the model has no tensor '%s'", name.c_str());
}

uint64_t tensor_bytes(const GgufTensor& t, DType type) { return row_bytes(type, t.dims[0]) * (t.n_elements / t.dims[0]); }

// "blk.12.attn_q.weight" -> layer 12, kind "attn_q"; false for tensors outside the layers
bool split_layer_name(const std::string& name, int& layer, std::string& kind) {
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 5 || name.find_first_not_of("0123456789", 4) != dot) return false;
  layer = std::stoi(name.substr(4, dot - 4));
  kind = name.substr(dot + 1);
  if (kind.size() > 7 && kind.compare(kind.size() - 7, 7, ".weight") == 0) kind.resize(kind.size() - 7);
  return true;
}

std::string strip_weight(std::string n) {
  if (n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0) n.resize(n.size() - 7);
  return n;
}

// Every character a regular expression could read as an operator, escaped.
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// The candidate's type for one tensor of its group.
DType candidate_type(const MixCandidate& c, const GgufTensor& t) { return c.keep ? t.type : converted_type(t, c.type); }

}  // namespace

std::string MixCandidate::name() const { return keep ? "keep" : convert_type_name(type); }

Sensitivity mix_groups(const GgufFile& f, const std::vector<DType>& types, int layer_bands) {
  if (types.empty()) fail("no candidate types");
  for (DType t : types)
    if (info(t).block_elems <= 1) fail("%s is not a block quantization (a candidate type must be one)", dtype_name(t));
  if (layer_bands < 0) fail("layer bands must be 0 (a group per tensor) or more");
  Sensitivity s;
  s.layer_bands = layer_bands;
  int n_layer = 0;
  for (const GgufTensor& t : f.tensors()) {
    int l;
    std::string kind;
    if (split_layer_name(t.name, l, kind)) n_layer = std::max(n_layer, l + 1);
  }
  std::map<std::string, size_t> index;
  for (const GgufTensor& t : f.tensors()) {
    s.total_elements += t.n_elements;
    // a tensor no candidate changes (a norm, an odd row length) is fixed
    const bool changes = std::any_of(types.begin(), types.end(), [&](DType d) { return converted_type(t, d) != t.type; });
    if (!changes) {
      s.fixed_bytes += t.n_bytes;
      continue;
    }
    int l;
    std::string kind, name = strip_weight(t.name);
    if (layer_bands > 0 && split_layer_name(t.name, l, kind)) {
      const int bands = std::min(layer_bands, n_layer), band = l * bands / n_layer;
      const int lo = (band * n_layer + bands - 1) / bands, hi = ((band + 1) * n_layer + bands - 1) / bands - 1;
      name = bands == 1 ? kind : kind + "@" + std::to_string(lo) + "-" + std::to_string(hi);
    }
    auto [it, fresh] = index.emplace(name, s.groups.size());
    if (fresh) s.groups.push_back(MixGroup{name, {}, 0, {}});
    MixGroup& g = s.groups[it->second];
    g.tensors.push_back(t.name);
    g.elements += t.n_elements;
  }
  for (MixGroup& g : s.groups) {
    std::vector<MixCandidate> cands{MixCandidate{true, DType::F32, 0, 0}};
    for (DType d : types) cands.push_back(MixCandidate{false, d, 0, 0});
    std::vector<std::vector<DType>> seen;  // per candidate, the types its tensors take: the same twice is one candidate
    for (MixCandidate& c : cands) {
      std::vector<DType> per;
      for (const std::string& n : g.tensors) {
        const GgufTensor& t = tensor(f, n);
        per.push_back(candidate_type(c, t));
        c.bytes += tensor_bytes(t, per.back());
      }
      if (std::find(seen.begin(), seen.end(), per) != seen.end()) continue;
      seen.push_back(per);
      g.candidates.push_back(c);
    }
  }
  return s;
}

void measure_sensitivity(Sensitivity& sens, const GgufFile& f, LlamaModel& model, Session& s, const ReferenceLogprobs& ref,
                         const std::vector<int32_t>& tokens,
                         const std::function<void(const MixGroup&, const MixCandidate&, double)>& progress) {
  sens.n_ctx = ref.n_ctx;
  sens.chunks = ref.chunks;
  sens.base_kld = evaluate(s, ref, tokens).kld_mean;
  for (MixGroup& g : sens.groups) {
    for (MixCandidate& c : g.candidates) {
      if (c.keep) continue;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::vector<uint8_t>> buffers;
      std::vector<std::pair<std::string, WeightMatrix>> saved;
      for (const std::string& n : g.tensors) {
        const GgufTensor& t = tensor(f, n);
        const DType to = candidate_type(c, t);
        if (to == t.type) continue;
        const int64_t cols = static_cast<int64_t>(t.dims[0]), rows = static_cast<int64_t>(t.n_elements / t.dims[0]);
        const size_t in_row = row_bytes(t.type, t.dims[0]), out_row = row_bytes(to, t.dims[0]);
        std::vector<uint8_t>& buf = buffers.emplace_back(out_row * static_cast<size_t>(rows));
        // as convert_gguf does it, row by row over the cores
        s.pool().parallel_for(rows, 4, [&](int64_t r0, int64_t r1) {
          std::vector<float> row(static_cast<size_t>(cols));
          for (int64_t r = r0; r < r1; ++r) {
            dequantize_row(t.type, t.data + static_cast<size_t>(r) * in_row, row.data(), cols);
            quantize_row(to, row.data(), cols, buf.data() + static_cast<size_t>(r) * out_row);
          }
        });
        WeightMatrix w;
        w.type = to;
        w.rows = rows;
        w.cols = cols;
        w.data = buf.data();
        w.row_stride = out_row;
        saved.emplace_back(n, model.replace_matrix(n, w));
      }
      const auto restore = [&] {
        for (const auto& [n, w] : saved) model.replace_matrix(n, w);
      };
      try {
        c.dkl = evaluate(s, ref, tokens).kld_mean - sens.base_kld;
      } catch (...) {
        restore();
        throw;
      }
      restore();
      if (progress) progress(g, c, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
}

nlohmann::json sensitivity_to_json(const Sensitivity& s) {
  nlohmann::json j = {{"format", "tessera-sensitivity/1"}, {"model", s.model},       {"text", s.text},
                      {"n_ctx", s.n_ctx},                  {"chunks", s.chunks},     {"cache_type", s.cache_type},
                      {"layer_bands", s.layer_bands},      {"base_kld", s.base_kld}, {"groups", nlohmann::json::array()}};
  for (const MixGroup& g : s.groups) {
    nlohmann::json cands = nlohmann::json::array();
    for (const MixCandidate& c : g.candidates) cands.push_back({{"type", c.name()}, {"bytes", c.bytes}, {"dkl", c.dkl}});
    j["groups"].push_back({{"name", g.name}, {"tensors", g.tensors}, {"elements", g.elements}, {"candidates", cands}});
  }
  return j;
}

void sensitivity_from_json(const nlohmann::json& j, Sensitivity& fresh, const std::string& what) {
  const char* w = what.c_str();
  try {
    if (!j.is_object() || j.value("format", "") != "tessera-sensitivity/1") fail("%s: not a tessera sensitivity file", w);
    if (j.at("layer_bands").get<int>() != fresh.layer_bands)
      fail("%s was measured with --layer-bands %d, not %d", w, j.at("layer_bands").get<int>(), fresh.layer_bands);
    if (j.at("cache_type").get<std::string>() != fresh.cache_type)
      fail("%s was measured with --cache-type %s, not %s", w, j.at("cache_type").get<std::string>().c_str(), fresh.cache_type.c_str());
    const double base = j.at("base_kld").get<double>();
    if (!std::isfinite(base)) fail("%s: base_kld is not a number", w);
    std::map<std::string, const nlohmann::json*> groups;
    for (const nlohmann::json& g : j.at("groups")) groups[g.at("name").get<std::string>()] = &g;
    for (MixGroup& g : fresh.groups) {
      const auto it = groups.find(g.name);
      if (it == groups.end()) fail("%s has no group '%s': measured on another model?", w, g.name.c_str());
      if (it->second->at("tensors").get<std::vector<std::string>>() != g.tensors) fail("%s: group '%s' holds other tensors", w, g.name.c_str());
      std::map<std::string, double> dkl;
      for (const nlohmann::json& c : it->second->at("candidates")) dkl[c.at("type").get<std::string>()] = c.at("dkl").get<double>();
      for (MixCandidate& c : g.candidates) {
        const auto d = dkl.find(c.name());
        if (d == dkl.end()) fail("%s has no figure for '%s' as %s (measured with other --types?)", w, g.name.c_str(), c.name().c_str());
        if (!std::isfinite(d->second)) fail("%s: the figure for '%s' as %s is not a number", w, g.name.c_str(), c.name().c_str());
        c.dkl = d->second;
      }
    }
    fresh.base_kld = base;
    fresh.model = j.value("model", "");
    fresh.text = j.value("text", "");
    fresh.n_ctx = j.value("n_ctx", 0);
    fresh.chunks = j.value("chunks", 0);
  } catch (const nlohmann::json::exception& e) {
    fail("%s: malformed sensitivity file (%s)", w, e.what());
  }
}

MixPlan search_mix(const Sensitivity& s, const MixBudget& b) {
  if (b.max_kld < 0 && b.max_bytes == 0) fail("search: no budget");
  const size_t G = s.groups.size();
  // bytes in units, rounded up: the plan's true size is at most what the table counts
  uint64_t largest = 0;
  for (const MixGroup& g : s.groups) {
    uint64_t m = 0;
    for (const MixCandidate& c : g.candidates) m = std::max(m, c.bytes);
    largest += m;
  }
  const uint64_t unit = std::max<uint64_t>(1, (largest + (1u << 18) - 1) >> 18);
  const auto units = [&](uint64_t bytes) { return static_cast<size_t>((bytes + unit - 1) / unit); };
  size_t W = 0;
  for (const MixGroup& g : s.groups) {
    size_t m = 0;
    for (const MixCandidate& c : g.candidates) m = std::max(m, units(c.bytes));
    W += m;
  }
  // best[w]: the least summed cost of the groups so far at exactly w units; pick[g][w]: the candidate that got there
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<double> best(W + 1, kNone), next(W + 1);
  std::vector<uint8_t> pick(G * (W + 1));
  best[0] = 0;
  size_t reach = 0;  // the largest w with a finite best so far
  for (size_t gi = 0; gi < G; ++gi) {
    const MixGroup& g = s.groups[gi];
    std::fill(next.begin(), next.end(), kNone);
    size_t grow = 0;
    for (size_t ci = 0; ci < g.candidates.size(); ++ci) {
      const size_t cw = units(g.candidates[ci].bytes);
      const double cost = std::max(0.0, g.candidates[ci].dkl);  // a negative figure is noise, not a gain
      grow = std::max(grow, cw);
      for (size_t w = 0; w <= reach; ++w) {
        if (best[w] == kNone || best[w] + cost >= next[w + cw]) continue;
        next[w + cw] = best[w] + cost;
        pick[gi * (W + 1) + w + cw] = static_cast<uint8_t>(ci);
      }
    }
    reach += grow;
    best.swap(next);
  }
  size_t end = W + 1;
  if (b.max_bytes > 0) {
    if (b.max_bytes < s.fixed_bytes) fail("no mix fits in %llu bytes: the tensors kept as they are take %llu",
                                         static_cast<unsigned long long>(b.max_bytes), static_cast<unsigned long long>(s.fixed_bytes));
    const size_t cap = std::min<uint64_t>(W, (b.max_bytes - s.fixed_bytes) / unit);
    for (size_t w = 0; w <= cap; ++w)
      if (best[w] != kNone && (end > W || best[w] < best[end])) end = w;
    if (end > W) {
      uint64_t smallest = s.fixed_bytes;
      for (const MixGroup& g : s.groups)
        smallest += std::min_element(g.candidates.begin(), g.candidates.end(), [](const MixCandidate& x, const MixCandidate& y) {
                      return x.bytes < y.bytes;
                    })->bytes;
      fail("no mix fits in %llu tensor bytes: the smallest takes %llu (add a smaller type to --types)",
           static_cast<unsigned long long>(b.max_bytes), static_cast<unsigned long long>(smallest));
    }
  } else {
    double least = kNone;
    for (size_t w = 0; w <= W && end > W; ++w) {
      if (best[w] == kNone) continue;
      least = std::min(least, best[w]);
      if (s.base_kld + best[w] <= b.max_kld) end = w;
    }
    if (end > W) fail("no mix meets a KL divergence of %g: the least predicted is %g (add a larger type to --types)", b.max_kld, s.base_kld + least);
  }
  MixPlan p;
  p.choice.resize(G);
  p.bytes = s.fixed_bytes;
  p.predicted_kld = s.base_kld;
  for (size_t gi = G; gi-- > 0;) {
    const size_t ci = pick[gi * (W + 1) + end];
    const MixCandidate& c = s.groups[gi].candidates[ci];
    p.choice[gi] = ci;
    p.bytes += c.bytes;
    p.predicted_kld += std::max(0.0, c.dkl);
    end -= units(c.bytes);
  }
  return p;
}

std::vector<TensorTypeOverride> plan_overrides(const Sensitivity& s, const MixPlan& p, const GgufFile& f) {
  std::map<std::string, DType> type;
  for (size_t gi = 0; gi < s.groups.size(); ++gi)
    for (const std::string& n : s.groups[gi].tensors) type[n] = candidate_type(s.groups[gi].candidates[p.choice[gi]], tensor(f, n));
  // the fixed tensors keep their type whatever the file's main type would make of them (f32 norms under an f16 plan)
  std::vector<TensorTypeOverride> out;
  for (const GgufTensor& t : f.tensors()) {
    const auto it = type.find(t.name);
    std::string pattern = "^";  // appended, not "^" + temporary: GCC 12 warns (-Wrestrict) on the latter
    pattern += regex_escape(t.name);
    pattern += '$';
    out.push_back({pattern, it == type.end() ? t.type : it->second});
  }
  return out;
}

DType plan_main_type(const Sensitivity& s, const MixPlan& p, const GgufFile& f) {
  std::map<DType, uint64_t> weights;
  for (size_t gi = 0; gi < s.groups.size(); ++gi)
    for (const std::string& n : s.groups[gi].tensors) {
      const GgufTensor& t = tensor(f, n);
      weights[candidate_type(s.groups[gi].candidates[p.choice[gi]], t)] += t.n_elements;
    }
  if (weights.empty()) fail("the model has no matrix to quantize");
  return std::max_element(weights.begin(), weights.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
}

}  // namespace tessera
