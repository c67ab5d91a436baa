#include "qloom/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace qloom {
namespace {
thread_local bool t_inside_pool_body = false;

// How long a worker that ran out of work (and a caller waiting for the last
// chunk) polls before it blocks on the condition variable. A decode step
// issues a parallel_for every few microseconds; waking a blocked thread
// takes tens of microseconds, so without the poll the caller ran most
// chunks itself and two threads decoded slower than one.
constexpr auto kSpin = std::chrono::microseconds(200);

void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Polls `ready` for up to kSpin; true when it became true.
template <class F>
bool spin_until(F&& ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
}
}  // namespace

struct ThreadPool::Impl {
  unsigned threads = 1;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  // The current job.
  const std::function<void(int64_t, int64_t)>* body = nullptr;
  int64_t n = 0, chunk = 0, num_chunks = 0;
  int64_t next_chunk = 0, chunks_done = 0;
  uint64_t generation = 0;
  bool stop = false;
  // Mirrors of generation / stop / chunks_done (written under `mu`) that
  // threads poll without the lock before blocking.
  std::atomic<uint64_t> published{0};
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> done_count{0};
  std::exception_ptr error;
  // The caller's floating-point environment (rounding mode, MXCSR's
  // flush-to-zero / denormals-are-zero): workers run every chunk under it, so
  // a result never depends on which thread computed it.
  std::fenv_t env{};

  // Runs chunks of the current job until none is left. Called with `lock` held.
  void run_chunks(std::unique_lock<std::mutex>& lock, bool worker) {
    while (next_chunk < num_chunks) {
      const int64_t c = next_chunk++;
      const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
      const std::fenv_t job_env = env;
      lock.unlock();
      std::fenv_t own_env;
      if (worker) std::fegetenv(&own_env), std::fesetenv(&job_env);
      std::exception_ptr err;
      t_inside_pool_body = true;
      try {
        (*body)(begin, end);
      } catch (...) {
        err = std::current_exception();
      }
      t_inside_pool_body = false;
      if (worker) std::fesetenv(&own_env);
      lock.lock();
      if (err && !error) error = err;
      done_count.store(++chunks_done, std::memory_order_release);
      if (chunks_done == num_chunks) done_cv.notify_all();
    }
  }

  void worker_loop() {
    std::unique_lock<std::mutex> lock(mu);
    uint64_t seen = 0;
    for (;;) {
      if (!stop && generation == seen) {
        lock.unlock();
        spin_until([&] {
          return published.load(std::memory_order_acquire) != seen || stopping.load(std::memory_order_relaxed);
        });
        lock.lock();
      }
      work_cv.wait(lock, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      run_chunks(lock, true);
    }
  }
};

ThreadPool::ThreadPool(unsigned threads) : impl_(std::make_unique<Impl>()) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  impl_->threads = threads;
  for (unsigned i = 1; i < threads; ++i) impl_->workers.emplace_back([this] { impl_->worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
    impl_->stopping.store(true);
  }
  impl_->work_cv.notify_all();
  for (auto& t : impl_->workers) t.join();
}

unsigned ThreadPool::size() const { return impl_->threads; }

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body,
                              int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t max_chunks = std::max<int64_t>(1, std::min<int64_t>(impl_->threads, n / min_chunk));
  if (max_chunks == 1 || t_inside_pool_body || impl_->workers.empty()) {
    body(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->body = &body;
  impl_->n = n;
  impl_->chunk = (n + max_chunks - 1) / max_chunks;
  impl_->num_chunks = (n + impl_->chunk - 1) / impl_->chunk;
  impl_->next_chunk = 0;
  impl_->chunks_done = 0;
  impl_->done_count.store(0, std::memory_order_relaxed);
  impl_->error = nullptr;
  std::fegetenv(&impl_->env);
  ++impl_->generation;
  impl_->published.store(impl_->generation, std::memory_order_release);
  impl_->work_cv.notify_all();
  impl_->run_chunks(lock, false);
  if (impl_->chunks_done != impl_->num_chunks) {
    const int64_t total = impl_->num_chunks;
    lock.unlock();
    spin_until([&] { return impl_->done_count.load(std::memory_order_acquire) == total; });
    lock.lock();
  }
  impl_->done_cv.wait(lock, [&] { return impl_->chunks_done == impl_->num_chunks; });
  impl_->body = nullptr;
  if (impl_->error) {
    std::exception_ptr e = impl_->error;
    impl_->error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace qloom
