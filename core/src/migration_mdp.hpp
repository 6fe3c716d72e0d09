// Migration-v0's MDP in C++ (envs/migration.py on envs/base.py, mode="periodic", for the native
// vector env): check the (source slot, destination slot) action against the mask and the
// refusals (MigrationEnv.is_valid), fall back to the no-op with the penalty, live-migrate the
// source's candidate (Cluster.migrate, Llumnix-K §3.5), run the engine one migration interval
// and fill preallocated rows with the observation (envs/observation.py's instance matrix,
// migration_context, the mask), the reward (envs/rewards.py's "slo" or "latency") and the step's
// info numbers. Every value is the Python formula's, in the Python order of operations, so the
// float32 observations and the rewards are the same bit for bit. Python (envs/migration_vector.py)
// checks that an env's configuration is one this kernel covers and resets the episodes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine.hpp"
#include "episode_numbers.hpp"
#include "instance_observation.hpp"

namespace servegym_core {

// What is fixed for every episode of one env configuration, given by envs/migration_vector.py.
struct MigrationSpec : ObservationSpec {
  // ColumnEncoder's k and c per context position: x / (k |x| + c).
  std::vector<double> context_k, context_c;
  // Positions of migration_context's cluster fields, then of its per-slot fields (max_instances each).
  std::int32_t ctx_phase_mode = 0, ctx_recent_qps = 0, ctx_arrived = 0, ctx_live_migrations = 0,
               ctx_prompt_tokens = 0, ctx_generated_tokens = 0;
  std::vector<std::int32_t> ctx_has_queued_candidate, ctx_has_running_candidate, ctx_candidate_kv_tokens,
      ctx_candidate_tier, ctx_freeness_full;
  std::vector<double> freeness_headroom;  // MigrationEnv._default_headroom
  double recent_window_s = 10.0;
  double migration_interval_s = 0.5;      // MigrationEnv.migration_interval_s
  double invalid_action_penalty = 0.0;    // ServingEnv.invalid_action_penalty
  std::int32_t reward = 0;                // IntervalReward
  std::vector<double> tier_weights;       // envs.rewards.tier_weights
  double e2e_scale_s = 10.0;              // LatencyReward.E2E_SCALE_S
};

// One episode's numbers that live in Python, given at each reset (after ServingEnv.reset).
struct MigrationEpisode : EpisodeNumbers {
  std::vector<std::int32_t> model_codes;  // MigrationEnv._model_codes(): per instance, equal codes: one model
  double next_tick_s = 0.0;               // MigrationEnv._next_tick_s
  std::int64_t seen = 0;                  // ServingEnv._seen: outcomes the reward has seen
};

// Where one env's step writes: rows of the vector engine's buffers.
struct MigrationRow {
  float* instances;  // max_instances x features
  float* context;
  float* mask;       // 2 (max_instances + 1): sources, then destinations
};

// The step's scalars (ServingEnv.step's reward and info).
struct MigrationStepResult : IntervalStepResult {
  bool invalid_action = false;
};

class MigrationMDP {
 public:
  explicit MigrationMDP(MigrationSpec spec);

  // Take over `engine` where Python's reset left it (no live migration in flight), and write the observation.
  void attach(Engine* engine, MigrationEpisode episode, const MigrationRow& row);
  // ServingEnv.step((source, destination)) after its checks (each in [0, max_instances]).
  MigrationStepResult step(std::int64_t source, std::int64_t destination, const MigrationRow& row);
  std::size_t features() const { return observation_.features(); }
  bool attached() const { return engine_ != nullptr; }

 private:
  // MigrationEnv.live_migrations_in_flight: drop the requests no longer on their source or ended;
  // the request ids left (the candidates' exclusions).
  const std::vector<std::int64_t>& in_flight_ids();
  // MigrationEnv._refusal != None for row r from slot `source` to slot `target`.
  bool refused(Req r, std::int32_t source, std::int32_t target) const;
  void fill(const MigrationRow& row);

  MigrationSpec spec_;
  Engine* engine_ = nullptr;
  MigrationEpisode episode_;
  bool over_ = false;
  double next_tick_s_ = 0.0;
  std::size_t seen_ = 0;
  std::vector<std::pair<Req, std::int32_t>> in_flight_;  // (row, source instance), in the order started
  std::vector<std::int64_t> in_flight_ids_;
  std::vector<std::int64_t> candidates_;  // the last fill's migration_candidates, 4 per slot
  std::vector<std::uint8_t> mask_;        // the last fill's mask
  InstanceObservation observation_;
  std::vector<std::int32_t> slots_;  // 0 .. n − 1: slot k holds instance k
};

}  // namespace servegym_core
