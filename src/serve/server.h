// `tessera serve`: an OpenAI-compatible HTTP server (cpp-httplib) in front of one Engine.
// Connection threads parse and check requests and queue them; one worker runs them in arrival
// order (FIFO), each with every thread of the engine's pool. A full queue answers 429.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "serve/chat_request.h"
#include "serve/engine.h"
#include "watch/x11_capture.h"

namespace tessera::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;             // non-empty: "Authorization: Bearer KEY" required
  size_t max_body_bytes = 48u << 20;  // the request body (a base64 image is 4/3 its bytes)
  int max_queue = 8;               // waiting requests beyond the running one; more: 429
  double deadline_s = 300;         // per request, from arrival: queued, prompt and generation
  double drain_s = 30;             // on SIGTERM: time given to in-flight requests before cancelling
  RequestLimits limits;
  // the visual memory's background work (with a vision tower)
  double cpu_budget_percent = 10;  // of the machine (all cores), over a sliding minute
  double debounce_s = 0.5;         // a frame must be unchanged this long before it is encoded
};

class Server {
 public:
  Server(Engine& engine, ServerOptions options);
  ~Server();
  // Serves until stop(); returns false when the address could not be bound.
  bool listen();
  // Bound port (after listen started; for --port 0).
  int port() const;
  // Stops taking requests (503), lets the running and queued ones finish for up to drain_s, then
  // cancels what is left and returns; listen() then returns. Safe from any thread (not a signal
  // handler: call it from a thread that waited for the signal).
  void shutdown();
  // Feeds the visual memory from the live X11 screen: a grab at most once per period_s, and only
  // after XDamage reported a change (where the display has it). Runs until shutdown.
  void capture_x11(std::unique_ptr<X11Capture> capture, double period_s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::serve
