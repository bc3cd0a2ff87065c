// `tessera watch`: a standing question over a stream of screen frames, one JSON line per frame
// (answer, tiles changed, tokens reused/recomputed, phase times, savings), then a summary line.
#include "watch.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/output_file.h"
#include "models/smolvlm/idefics3.h"
#include "watch/frame_source.h"
#include "watch/qwen_watcher.h"
#include "watch/watcher.h"

namespace tessera::cli {

void add_watch_options(CLI::App* sub, WatchArgs& w) {
  sub->add_option("--frames", w.frames, "a directory of PNG/JPEG frames, a file listing them, or - for raw frames on stdin")->required();
  sub->add_option("--mmproj", w.mmproj, "vision model (llama.cpp mmproj GGUF)");
  sub->add_option("-p,--prompt", w.question, "the standing question");
  sub->add_option("-n,--n-predict", w.n_predict, "answer length in tokens")->check(CLI::Range(1, 4096));
  sub->add_option("--cadence", w.cadence_s, "look at most once every SECONDS (a live watcher's period; 0: as fast as possible)")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_flag("--no-reuse", w.no_reuse, "recompute every frame in full (the baseline)");
  sub->add_option("--cache-mb", w.cache_mb, "memory budget of the tile cache")->check(CLI::Range(0, 1 << 20));
  sub->add_option("--validate", w.validate, "recompute every Nth frame in full and compare (exact mode: any differing bit fails)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--approx-global", w.approx_global,
                  "keep the global thumbnail's encoding while its pixels moved less than this mean absolute difference (0..255)")
      ->check(CLI::Range(0.0, 255.0));
  sub->add_flag("--approx-gate", w.approx_gate,
               "token gating in the encoder: re-encode only the changed 16x16 patches of a partly changed tile "
               "(Qwen3-VL: the changed 32x32 merge blocks of the image)");
  sub->add_option("--vision-max-pixels", w.max_pixels,
                  "Qwen3-VL: resize each frame to at most this many pixels before encoding (the processor's max_pixels)")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 26));
  sub->add_option("--approx-kv", w.approx_kv,
                  "keep stale K/V of unchanged tiles after a changed one, recomputing this fraction of each (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_flag("--validate-fp32-vision", w.validate_fp32_vision,
               "compare against a full recompute with the default fp32 vision path (a second copy of the vision model): "
               "the embedding error and next-token KL of the bf16 or fp16 vision path or --q8-activations");
  sub->add_option("--reference-mmproj", w.reference_mmproj,
                  "with --validate-fp32-vision: the reference's vision model (default: --mmproj), e.g. the f16 file a Q8_0 one was made from");
}

int cmd_watch(CommonArgs& a, const WatchArgs& w) {
  auto source = FrameSource::open(w.frames, ImageLimits{});  // an empty or missing source fails before loading models
  HfModel loaded = load_any(a, w.mmproj);
  const bool qwen = loaded.qwen_vision != nullptr;
  std::unique_ptr<Idefics3Vision> vision;
  if (qwen) {
    vision_options(a, *loaded.qwen_vision);
    if (w.approx_global >= 0) fail("--approx-global is SmolVLM's (its global thumbnail); Qwen3-VL encodes one whole image");
    if (w.validate_fp32_vision || !w.reference_mmproj.empty()) fail("--validate-fp32-vision is SmolVLM's for now");
  } else {
    vision = vision_options(a, std::move(loaded.vision));
    if (!vision) fail("watch needs the vision model: pass --mmproj MMPROJ.gguf (or -m a SmolVLM Hugging Face directory)");
    if (w.max_pixels) fail("--vision-max-pixels is Qwen3-VL's; SmolVLM's tiles are 512x512");
  }
  const LlamaModel& text = *loaded.text;
  WatchOptions wo;
  wo.question = w.question;
  wo.n_predict = w.n_predict;
  wo.reuse = !w.no_reuse;
  wo.cache_bytes = static_cast<size_t>(w.cache_mb) << 20;
  wo.approx_global = w.approx_global;
  wo.approx_kv = w.approx_kv;
  wo.approx_gate = w.approx_gate;
  wo.max_pixels = w.max_pixels;
  // with --validate-fp32-vision the frames are expected to differ: measured, not failed
  const bool approx = w.approx_global >= 0 || w.approx_kv >= 0 || w.approx_gate || w.validate_fp32_vision;
  std::unique_ptr<Idefics3Vision> fp32_vision;  // the reference: the vision model without the lower-precision options
  if (w.validate_fp32_vision) {
    if (w.validate <= 0) fail("--validate-fp32-vision needs --validate N");
    const std::string& ref = w.reference_mmproj.empty() ? w.mmproj : w.reference_mmproj;
    // an mmproj file alone (the text model is shared); a Hugging Face directory's tower otherwise
    fp32_vision = ref.empty() ? std::move(open_model(a.model).vision) : Idefics3Vision::load_mmproj(ref);
    if (!fp32_vision) fail("--validate-fp32-vision: no vision model in the reference");
  } else if (!w.reference_mmproj.empty()) {
    fail("--reference-mmproj needs --validate-fp32-vision");
  }
  const auto make_watcher = [&](Session& s, const WatchOptions& o, const Idefics3Vision* v) -> std::unique_ptr<FrameWatcher> {
    if (qwen) return std::make_unique<Qwen3VLWatcher>(text, *loaded.qwen_vision, s, o);
    return std::make_unique<Watcher>(text, *v, s, o);
  };
  Session session(text, session_options(a));
  std::unique_ptr<FrameWatcher> watcher = make_watcher(session, wo, vision.get());
  std::unique_ptr<Session> full_session;
  std::unique_ptr<FrameWatcher> full;
  if (w.validate > 0) {
    WatchOptions fo = wo;
    fo.reuse = false;
    fo.approx_global = fo.approx_kv = -1;
    fo.approx_gate = false;
    full_session = std::make_unique<Session>(text, session_options(a));
    full = make_watcher(*full_session, fo, fp32_vision ? fp32_vision.get() : vision.get());
  }

  int n = 0, skipped = 0, validated = 0, bitwise = 0, same_answer = 0, failures = 0;
  double sum_enc_work = 0, sum_tok_work = 0, busy_s = 0, sum_ratio = 0, sum_kl = 0, max_kl = 0;
  int ratios = 0;
  // running cost model for "what a full recompute would have cost" on frames not validated
  double ms_per_tile = 0, ms_per_token = 0;
  const double t_begin = now_seconds(), cpu_begin = cpu_seconds();
  double next_tick = t_begin;
  Frame f;
  for (int i = 0; source->next(f); ++i) {
    if (w.cadence_s > 0) {
      const double wait = next_tick - now_seconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      next_tick = std::max(next_tick + w.cadence_s, now_seconds());
    }
    if (!f.error.empty()) {
      ++skipped;
      std::printf("{\"frame\": %d, \"source\": \"%s\", \"skipped\": \"%s\"}\n", i, json_escape(f.name).c_str(), json_escape(f.error).c_str());
      flush_stdout();
      continue;
    }
    FrameResult r;
    try {
      r = watcher->process(f.image);
    } catch (const Error& e) {
      ++skipped;
      std::printf("{\"frame\": %d, \"source\": \"%s\", \"skipped\": \"%s\"}\n", i, json_escape(f.name).c_str(), json_escape(e.what()).c_str());
      flush_stdout();
      continue;
    }
    ++n;
    busy_s += r.total_ms * 1e-3;
    if (r.tiles_encoded > 0) ms_per_tile = r.encode_ms / r.tiles_encoded;
    if (r.tokens_recomputed > 0) ms_per_token = r.prefill_ms / r.tokens_recomputed;
    const double est_full = r.preprocess_ms + ms_per_tile * r.tiles + ms_per_token * r.prompt_tokens + r.decode_ms;
    const double enc_work = r.encoder_work;
    const double tok_work = static_cast<double>(r.tokens_recomputed) / std::max(1, r.prompt_tokens);
    sum_enc_work += enc_work;
    sum_tok_work += tok_work;
    std::ostringstream o;
    char buf[256];
    o << "{\"frame\": " << i << ", \"source\": \"" << json_escape(f.name) << "\", \"size\": \"" << r.width << "x" << r.height
      << "\", \"answer\": \"" << json_escape(r.answer) << "\", \"tiles\": " << r.tiles << ", \"tiles_changed\": " << r.tiles_encoded
 << ", \"tiles_gated\": " << r.tiles_gated
      << ", \"tiles_reused\": " << r.tiles_reused << ", \"global_kept_approx\": " << (r.global_kept_approx ? "true" : "false")
      << ", \"frame_unchanged\": " << (r.frame_unchanged ? "true" : "false") << ", \"answer_reused\": " << (r.answer_reused ? "true" : "false")
      << ", \"tokens\": " << r.prompt_tokens << ", \"tokens_reused\": " << r.tokens_reused << ", \"tokens_recomputed\": " << r.tokens_recomputed
      << ", \"tokens_kept_stale\": " << r.tokens_kept_stale << ", \"answer_drafted\": " << r.answer_drafted;
    std::snprintf(buf, sizeof buf, ", \"ms\": {\"preprocess\": %.1f, \"encode\": %.1f, \"prefill\": %.1f, \"decode\": %.1f, \"total\": %.1f}",
                  r.preprocess_ms, r.encode_ms, r.prefill_ms, r.decode_ms, r.total_ms);
    o << buf;
    double full_ms = est_full;
    bool measured = false;
    if (full && i % w.validate == 0) {
      const FrameResult fr = full->process(f.image);
      const Divergence dv = Watcher::compare(r, fr);
      full_ms = fr.total_ms;
      measured = true;
      ++validated;
      bitwise += dv.bitwise_equal;
      same_answer += dv.same_answer;
      sum_kl += dv.next_token_kl;
      max_kl = std::max(max_kl, dv.next_token_kl);
      std::snprintf(buf, sizeof buf,
                    ", \"validate\": {\"full_ms\": %.1f, \"bitwise_equal\": %s, \"emb_max_abs\": %.3g, \"emb_max_rel\": %.3g, \"next_token_kl\": %.3g, "
                    "\"same_answer\": %s}",
                    fr.total_ms, dv.bitwise_equal ? "true" : "false", dv.emb_max_abs, dv.emb_max_rel, dv.next_token_kl,
                    dv.same_answer ? "true" : "false");
      o << buf;
      if (!approx && !dv.bitwise_equal) {
        ++failures;
        std::fprintf(stderr, "watch: frame %d (%s) differs from its full recompute (exact reuse must be bitwise): emb max abs %.3g, KL %.3g, same answer %s\n",
                     i, f.name.c_str(), dv.emb_max_abs, dv.next_token_kl, dv.same_answer ? "yes" : "no");
      }
    }
    if (full_ms > 0) {
      sum_ratio += r.total_ms / full_ms;
      ++ratios;
    }
    std::snprintf(buf, sizeof buf, ", \"savings\": {\"encoder_work\": %.3f, \"prefill_tokens\": %.3f, \"time_vs_full\": %.3f, \"full_ms_%s\": %.1f}}",
                  enc_work, tok_work, full_ms > 0 ? r.total_ms / full_ms : 1.0, measured ? "measured" : "estimated", full_ms);
    o << buf;
    std::printf("%s\n", o.str().c_str());
    flush_stdout();
  }
  const double wall = now_seconds() - t_begin, cpu = cpu_seconds() - cpu_begin;
  const TileCache empty_cache(0);
  const Watcher* tiled = dynamic_cast<const Watcher*>(watcher.get());
  const TileCache& c = tiled ? tiled->cache() : empty_cache;
  const char* precision = qwen ? loaded.qwen_vision->precision() : vision->precision();
  std::printf("{\"summary\": {\"vision\": \"%s\", \"frames\": %d, \"skipped\": %d, \"mean_encoder_work\": %.3f, \"mean_prefill_tokens\": %.3f, "
              "\"mean_time_vs_full\": %.3f, \"validated\": %d, \"bitwise_equal\": %d, \"same_answer\": %d, \"mean_next_token_kl\": %.3g, "
              "\"max_next_token_kl\": %.3g, \"busy_s\": %.2f, \"wall_s\": %.2f, \"cpu_s\": %.2f, \"cache\": {\"entries\": %zu, \"mb\": %.1f, "
              "\"hits\": %llu, \"misses\": %llu, \"evictions\": %llu, \"collisions\": %llu}}}\n",
              precision, n, skipped, n ? sum_enc_work / n : 0, n ? sum_tok_work / n : 0, ratios ? sum_ratio / ratios : 0, validated, bitwise, same_answer,
              validated ? sum_kl / validated : 0, max_kl, busy_s, wall, cpu, c.entries(), c.bytes() / 1048576.0,
              static_cast<unsigned long long>(c.hits()), static_cast<unsigned long long>(c.misses()),
              static_cast<unsigned long long>(c.evictions()), static_cast<unsigned long long>(c.collisions()));
  if (failures) {
    std::fprintf(stderr, "watch: %d validated frame(s) differ from a full recompute\n", failures);
    return 3;
  }
  if (n == 0) {
    std::fprintf(stderr, "tessera: error: watch: no frame could be read (%d skipped)\n", skipped);
    return 1;
  }
  return 0;
}

}  // namespace tessera::cli
