#include "tools/serve/gen_queue.h"

#include <algorithm>
#include <chrono>

#include "tools/serve/api_error.h"

namespace vkmoe::serve {

GenerationQueue::Turn GenerationQueue::acquire(const std::function<bool()>& still_wanted) {
  std::unique_lock<std::mutex> lock(mu_);
  if (shut_down_) throw ApiError(503, "the server is shutting down", "shutting_down");
  if (static_cast<int>(waiters_.size()) >= max_waiting_ && (busy_ || !waiters_.empty()))
    throw ApiError(503, "the server is busy: " + std::to_string(waiters_.size()) + " requests are waiting",
                   "server_busy");
  const uint64_t ticket = next_ticket_++;
  waiters_.push_back(ticket);
  auto leave = [&] {
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), ticket));
    cv_.notify_all();
  };
  while (!shut_down_ && (busy_ || waiters_.front() != ticket)) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (still_wanted && !shut_down_ && (busy_ || waiters_.front() != ticket)) {
      lock.unlock();
      const bool wanted = still_wanted();
      lock.lock();
      if (!wanted) {
        leave();
        throw ApiError(499, "the client went away", "cancelled");
      }
    }
  }
  if (shut_down_) {
    leave();
    throw ApiError(503, "the server is shutting down", "shutting_down");
  }
  waiters_.pop_front();
  busy_ = true;
  return Turn(this);
}

void GenerationQueue::release() {
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  cv_.notify_all();
}

void GenerationQueue::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  cv_.notify_all();
}

int GenerationQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiters_.size());
}

bool GenerationQueue::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

}  // namespace vkmoe::serve
