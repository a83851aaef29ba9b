// A fixed pool of worker threads for data-parallel kernels. One pool per process, sized by
// --threads; the calling thread takes part, so a pool of N threads starts N-1 workers.
// Workers spin briefly on the job counter before sleeping on a condition variable: a decode
// step issues dozens of short fork/joins, and a futex wake-up per join would cost more than
// the work it splits (the approach of OpenMP's and llama.cpp's pools). The caller, once its
// own chunk is done, spins the same way and then blocks on the pending count (never
// sched_yield, which on a shared machine gives its core away for a time slice).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace llmserve {

class ThreadPool {
 public:
  /// num_threads >= 1 (the caller counts as one). Throws std::system_error when a thread
  /// cannot be started (the ones started are joined first).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  /// Calls fn(begin, end) over disjoint ranges covering [0, n), split into at most
  /// num_threads() contiguous chunks of at least `min_chunk` items. Blocks until all are done.
  /// Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

  /// Calls fn(i) once for every i in [0, items), in parallel. Each thread owns a contiguous
  /// share of the items and takes them front to back; a thread whose share is empty takes
  /// the back half of another's as its new share (so a thread whose core is busy elsewhere
  /// ends up with fewer). For bandwidth-bound kernels whose items are adjacent slices of a weight
  /// matrix: each thread reads one forward stream, which the hardware prefetchers follow,
  /// where a shared counter would hand the threads alternate items. Not reentrant (as
  /// parallel_for).
  void parallel_items(int64_t items, const std::function<void(int64_t)>& fn);

  /// Number of physical cores (falls back to hardware_concurrency()).
  static int physical_cores();

 private:
  void stop_and_join();
  void worker_loop(int worker_idx);
  /// Waits until state_ differs from `seen` (or stop); returns the new state.
  uint64_t wait_for_job(uint64_t seen);

  int num_threads_;
  /// parallel_items' per-thread shares of the items: (next item << 32) | end item.
  struct alignas(128) Share {
    std::atomic<uint64_t> front_back{0};
  };
  std::unique_ptr<Share[]> shares_;
  std::vector<std::thread> workers_;
  // Job slot: written by the caller before state_ is published (release), read by a worker
  // after it observes the new state (acquire) -- and only by workers that take part in the
  // job, whom the caller waits for, so the slot cannot change under them.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;  // caller-side job counter
  /// (generation << 16) | chunks, published atomically so that a worker that does not take
  /// part in a job never reads the job slot (which the next job may be rewriting).
  std::atomic<uint64_t> state_{0};
  /// Pauses the caller spins for the workers' chunks before blocking (~30 us).
  static constexpr int kCallerSpins = 2000;
  std::atomic<int> pending_{0};   // chunks not yet finished by workers
  std::atomic<int> sleepers_{0};  // workers blocked (or about to block) on cv_
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace llmserve
