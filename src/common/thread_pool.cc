#include "common/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace llmserve {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

static std::pair<int64_t, int64_t> chunk_range(int64_t n, int chunks, int idx) {
  const int64_t base = n / chunks, rem = n % chunks;
  const int64_t begin = idx * base + std::min<int64_t>(idx, rem);
  return {begin, begin + base + (idx < rem ? 1 : 0)};
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads_, max_chunks));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  cv_start_.notify_all();
  auto [b, e] = chunk_range(n, chunks, 0);
  fn(b, e);
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int worker_idx) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int chunks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (worker_idx < chunks) {
      auto [b, e] = chunk_range(n, chunks, worker_idx);
      (*job)(b, e);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

int ThreadPool::physical_cores() {
  // Count distinct (physical id, core id) pairs in /proc/cpuinfo.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    auto value = [&] { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace llmserve
