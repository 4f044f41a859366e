// The HTTP routes of `vkmoe serve` (cpp-httplib), signals and startup.
#include <httplib.h>

#include <csignal>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include <sys/socket.h>

#include "base/error.h"
#include "planner/planner.h"
#include "tools/serve/openai_response.h"
#include "tools/serve/serve.h"
#include "tools/serve/serve_core.h"

namespace vkmoe {
namespace serve {
namespace {

using nlohmann::json;

constexpr int kKeepAliveSeconds = 3;  // also bounds how long a stop waits for idle connections

void reply_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) { reply_json(res, e.status, error_json(e)); }

// Every handler answers errors as OpenAI JSON and never lets an exception out.
template <class F>
httplib::Server::Handler guarded(F f) {
  return [f](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const ApiError& e) {
      reply_error(res, e);
    } catch (const std::bad_alloc&) {
      reply_error(res, ApiError(500, "out of host memory", "out_of_memory"));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s %s: error: %s\n", req.method.c_str(), req.path.c_str(), e.what());
      reply_error(res, ApiError(500, e.what(), "internal_error"));
    } catch (...) {
      reply_error(res, ApiError(500, "unknown internal error", "internal_error"));
    }
  };
}

void log_generation(const char* what, const GenerateResult& r, const char* outcome) {
  std::fprintf(stderr, "%s: prompt %d tokens (%d cached) %.3f s, reply %d tokens %.3f s (%.2f tokens/s), %s\n", what,
               r.prompt_tokens, r.cached_tokens, r.prompt_seconds, r.completion_tokens, r.generation_seconds,
               r.generation_seconds > 0 ? r.completion_tokens / r.generation_seconds : 0.0, outcome);
}

// POST /v1/chat/completions, /v1/completions.
void handle_completion(ServeCore& core, Endpoint ep, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req.body);
  const CompletionParams p =
      ep == Endpoint::Chat ? parse_chat_request(body) : parse_completion_request(body, core.tokenizer().n_vocab());
  const GenerateRequest g = core.make_request(p);
  const ResponseMeta meta = make_meta(ep, core.model_id());
  const char* what = ep == Endpoint::Chat ? "chat" : "completion";
  if (!p.stream) {
    auto turn = core.wait_turn();
    GenerateResult r;
    try {
      r = core.generate(turn, g);
    } catch (const ApiError&) {  // the engine failed for good: this reply is written on return
      core.mark_fatal_reply_sent();
      throw;
    }
    if (r.finish == FinishReason::Cancelled) throw ApiError(503, "the server is shutting down", "shutting_down");
    log_generation(what, r, openai_finish_reason(r.finish));
    reply_json(res, 200, completion_json(meta, r));
    return;
  }
  const bool include_usage = p.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [&core, g, meta, include_usage, what](size_t, httplib::DataSink& sink) {
        bool ok = true;      // false once a write failed: the client went away
        bool fatal = false;  // the engine failed for good during this reply
        auto send = [&](const std::string& s) {
          if (ok) ok = sink.write(s.data(), s.size());
          return ok;
        };
        try {
          auto turn = core.wait_turn();
          if (meta.endpoint == Endpoint::Chat) send(sse_event(chunk_json(meta, "", nullptr, true)));
          const GenerateResult r = core.generate(turn, g, [&](std::string_view piece) {
            return send(sse_event(chunk_json(meta, std::string(piece))));
          });
          if (!ok) {
            log_generation(what, r, "client disconnected: cancelled");
          } else if (r.finish == FinishReason::Cancelled) {
            log_generation(what, r, "cancelled: the server is stopping");
            send(sse_event(error_json(ApiError(503, "the server is shutting down", "shutting_down"))));
          } else {
            log_generation(what, r, openai_finish_reason(r.finish));
            send(sse_event(chunk_json(meta, "", openai_finish_reason(r.finish))));
            if (include_usage) send(sse_event(usage_chunk_json(meta, r)));
            send(kSseDone);
          }
        } catch (const ApiError& e) {
          fatal = e.code == "device_lost";
          send(sse_event(error_json(e)));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s: error: %s\n", what, e.what());
          send(sse_event(error_json(ApiError(500, e.what(), "internal_error"))));
        } catch (...) {
          send(sse_event(error_json(ApiError(500, "unknown internal error", "internal_error"))));
        }
        if (ok) sink.done();
        if (fatal) core.mark_fatal_reply_sent();
        return ok;
      });
}

// POST /tokenize: {"content", "add_special"} -> {"tokens"}.
void handle_tokenize(const ServeCore& core, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req.body);
  if (!body.contains("content") || body["content"].is_null())
    throw ApiError(400, "'content' is required", "missing_field", "content");
  const std::string text = json_string(body, "content", "");
  const bool add_special = json_bool(body, "add_special", false);
  reply_json(res, 200, {{"tokens", core.tokenizer().encode(text, add_special)}});
}

// POST /detokenize: {"tokens"} -> {"content"}.
void handle_detokenize(const ServeCore& core, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req.body);
  auto t = body.find("tokens");
  if (t == body.end() || t->is_null()) throw ApiError(400, "'tokens' is required", "missing_field", "tokens");
  reply_json(res, 200, {{"content", core.tokenizer().decode(json_tokens(*t, "tokens", core.tokenizer().n_vocab()))}});
}

// POST /apply-template: {"messages", "tools", "add_generation_prompt"} -> {"prompt"}.
void handle_apply_template(const ServeCore& core, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req.body);
  auto m = body.find("messages");
  if (m == body.end() || m->is_null()) throw ApiError(400, "'messages' is required", "missing_field", "messages");
  const json messages = check_messages(*m);
  json tools = nullptr;
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    if (!t->is_array()) throw ApiError(400, "'tools' must be an array", "invalid_type", "tools");
    tools = *t;
  }
  const bool add_generation_prompt = json_bool(body, "add_generation_prompt", true);
  reply_json(res, 200, {{"prompt", core.chat().render(messages, add_generation_prompt, tools)}});
}

// The routes and the methods each takes (404 vs 405).
const std::map<std::string, std::string>& routes() {
  static const std::map<std::string, std::string> r = {
      {"/v1/chat/completions", "POST"}, {"/chat/completions", "POST"}, {"/v1/completions", "POST"},
      {"/completions", "POST"},         {"/v1/models", "GET"},         {"/models", "GET"},
      {"/health", "GET"},               {"/tokenize", "POST"},         {"/detokenize", "POST"},
      {"/apply-template", "POST"}};
  return r;
}

std::atomic<int> g_signal{0};
void on_stop_signal(int sig) { g_signal.store(sig); }

}  // namespace
}  // namespace serve

ServeOptions serve_options(const Args& a) {
  ServeOptions o;
  o.host = a.get("host", o.host);
  if (o.host.empty()) throw Error("--host needs an address");
  o.port = static_cast<int>(a.num("port", o.port, 0, 65535));
  o.max_body = a.has("max-body") ? parse_size(a.get("max-body")) : o.max_body;
  if (o.max_body == 0) throw Error("--max-body must be positive");
  o.max_queue = static_cast<int>(a.num("max-queue", o.max_queue, 0, 4096));
  const std::string path = a.get("model");
  o.model_id = path.empty() ? "vkmoe-synthetic" : path.substr(path.find_last_of('/') + 1);
  return o;
}

int run_server(const Model& model, Engine& engine, const Tokenizer& tok, const ServeOptions& o) {
  using namespace serve;
  ServeCore core(engine, tok, model.gguf(), o.model_id, o.max_queue);
  const int64_t started = make_meta(Endpoint::Chat, "").created;

  httplib::Server svr;
  const size_t n_threads = static_cast<size_t>(o.max_queue) + 8;  // every waiting request holds a thread
  svr.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  svr.set_payload_max_length(o.max_body);
  svr.set_keep_alive_timeout(kKeepAliveSeconds);
  // httplib's default adds SO_REUSEPORT, which lets a second server share a
  // busy port; a port in use must be an error.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  for (const char* path : {"/v1/chat/completions", "/chat/completions"})
    svr.Post(path, guarded([&](const auto& req, auto& res) { handle_completion(core, Endpoint::Chat, req, res); }));
  for (const char* path : {"/v1/completions", "/completions"})
    svr.Post(path, guarded([&](const auto& req, auto& res) {
      handle_completion(core, Endpoint::Completion, req, res);
    }));
  svr.Post("/tokenize", guarded([&](const auto& req, auto& res) { handle_tokenize(core, req, res); }));
  svr.Post("/detokenize", guarded([&](const auto& req, auto& res) { handle_detokenize(core, req, res); }));
  svr.Post("/apply-template", guarded([&](const auto& req, auto& res) { handle_apply_template(core, req, res); }));
  auto models = guarded([&](const auto&, auto& res) {
    const ModelConfig& c = model.config();
    reply_json(res, 200,
               {{"object", "list"},
                {"data", json::array({{{"id", core.model_id()},
                                       {"object", "model"},
                                       {"created", started},
                                       {"owned_by", "vkmoe"},
                                       {"meta",
                                        {{"arch", c.arch},
                                         {"n_ctx", core.n_ctx()},
                                         {"n_ctx_train", c.n_ctx_train},
                                         {"n_vocab", tok.n_vocab()},
                                         {"chat_template", core.chat().name()}}}}})}});
  });
  svr.Get("/v1/models", models);
  svr.Get("/models", models);
  svr.Get("/health", guarded([&](const auto&, auto& res) {
    reply_json(res, 200, {{"status", "ok"}, {"busy", core.queue().busy()}, {"waiting", core.queue().waiting()}});
  }));

  // httplib's own errors (no route, body too large, unparsable request) as
  // OpenAI JSON; responses that already have a body pass through.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e(res.status, std::string("HTTP ") + std::to_string(res.status), "http_error");
    auto route = routes().find(req.path);
    if (res.status == 404 && route != routes().end()) {
      res.status = 405;
      res.set_header("Allow", route->second);
      e = ApiError(405, req.method + " is not allowed on " + req.path + " (use " + route->second + ")",
                   "method_not_allowed");
    } else if (res.status == 404) {
      e = ApiError(404, "no route " + req.method + " " + req.path, "not_found");
    } else if (res.status == 413) {
      e = ApiError(413, "the request body is larger than the server's limit (--max-body)", "payload_too_large");
    } else if (res.status == 400) {
      e = ApiError(400, "malformed HTTP request", "bad_request");
    }
    reply_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_error(res, ApiError(500, what, "internal_error"));
  });
  svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    std::fprintf(stderr, "%s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });

  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port <= 0) throw Error("cannot listen on " + o.host + " (any port)");
  } else if (!svr.bind_to_port(o.host, port)) {
    throw Error("cannot listen on " + o.host + ":" + std::to_string(port) +
                " (in use, or not an address of this host?)");
  }

  // A write to a client that went away must fail, not kill the server.
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  const bool v6 = o.host.find(':') != std::string::npos;
  std::fprintf(stderr, "listening on http://%s%s%s:%d (model \"%s\", chat template: %s)\n", v6 ? "[" : "",
               o.host.c_str(), v6 ? "]" : "", port, o.model_id.c_str(), core.chat().name());
  std::fflush(stderr);

  // SIGINT/SIGTERM: cancel generations, then stop accepting and let httplib
  // finish the connections it has.
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    std::chrono::steady_clock::time_point fatal_seen{};
    while (!done.load()) {
      if (int sig = g_signal.load(); sig != 0 && svr.is_running()) {
        std::fprintf(stderr, "%s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        core.shutdown();
        svr.stop();
        return;
      }
      // The engine failed: stop once the failing request has its error (or
      // after 2 s, should that reply never complete).
      if (!core.fatal_error().empty() && svr.is_running()) {
        const auto now = std::chrono::steady_clock::now();
        if (fatal_seen == std::chrono::steady_clock::time_point{}) fatal_seen = now;
        if (core.fatal_reply_sent() || now - fatal_seen > std::chrono::seconds(2)) {
          svr.stop();
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const bool listened = svr.listen_after_bind();
  done = true;
  watcher.join();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (const std::string fatal = core.fatal_error(); !fatal.empty()) throw Error(fatal + "; the server stopped");
  if (g_signal.load() == 0 && !listened) throw Error("the HTTP server stopped unexpectedly");
  std::fprintf(stderr, "stopped\n");
  return 0;
}

}  // namespace vkmoe
