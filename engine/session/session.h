#pragma once
// A conversation with one engine: the KV cache keeps the tokens of the last
// request and reply, so a request that continues them (the next chat turn, a
// client resending its history) evaluates only what is new.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/forward/engine_select.h"
#include "engine/model/tokenizer.h"
#include "engine/sample/sampler.h"

namespace vkmoe {

struct GenerateRequest {
  std::vector<int32_t> prompt;     // the whole context the reply continues
  int max_tokens = -1;             // < 0: until end of generation or a full context
  SamplerParams sampling;
  std::vector<std::string> stop;   // stop strings (excluded from the text)
  const std::atomic<bool>* cancel = nullptr;  // set from anywhere to stop the reply
};

enum class FinishReason { Stop, Length, Cancelled };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled"

struct GenerateResult {
  std::string text;
  FinishReason finish = FinishReason::Stop;
  int prompt_tokens = 0;      // tokens of the prompt
  int cached_tokens = 0;      // of which the KV cache already held
  int completion_tokens = 0;  // sampled tokens (an end-of-generation token included)
  double prompt_seconds = 0, generation_seconds = 0;
};

class Session {
 public:
  Session(Engine& engine, const Tokenizer& tok) : engine_(engine), tok_(tok) {}

  // Samples a reply to req.prompt. on_text gets the reply as it is produced,
  // in pieces that never split a UTF-8 character or a possible stop string;
  // returning false cancels. Throws Error when the prompt does not fit the
  // context (with room for one token).
  GenerateResult generate(const GenerateRequest& req, const std::function<bool(std::string_view)>& on_text = {});

  void reset();
  const std::vector<int32_t>& context() const { return context_; }  // what the KV cache holds
  Engine& engine() { return engine_; }
  const Tokenizer& tokenizer() const { return tok_; }

 private:
  Engine& engine_;
  const Tokenizer& tok_;
  std::vector<int32_t> context_;
};

// How many leading bytes of `text` can be shown without splitting a UTF-8
// character or the start of one of `stop` at its end.
size_t streamable_prefix(std::string_view text, const std::vector<std::string>& stop);

}  // namespace vkmoe
