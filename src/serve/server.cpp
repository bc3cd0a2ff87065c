#include "serve/server.h"

#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/preempt.h"

namespace tessera::serve {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A Prometheus histogram with fixed bounds (seconds).
struct Histogram {
  std::vector<double> bounds{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  std::vector<uint64_t> counts = std::vector<uint64_t>(bounds.size() + 1, 0);
  double sum = 0;
  void add(double v) {
    size_t i = 0;
    while (i < bounds.size() && v > bounds[i]) ++i;
    ++counts[i];
    sum += v;
  }
  void write(std::string& out, const char* name, const char* help) const {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    uint64_t cum = 0;
    char line[160];
    for (size_t i = 0; i < bounds.size(); ++i) {
      cum += counts[i];
      std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], static_cast<unsigned long long>(cum));
      out += line;
    }
    cum += counts.back();
    std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                  static_cast<unsigned long long>(cum), name, sum, name, static_cast<unsigned long long>(cum));
    out += line;
  }
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Background CPU over a sliding window, against a share of the machine: background work runs
// only while the window's total stays under budget.
class CpuBudget {
 public:
  CpuBudget(double percent, double window_s) : percent_(percent), window_s_(window_s) {
    cores_ = std::max(1u, std::thread::hardware_concurrency());
  }
  // A step is allowed when the window's use plus what a step has recently cost stays within the
  // budget, so a long step (a tile: seconds of CPU) does not overshoot it.
  bool allows() {
    if (percent_ >= 100) return true;
    if (percent_ <= 0) return false;  // no background work at all
    return used() + step_cost_ <= percent_ / 100.0 * window_s_ * cores_;
  }
  void add(double cpu_s) {
    total_ += cpu_s;
    samples_.push_back({Clock::now(), cpu_s});
    if (cpu_s > 0.01) step_cost_ = step_cost_ == 0 ? cpu_s : 0.7 * step_cost_ + 0.3 * cpu_s;
  }
  double share() { return used() / (window_s_ * cores_); }  // of the machine, over the window
  double total() const { return total_; }

 private:
  double used() {
    const auto cut = Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window_s_));
    while (!samples_.empty() && samples_.front().first < cut) samples_.pop_front();
    double u = 0;
    for (const auto& s : samples_) u += s.second;
    return u;
  }
  double percent_, window_s_;
  unsigned cores_;
  double total_ = 0, step_cost_ = 0;
  std::deque<std::pair<Clock::time_point, double>> samples_;
};

// One queued request and what its connection thread waits for: the prompt accepted (or an
// error), then text pieces, then the end.
struct Job {
  ChatRequest request;
  std::unique_ptr<ImageRGB> image;  // decoded on arrival; dropped once the prompt is built
  size_t image_bytes = 0;           // ... counted in Impl::held_image_bytes until then
  Clock::time_point arrived, deadline;
  std::mutex mu;
  std::condition_variable cv;
  bool accepted = false, done = false;
  std::unique_ptr<ApiError> error;
  std::deque<std::string> pieces;
  Result result;
  std::atomic<bool> cancel{false};
  double ttft_s = -1;
};

std::string request_id() {
  static std::atomic<uint64_t> n{0};
  char buf[48];
  std::snprintf(buf, sizeof buf, "chatcmpl-%lx-%llu", static_cast<long>(::getpid()), static_cast<unsigned long long>(++n));
  return buf;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_json(e).dump(), "application/json");
}

}  // namespace

struct Server::Impl {
  Engine& engine;
  ServerOptions opt;
  httplib::Server http;
  int bound_port = 0;

  std::mutex mu;  // the queue and the metrics
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;
  std::shared_ptr<Job> running;
  bool draining = false, stopping = false;
  std::thread worker;

  std::map<int, uint64_t> by_status;
  std::atomic<bool> preempt{false};  // raised by a queued request: background work yields
  CpuBudget budget;
  size_t held_image_bytes = 0;  // decoded images of queued requests
  uint64_t over_budget = 0, preemptions = 0, screen_questions = 0, screen_questions_current = 0;
  std::string background_error;
  std::unique_ptr<X11Capture> x11;
  std::thread capture;
  std::atomic<uint64_t> grabs{0};
  Histogram ttft, latency;
  uint64_t prompt_tokens = 0, reused_tokens = 0, generated_tokens = 0, cancelled = 0;
  double decode_seconds = 0;

  Impl(Engine& e, ServerOptions o) : engine(e), opt(std::move(o)), budget(opt.cpu_budget_percent, 60.0) {}

  void count(int status) {
    std::lock_guard<std::mutex> lk(mu);
    ++by_status[status];
  }

  // Requests first, in arrival order; between them, the visual memory's background steps while
  // the CPU budget allows (polled every 100 ms: nothing runs on an idle screen).
  void work() {
    const bool background = engine.memory() != nullptr;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lk(mu);
        if (background)
          cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return stopping || !queue.empty(); });
        else
          cv.wait(lk, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) {
          if (stopping) return;
          if (!background || draining) continue;
          preempt = false;
        } else {
          job = queue.front();
          queue.pop_front();
          running = job;
        }
      }
      if (!job) {
        background_steps();
        continue;
      }
      run(*job);
      {
        std::lock_guard<std::mutex> lk(mu);
        running.reset();
      }
      cv.notify_all();
    }
  }

  void background_steps() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (preempt || !budget.allows()) return;
      }
      if (engine.over_budget()) {  // resident beyond --mem-budget even with the cache shrunk
        std::lock_guard<std::mutex> lk(mu);
        ++over_budget;
        return;
      }
      const double c0 = cpu_seconds();
      bool did = false;
      try {
        PreemptionScope armed(&preempt);
        did = engine.background_step(opt.debounce_s);
      } catch (const Preempted&) {
        did = true;
        std::lock_guard<std::mutex> lk(mu);
        ++preemptions;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(mu);
        if (background_error.empty()) std::fprintf(stderr, "tessera serve: background encoding failed: %s\n", e.what());
        background_error = e.what();
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        budget.add(cpu_seconds() - c0);
      }
      if (!did) return;
    }
  }

  void run(Job& job) {
    auto finish = [&](std::unique_ptr<ApiError> err) {
      drop_image(job);
      if (!err) {
        std::lock_guard<std::mutex> lk(mu);
        latency.add(std::chrono::duration<double>(Clock::now() - job.arrived).count());
        if (job.ttft_s >= 0) ttft.add(job.ttft_s);
      }
      std::lock_guard<std::mutex> lk(job.mu);
      job.error = std::move(err);
      job.done = true;
      job.cv.notify_all();
    };
    if (job.cancel || Clock::now() > job.deadline) {
      finish(std::make_unique<ApiError>(503, "server_error", "the request's deadline passed while it was queued"));
      return;
    }
    const double queued_ms = std::chrono::duration<double, std::milli>(Clock::now() - job.arrived).count();
    Engine::Prepared prepared;
    try {
      if (job.image) engine.admit_image(*job.image);
      prepared = engine.prepare(job.request, job.image.get());
      drop_image(job);
    } catch (const ApiError& e) {
      finish(std::make_unique<ApiError>(e));
      return;
    } catch (const std::exception& e) {
      finish(std::make_unique<ApiError>(500, "server_error", e.what()));
      return;
    }
    {
      std::lock_guard<std::mutex> lk(job.mu);
      job.accepted = true;
    }
    job.cv.notify_all();
    try {
      const auto emit = [&](const std::string& piece) {
        {
          std::lock_guard<std::mutex> lk(job.mu);
          if (job.ttft_s < 0) job.ttft_s = std::chrono::duration<double>(Clock::now() - job.arrived).count();
          job.pieces.push_back(piece);
        }
        job.cv.notify_all();
        return !job.cancel.load();
      };
      Result r = engine.complete(job.request, prepared, emit, job.deadline);
      r.usage.queue_ms = queued_ms;
      {
        std::lock_guard<std::mutex> lk(mu);
        screen_questions += prepared.screen;
        screen_questions_current += prepared.screen && prepared.screen_current;
        prompt_tokens += static_cast<uint64_t>(r.usage.prompt_tokens);
        reused_tokens += static_cast<uint64_t>(r.usage.reused_tokens);
        generated_tokens += static_cast<uint64_t>(r.usage.completion_tokens);
        decode_seconds += r.usage.decode_ms / 1e3;
        cancelled += job.cancel.load();
      }
      std::lock_guard<std::mutex> lk(job.mu);
      job.result = std::move(r);
    } catch (const std::exception& e) {
      finish(std::make_unique<ApiError>(500, "server_error", e.what()));
      return;
    }
    finish(nullptr);
  }

  // Queues a job, or says why not: 429 when the queue is full, or (under --mem-budget) when the
  // decoded images of the requests already waiting leave no room for this one's; 413 when the
  // image alone is more than they may hold.
  std::unique_ptr<ApiError> enqueue(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (static_cast<int>(queue.size()) >= opt.max_queue)
        return std::make_unique<ApiError>(429, "rate_limit_exceeded",
                                          "the server is busy: " + std::to_string(opt.max_queue) + " requests are waiting");
      if (job->image_bytes > engine.held_image_room())
        return std::make_unique<ApiError>(413, "invalid_request_error",
                                          "this image (" + std::to_string(job->image_bytes >> 20) +
                                              " MB decoded) is too large for the server's memory budget (--mem-budget)",
                                          "messages", "memory_budget_exceeded");
      if (job->image_bytes && held_image_bytes + job->image_bytes > engine.held_image_room())
        return std::make_unique<ApiError>(429, "rate_limit_exceeded",
                                          "the server is busy: the images of the requests waiting fill its memory budget "
                                          "(--mem-budget); try again shortly");
      held_image_bytes += job->image_bytes;
      queue.push_back(job);
      preempt = true;  // background work stops at its next checkpoint
    }
    cv.notify_all();
    return nullptr;
  }

  void drop_image(Job& job) {  // the prompt is built (or the request is over): its image goes
    job.image.reset();
    std::lock_guard<std::mutex> lk(mu);
    held_image_bytes -= job.image_bytes;
    job.image_bytes = 0;
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (opt.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + opt.api_key) return true;
    send_error(res, ApiError(401, "invalid_request_error", "a valid API key is required (Authorization: Bearer KEY)", "",
                             "invalid_api_key"));
    return false;
  }

  void chat(const httplib::Request& req, httplib::Response& res) {
    const auto arrived = Clock::now();
    if (!authorized(req, res)) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (draining) return send_error(res, ApiError(503, "server_error", "the server is shutting down"));
    }
    auto job = std::make_shared<Job>();
    job->arrived = arrived;
    job->deadline = arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.deadline_s));
    try {
      job->request = parse_chat_request(req.body, engine.model_id(), opt.limits);
      // httplib keeps the request until this handler returns, which for a chat is the end of the
      // generation: its body (up to --max-body-mb of base64) goes now, not then
      std::string().swap(const_cast<std::string&>(req.body));
      if (!job->request.image.empty()) {
        job->image = std::make_unique<ImageRGB>(engine.decode_request_image(job->request));
        job->image_bytes = job->image->pixels.size();
      }
      job->request.image.clear();
      job->request.image.shrink_to_fit();
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    if (std::unique_ptr<ApiError> refused = enqueue(job)) return send_error(res, *refused);
    // wait until the prompt is accepted (or refused): a refusal still gets its 4xx
    {
      std::unique_lock<std::mutex> lk(job->mu);
      job->cv.wait(lk, [&] { return job->accepted || job->done; });
      if (job->error) return send_error(res, *job->error);
    }
    const std::string id = request_id(), model = engine.model_id();
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    if (!job->request.stream) {
      const auto reply = [job, id, model, created] {  // by value: the provider outlives this call
        const Result& r = job->result;
        return completion_json(id, created, model, r.text, r.finish_reason, r.usage).dump();
      };
      {
        // most replies are ready within a second: a plain response, with its status
        std::unique_lock<std::mutex> lk(job->mu);
        if (job->cv.wait_for(lk, std::chrono::seconds(1), [&] { return job->done; })) {
          if (job->error) return send_error(res, *job->error);
          res.set_content(reply(), "application/json");
          return;
        }
      }
      // A longer one goes out chunked, led by a space a second (JSON allows leading whitespace)
      // until it is ready: a write is how a closed connection shows, so a client that went away
      // stops its generation within about two seconds. A failure after this point can no
      // longer change the status: it is an error body under 200, as in a stream.
      res.set_chunked_content_provider("application/json", [this, job, reply](size_t, httplib::DataSink& sink) {
        std::unique_lock<std::mutex> lk(job->mu);
        if (!job->cv.wait_for(lk, std::chrono::seconds(1), [&] { return job->done; })) {
          lk.unlock();
          return sink.write(" ", 1) ? true : cancel(*job);
        }
        const std::string body = job->error ? error_json(*job->error).dump() : reply();
        lk.unlock();
        sink.write(body.data(), body.size());
        sink.done();
        return true;
      });
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, job, id, model, created, sent_role = false](
                                                              size_t, httplib::DataSink& sink) mutable {
      const auto send = [&](const json& j) {
        const std::string s = "data: " + j.dump() + "\n\n";
        return sink.write(s.data(), s.size());
      };
      if (!sent_role && !send(chunk_json(id, created, model, "assistant", "", ""))) return cancel(*job);
      sent_role = true;
      std::unique_lock<std::mutex> lk(job->mu);
      job->cv.wait(lk, [&] { return job->done || !job->pieces.empty(); });
      while (!job->pieces.empty()) {
        const std::string piece = std::move(job->pieces.front());
        job->pieces.pop_front();
        lk.unlock();
        if (!send(chunk_json(id, created, model, "", piece, ""))) return cancel(*job);
        lk.lock();
      }
      if (!job->done) return true;
      if (job->error) {  // a failure after the stream began: an error event, as OpenAI sends
        send(error_json(*job->error));
      } else {
        send(chunk_json(id, created, model, "", "", job->result.finish_reason));
        if (job->request.include_usage) send(usage_chunk_json(id, created, model, job->result.usage));
      }
      const std::string done = "data: [DONE]\n\n";
      sink.write(done.data(), done.size());
      sink.done();
      return true;
    });
  }

  bool cancel(Job& job) {  // the client went away: the generation stops at its next token
    job.cancel = true;
    return false;
  }

  std::string metrics() {
    std::string out;
    std::lock_guard<std::mutex> lk(mu);
    out += "# HELP tessera_requests_total Chat completion requests by HTTP status.\n# TYPE tessera_requests_total counter\n";
    for (const auto& [status, n] : by_status)
      out += "tessera_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
    ttft.write(out, "tessera_time_to_first_token_seconds", "From arrival to the first reply text.");
    latency.write(out, "tessera_request_duration_seconds", "From arrival to the last reply byte.");
    // one metric: its TYPE (and HELP) lines and its value
    const auto metric = [&out](const char* name, const char* type, double value, const char* help = nullptr) {
      char line[96];
      if (help) out += std::string("# HELP ") + name + " " + help + "\n";
      out += std::string("# TYPE ") + name + " " + type + "\n";
      std::snprintf(line, sizeof line, " %.15g\n", value);
      out += name;
      out += line;
    };
    metric("tessera_prompt_tokens_total", "counter", static_cast<double>(prompt_tokens));
    metric("tessera_prompt_tokens_reused_total", "counter", static_cast<double>(reused_tokens));
    metric("tessera_generated_tokens_total", "counter", static_cast<double>(generated_tokens));
    metric("tessera_decode_seconds_total", "counter", decode_seconds, "Time spent generating (tokens/s = rate of the two).");
    metric("tessera_queue_length", "gauge", static_cast<double>(queue.size()));
    metric("tessera_requests_running", "gauge", running ? 1 : 0);
    metric("tessera_requests_cancelled_total", "counter", static_cast<double>(cancelled),
           "Requests whose client went away before the reply was complete.");
    metric("tessera_resident_memory_bytes", "gauge", static_cast<double>(resident_bytes()));
    if (const MemoryPlan& p = engine.memory_plan(); p.budget) {
      metric("tessera_memory_budget_bytes", "gauge", static_cast<double>(p.budget));
      metric("tessera_memory_over_budget_total", "counter", static_cast<double>(over_budget),
             "Background steps skipped because the process was resident beyond --mem-budget.");
    }
    metric("tessera_process_cpu_seconds_total", "counter", cpu_seconds());
    metric("tessera_kv_cache_bytes", "gauge", static_cast<double>(engine.kv_bytes()), "The KV cache's size (resident as far as written).");
    if (VisualMemory* m = engine.memory()) {
      const VisualMemory::Stats v = m->stats();
      metric("tessera_screen_frames_total", "counter", static_cast<double>(v.frames));
      metric("tessera_screen_frames_unchanged_total", "counter", static_cast<double>(v.frames_unchanged));
      metric("tessera_tiles_encoded_total", "counter", static_cast<double>(v.tiles_encoded));
      metric("tessera_tiles_reused_total", "counter", static_cast<double>(v.tiles_reused));
      metric("tessera_tile_cache_bytes", "gauge", static_cast<double>(v.cache_bytes));
      metric("tessera_tile_cache_budget_bytes", "gauge", static_cast<double>(m->cache_budget()));
      metric("tessera_screen_staleness_seconds", "gauge", v.staleness_s,
             "Age of the oldest screen change the visual memory does not reflect.");
      metric("tessera_screen_memory_current", "gauge", v.current ? 1 : 0);
      metric("tessera_background_cpu_share", "gauge", budget.share(), "Background CPU over the last minute, as a share of the machine.");
      metric("tessera_background_cpu_seconds_total", "counter", budget.total());
      metric("tessera_background_preemptions_total", "counter", static_cast<double>(preemptions));
      metric("tessera_screen_questions_total", "counter", static_cast<double>(screen_questions));
      metric("tessera_screen_questions_current_total", "counter", static_cast<double>(screen_questions_current));
      if (x11) {
        metric("tessera_screen_grabs_total", "counter", static_cast<double>(grabs.load()));
        metric("tessera_screen_damage_events_total", "counter", static_cast<double>(x11->damage_events()));
      }
    }
    return out;
  }

  // POST /v1/screen/frames: a frame from the process that captures the screen (PNG or JPEG by
  // content type, or raw RGB with ?width=W&height=H).
  void push_frame(const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    VisualMemory* m = engine.memory();
    if (!m) return send_error(res, ApiError(400, "invalid_request_error", "this model has no vision tower: start the server with --mmproj"));
    ImageLimits il;
    il.max_pixels = opt.limits.max_image_pixels;
    ImageRGB frame;
    try {
      const std::string type = req.get_header_value("Content-Type");
      const auto* data = reinterpret_cast<const uint8_t*>(req.body.data());
      if (type == "application/octet-stream") {
        const auto dim = [&](const char* k) -> int64_t {
          if (!req.has_param(k)) bad_request(k, std::string("raw RGB frames need ?width=W&height=H"));
          const std::string v = req.get_param_value(k);
          if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos)
            bad_request(k, std::string("'") + k + "' must be a positive integer");
          return std::stoll(v);
        };
        const int64_t w = dim("width"), h = dim("height");
        if (w < 1 || h < 1 || w * h > il.max_pixels) bad_request("width", "the frame size is out of range");
        if (static_cast<int64_t>(req.body.size()) != w * h * 3)
          bad_request("body", "a raw frame is width x height x 3 bytes: " + std::to_string(w * h * 3) + ", got " +
                                  std::to_string(req.body.size()));
        frame = image_from_raw(data, static_cast<int>(w), static_cast<int>(h), 3, static_cast<size_t>(w) * 3, il);
      } else if (type == "image/png" || type == "image/jpeg") {
        frame = decode_image(data, req.body.size(), "the frame", il);
      } else {
        bad_request("Content-Type", "a frame is image/png, image/jpeg or application/octet-stream (raw RGB)");
      }
    } catch (const ApiError& e) {
      return send_error(res, e);
    } catch (const Error& e) {
      return send_error(res, ApiError(400, "invalid_request_error", e.what(), "body"));
    }
    const int w = frame.width, h = frame.height;
    const bool changed = m->push(std::move(frame));
    res.status = 202;
    res.set_content(json({{"changed", changed}, {"width", w}, {"height", h}}).dump(), "application/json");
  }

  void routes() {
    // Connection threads mostly wait (for the queue, or a stream's next piece); enough of them that
    // a burst of clients reaches the queue and gets its 429 at once, instead of waiting unseen in
    // httplib's own task queue (8 threads by default) behind the running requests.
    const size_t connection_threads = static_cast<size_t>(2 * opt.max_queue + 32);
    http.new_task_queue = [connection_threads] { return new httplib::ThreadPool(connection_threads); };
    http.set_payload_max_length(opt.max_body_bytes);
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      chat(req, res);
      count(res.status < 0 ? 200 : res.status);  // httplib fills in 200 after the handler
    });
    http.Post("/v1/screen/frames", [this](const httplib::Request& req, httplib::Response& res) { push_frame(req, res); });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      const json j = {{"object", "list"},
                      {"data", json::array({{{"id", engine.model_id()}, {"object", "model"}, {"created", 0}, {"owned_by", "tessera"}}})}};
      res.set_content(j.dump(), "application/json");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lk(mu);
      res.status = draining ? 503 : 200;
      res.set_content(draining ? R"({"status": "shutting down"})" : R"({"status": "ok"})", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    // httplib's own refusals (no route, body over the limit, unreadable request) in OpenAI's form
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string msg = res.status == 404   ? "no route " + req.method + " " + req.path
                              : res.status == 413 ? "the request body is over the server's limit (serve --max-body-mb)"
                                                  : "the request could not be read";
      send_error(res, ApiError(res.status, "invalid_request_error", msg));
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string msg = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        msg = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, "server_error", msg));
    });
  }
};

Server::Server(Engine& engine, ServerOptions options) : impl_(std::make_unique<Impl>(engine, std::move(options))) {
  impl_->routes();
  impl_->worker = std::thread([this] { impl_->work(); });
}

Server::~Server() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->draining = true;  // also stops the capture thread
  }
  if (impl_->capture.joinable()) impl_->capture.join();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

bool Server::listen() {
  if (impl_->opt.port == 0) {
    impl_->bound_port = impl_->http.bind_to_any_port(impl_->opt.host);
    if (impl_->bound_port <= 0) return false;
  } else {
    if (!impl_->http.bind_to_port(impl_->opt.host, impl_->opt.port)) return false;
    impl_->bound_port = impl_->opt.port;
  }
  std::fprintf(stderr, "tessera serve: listening on http://%s:%d (model '%s')\n", impl_->opt.host.c_str(),
               impl_->bound_port, impl_->engine.model_id().c_str());
  return impl_->http.listen_after_bind();
}

int Server::port() const { return impl_->bound_port; }

void Server::capture_x11(std::unique_ptr<X11Capture> capture, double period_s) {
  Impl& s = *impl_;
  VisualMemory* memory = s.engine.memory();
  if (!memory) fail("--screen needs a vision tower (--mmproj)");
  s.x11 = std::move(capture);
  std::fprintf(stderr, "tessera serve: capturing the X11 screen %dx%d every %.2f s (%s, %s)\n", s.x11->width(),
               s.x11->height(), period_s, s.x11->uses_shm() ? "MIT-SHM" : "GetImage",
               s.x11->uses_damage() ? "XDamage" : "no XDamage: frames compared");
  s.capture = std::thread([&s, memory, period_s] {
    auto next = Clock::now();
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(s.mu);
        if (s.draining || s.stopping) return;
      }
      try {
        // at most one grab per period; with XDamage, none until something changed
        if (!s.x11->wait_for_change(0.2)) continue;
        std::this_thread::sleep_until(next);
        next = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period_s));
        memory->push(s.x11->grab());
        ++s.grabs;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tessera serve: screen capture stopped: %s\n", e.what());
        return;
      }
    }
  });
}

void Server::shutdown() {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lk(s.mu);
  s.draining = true;
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.opt.drain_s));
  if (!s.cv.wait_until(lk, until, [&] { return s.queue.empty() && !s.running; })) {
    for (auto& j : s.queue) j->cancel = true;
    if (s.running) s.running->cancel = true;
    s.cv.wait(lk, [&] { return s.queue.empty() && !s.running; });
  }
  lk.unlock();
  s.http.stop();
}

}  // namespace tessera::serve
