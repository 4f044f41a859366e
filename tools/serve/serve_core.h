#pragma once
// What the HTTP routes share: one Session over the engine (its KV cache keeps
// the last request's tokens, so a continuing conversation reuses them), the
// FIFO queue in front of it, and the chat-prompt renderer. Thread-safe.
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/session/session.h"
#include "tools/serve/chat_prompt.h"
#include "tools/serve/gen_queue.h"
#include "tools/serve/openai_request.h"

namespace vkmoe::serve {

class ServeCore {
 public:
  // gguf: the model's file (its tokenizer.chat_template, if any).
  ServeCore(Engine& engine, const Tokenizer& tok, const GgufFile& gguf, std::string model_id, int max_waiting);

  // The prompt of a request as tokens, checked to fit the context with room
  // for one reply token (ApiError 400 "context_length_exceeded" otherwise);
  // max_tokens capped by what the context leaves; cancelled by shutdown().
  GenerateRequest make_request(const CompletionParams& p) const;

  // Waits in line for the engine (ApiError 503 when the queue is full or the
  // server stops), then generates. on_text returning false cancels.
  GenerationQueue::Turn wait_turn(const std::function<bool()>& still_wanted = {});
  GenerateResult generate(const GenerationQueue::Turn& turn, const GenerateRequest& r,
                          const std::function<bool(std::string_view)>& on_text = {});

  // Cancels the running generation and every waiting one.
  void shutdown();
  bool stopping() const { return stopping_.load(); }
  // The engine failed for good (the Vulkan device was lost): generate() gave
  // the failing request ApiError 500 "device_lost", shut the queue down, and
  // this holds the message the server exits with ("" until then).
  std::string fatal_error() const;
  // The failing request's reply is complete (set by its handler), so the
  // server may stop without cutting it off.
  void mark_fatal_reply_sent() { fatal_reply_sent_ = true; }
  bool fatal_reply_sent() const { return fatal_reply_sent_.load(); }

  const std::string& model_id() const { return model_id_; }
  int n_ctx() const { return n_ctx_; }
  const Tokenizer& tokenizer() const { return tok_; }
  const ChatPrompt& chat() const { return chat_; }
  const GenerationQueue& queue() const { return queue_; }

 private:
  const Tokenizer& tok_;
  Session session_;
  ChatPrompt chat_;
  GenerationQueue queue_;
  std::string model_id_;
  int n_ctx_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex fatal_mu_;
  std::string fatal_;
  std::atomic<bool> fatal_reply_sent_{false};
};

}  // namespace vkmoe::serve
