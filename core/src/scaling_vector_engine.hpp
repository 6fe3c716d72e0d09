// N Scaling-v0 environments stepped by one call (DESIGN §11, EnvPool's style): each env is an
// Engine driven by its ScalingMDP kernel, writing its row of the shared observation, mask, reward
// and info buffers, on a SlicePool. Episodes are reset in Python (envs/scaling_vector.py), which
// then attaches the new engine, and at an episode's end replays the kernel's deployments and
// releases on its cluster.
#pragma once

#include <cstdint>
#include <vector>

#include "scaling_mdp.hpp"
#include "slice_pool.hpp"
#include "step_buffers.hpp"

namespace servegym_core {

class ScalingVectorEngine : public StepBuffers {
 public:
  // `num_envs` kernels of one spec; `num_threads` 0: min(num_envs, hardware threads).
  ScalingVectorEngine(const ScalingSpec& spec, std::int32_t num_envs, std::int32_t num_threads);

  // Env i's new episode (after Python's reset): its engine, which the caller keeps alive, and numbers.
  void attach(std::int32_t env, Engine* engine, ScalingEpisode episode);
  // Step every env with its action_size() actions (each checked in the action space first); call
  // without the GIL. An env's error is rethrown after all envs ran (the lowest env's).
  void step(const std::int64_t* actions);
  // Env i's kernel (its deployments, releases, slots and units, for Python at the episode's end).
  const ScalingMDP& kernel(std::int32_t env) const;

  std::int32_t num_envs() const { return static_cast<std::int32_t>(kernels_.size()); }
  std::int32_t num_threads() const { return pool_.num_threads(); }
  std::size_t features() const { return kernels_.front().features(); }
  std::size_t slots() const { return slots_; }
  std::size_t context_size() const { return context_size_; }
  std::size_t mask_size() const { return kernels_.front().mask_size(); }
  std::size_t action_size() const { return kernels_.front().action_size(); }

  // The observation buffers, one row per env (the step's in StepBuffers).
  std::vector<float> instances, context, mask;

 private:
  ScalingRow row(std::size_t env);

  std::vector<ScalingMDP> kernels_;
  std::size_t slots_;
  std::size_t context_size_;
  std::int64_t action_bound_;  // each action value is in [0, action_bound_)
  SlicePool pool_;
};

}  // namespace servegym_core
