#pragma once
// Persistent worker pool for data-parallel loops (matvec rows, experts).
// Workers are pinned to CPUs when there are enough for all of them, and
// between jobs they poll for 200 us before sleeping, so the back-to-back jobs
// of a decoded token start without a wake-up (~10-50 us each). Environment:
// VKMOE_PIN=0 leaves placement to the OS, VKMOE_POLL_US=N polls N us; the
// CLI's --cpu-strict and --poll (llama.cpp's spellings) set them through
// ThreadPlacement instead.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vkmoe {

// -1 fields: the environment's setting, else the default (pinned, 200 us).
struct ThreadPlacement {
  int pin = -1;          // 0: placement left to the OS, 1: worker i on the (i+1)-th allowed CPU
  int64_t poll_us = -1;  // polling before sleeping, microseconds
};

class ThreadPool {
 public:
  // n_threads counts the calling thread too; 0 = hardware_concurrency.
  // Throws Error when a thread cannot be started.
  explicit ThreadPool(int n_threads = 0, ThreadPlacement placement = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  bool pinned() const { return pinned_; }
  int64_t poll_ns() const { return poll_ns_; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), on the workers
  // and the calling thread; returns when all chunks are done. The first
  // exception thrown by fn is rethrown here. Calls from inside fn (nested)
  // run serially on the calling thread; calls from other threads queue.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  void stop();  // stops and joins the workers
  void worker_loop();
  void run_chunks();
  bool wait_for_job(uint64_t seen);  // false: stop

  // How long idle workers and a waiting caller poll before blocking; 0 when
  // the pool has more threads than CPUs (polling would steal their time).
  int64_t poll_ns_ = 0;
  bool pinned_ = false;

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};  // bumped under mu_ for each job
  std::atomic<bool> stop_{false};
  std::atomic<int> busy_workers_{0};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

// memcpy of large buffers split into 1 MiB pieces across the pool (a model
// load's staging copies: one thread's copy from a mapped file is bound by its
// page walks, not by memory bandwidth); a null pool: plain memcpy.
void parallel_memcpy(ThreadPool* pool, void* dst, const void* src, uint64_t bytes);

}  // namespace vkmoe
