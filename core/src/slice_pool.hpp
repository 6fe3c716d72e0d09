// The thread pool of the native vector envs (DESIGN §11, EnvPool's style): run a task on items
// 0 .. N − 1 in fixed slices, one slice per thread (the caller's thread runs slice 0), so which
// thread runs which item never changes a result.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace servegym_core {

class SlicePool {
 public:
  // `num_threads` 0: min(num_items, hardware threads); else min(num_items, num_threads).
  SlicePool(std::int32_t num_items, std::int32_t num_threads);
  ~SlicePool();
  SlicePool(const SlicePool&) = delete;
  SlicePool& operator=(const SlicePool&) = delete;

  // task(i) for every item i; call without the GIL. An item's exception is rethrown after every
  // item ran (the lowest item's).
  void run(const std::function<void(std::size_t)>& task);
  std::int32_t num_threads() const { return num_threads_; }

 private:
  void run_slice(std::int32_t slice);
  void worker(std::int32_t slice);

  std::size_t num_items_;
  std::int32_t num_threads_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::vector<std::exception_ptr> errors_;
  // Workers 1 .. T − 1 wait for a new generation, the caller runs slice 0 and waits for pending_
  // to reach 0. A step of a few envs takes tens of microseconds, about what waking a sleeping
  // thread takes, so both sides spin for a while first and sleep only after.
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, finish_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::int32_t> pending_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace servegym_core
