#include "models/gguf_convert.h"

#include <algorithm>
#include <map>
#include <regex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf_writer.h"
#include "kernels/exact_repack.h"
#include "kernels/kernels.h"
#include "kernels/quantize.h"

namespace tessera {

namespace {

// llama.cpp's general.file_type for a file whose matrices are `t`
uint32_t llama_file_type(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 32;
    case DType::Q8_0: return 7;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q4_K: return 14;  // Q4_K_S: llama.cpp's _M mixtures also raise some matrices' type
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q5_K: return 16;  // Q5_K_S
    case DType::Q6_K: return 18;
    case DType::Q3_K: return 11;  // Q3_K_S
    default: fail("convert: %s is not a conversion target", dtype_name(t));
  }
}

const std::map<std::string, DType>& convert_types() {
  static const std::map<std::string, DType> kTypes = {{"f32", DType::F32},   {"f16", DType::F16},   {"bf16", DType::BF16},
                                                      {"q8_0", DType::Q8_0}, {"q4_0", DType::Q4_0}, {"q4_1", DType::Q4_1},
                                                      {"q4_k", DType::Q4_K}, {"q5_0", DType::Q5_0}, {"q5_1", DType::Q5_1},
                                                      {"q5_k", DType::Q5_K}, {"q6_k", DType::Q6_K}, {"q3_k", DType::Q3_K}};
  return kTypes;
}

}  // namespace

DType convert_type_from_name(const std::string& name) {
  const auto it = convert_types().find(name);
  if (it == convert_types().end()) fail("unknown type '%s' (one of %s)", name.c_str(), kConvertTypeNames);
  return it->second;
}

std::string convert_type_name(DType t) {
  for (const auto& [name, type] : convert_types())
    if (type == t) return name;
  fail("%s is not a conversion target", dtype_name(t));
}

DType converted_type(const GgufTensor& t, DType want) { return convert_target_type(t.name, t.dims, t.type, want); }

DType convert_target_type(const std::string& name, const std::vector<uint64_t>& dims, DType current, DType want) {
  const bool blocks = info(want).block_elems > 1;
  const uint64_t n = dims.empty() ? 0 : dims[0];
  DType tt = want;
  // rows that are not a whole number of 256-element super-blocks take llama-quantize's fallback
  // (Q3_K's: Q4_0 in the pinned llama.cpp, IQ4_NL in later ones)
  if (n % 256 != 0)
    tt = want == DType::Q4_K   ? DType::Q5_0
         : want == DType::Q5_K ? DType::Q5_1
         : want == DType::Q6_K ? DType::Q8_0
         : want == DType::Q3_K ? DType::Q4_0
                               : want;
  if (blocks && (dims.size() < 2 || n % info(tt).block_elems != 0)) tt = current;  // keep norms, odd rows
  if (blocks && name.find("position_embd") != std::string::npos) tt = current;
  return tt;
}

void convert_gguf(const GgufFile& f, DType to, const std::string& out_path, const std::vector<TensorTypeOverride>& overrides) {
  const uint32_t file_type = llama_file_type(to);
  std::vector<std::regex> patterns;
  for (const TensorTypeOverride& o : overrides) {
    llama_file_type(o.type);  // a conversion target
    try {
      patterns.emplace_back(o.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      fail("convert: '%s' is not a regular expression", o.pattern.c_str());
    }
  }
  GgufWriter w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  if (const GgufValue* ft = f.find("general.file_type"); ft && ft->type == GgufType::UINT32)
    w.set("general.file_type", GgufValue::make_u32(file_type));
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for (const auto& t : f.tensors()) {
    if (!loadable_type(t.type)) fail("tensor '%s' has type %s, which cannot be converted", t.name.c_str(), dtype_name(t.type));
    const uint64_t n = t.dims[0], rows = t.n_elements / n;
    DType want = to;
    for (size_t i = 0; i < patterns.size(); ++i)
      if (std::regex_search(t.name, patterns[i])) {
        want = overrides[i].type;
        break;
      }
    const DType tt = converted_type(t, want);
    std::vector<uint8_t> data(row_bytes(tt, n) * rows);
    if (tt == t.type) {  // already the target: the same bytes
      std::copy(t.data, t.data + data.size(), data.begin());
      w.add_tensor(t.name, tt, t.dims, std::move(data));
      continue;
    }
    // rows are independent: spread over the cores (K quants search every sub-block's grid)
    pool.parallel_for(static_cast<int64_t>(rows), 4, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(n);
      for (int64_t r = r0; r < r1; ++r) {
        dequantize_row(t.type, t.data + static_cast<uint64_t>(r) * row_bytes(t.type, n), row.data(), static_cast<int64_t>(n));
        quantize_row(tt, row.data(), static_cast<int64_t>(n), data.data() + static_cast<uint64_t>(r) * row_bytes(tt, n));
      }
    });
    w.add_tensor(t.name, tt, t.dims, std::move(data));
  }
  w.write(out_path);
}

}  // namespace tessera
