#include "cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

#include "base/error.h"

namespace vkmoe {

namespace {
// The pool whose job the current thread is running (detects nested calls).
thread_local const ThreadPool* tl_running_pool = nullptr;

constexpr int64_t kPollNs = 200'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls ready() for up to poll_ns; true once it holds.
template <class Ready>
bool poll(int64_t poll_ns, Ready ready) {
  if (poll_ns <= 0) return ready();
  const int64_t until = now_ns() + poll_ns;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (now_ns() > until) return ready();
  }
}

// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void pin_to(std::thread& t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(t.native_handle(), sizeof(set), &set);  // best effort
}
}  // namespace

ThreadPool::ThreadPool(int n_threads, ThreadPlacement placement) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  // Worker i runs on the (i+1)-th allowed CPU; the first is left to the caller.
  const std::vector<int> cpus = allowed_cpus();
  const bool enough_cpus = int(cpus.size()) >= n_threads;
  if (placement.poll_us < 0)
    if (const char* env = std::getenv("VKMOE_POLL_US")) placement.poll_us = std::max(0ll, std::atoll(env));
  if (placement.pin < 0)
    if (const char* env = std::getenv("VKMOE_PIN")) placement.pin = std::atoi(env) != 0;
  poll_ns_ = enough_cpus ? (placement.poll_us >= 0 ? placement.poll_us * 1000 : kPollNs) : 0;
  const bool pin = enough_cpus && placement.pin != 0;
  pinned_ = pin;
  workers_.reserve(n_threads - 1);
  try {
    for (int i = 1; i < n_threads; ++i) {
      workers_.emplace_back([this] { worker_loop(); });
      if (pin) pin_to(workers_.back(), cpus[i]);
    }
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
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::wait_for_job(uint64_t seen) {
  auto ready = [&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
  if (!poll(poll_ns_, ready)) {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, ready);
  }
  return !stop_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop() {
  tl_running_pool = this;
  uint64_t seen = 0;
  while (wait_for_job(seen)) {
    seen = generation_.load(std::memory_order_acquire);
    run_chunks();
    if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller may be checking before it blocks
      done_.notify_one();
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
  fn_ = &fn;
  n_ = n;
  // A few chunks per thread balances uneven rows without much contention.
  chunk_ = std::max<int64_t>(1, (n + 4 * n_threads_ - 1) / (4 * n_threads_));
  next_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);  // sleeping workers check the generation under mu_
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  const ThreadPool* outer_pool = tl_running_pool;
  tl_running_pool = this;
  run_chunks();
  tl_running_pool = outer_pool;
  auto done = [&] { return busy_workers_.load(std::memory_order_acquire) == 0; };
  if (!poll(poll_ns_, done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, done);
  }
  fn_ = nullptr;
  std::exception_ptr error = error_;
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

void parallel_memcpy(ThreadPool* pool, void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return;  // an empty source may be null, which memcpy must not get
  if (!pool) {
    std::memcpy(dst, src, bytes);
    return;
  }
  constexpr uint64_t kPiece = 1ull << 20;
  pool->parallel_for(int64_t((bytes + kPiece - 1) / kPiece), [&](int64_t begin, int64_t end) {
    const uint64_t from = uint64_t(begin) * kPiece, to = std::min(bytes, uint64_t(end) * kPiece);
    std::memcpy(static_cast<uint8_t*>(dst) + from, static_cast<const uint8_t*>(src) + from, to - from);
  });
}

}  // namespace vkmoe
