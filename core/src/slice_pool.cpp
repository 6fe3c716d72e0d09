#include "slice_pool.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace servegym_core {

namespace {

constexpr std::chrono::microseconds kSpin{200};

// Spin until ready() or kSpin passed; whether ready() held.
template <class Ready>
bool spin_until(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

SlicePool::SlicePool(std::int32_t num_items, std::int32_t num_threads) {
  if (num_items < 1) throw std::invalid_argument("num_envs " + std::to_string(num_items) + ": must be >= 1");
  if (num_threads < 0) throw std::invalid_argument("num_threads " + std::to_string(num_threads) + ": must be >= 0");
  num_items_ = static_cast<std::size_t>(num_items);
  const std::int32_t hardware = std::max(1, static_cast<std::int32_t>(std::thread::hardware_concurrency()));
  num_threads_ = std::min(num_items, num_threads == 0 ? hardware : num_threads);
  errors_.resize(num_items_);
  for (std::int32_t slice = 1; slice < num_threads_; ++slice) workers_.emplace_back(&SlicePool::worker, this, slice);
}

SlicePool::~SlicePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
  }
  start_.notify_all();
  for (std::thread& thread : workers_) thread.join();
}

void SlicePool::run(const std::function<void(std::size_t)>& task) {
  task_ = &task;
  std::fill(errors_.begin(), errors_.end(), nullptr);
  if (num_threads_ > 1) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.store(num_threads_ - 1);
      generation_.fetch_add(1);
    }
    start_.notify_all();
  }
  run_slice(0);
  if (num_threads_ > 1 && !spin_until([this] { return pending_.load() == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    finish_.wait(lock, [this] { return pending_.load() == 0; });
  }
  task_ = nullptr;
  for (const std::exception_ptr& error : errors_) {
    if (error) std::rethrow_exception(error);
  }
}

void SlicePool::run_slice(std::int32_t slice) {
  // Fixed slices: items [slice · N / T, (slice + 1) · N / T).
  const std::size_t n = num_items_, t = static_cast<std::size_t>(num_threads_);
  const std::size_t s = static_cast<std::size_t>(slice);
  for (std::size_t i = s * n / t; i < (s + 1) * n / t; ++i) {
    try {
      (*task_)(i);
    } catch (...) {
      errors_[i] = std::current_exception();
    }
  }
}

void SlicePool::worker(std::int32_t slice) {
  std::uint64_t seen = 0;
  const auto ready = [&] { return stopping_.load() || generation_.load() != seen; };
  while (true) {
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, ready);
    }
    if (stopping_.load()) return;
    seen = generation_.load();
    run_slice(slice);
    if (pending_.fetch_sub(1) == 1) {
      { std::lock_guard<std::mutex> lock(mutex_); }  // the caller is spinning, or waiting with the lock released
      finish_.notify_one();
    }
  }
}

}  // namespace servegym_core
