#include "serve.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "serve/engine.h"

namespace tessera::cli {

void add_serve_options(CLI::App* sub, ServeArgs& s) {
  sub->add_option("--mmproj", s.mmproj, "vision model (llama.cpp mmproj GGUF): image_url parts");
  sub->add_option("--host", s.server.host, "address to bind (default 127.0.0.1: this machine only)");
  sub->add_option("--port", s.server.port, "port (0: any free port, printed)")->check(CLI::Range(0, 65535));
  sub->add_option("--api-key", s.server.api_key, "require 'Authorization: Bearer KEY' on every API route");
  sub->add_option("--max-body-mb", s.max_body_mb, "largest request body")->check(CLI::Range(0.001, 1024.0));
  sub->add_option("--max-queue", s.server.max_queue, "requests waiting beyond the running one; more get 429")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--max-tokens", s.server.limits.max_tokens, "the largest max_tokens a request may ask for")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--vision-max-pixels", s.vision_max_pixels,
                  "Qwen3-VL: resize request images and screen frames to at most this many pixels before encoding (the processor's max_pixels)")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 26));
  sub->add_option("--image-max-pixels", s.max_image_pixels, "refuse larger images")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_option("--deadline", s.server.deadline_s, "seconds a request may take from arrival (queue included)")
      ->check(CLI::Range(0.001, 86400.0));
  sub->add_option("--cpu-budget", s.server.cpu_budget_percent,
                  "percent of the machine (all cores) the screen's background encoding may use, over a sliding minute")
      ->check(CLI::Range(0.0, 100.0));
  sub->add_option("--debounce", s.server.debounce_s, "seconds a screen frame must stay unchanged before it is encoded")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--screen-cache-mb", s.screen_cache_mb, "memory budget of the screen's tile cache (default 64)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--mem-budget", s.mem_budget_mb,
                  "resident memory budget in MB: the tile cache gets what the model, KV cache and buffers leave; "
                  "a request image that cannot fit is refused (413); refused at start when too small")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--screen", s.screen, "capture the live screen into the visual memory: x11 ($DISPLAY) or x11:DISPLAY (e.g. x11::99)");
  sub->add_option("--capture-period", s.capture_period_s, "seconds between screen grabs at most (XDamage: none while nothing changes)")
      ->check(CLI::Range(0.01, 3600.0));
  sub->add_option("--drain", s.server.drain_s, "on SIGTERM/SIGINT, seconds in-flight requests get before they are cancelled")
      ->check(CLI::Range(0.0, 3600.0));
}

int cmd_serve(CommonArgs& a, ServeArgs& s) {
  s.server.max_body_bytes = static_cast<size_t>(s.max_body_mb * 1024 * 1024);
  // A resident process: buffers of a megabyte or more (request bodies, images, embeddings) get
  // their own mappings and go back to the system when freed. A fixed threshold also turns off
  // glibc's adaptive one, which rises after the first such free and then keeps those buffers in
  // the heap for good. Few arenas: connection threads mostly wait, and each arena keeps its pages.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_ARENA_MAX, 2);
  s.server.limits.max_image_pixels = s.max_image_pixels;
  s.server.limits.max_image_bytes = s.server.max_body_bytes;
  // SIGTERM and SIGINT go to one thread that waits for them (every thread started below
  // inherits the mask), so a shutdown runs as ordinary code, not in a handler
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a kill

  std::unique_ptr<X11Capture> x11;
  if (!s.screen.empty()) {
    if (s.screen != "x11" && s.screen.rfind("x11:", 0) != 0) fail("--screen '%s': use x11 or x11:DISPLAY", s.screen.c_str());
    x11 = std::make_unique<X11Capture>(s.screen == "x11" ? "" : s.screen.substr(4));  // a bad display fails before loading
  }
  HfModel loaded = load_any(a, s.mmproj);
  loaded.vision = vision_options(a, std::move(loaded.vision));
  if (loaded.qwen_vision) vision_options(a, *loaded.qwen_vision);
  const std::string path = a.model.empty() ? default_model_path() : a.model;
  std::string id = std::filesystem::path(path).filename().string();
  if (id.size() > 5 && id.compare(id.size() - 5, 5, ".gguf") == 0) id.resize(id.size() - 5);
  ImageLimits il;
  il.max_pixels = s.max_image_pixels;
  serve::EngineMemory mem;
  mem.screen_cache_bytes = static_cast<size_t>(s.screen_cache_mb) << 20;
  mem.budget_bytes = static_cast<size_t>(s.mem_budget_mb) << 20;
  mem.weight_bytes = std::filesystem::file_size(path) + (s.mmproj.empty() ? 0 : std::filesystem::file_size(s.mmproj));
  if (x11) mem.screen_width = x11->width(), mem.screen_height = x11->height();
  if (s.vision_max_pixels && !loaded.qwen_vision) fail("--vision-max-pixels is Qwen3-VL's (start the server with a Qwen3-VL mmproj)");
  mem.vision_max_pixels = s.vision_max_pixels;
  serve::Engine engine(std::move(loaded), session_options(a), id, il, mem);
  if (s.mem_budget_mb)
    std::fprintf(stderr, "tessera serve: --mem-budget %d MB: %s; tile cache %zu MB\n", s.mem_budget_mb,
                 engine.memory_plan().describe().c_str(), engine.memory_plan().cache >> 20);
  serve::Server server(engine, s.server);
  if (x11) server.capture_x11(std::move(x11), s.capture_period_s);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "tessera serve: %s: finishing in-flight requests (up to %.0f s)\n",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT", s.server.drain_s);
    server.shutdown();
  });
  if (!server.listen()) {
    std::fprintf(stderr, "tessera: error: cannot listen on %s:%d (in use, or not an address of this machine)\n",
                 s.server.host.c_str(), s.server.port);
    ::kill(::getpid(), SIGTERM);  // wake the waiter
    waiter.join();
    return 1;
  }
  waiter.join();
  std::fprintf(stderr, "tessera serve: stopped\n");
  return 0;
}

}  // namespace tessera::cli
