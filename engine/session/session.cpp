#include "engine/session/session.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"

namespace vkmoe {
namespace {

// Bytes at the end of text that begin an incomplete UTF-8 character.
size_t incomplete_utf8_tail(std::string_view text) {
  for (size_t back = 1; back <= std::min<size_t>(4, text.size()); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return len > back ? back : 0;
  }
  return 0;
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

size_t streamable_prefix(std::string_view text, const std::vector<std::string>& stop) {
  size_t keep = text.size() - incomplete_utf8_tail(text);
  for (const std::string& s : stop)  // a suffix of text that a stop string starts with
    for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), text.size()); n > 0; --n)
      if (text.substr(text.size() - n) == std::string_view(s).substr(0, n)) {
        keep = std::min(keep, text.size() - n);
        break;
      }
  return keep;
}

void Session::reset() {
  engine_.reset();
  context_.clear();
}

GenerateResult Session::generate(const GenerateRequest& req, const std::function<bool(std::string_view)>& on_text) {
  GenerateResult res;
  const int n_ctx = engine_.n_ctx();
  if (req.prompt.empty()) throw Error("the prompt is empty");
  if (static_cast<int>(req.prompt.size()) >= n_ctx)
    throw Error("the prompt (" + std::to_string(req.prompt.size()) + " tokens) does not fit the context of " +
                std::to_string(n_ctx) + " tokens");
  // Reuse the longest shared prefix; the last prompt token is always evaluated
  // again, for its logits.
  size_t keep = 0;
  const size_t limit = std::min(context_.size(), req.prompt.size() - 1);
  while (keep < limit && context_[keep] == req.prompt[keep]) ++keep;
  if (engine_.n_past() != static_cast<int>(context_.size())) keep = 0;  // engine used elsewhere
  if (keep == 0) engine_.reset(); else engine_.truncate(static_cast<int>(keep));
  context_.resize(keep);
  res.prompt_tokens = static_cast<int>(req.prompt.size());
  res.cached_tokens = static_cast<int>(keep);

  auto eval = [&](std::vector<int32_t> tokens) {
    try {
      const std::span<const float> logits = engine_.eval_view(tokens);
      context_.insert(context_.end(), tokens.begin(), tokens.end());
      return logits;
    } catch (...) {
      reset();  // the cache holds an unknown part of the tokens
      throw;
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  std::span<const float> logits = eval(std::vector<int32_t>(req.prompt.begin() + keep, req.prompt.end()));
  res.prompt_seconds = seconds_since(t0);

  Sampler sampler(req.sampling);
  for (int32_t id : req.prompt) sampler.accept(id);
  auto t1 = std::chrono::steady_clock::now();
  std::string text;   // the reply so far
  size_t shown = 0;   // bytes of text given to on_text
  auto emit = [&](size_t upto) {
    if (upto <= shown) return true;
    const bool go_on = !on_text || on_text(std::string_view(text).substr(shown, upto - shown));
    shown = upto;
    return go_on;
  };
  res.finish = FinishReason::Length;
  for (;;) {
    if (req.cancel && req.cancel->load()) {
      res.finish = FinishReason::Cancelled;
      break;
    }
    if (req.max_tokens >= 0 && res.completion_tokens >= req.max_tokens) break;
    const int32_t id = sampler.sample(logits.data(), static_cast<int>(logits.size()));
    sampler.accept(id);
    ++res.completion_tokens;
    if (tok_.is_eog(id)) {
      res.finish = FinishReason::Stop;
      break;
    }
    const size_t before = text.size();
    text += tok_.piece(id);
    size_t stop_at = std::string::npos;
    for (const std::string& s : req.stop) {
      if (s.empty()) continue;
      // Only a match that ends in the new piece is new.
      const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
      const size_t at = text.find(s, from);
      if (at != std::string::npos) stop_at = std::min(stop_at, at);
    }
    if (stop_at != std::string::npos) {
      text.resize(stop_at);
      emit(text.size());
      res.finish = FinishReason::Stop;
      break;
    }
    if (!emit(streamable_prefix(text, req.stop))) {
      res.finish = FinishReason::Cancelled;
      break;
    }
    if (engine_.n_past() + 1 >= n_ctx) break;  // no room for the next token
    logits = eval({id});
  }
  if (res.finish != FinishReason::Cancelled) emit(text.size());
  res.text = text.substr(0, res.finish == FinishReason::Cancelled ? shown : text.size());
  res.generation_seconds = seconds_since(t1);
  return res;
}

}  // namespace vkmoe
