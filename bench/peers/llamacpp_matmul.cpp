// llamacpp_matmul: peer micro-benchmark of a single GGML_OP_MUL_MAT on the
// CPU backend of the peer llama.cpp build (.peers/llama.cpp-build), so that
// our quantized matmul kernels can be compared "same shapes, same threads".
//
// Built and run by bench/peers/llamacpp_matmul.sh (links libggml, libggml-base,
// libggml-cpu from that build; headers from the vendored source).
//
// For every (weight type, shape) it builds a one-node graph
//     y[M,N] = mul_mat(W[N,K] (type T), x[M,K] (f32))      (ggml: ne0=K)
// and times ggml_graph_compute() with a persistent threadpool. Everything the
// op does is inside the timed region, in particular the conversion of the f32
// activations into the weight type's vec_dot_type (Q8_0 / Q8_1 / Q8_K / F16 /
// BF16), which llama.cpp performs inside its MUL_MAT on every call.
//
// Usage:
//   llamacpp_matmul [-t THREADS] [-r REPS] [-w WARMUP] [--min-time SEC]
//                   [--types q8_0,q4_0,...] [--repack 0|1|both]
//                   [--flush-mb MB] [--shapes M:N:K,...] [--commit STR]
//
//   --repack 0     weights in the plain CPU buffer (default; what a bare
//                  ggml_graph_compute user gets)
//   --repack 1     weights in the CPU "extra" (CPU_REPACK) buffer type, as
//                  llama.cpp model loading does by default (use_extra_bufts);
//                  types without a repacked layout on this CPU are reported
//                  as skipped.
//   --flush-mb MB  write MB MiB of memory before every timed run (untimed),
//                  to measure with cold caches (default 0: hot caches).
//   --quiet-threshold CPUS / --quiet-wait SEC / --attempts N
//                  the bench machine is small and shared: before each timed
//                  batch wait (up to SEC) until other processes use <= CPUS
//                  CPUs, and re-measure a case whose batch saw more than that
//                  (up to N batches, keep the least contended one).
//                  Defaults 0.25 / 2 / 2.
//
// Output: one JSON object per line on stdout; diagnostics on stderr.
// Fields: type M N K threads repack cold_cache path act reps median_ms min_ms
// p10_ms p90_ms gflops (2*M*N*K/median) weight_gbs (ggml_nbytes(W)/median)
// weight_bytes act_convert_ms_1t (1-thread cost of converting the M x K f32
// activations to vec_dot_type alone; already included in median_ms)
// max_rel_err (spot check vs. dequantized weights, relative to sum|w*x|)
// other_cpus (CPUs busy with other processes during the kept batch)
// attempts contended; or "skipped" with the reason.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace {

struct Shape { int64_t M, N, K; };

const std::vector<Shape> kDefaultShapes = {
    // decode (SmolLM2-135M: hidden 576, kv 192, ffn 1536, vocab 49152)
    {1, 576, 576}, {1, 192, 576}, {1, 1536, 576}, {1, 576, 1536}, {1, 49152, 576},
    // prefill
    {512, 1536, 576}, {512, 576, 1536}, {512, 576, 576},
};

const std::vector<std::string> kDefaultTypes = {"q8_0", "q4_0", "q4_1", "q4_K", "f32", "f16", "bf16"};

bool parse_type(const std::string & s, ggml_type & t) {
    for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
        const char * name = ggml_type_name((ggml_type) i);
        if (name && s == name && ggml_get_type_traits((ggml_type) i)->blck_size > 0) {
            t = (ggml_type) i;
            return true;
        }
    }
    return false;
}

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        size_t p = s.find(sep, start);
        if (p == std::string::npos) p = s.size();
        if (p > start) out.push_back(s.substr(start, p - start));
        start = p + 1;
    }
    return out;
}

// Which code path this vendored ggml-cpu (0c1e57098; x86 AVX-512 build with
// GGML_LLAMAFILE=ON, GGML_CPU_REPACK=ON, tiled K-quant path enabled, no AMX)
// takes for MUL_MAT with f32 activations. Derived from ggml-cpu.c
// ggml_compute_forward_mul_mat, llamafile/sgemm.cpp llamafile_sgemm,
// tiled/tiled.cpp ggml_compute_forward_mul_mat_tiled and repack.cpp.
std::string describe_path(ggml_type t, int64_t M, bool repacked) {
    if (repacked) {
        std::string name = t == GGML_TYPE_Q4_0 ? "q4_0_8x8_q8_0" :
                           t == GGML_TYPE_Q4_K ? "q4_K_8x8_q8_K" : std::string(ggml_type_name(t)) + "_repacked";
        return "repack " + name + (M >= 4 ? " gemm (+gemv for M%4 rows)" : " gemv");
    }
    const bool tiled_type = t == GGML_TYPE_Q2_K || t == GGML_TYPE_Q3_K || t == GGML_TYPE_Q4_K ||
                            t == GGML_TYPE_Q5_K || t == GGML_TYPE_Q6_K;
    if (tiled_type && M >= 8) {
        return "ggml-cpu tiled K-quant matmul";
    }
    const bool sgemm_type = t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 ||
                            t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q5_0 ||
                            t == GGML_TYPE_IQ4_NL;
    if (sgemm_type && M >= 2) {
        return "llamafile_sgemm (tinyBLAS)";
    }
    const ggml_type vdt = ggml_get_type_traits_cpu(t)->vec_dot_type;
    return std::string("ggml vec_dot_") + ggml_type_name(t) +
           (t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 ? "" : std::string("_") + ggml_type_name(vdt)) +
           " (1 row x 1 col per call)";
}

std::string act_desc(ggml_type t, bool repacked, int64_t M) {
    const ggml_type vdt = ggml_get_type_traits_cpu(t)->vec_dot_type;
    if (vdt == GGML_TYPE_F32) return "f32 (used as is)";
    std::string s = std::string(ggml_type_name(vdt));
    if (repacked && M >= 4) {
        s += "x4 interleaved (ggml_quantize_mat_t)";
    }
    return s + " (quantized/converted from f32 inside the op, every call)";
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// --- contention accounting (the bench machine is small and shared) ---------
// system-wide busy CPU seconds (from /proc/stat) and this process's CPU seconds
struct CpuSample { double sys_busy = 0.0, self = 0.0, wall = 0.0; };

CpuSample cpu_sample() {
    CpuSample c;
    c.wall = now_s();
    if (FILE * f = fopen("/proc/stat", "r")) {
        unsigned long long v[10] = {0};
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) >= 8) {
            // user nice system idle iowait irq softirq steal (guest* already in user)
            const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
            c.sys_busy = (double) busy / (double) sysconf(_SC_CLK_TCK);
        }
        fclose(f);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    c.self = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    return c;
}

// average number of CPUs busy with *other* work between a and b (incl. steal)
double other_cpus(const CpuSample & a, const CpuSample & b) {
    const double wall = b.wall - a.wall;
    if (wall <= 0) return 0.0;
    return std::max(0.0, ((b.sys_busy - a.sys_busy) - (b.self - a.self)) / wall);
}

// sleep-sample until the rest of the machine is (nearly) idle, or timeout
double wait_quiet(double threshold, double timeout_s) {
    const double t_end = now_s() + timeout_s;
    double other = 0.0;
    do {
        CpuSample a = cpu_sample();
        usleep(250 * 1000);
        other = other_cpus(a, cpu_sample());
        if (other <= threshold) break;
    } while (now_s() < t_end);
    return other;
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0.0;
    const double idx = p * (double) (v.size() - 1);
    const size_t lo = (size_t) std::floor(idx), hi = (size_t) std::ceil(idx);
    return v[lo] + (v[hi] - v[lo]) * (idx - (double) lo);
}

void json_str(std::string & out, const char * key, const std::string & v) {
    out += "\""; out += key; out += "\":\"";
    for (char c : v) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    out += "\",";
}
void json_num(std::string & out, const char * key, double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "\"%s\":%.6g,", key, v);
    out += buf;
}
void json_int(std::string & out, const char * key, long long v) {
    char buf[64];
    snprintf(buf, sizeof buf, "\"%s\":%lld,", key, v);
    out += buf;
}
void json_bool(std::string & out, const char * key, bool v) {
    out += "\""; out += key; out += "\":"; out += v ? "true," : "false,";
}
void emit(std::string s) {
    if (!s.empty() && s.back() == ',') s.pop_back();
    printf("{%s}\n", s.c_str());
    fflush(stdout);
}

struct Opts {
    int threads = 1;
    int reps = 50;
    int warmup = 5;
    double min_time = 0.3;   // seconds of timed runs per case (reps grows up to max_reps)
    int max_reps = 2000;
    int repack_mode = 0;     // 0, 1, 2 = both
    size_t flush_mb = 0;
    std::vector<std::string> types = kDefaultTypes;
    std::vector<Shape> shapes = kDefaultShapes;
    std::string commit = "0c1e57098";
    double quiet_threshold = 0.25;  // other CPUs busy above which a measurement counts as contended
    double quiet_wait = 2.0;        // max seconds to wait for a quiet machine before each attempt
    int attempts = 2;               // re-measure a contended case up to this many times (keep least contended)
};

void usage() {
    fprintf(stderr,
            "usage: llamacpp_matmul [-t THREADS] [-r REPS] [-w WARMUP] [--min-time SEC] [--max-reps N]\n"
            "                       [--types q8_0,q4_0,...] [--repack 0|1|both] [--flush-mb MB]\n"
            "                       [--shapes M:N:K,...] [--commit STR]\n"
            "                       [--quiet-threshold CPUS] [--quiet-wait SEC] [--attempts N]\n");
}

}  // namespace

int main(int argc, char ** argv) {
    Opts o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) { usage(); exit(2); }
            return argv[++i];
        };
        if (a == "-t" || a == "--threads") o.threads = atoi(next().c_str());
        else if (a == "-r" || a == "--reps") o.reps = atoi(next().c_str());
        else if (a == "-w" || a == "--warmup") o.warmup = atoi(next().c_str());
        else if (a == "--min-time") o.min_time = atof(next().c_str());
        else if (a == "--max-reps") o.max_reps = atoi(next().c_str());
        else if (a == "--types") o.types = split(next(), ',');
        else if (a == "--repack") {
            std::string v = next();
            o.repack_mode = v == "both" ? 2 : atoi(v.c_str());
        }
        else if (a == "--flush-mb") o.flush_mb = (size_t) atoll(next().c_str());
        else if (a == "--commit") o.commit = next();
        else if (a == "--quiet-threshold") o.quiet_threshold = atof(next().c_str());
        else if (a == "--quiet-wait") o.quiet_wait = atof(next().c_str());
        else if (a == "--attempts") o.attempts = std::max(1, atoi(next().c_str()));
        else if (a == "--shapes") {
            o.shapes.clear();
            for (const auto & s : split(next(), ',')) {
                auto p = split(s, ':');
                if (p.size() != 3) { usage(); return 2; }
                o.shapes.push_back({atoll(p[0].c_str()), atoll(p[1].c_str()), atoll(p[2].c_str())});
            }
        }
        else if (a == "-h" || a == "--help") { usage(); return 0; }
        else { fprintf(stderr, "unknown arg %s\n", a.c_str()); usage(); return 2; }
    }
    if (o.threads < 1 || o.reps < 1) { usage(); return 2; }

    ggml_cpu_init();

    // the CPU "extra" buffer types (here: CPU_REPACK only), exactly as llama.cpp
    // finds them in make_cpu_buft_list()
    ggml_backend_buffer_type_t repack_buft = nullptr;
    {
        ggml_backend_reg_t reg = ggml_backend_cpu_reg();
        ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
        auto fn = (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
        if (fn) {
            for (ggml_backend_buffer_type_t * b = fn(dev); b && *b; ++b) {
                fprintf(stderr, "[llamacpp_matmul] CPU extra buffer type: %s\n", ggml_backend_buft_name(*b));
                if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) repack_buft = *b;
            }
        }
    }

    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(o.threads);
    struct ggml_threadpool * tp = ggml_threadpool_new(&tpp);

    std::vector<char> flush_buf(o.flush_mb << 20);
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);

    std::vector<int> repack_variants;
    if (o.repack_mode == 0 || o.repack_mode == 2) repack_variants.push_back(0);
    if (o.repack_mode == 1 || o.repack_mode == 2) repack_variants.push_back(1);

    for (const auto & tname : o.types) {
        ggml_type type;
        if (!parse_type(tname, type)) { fprintf(stderr, "unknown type %s\n", tname.c_str()); return 2; }
        const int64_t blck = ggml_blck_size(type);

        for (const Shape & sh : o.shapes) {
            for (int rp : repack_variants) {
                std::string base;
                json_str(base, "engine", "llama.cpp");
                json_str(base, "commit", o.commit);
                json_str(base, "type", ggml_type_name(type));
                json_int(base, "M", sh.M);
                json_int(base, "N", sh.N);
                json_int(base, "K", sh.K);
                json_int(base, "threads", o.threads);
                json_bool(base, "repack", rp != 0);
                json_bool(base, "cold_cache", o.flush_mb > 0);

                if (sh.K % blck != 0) {
                    std::string s = base;
                    json_str(s, "skipped", "K % " + std::to_string(blck) + " != 0: type " + ggml_type_name(type) +
                             " cannot hold this matrix (llama-quantize would fall back, e.g. q4_K -> q5_0)");
                    emit(s);
                    continue;
                }
                if (rp && !repack_buft) {
                    std::string s = base;
                    json_str(s, "skipped", "no CPU_REPACK buffer type in this build");
                    emit(s);
                    continue;
                }

                // ---- weights: N rows of K (ggml ne0 = K, ne1 = N)
                struct ggml_init_params wp = { ggml_tensor_overhead() * 4, nullptr, /*no_alloc=*/true };
                struct ggml_context * ctx_w = ggml_init(wp);
                struct ggml_tensor * w = ggml_new_tensor_2d(ctx_w, type, sh.K, sh.N);
                ggml_set_name(w, "w");
                ggml_backend_buffer_type_t buft = rp ? repack_buft : ggml_backend_cpu_buffer_type();
                ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(ctx_w, buft);
                if (!wbuf) { fprintf(stderr, "weight alloc failed\n"); return 1; }
                if (rp && w->extra == nullptr) {
                    // no repacked layout for this type/shape on this CPU: llama.cpp would
                    // keep such a weight in the plain CPU buffer (same as repack=0)
                    std::string s = base;
                    json_str(s, "skipped", std::string("no CPU_REPACK layout for ") + ggml_type_name(type) +
                             " on this CPU (llama.cpp keeps it in the plain CPU buffer: same as repack=false)");
                    emit(s);
                    ggml_backend_buffer_free(wbuf);
                    ggml_free(ctx_w);
                    continue;
                }
                std::vector<float> wf((size_t) (sh.N * sh.K));
                for (auto & v : wf) v = uni(rng);
                const size_t wbytes = ggml_nbytes(w);
                std::vector<uint8_t> wq(wbytes);
                ggml_quantize_init(type);
                ggml_quantize_chunk(type, wf.data(), wq.data(), 0, sh.N, sh.K, nullptr);
                ggml_backend_tensor_set(w, wq.data(), 0, wbytes);  // repack happens here when rp

                // ---- activations + output + graph in a host context
                const size_t cmem = ggml_tensor_overhead() * 8 + ggml_graph_overhead() +
                                    (size_t) (sh.M * sh.K + sh.M * sh.N) * sizeof(float) + (1 << 20);
                struct ggml_init_params cp = { cmem, nullptr, /*no_alloc=*/false };
                struct ggml_context * ctx = ggml_init(cp);
                struct ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, sh.K, sh.M);
                float * xd = (float *) x->data;
                for (int64_t i = 0; i < sh.M * sh.K; ++i) xd[i] = uni(rng);
                struct ggml_tensor * y = ggml_mul_mat(ctx, w, x);
                struct ggml_cgraph * gf = ggml_new_graph(ctx);
                ggml_build_forward_expand(gf, y);

                struct ggml_cplan plan = ggml_graph_plan(gf, o.threads, tp);
                std::vector<uint8_t> work(plan.work_size + 64);
                plan.work_data = plan.work_size ? work.data() : nullptr;

                auto run_once = [&]() {
                    if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) {
                        fprintf(stderr, "ggml_graph_compute failed\n");
                        exit(1);
                    }
                };
                auto flush = [&]() {
                    if (!flush_buf.empty()) {
                        for (size_t i = 0; i < flush_buf.size(); i += 64) flush_buf[i] = (char) (flush_buf[i] + 1);
                    }
                };

                // warmup + estimate
                double t_est = 0.0;
                for (int i = 0; i < std::max(1, o.warmup); ++i) {
                    flush();
                    double t0 = now_s();
                    run_once();
                    t_est = now_s() - t0;
                }
                int reps = o.reps;
                if (t_est > 0 && reps * t_est < o.min_time) {
                    reps = (int) std::min<double>(o.max_reps, std::ceil(o.min_time / t_est));
                }
                // timed runs; if other processes were busy meanwhile, wait for a quiet
                // machine and measure again, keeping the least contended attempt
                std::vector<double> ts;
                double other = 1e9;
                int attempts_used = 0;
                for (int att = 0; att < o.attempts; ++att) {
                    if (o.quiet_wait > 0) wait_quiet(o.quiet_threshold, o.quiet_wait);
                    for (int i = 0; i < 2; ++i) run_once();  // re-warm after the sleep
                    std::vector<double> cur;
                    cur.reserve(reps);
                    CpuSample c0 = cpu_sample();
                    for (int i = 0; i < reps; ++i) {
                        flush();
                        double t0 = now_s();
                        run_once();
                        cur.push_back(now_s() - t0);
                    }
                    const double oc = other_cpus(c0, cpu_sample());
                    ++attempts_used;
                    if (oc < other) { other = oc; ts = cur; }
                    if (other <= o.quiet_threshold) break;
                }

                // ---- correctness spot check against dequantized weights (double accumulation)
                double max_rel = 0.0;
                {
                    const auto * tt = ggml_get_type_traits(type);
                    std::vector<float> row(sh.K);
                    const float * yd = (const float *) y->data;
                    const int64_t ncheck_n = std::min<int64_t>(sh.N, 8), ncheck_m = std::min<int64_t>(sh.M, 4);
                    for (int64_t a = 0; a < ncheck_n; ++a) {
                        const int64_t n = a * (sh.N / ncheck_n);
                        const uint8_t * wrow = wq.data() + n * ggml_row_size(type, sh.K);
                        if (type == GGML_TYPE_F32) {
                            memcpy(row.data(), wrow, sh.K * sizeof(float));
                        } else {
                            tt->to_float(wrow, row.data(), sh.K);
                        }
                        for (int64_t b = 0; b < ncheck_m; ++b) {
                            const int64_t m = b * (sh.M / ncheck_m);
                            double ref = 0.0, mag = 0.0;
                            for (int64_t k = 0; k < sh.K; ++k) {
                                ref += (double) row[k] * xd[m * sh.K + k];
                                mag += std::fabs((double) row[k] * xd[m * sh.K + k]);
                            }
                            const double got = yd[m * sh.N + n];
                            max_rel = std::max(max_rel, std::fabs(got - ref) / std::max(mag, 1e-30));
                        }
                    }
                }

                // ---- stand-alone cost of the activation conversion (1 thread, M*K)
                double act_ms = 0.0;
                const ggml_type vdt = ggml_get_type_traits_cpu(type)->vec_dot_type;
                if (vdt != GGML_TYPE_F32) {
                    auto from_float = ggml_get_type_traits_cpu(vdt)->from_float;
                    std::vector<uint8_t> qa(ggml_row_size(vdt, sh.K) * sh.M);
                    std::vector<double> ta;
                    for (int i = 0; i < 21; ++i) {
                        double t0 = now_s();
                        for (int64_t m = 0; m < sh.M; ++m) {
                            from_float(xd + m * sh.K, qa.data() + m * ggml_row_size(vdt, sh.K), sh.K);
                        }
                        ta.push_back(now_s() - t0);
                    }
                    act_ms = percentile(ta, 0.5) * 1e3;
                }

                const double med = percentile(ts, 0.5);
                const double flops = 2.0 * (double) sh.M * (double) sh.N * (double) sh.K;
                std::string s = base;
                json_str(s, "path", describe_path(type, sh.M, rp != 0));
                json_str(s, "act", act_desc(type, rp != 0, sh.M));
                json_int(s, "reps", reps);
                json_num(s, "median_ms", med * 1e3);
                json_num(s, "min_ms", percentile(ts, 0.0) * 1e3);
                json_num(s, "p10_ms", percentile(ts, 0.1) * 1e3);
                json_num(s, "p90_ms", percentile(ts, 0.9) * 1e3);
                json_num(s, "gflops", flops / med * 1e-9);
                json_num(s, "weight_gbs", (double) wbytes / med * 1e-9);
                json_int(s, "weight_bytes", (long long) wbytes);
                json_num(s, "act_convert_ms_1t", act_ms);
                json_num(s, "max_rel_err", max_rel);
                json_num(s, "other_cpus", other);
                json_int(s, "attempts", attempts_used);
                json_bool(s, "contended", other > o.quiet_threshold);
                emit(s);

                ggml_free(ctx);
                ggml_backend_buffer_free(wbuf);
                ggml_free(ctx_w);
            }
        }
    }

    ggml_threadpool_free(tp);
    return 0;
}
