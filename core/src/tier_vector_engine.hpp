// N Tier-v0 environments stepped by one call (DESIGN §11, EnvPool's style): each env is an Engine
// driven by its TierMDP kernel, writing its row of the shared observation, reward and info
// buffers, on a SlicePool. Episodes are reset in Python (envs/tier_vector.py), which then
// attaches the new engine.
#pragma once

#include <cstdint>
#include <vector>

#include "slice_pool.hpp"
#include "step_buffers.hpp"
#include "tier_mdp.hpp"

namespace servegym_core {

class TierVectorEngine : public StepBuffers {
 public:
  // `num_envs` kernels of one spec; `num_threads` 0: min(num_envs, hardware threads).
  TierVectorEngine(const TierSpec& spec, std::int32_t num_envs, std::int32_t num_threads);

  // Env i's new episode (after Python's reset): its engine, which the caller keeps alive, and numbers.
  void attach(std::int32_t env, Engine* engine, TierEpisode episode);
  // Step every env with levels[i · K .. i · K + K) (each checked in [0, headroom_levels) first);
  // call without the GIL. An env's error is rethrown after all envs ran (the lowest env's).
  void step(const std::int64_t* levels);

  std::int32_t num_envs() const { return static_cast<std::int32_t>(kernels_.size()); }
  std::int32_t num_threads() const { return pool_.num_threads(); }
  std::int32_t num_tiers() const { return num_tiers_; }
  std::size_t features() const { return kernels_.front().features(); }
  std::size_t slots() const { return slots_; }
  std::size_t context_size() const { return context_size_; }

  // The observation buffers and the budgets in force, one row per env (the step's in StepBuffers).
  std::vector<float> instances, context;
  std::vector<double> headroom_fractions;

 private:
  TierRow row(std::size_t env);

  std::vector<TierMDP> kernels_;
  std::size_t slots_;
  std::size_t context_size_;
  std::int32_t num_tiers_;
  std::int32_t levels_;
  SlicePool pool_;
};

}  // namespace servegym_core
