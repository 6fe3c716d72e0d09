// N Routing-v0 environments stepped by one call (DESIGN §11, EnvPool's style): each env is an
// Engine driven by its RoutingMDP kernel, writing its row of the shared observation, mask, reward
// and info buffers. A persistent pool of threads runs fixed slices of the envs, so which thread
// steps which env never changes a result. Episodes are reset in Python (envs/vector.py), which
// then attaches the new engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "routing_mdp.hpp"

namespace servegym_core {

class VectorEngine {
 public:
  // `num_envs` kernels of one spec; `num_threads` 0: min(num_envs, hardware threads).
  VectorEngine(const RoutingSpec& spec, std::int32_t num_envs, std::int32_t num_threads);
  ~VectorEngine();
  VectorEngine(const VectorEngine&) = delete;
  VectorEngine& operator=(const VectorEngine&) = delete;

  // Env i's new episode (after Python's reset): its engine, which the caller keeps alive, and numbers.
  void attach(std::int32_t env, Engine* engine, RoutingEpisode episode);
  // Step every env with actions[i] (checked in [0, max_instances) first); call without the GIL.
  // Results land in the buffers; an env's error is rethrown after all envs ran (the lowest env's).
  void step(const std::int64_t* actions);

  std::int32_t num_envs() const { return static_cast<std::int32_t>(kernels_.size()); }
  std::int32_t num_threads() const { return num_threads_; }
  std::size_t features() const { return kernels_.front().features(); }
  std::size_t slots() const { return slots_; }
  std::size_t context_size() const { return context_size_; }

  // The buffers, one row per env.
  std::vector<float> instances, context, mask;
  std::vector<std::uint8_t> valid, done, invalid_action;
  std::vector<double> reward, time_s, cost_usd;
  std::vector<std::int64_t> finished, slo_met;

 private:
  RoutingRow row(std::size_t env);
  void run_slice(std::int32_t slice);
  void worker(std::int32_t slice);

  std::vector<RoutingMDP> kernels_;
  std::size_t slots_;
  std::size_t context_size_;
  std::int32_t num_threads_;
  const std::int64_t* actions_ = nullptr;
  std::vector<std::exception_ptr> errors_;
  // The pool: workers 1 .. T − 1 wait for a new generation, the caller runs slice 0 and waits for
  // pending_ to reach 0. A step of a few envs takes tens of microseconds, about what waking a
  // sleeping thread takes, so both sides spin for kSpin first and sleep only after.
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, finish_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::int32_t> pending_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace servegym_core
