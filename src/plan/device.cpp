#include "plan/device.h"

#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/error.h"
#include "core/huge_page_arena.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "formats/json_input.h"
#include "image/image.h"
#include "image/resize.h"
#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/attention_f16.h"
#include "kernels/f16_tiles.h"
#include "kernels/decode_panels.h"
#include "kernels/elementwise.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernel_table.h"
#include "kernels/q8_panels.h"
#include "kernels/quantize.h"
#include "models/qwen3vl/preprocess.h"
#include "models/smolvlm/preprocess.h"
#include "profile/probe.h"

namespace tessera::plan {

using json = nlohmann::json;

namespace {

// The weight types a plan may ask for, and the fallbacks K types take on short rows
const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q5_1,
                        DType::Q5_0, DType::Q4_K, DType::Q4_1, DType::Q4_0};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The middle of the samples (the upper one of an even count).
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median time of `reps` calls of f, `before` run (untimed) ahead of each.
template <class F, class B>
double median_timed(int reps, F&& f, B&& before) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    before();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  return median_of(std::move(t));
}

// Median seconds of `reps` calls of f, after one warm-up call.
template <class F>
double median_seconds(int reps, F&& f) {
  f();  // warm
  return median_timed(reps, f, [] {});
}

// A question's first frame in a new process, as its two bounds: one call on fresh pages (before
// it the resampler's scratch and the heap's free memory go back to the kernel, as in a process
// that has allocated nothing), then the same call again on the pages the first faulted. A real
// first frame comes after a model load, whose freed heap holds some of its images: all of them at
// SmolVLM's edge 1024, half at 2048 (page faults counted inside `tessera run`, docs/plan.md).
// Halfway between the bounds, the figure is off by at most half their gap whatever the load
// left; a load that freed nothing (every matrix repacked straight from the file) pays the cold
// one. A watcher's later frames pay the warm bound.
struct FirstFrame {
  double cold = 0, warm = 0;
  double mid() const { return 0.5 * (cold + warm); }
};
template <class F>
FirstFrame first_frame_seconds(F&& f) {
  FirstFrame r;
  r.cold = median_timed(1, f, [] {
    release_resize_scratch();
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  });
  r.warm = median_timed(1, f, [] {});
  return r;
}

// A rows x cols matrix of type t from seeded Gaussian rows; the first `distinct` rows are
// quantized and repeated (a streaming benchmark needs bytes, not distinct values).
struct TestMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
  PackedWeights packed;
  bool q8 = false;  // packed as q8 panels: run as the session runs them, on 8-bit activations
  const WeightMatrix& m() const { return packed.data ? packed.matrix : w; }
};

// n positions of 4 kv heads x 64 in an fp16 cache laid out as the session keeps it (each kv head's
// positions contiguous, K in tiles; runtime/session.h), from the sample rows x; the view of it.
struct CalibrationCache {
  std::vector<uint8_t> k, v;
  KvView view;
};
CalibrationCache session_layout_cache(const std::vector<float>& x, int n) {
  const size_t row = kv_row_bytes(DType::F16, 64), tile = kv_tile_bytes(DType::F16, 64), tiles = (static_cast<size_t>(n) + 15) / 16;
  CalibrationCache c;
  c.k.resize(4 * tiles * tile), c.v.resize(4 * static_cast<size_t>(n) * row);
  for (int64_t p = 0; p < int64_t{n} * 4; ++p) {  // head p % 4, position p / 4
    kv_store_k_at(DType::F16, x.data() + (p % 256) * 64, 64, c.k.data() + static_cast<size_t>(p % 4) * tiles * tile, tile, p / 4);
    kv_store_row(DType::F16, x.data() + ((p + 7) % 256) * 64, 64, c.v.data() + static_cast<size_t>(p % 4 * n + p / 4) * row);
  }
  c.view = KvView{c.k.data(), c.v.data(), DType::F16, static_cast<int64_t>(row), static_cast<int64_t>(n) * static_cast<int64_t>(row)};
  c.view.k_tiles = true, c.view.k_tile_stride = static_cast<int64_t>(tile), c.view.k_head_stride = static_cast<int64_t>(tiles * tile);
  return c;
}

// Every thread of the pool reading its share of [buf, buf + bytes) `passes` times over with the
// probe's read loop: GB/s, from the median of `reps` timed runs.
double read_gbs(ThreadPool& pool, const float* buf, size_t bytes, int passes, int reps) {
  const size_t share = bytes / static_cast<size_t>(pool.size()) / 64 * 64;
  const double s = median_seconds(reps, [&] {
    pool.parallel_for(pool.size(), 1, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i)
        for (int p = 0; p < passes; ++p) probe_read_pass(buf + static_cast<size_t>(i) * share / sizeof(float), share);
    });
  });
  return static_cast<double>(share) * static_cast<double>(pool.size()) * passes / s / 1e9;
}

// The types the 8-bit-activation path takes, of those calibrated.
bool q8_type(DType t) { return supports_q8_activations(t); }

// The 8-bit path's rate tables by their JSON names (under "q8_activations").
template <class D>
auto q8_rate_maps(D& d) {
  using M = decltype(&d.q8_decode_gbs);
  return std::vector<std::pair<const char*, M>>{{"decode_gbs", &d.q8_decode_gbs},
                                                {"decode_gbs_small", &d.q8_decode_gbs_small},
                                                {"prefill_gflops", &d.q8_prefill_gflops},
                                                {"prefill_gflops_narrow", &d.q8_prefill_gflops_narrow},
                                                {"prefill_gflops_short", &d.q8_prefill_gflops_short}};
}

// The (bytes, GB/s) curves by their JSON names (device.h).
template <class D>
auto curve_fields(D& d) {
  using C = decltype(&d.read_curve);
  return std::vector<std::pair<const char*, C>>{{"decode_curve", &d.decode_curve}, {"q8_decode_curve", &d.q8_decode_curve}, {"read_curve", &d.read_curve}};
}

// y = W x over n tokens as a session runs W: with 8-bit activations (x quantized into xq, then
// matmul_q8) where W carries q8 panels, else the fp32-activation matmul.
void run_matmul(const TestMatrix& t, const float* x, int n, int64_t k, float* y, int64_t ys, std::vector<BlockQ8_1>& xq,
                ThreadPool& pool) {
  if (!t.q8) {
    matmul(t.m(), x, n, k, y, ys, pool);
    return;
  }
  const int64_t nb = k / 32;
  if (xq.size() < static_cast<size_t>(n * nb)) xq.resize(static_cast<size_t>(n * nb));
  quantize_rows_q8_1(x, n, k, xq.data(), k, pool);
  matmul_q8(t.packed.matrix, xq.data(), n, nb, y, ys, pool);
}

std::vector<uint8_t> quantized_rows(DType type, int64_t rows, int64_t cols, int64_t distinct) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const size_t rb = row_bytes(type, static_cast<uint64_t>(cols));
  std::vector<uint8_t> bytes(rb * static_cast<size_t>(rows), 0);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < distinct; ++r) {
    for (float& x : row) x = nd(rng);
    quantize_row(type, row.data(), cols, bytes.data() + static_cast<size_t>(r) * rb);
  }
  for (int64_t r = distinct; r < rows; ++r)
    std::memcpy(bytes.data() + static_cast<size_t>(r) * rb, bytes.data() + static_cast<size_t>(r % distinct) * rb, rb);
  return bytes;
}

// The matrix in the layout a Session gives it (runtime/session.cpp): decode panels where the
// level reads them, else the rows as they are.
void set_matrix(TestMatrix& t, DType type, int64_t rows, int64_t cols, std::vector<uint8_t> bytes, bool q8 = false,
                HugePageArena* arena = nullptr) {
  t.bytes = std::move(bytes);
  t.w = WeightMatrix{};
  t.w.type = type, t.w.rows = rows, t.w.cols = cols, t.w.data = t.bytes.data(), t.w.row_stride = row_bytes(type, static_cast<uint64_t>(cols));
  t.q8 = q8;
  if (q8) {  // the session's q8 panels (runtime/session.cpp)
    t.packed = pack_q8_panels(t.w, {}, arena);
    t.bytes.clear();
    t.bytes.shrink_to_fit();
  } else if (kernels().decode_panels && fits_decode_panels(t.w) && kernels().decode_panels(type)) {
    t.packed = pack_decode_panels(t.w, {}, arena);
    t.bytes.clear();
    t.bytes.shrink_to_fit();
  }
}

void make_matrix(TestMatrix& t, DType type, int64_t rows, int64_t cols, int64_t distinct, bool q8 = false) {
  set_matrix(t, type, rows, cols, quantized_rows(type, rows, cols, distinct), q8);
}

// `copies` copies of `bytes` in a temporary file, mapped read-only (the file is unlinked at once).
std::unique_ptr<MappedFile> map_copies(const std::vector<uint8_t>& bytes, size_t copies) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/tessera-plan-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) fail("plan --calibrate: cannot create a temporary file in %s", dir && *dir ? dir : "/tmp");
  bool ok = true;
  for (size_t i = 0; i < copies && ok; ++i)
    for (size_t done = 0; done < bytes.size() && ok;) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      ok = n > 0;
      done += n > 0 ? static_cast<size_t>(n) : 0;
    }
  ::close(fd);
  std::unique_ptr<MappedFile> m;
  if (ok) m = std::make_unique<MappedFile>(path);
  ::unlink(path.c_str());
  if (!ok) fail("plan --calibrate: cannot write a temporary file in %s", dir && *dir ? dir : "/tmp");
  return m;
}

// The vision encoders' kernels, timed on demand (median of 3 calls): the GEMMs of one SigLIP
// layer, 1024 tokens through its fp16 matrices as the encoders run them (bf16 tiles where bf16 is
// fast, else f16 tiles where fp16 arithmetic is, fp32 panels otherwise): q, k, v and o (768 x
// 768), fc1 (768 -> 3072) and fc2 (3072 -> 768), their rate the layer's FLOPs over its time (one
// 1024^3 GEMM ran 4-10% faster than the encoders' own mix on the Xeon: fc2's long rows and the
// square ones' short ones are slower); fused attention, 1024
// queries over 1024 keys, 8 heads of 64, fp16 cache, bidirectional; and where the GEMMs are bf16
// (fp16) the encoders' bf16 (fp16) attention over the same shape from fp32 rows (its packing
// included; the encoders pack bf16 in their q/k/v GEMM instead).
struct EncoderSampler {
  static constexpr int64_t W = 8 * 64;
  ThreadPool& pool;
  static constexpr int64_t kTokens = 1024, kHidden = 768, kFf = 3072, kQwenHidden = 1024, kQwenFf = 4096;
  std::vector<float> x = std::vector<float>(static_cast<size_t>(kTokens) * kQwenFf), y = std::vector<float>(static_cast<size_t>(kTokens) * kQwenFf);
  TestMatrix tsq, tfc1, tfc2, qsq, qfc1, qfc2;  // SigLIP's 768 x 768, 3072 x 768, 768 x 3072 (rows x cols); Qwen3-VL's at 1024 / 4096
  PackedWeights psq, pfc1, pfc2, pqsq, pqfc1, pqfc2;
  bool bf16 = bf16_gemm_fast();
  bool f16 = !bf16 && f16_gemm_fast();
  AttentionShape sh;
  size_t row = kv_row_bytes(DType::F16, 64);
  std::vector<uint8_t> k, v;
  std::vector<float> q, o, kf, vf;
  std::vector<double> vision_gflops, qwen_vision_gflops, attn_gflops, vision_attn_gflops;

  explicit EncoderSampler(ThreadPool& p) : pool(p) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& e : x) e = nd(rng);
    const auto pack = [&](TestMatrix& t, int64_t rows, int64_t cols) {
      make_matrix(t, DType::F16, rows, cols, std::min<int64_t>(rows, 1024));
      return bf16 ? pack_bf16_tiles(t.w) : f16 ? pack_f16_tiles(t.w) : pack_gemm_panels(t.w);
    };
    psq = pack(tsq, kHidden, kHidden);
    pfc1 = pack(tfc1, kFf, kHidden);
    pfc2 = pack(tfc2, kHidden, kFf);
    pqsq = pack(qsq, kQwenHidden, kQwenHidden);
    pqfc1 = pack(qfc1, kQwenFf, kQwenHidden);
    pqfc2 = pack(qfc2, kQwenHidden, kQwenFf);
    sh.n_head = sh.n_head_kv = 8, sh.head_dim = 64, sh.scale = 0.125f, sh.causal = false, sh.n_kv = 1024;
    k.resize(1024 * 8 * row), v.resize(1024 * 8 * row);
    q.resize(static_cast<size_t>(1024 * W)), o.resize(static_cast<size_t>(1024 * W));
    for (size_t i = 0; i < q.size(); ++i) q[i] = x[i % x.size()];
    for (int64_t p = 0; p < 1024 * 8; ++p) {
      kv_store_row(DType::F16, x.data() + (p % 256) * 64, 64, k.data() + static_cast<size_t>(p) * row);
      kv_store_row(DType::F16, x.data() + ((p + 7) % 256) * 64, 64, v.data() + static_cast<size_t>(p) * row);
    }
    if ((bf16 && attention_bf16_available()) || f16) {
      kf.resize(static_cast<size_t>(1024 * W)), vf.resize(static_cast<size_t>(1024 * W));
      for (size_t i = 0; i < kf.size(); ++i) kf[i] = x[(i + 7) % x.size()], vf[i] = x[(i + 13) % x.size()];
    }
  }
  void sample() {
    const auto run = [&](const PackedWeights& p) {
      const WeightMatrix& w = p.matrix;
      if (bf16) gemm_bf16(w, x.data(), kTokens, w.cols, y.data(), w.rows, pool);
      else if (f16) gemm_f16(w, x.data(), kTokens, w.cols, y.data(), w.rows, pool);
      else gemm(w, x.data(), kTokens, w.cols, y.data(), w.rows, pool);
    };
    // a layer: q, k, v and o as four square GEMMs (SigLIP's; Qwen3-VL's fused q/k/v is the same
    // FLOPs in one call), fc1, fc2
    const auto layer_gflops = [&](const PackedWeights& sq, const PackedWeights& f1, const PackedWeights& f2, double h, double f) {
      const double s = 4 * median_seconds(3, [&] { run(sq); }) + median_seconds(3, [&] { run(f1); }) + median_seconds(3, [&] { run(f2); });
      return 2.0 * kTokens * (4.0 * h * h + 2.0 * h * f) / s / 1e9;
    };
    vision_gflops.push_back(layer_gflops(psq, pfc1, pfc2, kHidden, kFf));
    qwen_vision_gflops.push_back(layer_gflops(pqsq, pqfc1, pqfc2, kQwenHidden, kQwenFf));
    KvView kv{k.data(), v.data(), DType::F16, static_cast<int64_t>(8 * row), static_cast<int64_t>(row)};
    const double sa = median_seconds(3, [&] { flash_attention(sh, q.data(), 1024, W, kv, o.data(), W, pool); });
    attn_gflops.push_back(4.0 * 1024 * 1024 * static_cast<double>(W) / sa / 1e9);
    if (!kf.empty()) {
      const double sb = median_seconds(3, [&] {
        if (f16) attention_f16(sh, q.data(), 1024, W, kf.data(), vf.data(), W, o.data(), W, pool);
        else attention_bf16(sh, q.data(), 1024, W, kf.data(), vf.data(), W, o.data(), W, pool);
      });
      vision_attn_gflops.push_back(4.0 * 1024 * 1024 * static_cast<double>(W) / sb / 1e9);
    }
  }
};

}  // namespace

DeviceProfile calibrate_this_machine(int threads) {
  DeviceProfile d;
  {
    std::ifstream f("/proc/self/statm");
    size_t pages = 0, rss = 0;
    f >> pages >> rss;
    d.process_bytes = static_cast<double>(rss) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  }
  d.threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  d.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  d.name = "this machine";
  d.source = "measured by tessera plan --calibrate";
  d.measured = true;
  d.mem_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  ThreadPool pool(d.threads);
  // DRAM: the probe's read loop over 256 MiB, every thread on its share
  {
    const size_t bytes = size_t{256} << 20;
    std::vector<float> buf(bytes / sizeof(float), 1.0f);
    d.dram_gbs = read_gbs(pool, buf.data(), bytes, 1, 5);
  }
  // fp32 FMA peak: the probe's loops (the best vector level), all threads
  {
    ProbeOptions po;
    po.threads = d.threads, po.repetitions = 3, po.scale = 0.25;
    for (const ProbeResult& r : run_probe(po))
      if (r.name.rfind("fp32_fma", 0) == 0 && r.threads == d.threads) d.fp32_peak_gflops = std::max(d.fp32_peak_gflops, r.value);
  }
  // a kernel call's fixed cost: one-token matmuls on matrices in cache at two sizes, extrapolated
  // to no rows (the pool's dispatch and join)
  {
    double t[2];
    const int64_t rows[2] = {256, 2048};
    for (int k = 0; k < 2; ++k) {
      TestMatrix m;
      make_matrix(m, DType::Q8_0, rows[k], 256, rows[k]);
      std::vector<float> x(256, 0.5f), y(static_cast<size_t>(rows[k]));
      t[k] = median_seconds(9, [&] {
        for (int i = 0; i < 200; ++i) matmul(m.m(), x.data(), 1, 256, y.data(), rows[k], pool);
      }) / 200;
    }
    d.op_us = std::max(0.0, t[0] - (t[1] - t[0]) / (rows[1] - rows[0]) * rows[0]) * 1e6;
  }
  // The encoder's GEMM and attention rates, sampled three times across the calibration (here,
  // between the decode and the prefill rounds, and after them) and their medians kept: each sample
  // lasts a few milliseconds, so one neighbour's burst on this shared machine would otherwise set
  // them (a 2x slower vision rate than the next run's was seen).
  EncoderSampler encoder(pool);
  encoder.sample();
  // per weight type: one-token matmul over >= 128 MiB (from DRAM), 256-token matmul on 2048 x 2048
  const int64_t cols = 2048;
  std::vector<float> x(static_cast<size_t>(256 * cols));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  // Per weight type, in interleaved rounds (a round times every type once; each rate is the median
  // over rounds), so a neighbour's burst on this shared machine slows one round of every type,
  // not every round of one.
  // decode: one-token matmuls on copies of a matrix cycled through >= 128 MiB, so each call reads
  // from DRAM as a model's layers do, per call (the call's fixed cost is in the rate): a large
  // model's matrix (4096 x 2048) and a small one's (1536 x 512)
  for (int small = 0; small < 2; ++small) {
    const int64_t r = small ? 1536 : 4096, k = small ? 512 : 2048;
    struct Set {
      DType type;
      bool q8 = false;
      size_t mb = 0;
      std::unique_ptr<HugePageArena> arena = std::make_unique<HugePageArena>();  // the panels, as a Session keeps them
      std::vector<TestMatrix> m;
      std::unique_ptr<MappedFile> mapped;
      std::vector<double> t;
    };
    std::vector<Set> sets;
    for (int q8 = 0; q8 < 2; ++q8)
      for (DType type : kTypes) {
        if (q8 && !q8_type(type)) continue;
        Set st;
        st.type = type, st.q8 = q8;
        st.mb = row_bytes(type, static_cast<uint64_t>(k)) * static_cast<size_t>(r);
        const size_t copies = std::max<size_t>(2, (size_t{128} << 20) / st.mb + 1);
        const std::vector<uint8_t> base = quantized_rows(type, r, k, 256);
        st.m.resize(copies);
        for (TestMatrix& t : st.m) set_matrix(t, type, r, k, base, q8, st.arena.get());
        // A type no panel layout takes is read where the model file is mapped (page-cache pages,
        // not the arena's huge pages): time it there too.
        if (!st.m.front().packed.data) {
          st.mapped = map_copies(base, copies);
          for (size_t i = 0; i < copies; ++i) st.m[i].bytes = {}, st.m[i].w.data = st.mapped->data() + i * st.mb;
        }
        sets.push_back(std::move(st));
      }
    std::vector<float> y(static_cast<size_t>(r));
    std::vector<BlockQ8_1> xq;
    for (int round = 0; round < 6; ++round)
      for (Set& st : sets) {
        const auto t0 = std::chrono::steady_clock::now();
        for (const TestMatrix& t : st.m) run_matmul(t, x.data(), 1, k, y.data(), r, xq, pool);
        if (round > 0) st.t.push_back(seconds_since(t0));  // round 0 warms up
      }
    for (Set& st : sets) {
      std::sort(st.t.begin(), st.t.end());
      // the rate in the file's bytes (what the model streams), whatever the panels hold
      auto& rates = st.q8 ? (small ? d.q8_decode_gbs_small : d.q8_decode_gbs) : (small ? d.decode_gbs_small : d.decode_gbs);
      rates[st.type] = static_cast<double>(st.mb) * static_cast<double>(st.m.size()) / st.t[st.t.size() / 2] / 1e9;
    }
  }
  // decode from the cache (device.h): Q4_1 (8-bit path) and F16 (fp32 path) one-token matmuls
  // cycled through sets of 16 MiB .. 256 MiB, the sizes interleaved round by round (a neighbour's
  // burst slows one round of every size) and each size's median kept. Every size moves at least
  // 256 MiB a round, so the small sets' calls are timed over many passes.
  for (int q8 = 0; q8 < 2; ++q8) {
    const DType type = q8 ? DType::Q4_1 : DType::F16;
    if (!(q8 ? d.q8_decode_gbs : d.decode_gbs).count(type)) continue;
    const int64_t r = 4096, k = 2048;
    const size_t mb = row_bytes(type, static_cast<uint64_t>(k)) * static_cast<size_t>(r);
    const std::vector<uint8_t> base = quantized_rows(type, r, k, 256);
    const size_t most = std::min<size_t>(size_t{256} << 20, static_cast<size_t>(d.mem_bytes / 16));
    HugePageArena arena;
    std::vector<TestMatrix> m(std::max<size_t>(2, (most + mb / 2) / mb));
    for (TestMatrix& t : m) set_matrix(t, type, r, k, base, q8, &arena);
    std::vector<size_t> counts;  // matrices per set: the nearest count to 16, 32, ... MiB
    for (size_t bytes = size_t{16} << 20; bytes <= most; bytes *= 2) counts.push_back(std::clamp<size_t>((bytes + mb / 2) / mb, 1, m.size()));
    std::vector<std::vector<double>> t(counts.size());
    std::vector<float> y(static_cast<size_t>(r));
    std::vector<BlockQ8_1> xq;
    for (int round = 0; round < 8; ++round)
      for (size_t i = 0; i < counts.size(); ++i) {
        const size_t n = counts[i], passes = std::max<size_t>(1, (size_t{256} << 20) / (n * mb));
        for (size_t j = 0; j < n; ++j) run_matmul(m[j], x.data(), 1, k, y.data(), r, xq, pool);  // brings the set in
        const auto t0 = std::chrono::steady_clock::now();
        for (size_t p = 0; p < passes; ++p)
          for (size_t j = 0; j < n; ++j) run_matmul(m[j], x.data(), 1, k, y.data(), r, xq, pool);
        if (round > 0) t[i].push_back(seconds_since(t0) / static_cast<double>(passes));  // round 0 warms up
      }
    auto& curve = q8 ? d.q8_decode_curve : d.decode_curve;
    for (size_t i = 0; i < counts.size(); ++i) {
      const double bytes = static_cast<double>(counts[i] * mb);
      if (!curve.empty() && !(bytes > curve.back().first)) continue;  // two sizes rounded to one count
      curve.emplace_back(bytes, bytes / median_of(t[i]) / 1e9);
    }
  }
  encoder.sample();
  // prefill: 256 tokens through a wide matrix (2048 x 2048) and a narrow one (1536 x 512, a small
  // model's MLP), and a short prompt's 64 through the narrow one. Both shapes and every type in each
  // round, 8 timed rounds: a neighbour's burst on this shared machine slows one round of every rate
  // (with the shapes in turn, one burst once set all of one shape's rates: 2x between calibrations
  // minutes apart, 2026-12-07).
  {
    struct Shape {
      int64_t r, k;
      std::vector<TestMatrix> m;  // every type with fp32 activations, then the q8 path's types
      std::vector<std::vector<double>> t, t_short;
    } shapes[2] = {{2048, cols, {}, {}, {}}, {1536, 512, {}, {}, {}}};
    for (Shape& sh : shapes) {
      sh.m.reserve(2 * std::size(kTypes));
      for (int q8 = 0; q8 < 2; ++q8)
        for (DType type : kTypes)
          if (!q8 || q8_type(type)) make_matrix(sh.m.emplace_back(), type, sh.r, sh.k, sh.r, q8);
      sh.t.resize(sh.m.size()), sh.t_short.resize(sh.m.size());
    }
    std::vector<float> y(static_cast<size_t>(256) * 2048);
    std::vector<BlockQ8_1> xq;
    for (int round = 0; round < 9; ++round)
      for (int narrow = 0; narrow < 2; ++narrow) {
        Shape& sh = shapes[narrow];
        for (size_t i = 0; i < sh.m.size(); ++i) {
          auto t0 = std::chrono::steady_clock::now();
          run_matmul(sh.m[i], x.data(), 256, sh.k, y.data(), sh.r, xq, pool);
          if (round > 0) sh.t[i].push_back(seconds_since(t0));  // round 0 warms up
          if (!narrow) continue;
          t0 = std::chrono::steady_clock::now();
          run_matmul(sh.m[i], x.data(), 64, sh.k, y.data(), sh.r, xq, pool);
          if (round > 0) sh.t_short[i].push_back(seconds_since(t0));
        }
      }
    for (int narrow = 0; narrow < 2; ++narrow) {
      const Shape& sh = shapes[narrow];
      const double flops = 2.0 * static_cast<double>(sh.r) * sh.k / 1e9;
      for (size_t i = 0; i < sh.m.size(); ++i) {
        const DType type = sh.m[i].w.type;
        const bool q8 = sh.m[i].q8;
        (narrow ? (q8 ? d.q8_prefill_gflops_narrow : d.prefill_gflops_narrow) : (q8 ? d.q8_prefill_gflops : d.prefill_gflops))[type] =
            256 * flops / median_of(sh.t[i]);
        if (narrow) (q8 ? d.q8_prefill_gflops_short : d.prefill_gflops_short)[type] = 64 * flops / median_of(sh.t_short[i]);
      }
    }
  }
  encoder.sample();
  // the encoder's rates: the medians of the three samples taken across the calibration
  d.vision_bf16 = encoder.bf16;
  d.vision_f16 = encoder.f16;
  d.vision_q8 = q8_vision_fast();
  d.vision_q8_float = q8_vision_fast() && bf16_gemm_fast();  // tools/cli_common.cpp, vision_options
  d.vision_gflops = median_of(encoder.vision_gflops);
  d.qwen_vision_gflops = median_of(encoder.qwen_vision_gflops);
  d.attn_gflops = median_of(encoder.attn_gflops);
  if (!encoder.vision_attn_gflops.empty()) d.vision_attn_gflops = median_of(encoder.vision_attn_gflops);
  // a layer's element-wise work on a 256-token batch of a 2B-like layer (width 2048, 16 query heads
  // and 8 kv heads of 128, FFN 6144), each op as the session calls it (runtime/session.cpp)
  {
    const int64_t n = 256, E = 2048, hd = 128, nh = 16, nkv = 8, QD = nh * hd, KV = nkv * hd, FF = 6144;
    std::vector<float> xs(static_cast<size_t>(n * E)), dx(xs.size()), yn(xs.size()), w(static_cast<size_t>(E), 1.0f);
    std::vector<float> q(static_cast<size_t>(n * QD)), k(static_cast<size_t>(n * KV)), v(k.size()), cs(static_cast<size_t>(n * hd));
    std::vector<float> g(static_cast<size_t>(n * FF)), u(g.size());
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = x[i % x.size()], dx[i] = 0.0f;
    for (size_t i = 0; i < q.size(); ++i) q[i] = x[i % x.size()];
    for (size_t i = 0; i < k.size(); ++i) k[i] = x[(i + 3) % x.size()], v[i] = x[(i + 5) % x.size()];
    for (size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * x[i % x.size()], u[i] = x[(i + 1) % x.size()];
    for (int64_t i = 0; i < n; ++i) rope_angles(i, static_cast<int>(hd), 10000.0f, &cs[static_cast<size_t>(i * hd)]);
    const size_t row = kv_row_bytes(DType::F16, static_cast<int>(hd)), tile = kv_tile_bytes(DType::F16, static_cast<int>(hd));
    std::vector<uint8_t> kc(static_cast<size_t>(n / kKvTile) * nkv * tile), vc(static_cast<size_t>(n) * nkv * row);
    const double tn = median_seconds(5, [&] {
      for (int64_t i = 0; i < n; ++i) add_rms_norm(&xs[static_cast<size_t>(i * E)], &dx[static_cast<size_t>(i * E)], w.data(), &yn[static_cast<size_t>(i * E)], E, 1e-6f);
    });
    d.norm_ns = tn / static_cast<double>(n * E) * 1e9;
    const double tr = median_seconds(5, [&] {
      pool.parallel_for(n, 4, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const float* c = &cs[static_cast<size_t>(i * hd)];
          rope_neox(&q[static_cast<size_t>(i * QD)], static_cast<int>(nh), static_cast<int>(hd), c);
          rope_neox(&k[static_cast<size_t>(i * KV)], static_cast<int>(nkv), static_cast<int>(hd), c);
          for (int64_t h = 0; h < nkv; ++h) {
            kv_store_k_at(DType::F16, &k[static_cast<size_t>(i * KV + h * hd)], static_cast<int>(hd),
                          kc.data() + static_cast<size_t>(h * n / kKvTile) * tile, tile, i);
            kv_store_row(DType::F16, &v[static_cast<size_t>(i * KV + h * hd)], static_cast<int>(hd),
                         vc.data() + static_cast<size_t>(h * n + i) * row);
          }
        }
      });
    });
    d.rope_store_ns = tr / static_cast<double>(n * (QD + 2 * KV)) * 1e9;
    const double ts = median_seconds(5, [&] {
      pool.parallel_for(n * FF, 256, [&](int64_t i0, int64_t i1) { swiglu(g.data() + i0, u.data() + i0, i1 - i0); });
    });
    d.swiglu_ns = ts / static_cast<double>(n * FF) * 1e9;
  }
  // decode attention: one query per head (8 heads on 4 kv heads) over 4096 cached positions, fp16,
  // K in tiles, each kv head's positions contiguous as the session keeps them, as the rate at which
  // it gets through the cache's bytes (conversion and dot products included). Each call reads the
  // next of 64 copies (256 MiB): in a decode the layers' weights pass between two reads of a layer's
  // cache, so it comes from memory, and predict.cpp applies the weights' cache_speedup where a
  // token's bytes fit the last-level cache. (One warm 4 MiB copy read 1.5-2x faster than the
  // session's decode attention on Zen 3.)
  {
    AttentionShape sh;
    sh.n_head = 8, sh.n_head_kv = 4, sh.head_dim = 64, sh.scale = 0.125f, sh.causal = true, sh.n_kv = 4096, sh.q_pos0 = 4095;
    const CalibrationCache one = session_layout_cache(x, 4096);
    const size_t k_bytes = one.k.size(), v_bytes = one.v.size(), copies = 64;
    std::vector<uint8_t> k(k_bytes * copies), v(v_bytes * copies);
    for (size_t c = 0; c < copies; ++c) {
      std::memcpy(k.data() + c * k_bytes, one.k.data(), k_bytes);
      std::memcpy(v.data() + c * v_bytes, one.v.data(), v_bytes);
    }
    std::vector<float> q(8 * 64), o(8 * 64);
    for (size_t i = 0; i < q.size(); ++i) q[i] = x[i];
    size_t next = 0;
    const double s = median_seconds(5, [&] {
      for (int i = 0; i < 20; ++i, next = (next + 1) % copies) {
        KvView kv = one.view;  // the same strides over the next copy
        kv.k = k.data() + next * k_bytes, kv.v = v.data() + next * v_bytes;
        flash_attention(sh, q.data(), 1, 8 * 64, kv, o.data(), 8 * 64, pool);
      }
    }) / 20;
    d.attn_decode_gbs = static_cast<double>(k_bytes + v_bytes) / s / 1e9;
  }
  // a prompt's causal attention (device.h): n tokens from position 0, K in tiles as the session
  // keeps it, at 128 and 512 tokens
  {
    AttentionShape sh;
    sh.n_head = 8, sh.n_head_kv = 4, sh.head_dim = 64, sh.scale = 0.125f, sh.causal = true, sh.q_pos0 = 0;
    for (const int n : {128, 512}) {
      sh.n_kv = n;
      const CalibrationCache cache = session_layout_cache(x, n);
      const KvView& kv = cache.view;
      std::vector<float> q(static_cast<size_t>(n) * 8 * 64), o(q.size());
      for (size_t i = 0; i < q.size(); ++i) q[i] = x[i % x.size()];
      const int reps = n == 128 ? 20 : 4;
      const double s = median_seconds(5, [&] {
        for (int i = 0; i < reps; ++i) flash_attention(sh, q.data(), n, 8 * 64, kv, o.data(), 8 * 64, pool);
      }) / reps;
      (n == 128 ? d.prompt_attn_gflops_128 : d.prompt_attn_gflops_512) = 4.0 * 0.5 * n * (n + 1) * 8 * 64 / s / 1e9;
    }
  }
  // image resampling, a 1920 x 1080 screen at three sizes of each processor, fitted by least squares
  // to a cost per source pixel (reading it through the filter) and one per output pixel; timed as
  // first frames (first_frame_seconds), which is what a question on a new screen pays in `tessera run`.
  {
    ImageRGB im;
    im.width = 1920, im.height = 1080;
    im.pixels.resize(static_cast<size_t>(1920) * 1080 * 3);
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
    const double src = 1920.0 * 1080;
    // t = a * src + b * out: the least-squares (a, b) >= 0 over the sizes
    auto fit = [&](const double* out, const double* t, int n, double& ns_src, double& ns_out) {
      double so = 0, st = 0, soo = 0, sot = 0;
      for (int k = 0; k < n; ++k) so += out[k], st += t[k], soo += out[k] * out[k], sot += out[k] * t[k];
      const double var = soo - so * so / n;
      double b = var > 0 ? (sot - so * st / n) / var : 0;
      b = std::max(0.0, b);
      double a = std::max(0.0, (st - b * so) / n / src);
      if (a == 0 && soo > 0) b = sot / soo;  // the intercept clamped: refit through the origin
      ns_src = a, ns_out = b;
    };
    // each size's median first frame over 7 rounds, the sizes in turn within a round (a neighbour's
    // burst then moves one sample of each size, not the fit's slope): the bounds' midpoint, and
    // where asked the cold bound
    const auto timed_sizes = [&](const auto& call, double* t, double* t_cold = nullptr) {
      std::vector<double> s[3], c[3];
      for (int rep = 0; rep < 7; ++rep)
        for (int k = 0; k < 3; ++k) {
          const FirstFrame f = first_frame_seconds([&] { call(k); });
          s[k].push_back(f.mid()), c[k].push_back(f.cold);
        }
      for (int k = 0; k < 3; ++k) {
        t[k] = median_of(std::move(s[k])) * 1e9;
        if (t_cold) t_cold[k] = median_of(std::move(c[k])) * 1e9;
      }
    };
    double out[3], t[3], t_cold[3];
    const int edges[3] = {512, 1024, 2048};  // the knob's range: from one tile to 4 x 4
    Idefics3PreprocessConfig ic[3];
    for (int k = 0; k < 3; ++k) {
      ic[k].longest_edge = edges[k];
      const Idefics3Grid g = idefics3_grid(ic[k], im.width, im.height);
      out[k] = static_cast<double>(g.stretched_w) * g.stretched_h;
    }
    timed_sizes([&](int k) { (void)preprocess_idefics3(im, ic[k], &pool); }, t, t_cold);
    fit(out, t, 3, d.preprocess_ns_src, d.preprocess_ns_out);
    fit(out, t_cold, 3, d.preprocess_cold_ns_src, d.preprocess_cold_ns_out);
    const int64_t pixels[3] = {65536, 262144, 1048576};
    Qwen3VLPreprocessConfig qc[3];
    for (int k = 0; k < 3; ++k) {
      qc[k] = Qwen3VLPreprocessConfig{}.with_max_pixels(pixels[k]);
      int rh = 0, rw = 0;
      qwen3vl_smart_resize(im.height, im.width, qc[k].factor(), qc[k].min_pixels, qc[k].max_pixels, rh, rw);
      out[k] = static_cast<double>(rh) * rw;
    }
    timed_sizes([&](int k) { (void)preprocess_qwen3vl(im, qc[k], &pool); }, t);
    fit(out, t, 3, d.qwen_preprocess_ns_src, d.qwen_preprocess_ns_out);
  }
  return d;
}

double rate_on_curve(const std::vector<std::pair<double, double>>& c, double bytes) {
  if (c.empty()) return 0;
  if (bytes <= c.front().first) return c.front().second;
  for (size_t i = 1; i < c.size(); ++i)
    if (bytes <= c[i].first) {
      const double f = std::log2(bytes / c[i - 1].first) / std::log2(c[i].first / c[i - 1].first);
      return c[i - 1].second + f * (c[i].second - c[i - 1].second);
    }
  return c.back().second;
}

std::string device_to_json(const DeviceProfile& d) {
  json j;
  j["name"] = d.name, j["source"] = d.source, j["measured"] = d.measured;
  j["mem_bytes"] = d.mem_bytes, j["cores"] = d.cores, j["threads"] = d.threads, j["dram_gbs"] = d.dram_gbs;
  j["fp32_peak_gflops"] = d.fp32_peak_gflops;
  for (const auto& [t, v] : d.decode_gbs) j["decode_gbs"][dtype_name(t)] = v;
  for (const auto& [t, v] : d.decode_gbs_small) j["decode_gbs_small"][dtype_name(t)] = v;
  for (const auto& [t, v] : d.prefill_gflops) j["prefill_gflops"][dtype_name(t)] = v;
  for (const auto& [t, v] : d.prefill_gflops_narrow) j["prefill_gflops_narrow"][dtype_name(t)] = v;
  for (const auto& [t, v] : d.prefill_gflops_short) j["prefill_gflops_short"][dtype_name(t)] = v;
  for (const auto& [key, m] : q8_rate_maps(d))
    for (const auto& [t, v] : *m) j["q8_activations"][key][dtype_name(t)] = v;
  j["vision_gflops"] = d.vision_gflops, j["attn_gflops"] = d.attn_gflops, j["op_us"] = d.op_us;
  if (d.qwen_vision_gflops > 0) j["qwen_vision_gflops"] = d.qwen_vision_gflops;
  if (d.vision_attn_gflops > 0) j["vision_attn_gflops"] = d.vision_attn_gflops;
  j["vision_bf16"] = d.vision_bf16;
  j["vision_f16"] = d.vision_f16;
  j["vision_q8"] = d.vision_q8;
  j["vision_q8_float"] = d.vision_q8_float;
  for (const auto& [key, c] : curve_fields(d)) {
    if (c->empty()) continue;
    j[key] = json::array();
    for (const auto& [b, g] : *c) j[key].push_back({b, g});
  }
  if (d.decode_cached_ratio > 0) j["decode_cached_ratio"] = d.decode_cached_ratio;
  if (d.q8_decode_cached_ratio > 0) j["q8_decode_cached_ratio"] = d.q8_decode_cached_ratio;
  j["attn_decode_gbs"] = d.attn_decode_gbs;
  if (d.prompt_attn_gflops_128 > 0) j["prompt_attn_gflops_128"] = d.prompt_attn_gflops_128, j["prompt_attn_gflops_512"] = d.prompt_attn_gflops_512;
  if (d.norm_ns > 0) j["norm_ns"] = d.norm_ns, j["rope_store_ns"] = d.rope_store_ns, j["swiglu_ns"] = d.swiglu_ns;
  j["preprocess_ns_src"] = d.preprocess_ns_src, j["preprocess_ns_out"] = d.preprocess_ns_out;
  j["preprocess_cold_ns_src"] = d.preprocess_cold_ns_src, j["preprocess_cold_ns_out"] = d.preprocess_cold_ns_out;
  j["qwen_preprocess_ns_src"] = d.qwen_preprocess_ns_src, j["qwen_preprocess_ns_out"] = d.qwen_preprocess_ns_out;
  j["process_bytes"] = d.process_bytes;
  j["gpu_tflops"] = d.gpu_tflops, j["ane_tops"] = d.ane_tops, j["sme"] = d.sme;
  return j.dump(1) + "\n";
}

DeviceProfile device_from_json(const std::string& text, const std::string& path) {
  const json j = parse_json(reinterpret_cast<const uint8_t*>(text.data()), text.size(), path);
  DeviceProfile d;
  const auto num = [&](const json& o, const char* k, double lo, double hi) {
    if (!o.is_object() || !o.contains(k) || !o[k].is_number()) fail("%s: '%s' must be a number", path.c_str(), k);
    const double v = o[k].get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) fail("%s: '%s' = %g is out of range", path.c_str(), k, v);
    return v;
  };
  if (!j.is_object()) fail("%s: not a JSON object", path.c_str());
  d.name = j.value("name", "this machine");
  d.source = j.value("source", path);
  d.measured = true;
  d.mem_bytes = num(j, "mem_bytes", 1e6, 1e15);
  d.cores = static_cast<int>(num(j, "cores", 1, 4096));
  d.threads = static_cast<int>(num(j, "threads", 1, 4096));
  d.dram_gbs = num(j, "dram_gbs", 1e-3, 1e5);
  d.fp32_peak_gflops = num(j, "fp32_peak_gflops", 1e-3, 1e7);
  d.vision_gflops = num(j, "vision_gflops", 1e-3, 1e7);
  if (j.contains("qwen_vision_gflops")) d.qwen_vision_gflops = num(j, "qwen_vision_gflops", 1e-3, 1e7);  // optional
  d.attn_gflops = num(j, "attn_gflops", 1e-3, 1e7);
  if (j.contains("vision_attn_gflops")) d.vision_attn_gflops = num(j, "vision_attn_gflops", 1e-3, 1e7);  // optional
  if (j.contains("prompt_attn_gflops_128")) {  // optional, both or neither: see device.h
    d.prompt_attn_gflops_128 = num(j, "prompt_attn_gflops_128", 1e-3, 1e7);
    d.prompt_attn_gflops_512 = num(j, "prompt_attn_gflops_512", 1e-3, 1e7);
  }
  if (!j.contains("vision_bf16")) d.vision_bf16 = d.vision_gflops > d.attn_gflops;  // optional: see device.h
  else if (j["vision_bf16"].is_boolean()) d.vision_bf16 = j["vision_bf16"].get<bool>();
  else fail("%s: 'vision_bf16' must be true or false", path.c_str());
  if (j.contains("vision_f16")) {  // optional: see device.h
    if (!j["vision_f16"].is_boolean()) fail("%s: 'vision_f16' must be true or false", path.c_str());
    d.vision_f16 = j["vision_f16"].get<bool>();
  }
  if (j.contains("vision_q8")) {  // optional: see device.h
    if (!j["vision_q8"].is_boolean()) fail("%s: 'vision_q8' must be true or false", path.c_str());
    d.vision_q8 = j["vision_q8"].get<bool>();
  }
  if (j.contains("vision_q8_float")) {  // optional: see device.h
    if (!j["vision_q8_float"].is_boolean()) fail("%s: 'vision_q8_float' must be true or false", path.c_str());
    d.vision_q8_float = j["vision_q8_float"].get<bool>();
  }
  for (const auto& [key, c] : curve_fields(d)) {  // optional: see device.h
    if (!j.contains(key)) continue;
    const json& a = j[key];
    if (!a.is_array() || a.size() > 64) fail("%s: '%s' must be a list of at most 64 [bytes, GB/s] pairs", path.c_str(), key);
    for (const json& e : a) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_number() || !e[1].is_number())
        fail("%s: '%s' must be a list of [bytes, GB/s] pairs", path.c_str(), key);
      const double b = e[0].get<double>(), g = e[1].get<double>();
      if (!(b >= 1024 && b <= 1e15) || !(g > 1e-3 && g < 1e5) || (!c->empty() && !(b > c->back().first)))
        fail("%s: '%s' needs ascending sizes and positive rates", path.c_str(), key);
      c->emplace_back(b, g);
    }
  }
  if (j.contains("decode_cached_ratio")) d.decode_cached_ratio = num(j, "decode_cached_ratio", 0.05, 20);
  if (j.contains("q8_decode_cached_ratio")) d.q8_decode_cached_ratio = num(j, "q8_decode_cached_ratio", 0.05, 20);
  d.attn_decode_gbs = num(j, "attn_decode_gbs", 1e-3, 1e5);
  if (j.contains("norm_ns")) {  // optional: calibrations before 2026-12-05 lack them
    d.norm_ns = num(j, "norm_ns", 0, 1e6);
    d.rope_store_ns = num(j, "rope_store_ns", 0, 1e6);
    d.swiglu_ns = num(j, "swiglu_ns", 0, 1e6);
  }
  d.op_us = num(j, "op_us", 0, 1e6);
  d.preprocess_ns_src = num(j, "preprocess_ns_src", 0, 1e9);
  d.preprocess_ns_out = num(j, "preprocess_ns_out", 0, 1e9);
  // optional (see device.h): the midpoint's where absent
  d.preprocess_cold_ns_src = j.contains("preprocess_cold_ns_src") ? num(j, "preprocess_cold_ns_src", 0, 1e9) : d.preprocess_ns_src;
  d.preprocess_cold_ns_out = j.contains("preprocess_cold_ns_out") ? num(j, "preprocess_cold_ns_out", 0, 1e9) : d.preprocess_ns_out;
  d.qwen_preprocess_ns_src = num(j, "qwen_preprocess_ns_src", 0, 1e9);
  d.qwen_preprocess_ns_out = num(j, "qwen_preprocess_ns_out", 0, 1e9);
  d.process_bytes = num(j, "process_bytes", 0, 1e12);
  for (const char* key : {"decode_gbs", "decode_gbs_small", "prefill_gflops", "prefill_gflops_narrow"}) {
    if (!j.contains(key) || !j[key].is_object()) fail("%s: '%s' must be an object", path.c_str(), key);
    for (DType t : kTypes) {
      if (!j[key].contains(dtype_name(t))) fail("%s: '%s' has no %s", path.c_str(), key, dtype_name(t));
      std::map<DType, double>& m = std::strcmp(key, "decode_gbs") == 0         ? d.decode_gbs
                                   : std::strcmp(key, "decode_gbs_small") == 0 ? d.decode_gbs_small
                                   : std::strcmp(key, "prefill_gflops") == 0   ? d.prefill_gflops
                                                                               : d.prefill_gflops_narrow;
      m[t] = num(j[key], dtype_name(t), 1e-3, 1e7);
    }
  }
  if (j.contains("q8_activations")) {  // optional: calibrations before 2026-12-05 lack it
    const json& q = j["q8_activations"];
    if (!q.is_object()) fail("%s: 'q8_activations' must be an object", path.c_str());
    for (const auto& [key, m] : q8_rate_maps(d)) {
      if (!q.contains(key)) continue;
      if (!q[key].is_object()) fail("%s: 'q8_activations.%s' must be an object", path.c_str(), key);
      for (DType t : kTypes)
        if (q8_type(t) && q[key].contains(dtype_name(t))) (*m)[t] = num(q[key], dtype_name(t), 1e-3, 1e7);
    }
  }
  if (j.contains("prefill_gflops_short")) {  // optional: older calibrations lack it
    const json& ks = j["prefill_gflops_short"];
    if (!ks.is_object()) fail("%s: 'prefill_gflops_short' must be an object", path.c_str());
    for (DType t : kTypes)
      if (ks.contains(dtype_name(t))) d.prefill_gflops_short[t] = num(ks, dtype_name(t), 1e-3, 1e7);
  }
  return d;
}

// Published figures (Apple's press releases and product pages; docs/plan.md cites each). CPU
// fp32: performance cores x 4 FMA pipes x 4 lanes x 2 flops x clock, a derived figure.
const std::vector<AppleChip>& apple_chips() {
  static const std::vector<AppleChip> chips = {
      {"m1", 4, 4, 68.25, 4 * 32 * 3.2, 2.6, 11, false, {8, 16}},
      {"m1-pro", 8, 2, 200, 8 * 32 * 3.2, 5.2, 11, false, {16, 32}},
      {"m1-max", 8, 2, 400, 8 * 32 * 3.2, 10.4, 11, false, {32, 64}},
      {"m2", 4, 4, 100, 4 * 32 * 3.5, 3.6, 15.8, false, {8, 16, 24}},
      {"m2-pro", 8, 4, 200, 8 * 32 * 3.5, 6.8, 15.8, false, {16, 32}},
      {"m2-max", 8, 4, 400, 8 * 32 * 3.5, 13.6, 15.8, false, {32, 64, 96}},
      {"m3", 4, 4, 100, 4 * 32 * 4.05, 4.1, 18, false, {8, 16, 24}},
      {"m3-pro", 6, 6, 150, 6 * 32 * 4.05, 7.4, 18, false, {18, 36}},
      {"m3-max", 12, 4, 400, 12 * 32 * 4.05, 16.4, 18, false, {36, 48, 64, 96, 128}},
      {"m4", 4, 6, 120, 4 * 32 * 4.4, 4.3, 38, true, {16, 24, 32}},
      {"m4-pro", 10, 4, 273, 10 * 32 * 4.5, 9.2, 38, true, {24, 48, 64}},
      {"m4-max", 12, 4, 546, 12 * 32 * 4.5, 18.4, 38, true, {36, 48, 64, 128}},
  };
  return chips;
}

const AppleChip& find_apple_chip(const std::string& name) {
  for (const AppleChip& c : apple_chips())
    if (name == c.name) return c;
  fail("unknown device '%s' (this, or an Apple chip: m1, m1-pro, ..., m4-max; see tessera plan --list-devices)", name.c_str());
}

DeviceProfile apple_device(const std::string& name, int memory_gb, const DeviceProfile& here) {
  const AppleChip* chip = &find_apple_chip(name);
  if (memory_gb == 0) memory_gb = chip->memory_gb.front();
  if (std::find(chip->memory_gb.begin(), chip->memory_gb.end(), memory_gb) == chip->memory_gb.end())
    fail("%s is not sold with %d GB of memory", name.c_str(), memory_gb);
  DeviceProfile d;
  d.name = std::string(name) + " " + std::to_string(memory_gb) + " GB";
  d.source = "Apple's published figures; rates scaled from this machine's calibration";
  d.mem_bytes = static_cast<double>(memory_gb) * (1u << 30);
  d.cores = d.threads = chip->p_cores;
  d.dram_gbs = chip->dram_gbs;
  d.gpu_tflops = chip->gpu_tflops, d.ane_tops = chip->ane_tops, d.sme = chip->sme;
  // bandwidth-bound work keeps this machine's fraction of its read bandwidth; compute-bound work
  // its fraction of the fp32 peak the probe measured (a CPU plan: the GPU and the Neural Engine
  // are listed, not used)
  const double here_fp32 = here.fp32_peak_gflops;
  const double bw = chip->dram_gbs / here.dram_gbs, fl = chip->cpu_fp32_gflops / here_fp32;
  for (const auto& [t, v] : here.decode_gbs) d.decode_gbs[t] = std::min(v, here.dram_gbs) * bw;  // at most the roof
  for (const auto& [t, v] : here.decode_gbs_small) d.decode_gbs_small[t] = std::min(v, here.dram_gbs) * bw;
  for (const auto& [t, v] : here.prefill_gflops) d.prefill_gflops[t] = v * fl;
  for (const auto& [t, v] : here.prefill_gflops_narrow) d.prefill_gflops_narrow[t] = v * fl;
  for (const auto& [t, v] : here.prefill_gflops_short) d.prefill_gflops_short[t] = v * fl;
  // the 8-bit path likewise (int8 dot products assumed to keep their ratio to fp32 FMAs: NEON's
  // SDOT against FMLA is 4x in lanes, as AVX-512 VNNI against fp32 FMA)
  for (const auto& [t, v] : here.q8_decode_gbs) d.q8_decode_gbs[t] = std::min(v, here.dram_gbs) * bw;
  for (const auto& [t, v] : here.q8_decode_gbs_small) d.q8_decode_gbs_small[t] = std::min(v, here.dram_gbs) * bw;
  for (const auto& [t, v] : here.q8_prefill_gflops) d.q8_prefill_gflops[t] = v * fl;
  for (const auto& [t, v] : here.q8_prefill_gflops_narrow) d.q8_prefill_gflops_narrow[t] = v * fl;
  for (const auto& [t, v] : here.q8_prefill_gflops_short) d.q8_prefill_gflops_short[t] = v * fl;
  d.vision_bf16 = here.vision_bf16, d.vision_f16 = here.vision_f16, d.vision_q8 = here.vision_q8;
  d.vision_q8_float = here.vision_q8_float;  // the rates below are those of this machine's path, scaled
  d.vision_gflops = here.vision_gflops * fl;
  d.qwen_vision_gflops = here.qwen_vision_gflops * fl;
  d.attn_gflops = here.attn_gflops * fl;
  d.vision_attn_gflops = here.vision_attn_gflops * fl;
  d.prompt_attn_gflops_128 = here.prompt_attn_gflops_128 * fl, d.prompt_attn_gflops_512 = here.prompt_attn_gflops_512 * fl;
  d.attn_decode_gbs = here.attn_decode_gbs * fl;  // compute-bound at these lengths, like the encoder's
  // the element-wise ops: per core (the norms run on one), at the compute ratio per core
  const double fl_core = (chip->cpu_fp32_gflops / chip->p_cores) / (here_fp32 / std::max(1, here.threads));
  d.norm_ns = here.norm_ns / fl_core;
  d.rope_store_ns = here.rope_store_ns / fl;
  d.swiglu_ns = here.swiglu_ns / fl;
  d.op_us = here.op_us;
  d.process_bytes = here.process_bytes;
  const double px = here_fp32 / chip->cpu_fp32_gflops;
  d.preprocess_ns_src = here.preprocess_ns_src * px, d.preprocess_ns_out = here.preprocess_ns_out * px;
  d.preprocess_cold_ns_src = here.preprocess_cold_ns_src * px, d.preprocess_cold_ns_out = here.preprocess_cold_ns_out * px;
  d.qwen_preprocess_ns_src = here.qwen_preprocess_ns_src * px, d.qwen_preprocess_ns_out = here.qwen_preprocess_ns_out * px;
  return d;
}

}  // namespace tessera::plan
