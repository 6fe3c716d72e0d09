#include "vector_engine.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

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

VectorEngine::VectorEngine(const RoutingSpec& spec, std::int32_t num_envs, std::int32_t num_threads)
    : slots_(static_cast<std::size_t>(spec.max_instances)), context_size_(spec.context_k.size()) {
  if (num_envs < 1) throw std::invalid_argument("num_envs " + std::to_string(num_envs) + ": must be >= 1");
  if (num_threads < 0) throw std::invalid_argument("num_threads " + std::to_string(num_threads) + ": must be >= 0");
  kernels_.reserve(static_cast<std::size_t>(num_envs));
  for (std::int32_t i = 0; i < num_envs; ++i) kernels_.emplace_back(spec);
  const std::int32_t hardware = std::max(1, static_cast<std::int32_t>(std::thread::hardware_concurrency()));
  num_threads_ = std::min(num_envs, num_threads == 0 ? hardware : num_threads);
  const std::size_t n = static_cast<std::size_t>(num_envs);
  instances.assign(n * slots_ * features(), 0.0f);
  context.assign(n * context_size_, 0.0f);
  mask.assign(n * slots_, 0.0f);
  valid.assign(n * slots_, 0);
  done.assign(n, 0);
  invalid_action.assign(n, 0);
  reward.assign(n, 0.0);
  time_s.assign(n, 0.0);
  cost_usd.assign(n, 0.0);
  finished.assign(n, 0);
  slo_met.assign(n, 0);
  errors_.resize(n);
  for (std::int32_t slice = 1; slice < num_threads_; ++slice) workers_.emplace_back(&VectorEngine::worker, this, slice);
}

VectorEngine::~VectorEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
  }
  start_.notify_all();
  for (std::thread& thread : workers_) thread.join();
}

RoutingRow VectorEngine::row(std::size_t env) {
  return RoutingRow{&instances[env * slots_ * features()], &context[env * context_size_], &mask[env * slots_],
                    &valid[env * slots_]};
}

void VectorEngine::attach(std::int32_t env, Engine* engine, RoutingEpisode episode) {
  if (env < 0 || env >= num_envs()) throw std::out_of_range("env " + std::to_string(env) + " is not in the vector");
  const std::size_t i = static_cast<std::size_t>(env);
  kernels_[i].attach(engine, std::move(episode), row(i));
  done[i] = 0;
}

void VectorEngine::step(const std::int64_t* actions) {
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    if (!kernels_[i].attached()) throw std::logic_error("env " + std::to_string(i) + " was never reset");
    if (actions[i] < 0 || static_cast<std::size_t>(actions[i]) >= slots_) {
      throw std::invalid_argument("action " + std::to_string(actions[i]) + " of env " + std::to_string(i) +
                                  " is outside Discrete(" + std::to_string(slots_) + ")");
    }
  }
  actions_ = actions;
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
  actions_ = nullptr;
  for (const std::exception_ptr& error : errors_) {
    if (error) std::rethrow_exception(error);
  }
}

void VectorEngine::run_slice(std::int32_t slice) {
  // Fixed slices: envs [slice · N / T, (slice + 1) · N / T).
  const std::size_t n = kernels_.size(), t = static_cast<std::size_t>(num_threads_);
  const std::size_t s = static_cast<std::size_t>(slice);
  for (std::size_t i = s * n / t; i < (s + 1) * n / t; ++i) {
    try {
      const RoutingStepResult result = kernels_[i].step(actions_[i], row(i));
      reward[i] = result.reward;
      done[i] = result.done ? 1 : 0;
      invalid_action[i] = result.invalid_action ? 1 : 0;
      finished[i] = result.finished;
      slo_met[i] = result.slo_met;
      time_s[i] = result.time_s;
      cost_usd[i] = result.cost_usd;
    } catch (...) {
      errors_[i] = std::current_exception();
    }
  }
}

void VectorEngine::worker(std::int32_t slice) {
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
