// The machine a plan is for: this one, measured (`tessera plan --calibrate`: tessera's own kernels
// timed on synthetic weights of every type), or an Apple M1-M4 from a table of published figures
// whose kernel rates are this machine's efficiencies scaled to its bandwidth and compute.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace tessera::plan {

struct DeviceProfile {
  std::string name, source;
  double mem_bytes = 0;     // physical memory
  int cores = 0;            // cores tessera's threads run on (performance cores on Apple)
  int threads = 0;          // threads the rates were measured with
  double dram_gbs = 0;      // streaming read, all threads
  double fp32_peak_gflops = 0;  // FMA peak, all threads (the probe's loop)
  // one-token matmuls from DRAM, weight bytes per second by type, per call: on 4096 x 2048
  // matrices and on 1536 x 512 ones (a small model's, where the call's fixed cost weighs more)
  std::map<DType, double> decode_gbs, decode_gbs_small;
  std::map<DType, double> prefill_gflops; // 256-token matmul on a 2048 x 2048 matrix, by weight type
  std::map<DType, double> prefill_gflops_narrow;  // the same on 1536 x 512 (a small model's rows)
  // 64 tokens through the 1536 x 512 matrix: how a short prompt's matmuls fall below the 256-token
  // rate (empty in calibrations made before it was measured: no correction)
  std::map<DType, double> prefill_gflops_short;
  // The same five on the 8-bit-activation path (the engine's default for quantized matrices:
  // matmul_q8 over q8 panels, the activations' quantization included), for the types it takes;
  // empty in calibrations made before it was the default (the fp32 rates stand in).
  std::map<DType, double> q8_decode_gbs, q8_decode_gbs_small, q8_prefill_gflops, q8_prefill_gflops_narrow, q8_prefill_gflops_short;
  // Decode from the cache. The rates above stream from a 128 MiB set (kDecodeSetBytes): DRAM's
  // rate on the machines seen, but a model whose bytes per token fit the last-level cache
  // (SmolLM2's 101 MB on a Xeon with 260 MiB of L3) reads faster. decode_curve /
  // q8_decode_curve: the one-token matmul's own rate (F16 on the fp32 path, Q4_1 on the 8-bit
  // path; GB/s of the file's bytes) against the bytes of the set its calls cycle through (16 MiB
  // .. 256 MiB, ascending); plan/predict.cpp's cache_speedup is the curve at a token's bytes over
  // the curve at 128 MiB (at least 1). Empty: not measured (Apple devices; calibrations before 2026-12-07,
  // which carry the older estimate below instead).
  std::vector<std::pair<double, double>> decode_curve, q8_decode_curve;  // (bytes, GB/s)
  // The older estimate: read_curve, a streaming read's all-thread rate against the set's bytes, and
  // *_cached_ratio, a one-token matmul's rate through a 16 MiB set over its rate through 128 MiB.
  // It credited the matmul with the read's cache gain, which the matmul does not get in full (on
  // Zen 3, 1.25x where the decode got none: docs/plan.md). Read from older calibrations only.
  std::vector<std::pair<double, double>> read_curve;  // (bytes, GB/s)
  double decode_cached_ratio = 0, q8_decode_cached_ratio = 0;
  double vision_gflops = 0; // the vision encoder's GEMM (bf16 where this CPU has it, else fp32), over SigLIP's layer
  // the same over a Qwen3-VL tower layer (width 1024, FFN 4096: longer rows, 10-15% slower on the
  // Xeon's fp16 path); 0 in calibrations before 2026-12-05 late: vision_gflops stands in
  double qwen_vision_gflops = 0;
  // whether the encoder runs bf16 GEMMs there (bf16_gemm_fast(): AMX, or AVX512-BF16 on AMD); with
  // them its attention is bf16 and its weights are held as bf16 tiles. Calibrations made before
  // it was recorded: inferred from the rates (vision_gflops > attn_gflops), which an fp32 GEMM that
  // is simply faster than fp32 attention (the Xeon without AMX) also passes
  bool vision_bf16 = false;
  // whether it runs fp16 GEMMs and attention instead (f16_gemm_fast(): AVX512-FP16 where bf16 is
  // slow, the Intel Xeon without AMX); its weights are then fp16 tiles, as large as bf16 ones.
  // Absent from calibrations made before 2026-12-05 evening: false.
  bool vision_f16 = false;
  // whether a quantized mmproj's matrices run on 8-bit activations (q8_vision_fast(): AVX-512 VNNI
  // without AMX), at the 8-bit prefill rate of their type; the attention keeps the path above.
  // Absent from calibrations made before 2026-12-07 afternoon: false.
  bool vision_q8 = false;
  // whether a float mmproj's matrices are quantized to Q8_0 at load and run on 8-bit activations
  // too (the CLI's default where q8_vision_fast() and bf16_gemm_fast(): AMD Zen 4), predicted as a
  // Q8_0 mmproj. Absent from calibrations made before 2026-12-07 evening: false.
  bool vision_q8_float = false;
  double attn_gflops = 0;   // fused attention over a 1024-token encoder tile / a long prompt
  // the encoder's bf16 (or fp16) attention over a 1024-token tile, where those GEMMs run (0: not measured, as in
  // calibrations before it was; the GEMM's rate stands in)
  double vision_attn_gflops = 0;
  double attn_decode_gbs = 0;  // one token's attention: cache bytes per second (fp16, 4096 positions, the session's layout: K in tiles, each kv head's positions contiguous; from memory)
  // a prompt's causal attention as a session runs it (8 heads on 4 kv heads x 64, fp16 cache with
  // K in tiles), GFLOP/s over the causal pairs, for 128 and 512 positions (a short prompt runs at
  // about half the long one's rate: fewer rows per item, the diagonal's partial blocks); 0: not
  // measured (calibrations before 2026-12-06): attn_gflops stands in
  double prompt_attn_gflops_128 = 0, prompt_attn_gflops_512 = 0;
  // A text layer's element-wise work, ns per element, as the session runs it over a 256-token
  // batch: the two (add+)RMSNorms, one token after another (per element of the width); RoPE of q
  // and k with the K/V stores into the f16 cache, tokens over the threads (per element of q, k
  // and v); SwiGLU over the threads (per element of the FFN). 0: not measured (calibrations before
  // 2026-12-05), no term.
  double norm_ns = 0, rope_store_ns = 0, swiglu_ns = 0;
  double op_us = 0;         // fixed cost of one kernel call (dispatch to the thread pool and back)
  // image resampling (SmolVLM's, Qwen3-VL's): ns per source pixel and per output pixel
  double preprocess_ns_src = 0, preprocess_ns_out = 0, qwen_preprocess_ns_src = 0, qwen_preprocess_ns_out = 0;
  // SmolVLM's first frame on fresh pages alone (the cold bound; the two above are the midpoint of
  // it and the warm one): what a question pays after a load that freed no float panels for the
  // frame's images to reuse. Absent from calibrations before 2026-12-07 evening: the midpoint's.
  double preprocess_cold_ns_src = 0, preprocess_cold_ns_out = 0;
  double process_bytes = 0;     // resident before any model is loaded (code, libraries, stacks)
  // published, for the table and the listing (Apple; 0 where unknown)
  double gpu_tflops = 0, ane_tops = 0;
  bool sme = false;
  bool measured = false;    // true: calibrated here; false: modelled from the table
};

constexpr double kDecodeSetBytes = 128.0 * (1 << 20);  // the decode rates' set (see above)
// A (bytes, GB/s) curve's rate at `bytes`: log-linear between its points, its ends beyond them;
// 0 for an empty curve.
double rate_on_curve(const std::vector<std::pair<double, double>>& curve, double bytes);

std::string device_to_json(const DeviceProfile& d);
DeviceProfile device_from_json(const std::string& text, const std::string& path);

// Times tessera's kernels on this machine: a few seconds. `threads` 0: all cores.
DeviceProfile calibrate_this_machine(int threads);

// Apple silicon: the table's names ("m1", "m2-pro", "m4-max", ...), each with its memory options.
struct AppleChip {
  const char* name;
  int p_cores, e_cores;
  double dram_gbs, cpu_fp32_gflops, gpu_tflops, ane_tops;
  bool sme;
  std::vector<int> memory_gb;
};
const std::vector<AppleChip>& apple_chips();
// The chip of that name; throws Error naming the choices when there is none.
const AppleChip& find_apple_chip(const std::string& name);
// "m2-pro" with `memory_gb` (0: the chip's smallest), its rates scaled from `here` (this machine's
// calibration) by the ratio of bandwidth (decode) and of compute (prefill, vision).
DeviceProfile apple_device(const std::string& name, int memory_gb, const DeviceProfile& here);

}  // namespace tessera::plan
