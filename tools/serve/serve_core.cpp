#include "tools/serve/serve_core.h"

#include <algorithm>

#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::serve {

ServeCore::ServeCore(Engine& engine, const Tokenizer& tok, const GgufFile& gguf, std::string model_id,
                     int max_waiting)
    : tok_(tok),
      session_(engine, tok),
      chat_(gguf, tok),
      queue_(max_waiting),
      model_id_(std::move(model_id)),
      n_ctx_(engine.n_ctx()) {}

GenerateRequest ServeCore::make_request(const CompletionParams& p) const {
  GenerateRequest r;
  if (p.endpoint == Endpoint::Chat) r.prompt = chat_.tokenize(chat_.render(p.messages, true, p.tools));
  else if (p.prompt_is_tokens) r.prompt = p.prompt_tokens;
  else r.prompt = tok_.encode(p.prompt, true);
  if (r.prompt.empty())
    throw ApiError(400, "the prompt is empty", "invalid_value", p.endpoint == Endpoint::Chat ? "messages" : "prompt");
  const int n = static_cast<int>(r.prompt.size());
  if (n >= n_ctx_)
    throw ApiError(400,
                   "the prompt is " + std::to_string(n) + " tokens; the context holds " + std::to_string(n_ctx_) +
                       " (prompt and reply together)",
                   "context_length_exceeded", p.endpoint == Endpoint::Chat ? "messages" : "prompt");
  const int room = n_ctx_ - n;
  r.max_tokens = p.max_tokens < 0 ? room : std::min(p.max_tokens, room);
  r.sampling = p.sampling;
  r.stop = p.stop;
  r.cancel = &stopping_;
  return r;
}

GenerationQueue::Turn ServeCore::wait_turn(const std::function<bool()>& still_wanted) {
  return queue_.acquire(still_wanted);
}

GenerateResult ServeCore::generate(const GenerationQueue::Turn&, const GenerateRequest& r,
                                   const std::function<bool(std::string_view)>& on_text) {
  try {
    return session_.generate(r, on_text);
  } catch (const vk::DeviceLost& e) {
    {
      std::lock_guard<std::mutex> lock(fatal_mu_);
      fatal_ = e.what();
    }
    shutdown();
    throw ApiError(500, std::string(e.what()) + "; the server stops", "device_lost");
  }
}

std::string ServeCore::fatal_error() const {
  std::lock_guard<std::mutex> lock(fatal_mu_);
  return fatal_;
}

void ServeCore::shutdown() {
  stopping_ = true;
  queue_.shutdown();
}

}  // namespace vkmoe::serve
