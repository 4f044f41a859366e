#include "tools/chat_cmd.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>

#include "engine/model/chat_format.h"
#include "engine/session/session.h"
#include "tools/command_setup.h"

namespace vkmoe {

const std::vector<OptionSpec> kChatOptions = {{"system", "-sys"}, {"n-predict", "-n"}};

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) { g_interrupted.store(true); }

// Ctrl-C sets g_interrupted (no SA_RESTART: a pending read returns).
struct SigintScope {
  struct sigaction old = {};
  SigintScope() {
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
  }
  ~SigintScope() { sigaction(SIGINT, &old, nullptr); }
};

// One line of user input; false at end of input or on Ctrl-C while reading.
bool read_line(std::string& line, bool tty) {
  if (tty) std::fputs("\n> ", stdout);
  std::fflush(stdout);
  line.clear();
  for (;;) {
    const int c = std::getchar();
    if (c == EOF) return !line.empty() && !g_interrupted.load();
    if (c == '\n') return true;
    line += static_cast<char>(c);
  }
}

}  // namespace

int cmd_chat(const Args& a) {
  GenerateRequest req;
  req.sampling = sampler_params(a);
  req.max_tokens = static_cast<int>(a.num("n-predict", -1, -1, kMaxTokens));
  req.cancel = &g_interrupted;
  auto model = load_model(a);
  auto tok = Tokenizer::from_gguf(model->gguf());
  const ChatFormat format(model->gguf(), *tok);
  auto engine = make_engine(*model, engine_options(a, *model));
  print_startup_summary(*model, *engine);
  const bool tty = isatty(STDIN_FILENO);
  std::fprintf(stderr, "chat template: %s. /reset starts over, /exit (or end of input) quits, Ctrl-C stops a reply\n",
               format.from_model() ? "the model's" : "ChatML (the model has none)");

  Session session(*engine, *tok);
  const nlohmann::json first = a.has("system")
                                   ? nlohmann::json::array({{{"role", "system"}, {"content", a.get("system")}}})
                                   : nlohmann::json::array();
  nlohmann::json messages = first;
  SigintScope sigint;
  std::string line;
  while (read_line(line, tty)) {
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      messages = first;
      session.reset();
      std::fprintf(stderr, "[conversation reset]\n");
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    req.prompt = format.tokenize(format.render(messages, true));
    GenerateResult r;
    try {
      r = session.generate(req, [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      });
    } catch (const Error& e) {
      messages.erase(messages.size() - 1);
      std::fprintf(stderr, "vkmoe: %s; /reset to start over\n", e.what());
      continue;
    }
    std::fputs("\n", stdout);
    if (r.finish == FinishReason::Cancelled) {
      g_interrupted.store(false);
      std::fprintf(stderr, "[reply stopped]\n");
    }
    messages.push_back({{"role", "assistant"}, {"content", r.text}});
    std::fprintf(stderr, "[%d prompt tokens, %d from cache; %d tokens at %.1f tokens/s]\n", r.prompt_tokens,
                 r.cached_tokens, r.completion_tokens,
                 r.generation_seconds > 0 ? r.completion_tokens / r.generation_seconds : 0.0);
  }
  if (tty) std::fputs("\n", stdout);
  return 0;
}

}  // namespace vkmoe
