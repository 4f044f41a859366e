#include "cpu/thread_pool.h"

#include <algorithm>
#include <string>
#include <system_error>

#include "base/error.h"

namespace vkmoe {

namespace {
// The pool whose job the current thread is running (detects nested calls).
thread_local const ThreadPool* tl_running_pool = nullptr;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(n_threads - 1);
  try {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::system_error& e) {
    // Unwinding with workers still waiting would hang in ~condition_variable.
    const size_t started = workers_.size() + 1;
    stop();
    throw Error("cannot start CPU thread " + std::to_string(started + 1) + " of " + std::to_string(n_threads) +
                " (" + e.what() + "); use fewer threads (-t)");
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  tl_running_pool = this;
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_workers_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run_chunks() {
  for (;;) {
    const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) return;
    try {
      (*fn_)(begin, std::min(n_, begin + chunk_));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(n_, std::memory_order_relaxed);  // skip the remaining chunks
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || tl_running_pool == this) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    // A few chunks per thread balances uneven rows without much contention.
    chunk_ = std::max<int64_t>(1, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    busy_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  const ThreadPool* outer_pool = tl_running_pool;
  tl_running_pool = this;
  run_chunks();
  tl_running_pool = outer_pool;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_workers_ == 0; });
    fn_ = nullptr;
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace vkmoe
