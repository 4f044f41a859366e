#pragma once
// `vkmoe serve`: an OpenAI-compatible HTTP server over one engine.
#include <cstddef>
#include <string>

#include "engine/forward/engine_select.h"
#include "engine/model/model.h"
#include "engine/model/tokenizer.h"
#include "tools/cli_args.h"

namespace vkmoe {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (the one taken is printed)
  size_t max_body = 1 << 20;     // request bodies above this get 413
  int max_queue = 64;            // requests waiting for the engine beyond this get 503
  std::string model_id;          // "id" in /v1/models and "model" in replies
};

// --host, --port, --max-body, --max-queue; the model id is the -m file's name.
ServeOptions serve_options(const Args& a);

// Serves until SIGINT or SIGTERM; returns the exit status (0 then). Prints a
// one-line summary and "listening on http://HOST:PORT" to stderr.
int run_server(const Model& model, Engine& engine, const Tokenizer& tok, const ServeOptions& o);

}  // namespace vkmoe
