#pragma once
// One progress line on stderr for long work:
//   "\r<what> [##########          ]  50%"  then  "<what>: done, 1.50 GiB in 2.1 s".
// Shown only when the total reaches show_from (small jobs stay quiet).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/clock.h"

namespace vkmoe {

class ProgressLine {
 public:
  ProgressLine(std::string what, uint64_t total, uint64_t show_from)
      : what_(std::move(what)), total_(total), shown_(total >= show_from && total > 0) {}
  ~ProgressLine() {
    if (drawn_ >= 0 && !finished_) std::fputc('\n', stderr);  // end an interrupted line
  }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void advance(uint64_t n) {
    done_ += n;
    const int pct = static_cast<int>(100 * std::min(done_, total_) / std::max<uint64_t>(total_, 1));
    if (!shown_ || pct == drawn_) return;
    constexpr int kWidth = 30;
    const int filled = pct * kWidth / 100;
    std::fprintf(stderr, "\r%s [%s%s] %3d%%", what_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), drawn_ = pct);
    std::fflush(stderr);
  }
  void finish() {
    finished_ = true;
    if (shown_)
      std::fprintf(stderr, "\r%s: done, %.2f GiB in %.1f s%*s\n", what_.c_str(), done_ / double(1ull << 30),
                   seconds_since(t0_), 24, "");
  }

 private:
  std::string what_;
  uint64_t total_, done_ = 0;
  bool shown_, finished_ = false;
  int drawn_ = -1;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace vkmoe
