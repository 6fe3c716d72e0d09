// Tier-v0's MDP in C++ (envs/tier.py on envs/base.py, for the native vector env): set the
// per-tier headroom budgets of K-tier Llumnix dispatch from the action's levels, run the engine
// one control interval, and fill preallocated rows with the observation (envs/observation.py's
// instance matrix, tier_context), the reward (envs/rewards.py's "slo" or "latency") and the
// step's info numbers. Every value is the Python formula's, in the Python order of operations,
// so the float32 observations and the rewards are the same bit for bit. Python (envs/tier_vector.py)
// checks that an env's configuration is one this kernel covers and resets the episodes.
#pragma once

#include <cstdint>
#include <vector>

#include "engine.hpp"
#include "episode_numbers.hpp"
#include "instance_observation.hpp"

namespace servegym_core {

// What is fixed for every episode of one env configuration, given by envs/tier_vector.py.
struct TierSpec : ObservationSpec {
  // ColumnEncoder's k and c per context position: x / (k |x| + c).
  std::vector<double> context_k, context_c;
  // Positions of tier_context's per-tier fields (num_tiers each), then of the cluster's.
  std::vector<std::int32_t> ctx_headroom_fraction, ctx_arrivals_per_s, ctx_finished, ctx_slo_attainment,
      ctx_mean_ttft_s;
  std::int32_t ctx_recent_qps = 0, ctx_arrived = 0;
  double recent_window_s = 10.0;
  double control_interval_s = 1.0;      // Scenario.control_interval_s
  std::int32_t headroom_levels = 5;     // HEADROOM_LEVELS: level l sets l / (L − 1) · cap
  double headroom_cap_fraction = 0.4;   // HEADROOM_CAP_FRACTION
  std::int32_t reward = 0;              // IntervalReward
  std::vector<double> tier_weights;     // envs.rewards.tier_weights
  double e2e_scale_s = 10.0;            // LatencyReward.E2E_SCALE_S
};

// One episode's numbers that live in Python, given at each reset (after ServingEnv.reset).
struct TierEpisode : EpisodeNumbers {
  std::vector<double> headroom_fractions;  // in force (TierEnv.headroom_fractions)
  // TierEnv._interval_stats of the reset's interval, tier-major: arrivals, finished, SLO met,
  // completed, Σ TTFT of the completed.
  std::vector<double> interval_stats;
  double next_control_s = 0.0;         // TierEnv._next_control_s
  std::int64_t arrived_before = 0;     // TierEnv._arrived_before
  std::int64_t outcomes_before = 0;    // TierEnv._outcomes_before
  std::int64_t seen = 0;               // ServingEnv._seen: outcomes the reward has seen
};

// Where one env's step writes: rows of the vector engine's buffers.
struct TierRow {
  float* instances;  // max_instances x features
  float* context;
  double* headroom_fractions;  // num_tiers: the budgets in force (the step info's)
};

// The step's scalars (ServingEnv.step's reward and info).
using TierStepResult = IntervalStepResult;

class TierMDP {
 public:
  explicit TierMDP(TierSpec spec);

  // Take over `engine` where Python's reset left it, and write the observation.
  void attach(Engine* engine, TierEpisode episode, const TierRow& row);
  // ServingEnv.step(levels) after its checks (num_tiers levels, each in [0, headroom_levels)).
  TierStepResult step(const std::int64_t* levels, const TierRow& row);
  std::size_t features() const { return observation_.features(); }
  bool attached() const { return engine_ != nullptr; }

 private:
  void record_interval();  // TierEnv._record_interval
  void fill(const TierRow& row);

  TierSpec spec_;
  Engine* engine_ = nullptr;
  TierEpisode episode_;
  bool over_ = false;
  double next_control_s_ = 0.0;
  std::size_t arrived_before_ = 0, outcomes_before_ = 0, seen_ = 0;
  std::vector<double> fractions_, stats_;
  InstanceObservation observation_;
  std::vector<std::int32_t> slots_;  // 0 .. n − 1: slot k holds instance k
};

}  // namespace servegym_core
