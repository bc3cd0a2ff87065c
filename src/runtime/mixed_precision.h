// Automatic mixed precision under a quality or size budget (`tessera quantize`).
//
// 1. Sensitivity, measured once: the matrices of a reference model are put in groups (per tensor,
//    or per kind over bands of layers: mix_groups); for each group and candidate type, the group
//    alone is quantized in memory (LlamaModel::replace_matrix, no file written) and the mean KL
//    divergence from the reference's cached log-probabilities is measured; its increase over the
//    unmodified model's is the group's cost at that type.
// 2. Search: the costs are taken as additive (the mix's KL ~ the sum of its groups'), and the
//    cheapest mix meeting a KL budget, or the least predicted KL within a size budget, is found
//    exactly (a multiple-choice knapsack: dynamic programming over bytes counted in units of
//    1/2^18 of the largest mix's, rounded up so a size budget is never exceeded).
// 3. The plan becomes per-tensor overrides for convert_gguf.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "models/gguf_convert.h"
#include "runtime/eval.h"
#include "runtime/session.h"

namespace tessera {

// One way to store a group: a conversion target, or `keep` (the reference's own bytes, no loss).
struct MixCandidate {
  bool keep = false;
  DType type = DType::F32;  // when !keep: asked of every tensor (converted_type's fallbacks apply)
  uint64_t bytes = 0;       // the group's bytes this way
  double dkl = 0;           // the increase in mean KL divergence (nats) when only this group is stored this way
  std::string name() const;
};

struct MixGroup {
  std::string name;                  // "token_embd", "attn_q" (all layers), "attn_q@0-6" (a band of layers), or a tensor's name
  std::vector<std::string> tensors;  // GGUF tensor names
  uint64_t elements = 0;
  std::vector<MixCandidate> candidates;  // `keep` first
};

struct Sensitivity {
  std::string model, text, cache_type;
  int n_ctx = 0, chunks = 0, layer_bands = 0;  // layer_bands 0: a group per tensor
  double base_kld = 0;        // the unmodified model's (nonzero with an 8-bit KV cache)
  uint64_t fixed_bytes = 0;   // the tensors in no group (norms), kept as they are
  uint64_t total_elements = 0;  // of every tensor: the denominator of bits per weight
  std::vector<MixGroup> groups;
};

// The quantizable matrices of `f` grouped: layer_bands 0 puts each tensor in its own group,
// N >= 1 puts blk.L.KIND of the same KIND and band of layers (N contiguous bands) together;
// tensors outside blk.* are groups of their own. Candidate bytes for each of `types` are filled,
// dkl left 0. Fails when `types` is empty or holds a type that is not a block quantization.
Sensitivity mix_groups(const GgufFile& f, const std::vector<DType>& types, int layer_bands);

// Measures every candidate's dkl in place: `model` (loaded from `f`) gets each group swapped
// in memory, `s` (a session on it) is scored against `ref` over `tokens`. `progress` is called
// after each measured candidate. The model's matrices are restored before returning.
void measure_sensitivity(Sensitivity& sens, const GgufFile& f, LlamaModel& model, Session& s, const ReferenceLogprobs& ref,
                         const std::vector<int32_t>& tokens,
                         const std::function<void(const MixGroup&, const MixCandidate&, double seconds)>& progress = {});

nlohmann::json sensitivity_to_json(const Sensitivity& s);
// The dkl figures of a saved sensitivity laid onto `fresh` (mix_groups of the model being
// quantized): its groups and candidates must all be there, else tessera::Error naming `what`.
void sensitivity_from_json(const nlohmann::json& j, Sensitivity& fresh, const std::string& what);

struct MixBudget {
  double max_kld = -1;     // >= 0: the fewest bytes whose predicted KL (base included) is at most this
  uint64_t max_bytes = 0;  // > 0: the least predicted KL within this many tensor bytes
};

struct MixPlan {
  std::vector<size_t> choice;  // per group: the index of its candidate
  uint64_t bytes = 0;          // tensor bytes, fixed ones included
  double predicted_kld = 0;    // base + the chosen candidates' dkl (negative dkl counted as 0)
};

// Fails (tessera::Error) when no mix meets the budget or neither budget is set.
MixPlan search_mix(const Sensitivity& s, const MixBudget& b);

// The plan as convert_gguf overrides, one exact-name pattern per tensor in a group.
std::vector<TensorTypeOverride> plan_overrides(const Sensitivity& s, const MixPlan& p, const GgufFile& f);
// The type most of the plan's weights take: the output's general.file_type.
DType plan_main_type(const Sensitivity& s, const MixPlan& p, const GgufFile& f);

}  // namespace tessera
