#pragma once
// One generation at a time: requests wait their turn for the engine in
// arrival order (FIFO), so no reply is ever interleaved into another's KV state.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace vkmoe::serve {

class GenerationQueue {
 public:
  // At most max_waiting callers wait (beyond the one generating).
  explicit GenerationQueue(int max_waiting) : max_waiting_(max_waiting) {}

  // The engine for one caller until destroyed.
  class Turn {
   public:
    explicit Turn(GenerationQueue* q) : q_(q) {}
    Turn(Turn&& o) noexcept : q_(o.q_) { o.q_ = nullptr; }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (q_) q_->release();
    }

   private:
    GenerationQueue* q_;
  };

  // Waits for this caller's turn. Throws ApiError 503 when the queue is full
  // or shut down, or when still_wanted (polled every 100 ms while waiting)
  // turns false.
  Turn acquire(const std::function<bool()>& still_wanted = {});
  // Wakes every waiter with 503; later acquire() calls fail at once.
  void shutdown();
  int waiting() const;  // callers waiting now
  bool busy() const;    // a caller holds the engine

 private:
  void release();

  const int max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint64_t> waiters_;  // tickets, in arrival order
  uint64_t next_ticket_ = 0;
  bool busy_ = false, shut_down_ = false;
};

}  // namespace vkmoe::serve
