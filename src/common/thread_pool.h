// A fixed pool of worker threads for data-parallel kernels. One pool per process, sized by
// --threads; the calling thread takes part, so a pool of N threads starts N-1 workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llmserve {

class ThreadPool {
 public:
  /// num_threads >= 1 (the caller counts as one).
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

  /// Number of physical cores (falls back to hardware_concurrency()).
  static int physical_cores();

 private:
  void worker_loop(int worker_idx);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace llmserve
