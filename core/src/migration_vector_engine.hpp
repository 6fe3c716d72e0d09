// N Migration-v0 environments (mode="periodic") stepped by one call (DESIGN §11, EnvPool's
// style): each env is an Engine driven by its MigrationMDP kernel, writing its row of the shared
// observation, mask, reward and info buffers, on a SlicePool. Episodes are reset in Python
// (envs/migration_vector.py), which then attaches the new engine.
#pragma once

#include <cstdint>
#include <vector>

#include "migration_mdp.hpp"
#include "slice_pool.hpp"
#include "step_buffers.hpp"

namespace servegym_core {

class MigrationVectorEngine : public StepBuffers {
 public:
  // `num_envs` kernels of one spec; `num_threads` 0: min(num_envs, hardware threads).
  MigrationVectorEngine(const MigrationSpec& spec, std::int32_t num_envs, std::int32_t num_threads);

  // Env i's new episode (after Python's reset): its engine, which the caller keeps alive, and numbers.
  void attach(std::int32_t env, Engine* engine, MigrationEpisode episode);
  // Step every env with (actions[2 i], actions[2 i + 1]) (each checked in [0, max_instances]
  // first); call without the GIL. An env's error is rethrown after all envs ran (the lowest env's).
  void step(const std::int64_t* actions);

  std::int32_t num_envs() const { return static_cast<std::int32_t>(kernels_.size()); }
  std::int32_t num_threads() const { return pool_.num_threads(); }
  std::size_t features() const { return kernels_.front().features(); }
  std::size_t slots() const { return slots_; }
  std::size_t context_size() const { return context_size_; }
  std::size_t mask_size() const { return 2 * (slots_ + 1); }

  // The observation buffers and the migration counters, one row per env (the step's in StepBuffers).
  std::vector<float> instances, context, mask;
  std::vector<std::int64_t> migrations_started, migrations_done, migrations_aborted;

 private:
  MigrationRow row(std::size_t env);

  std::vector<MigrationMDP> kernels_;
  std::vector<Engine*> engines_;
  std::size_t slots_;
  std::size_t context_size_;
  SlicePool pool_;
};

}  // namespace servegym_core
