/* tessera public C API: load a GGUF model, open a session, generate text.
 * Every call that can fail returns NULL or a negative number and leaves a one-line message
 * that tessera_last_error() returns (per thread). */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessera_model tessera_model;
typedef struct tessera_session tessera_session;

typedef struct tessera_generate_params {
  int n_predict;       /* tokens to generate at most */
  float temperature;   /* <= 0: greedy */
  int top_k;           /* <= 0: off */
  float top_p;         /* >= 1: off */
  float min_p;         /* <= 0: off */
  float repeat_penalty;/* 1: off */
  uint64_t seed;
  int chat;            /* nonzero: wrap the prompt in the model's chat template */
} tessera_generate_params;

/* Called with each piece of generated text (UTF-8, complete characters). */
typedef void (*tessera_piece_fn)(const char* piece, size_t len, void* user);

const char* tessera_last_error(void);
tessera_generate_params tessera_default_params(void);

tessera_model* tessera_model_load(const char* path);  /* a GGUF file or a Hugging Face directory */
void tessera_model_free(tessera_model* model);

/* n_ctx: context size in tokens; n_threads: 0 for all cores. */
tessera_session* tessera_session_new(const tessera_model* model, int n_ctx, int n_threads);

/* The same with every option the CLI has (tessera_default_session_params() gives its defaults). */
typedef struct tessera_session_params {
  int n_ctx;               /* context size in tokens (4096) */
  int n_threads;           /* 0: all cores */
  int n_batch;             /* tokens per forward pass (512) */
  const char* cache_type;  /* KV cache: "f16" (default), "f32", "bf16", "q8" or "q4" (alias "q4_0") */
  int q8_activations;      /* nonzero (default): 8-bit activations for quantized matrices, llama.cpp's W4A8
                              numerics; 0: fp32 activations (--f32-activations, closer to float64) */
} tessera_session_params;
tessera_session_params tessera_default_session_params(void);
tessera_session* tessera_session_new_with(const tessera_model* model, const tessera_session_params* params);
void tessera_session_free(tessera_session* session);

/* Tokenizes text into ids (at most max_ids); returns the token count or -1. */
int tessera_tokenize(const tessera_model* model, const char* text, int parse_special,
                     int32_t* ids, int max_ids);

/* Appends the prompt to the session and generates; returns generated tokens or -1. */
int tessera_generate(tessera_session* session, const char* prompt,
                     const tessera_generate_params* params, tessera_piece_fn on_piece, void* user);

/* ---- SmolVLM screen questions ----------------------------------------------------------
 * A vision tower (llama.cpp mmproj GGUF) used with a text model from tessera_model_load. */
typedef struct tessera_vision tessera_vision;

tessera_vision* tessera_vision_load(const char* mmproj_path);
void tessera_vision_free(tessera_vision* vision);
/* Runs a quantized mmproj's layers (Q8_0, Q4_*, Q5_*, Q6_K) on 8-bit activations from now on, as llama.cpp
 * does (--q8-activations); float layers are unchanged. Returns the layers switched, or -1. */
int tessera_vision_use_q8_activations(tessera_vision* vision);
/* Quantizes the float linear layers but the patch embedding to Q8_0 (the bytes `tessera convert
 * --type q8_0` writes) and runs them on 8-bit activations from now on (--q8-vision), on up to
 * n_threads threads (0: all cores). Returns the layers switched, or -1. */
int tessera_vision_quantize_q8_0(tessera_vision* vision, int n_threads);
/* Runs the float layers as the bf16 GEMM, and the attention as the bf16 attention, on AMX tiles
 * from now on (--bf16-vision: inputs rounded to bf16, fp32 sums). Returns the layers switched, or
 * -1 (and an error) where the CPU or OS gives no AMX bf16. */
int tessera_vision_use_bf16_gemm(tessera_vision* vision);
/* Runs the float layers as the fp16 GEMM and the attention as the fp16 attention from now on
 * (--f16-vision: inputs rounded to fp16, fp16 sums over 128 k, fp32 across; AVX512-FP16 or ARM
 * FP16). Returns the layers switched, or -1 (and an error) where the CPU has no fp16 arithmetic. */
int tessera_vision_use_f16_gemm(tessera_vision* vision);

/* An image in memory: interleaved 8-bit RGB (channels 3) or RGBA (4, composited onto white),
 * rows `stride` bytes apart -- what a screen capturer hands over. */
typedef struct tessera_frame {
  const uint8_t* pixels;
  int width, height, channels;
  size_t stride;
} tessera_frame;

/* Phase timings of the last tessera_ask_image call, in milliseconds. */
typedef struct tessera_image_timings {
  double preprocess_ms, encode_ms, connector_ms, prefill_ms, decode_ms;
  int tiles, prompt_tokens, generated_tokens;
} tessera_image_timings;

/* Asks `question` about the frame (appended to the session) and generates the answer.
 * Returns the number of generated tokens or -1; `timings` may be NULL. */
int tessera_ask_image(tessera_session* session, const tessera_vision* vision, const tessera_frame* frame,
                      const char* question, const tessera_generate_params* params, tessera_piece_fn on_piece,
                      void* user, tessera_image_timings* timings);

/* ---- Watching a screen (src/watch/watcher.h) ----------------------------------------
 * A standing question asked of frame after frame, reusing the previous frames' work: tiles
 * whose pixels are unchanged and the KV cache up to the first change (exact: bitwise what a
 * full recompute gives), plus opt-in approximations. The watcher owns the session's KV cache
 * while it lives: do not use the session for anything else meanwhile. */
typedef struct tessera_watcher tessera_watcher;

typedef struct tessera_watch_options {
  const char* question;   /* the standing question */
  int n_predict;          /* answer length in tokens */
  int reuse;              /* 1: exact reuse (default); 0: recompute every frame */
  size_t cache_mb;        /* tile cache budget */
  double approx_global;   /* < 0: off; else keep the thumbnail below this mean pixel change */
  double approx_kv;       /* < 0: off; else fraction of later unchanged tiles' tokens recomputed */
} tessera_watch_options;

typedef struct tessera_watch_result {
  int tiles, tiles_changed, prompt_tokens, tokens_reused, tokens_recomputed;
  double preprocess_ms, encode_ms, prefill_ms, decode_ms, total_ms;
} tessera_watch_result;

tessera_watch_options tessera_default_watch_options(void);
tessera_watcher* tessera_watcher_new(tessera_session* session, const tessera_vision* vision, const tessera_watch_options* options);
void tessera_watcher_free(tessera_watcher* watcher);
/* Answers the standing question for one frame; the whole answer comes through on_piece.
 * Returns 0, or -1 (tessera_last_error()). `result` may be NULL. */
int tessera_watch_frame(tessera_watcher* watcher, const tessera_frame* frame, tessera_piece_fn on_piece, void* user,
                        tessera_watch_result* result);

/* ---- Profiling (src/profile/profiler.h) -------------------------------------------------
 * Phases, per-op table with roofline verdicts, memory and energy, as `tessera profile` prints
 * them, for an app's own requests. Off by default (and free when off). */
void tessera_profile_start(int trace);
void tessera_profile_stop(void);
/* Writes the report (JSON) or the Chrome/Perfetto trace (JSON) into buf; returns the full
 * length (call again with a larger buf if it did not fit). probe_json: the probe's saved
 * peaks (NULL: no roofline). */
size_t tessera_profile_report(char* buf, size_t size, const char* probe_json, int threads);
size_t tessera_profile_trace(char* buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_TESSERA_H */
