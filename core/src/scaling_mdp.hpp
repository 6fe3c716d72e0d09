// Scaling-v0's MDP in C++ (envs/scaling.py on envs/base.py, for the native vector env): check the
// per-kind remove / hold / add choices against the mask and the joint limits (ScalingEnv.is_valid),
// fall back to holding with the penalty, drain or deploy units (Cluster.drain, Cluster.deploy:
// GPUs held and paid from now, serving after the start-up time), route arrivals over the units
// (the engine's "units" router; in place on an idle combo member), run the engine one scaling window, release the GPUs of the
// instances that stopped, and fill preallocated rows with the observation (envs/observation.py's
// instance matrix over the env's slots, scaling_context, the mask), the reward (envs/rewards.py's
// "cost", "slo" or "latency") and the step's info numbers. Every value is the Python formula's,
// in the Python order of operations, so the float32 observations and the rewards are the same bit
// for bit. It logs every deployment and release, which Python replays on its cluster at the
// episode's end (envs/scaling_vector.py).
#pragma once

#include <cstdint>
#include <vector>

#include "engine.hpp"
#include "episode_numbers.hpp"
#include "instance_observation.hpp"
#include "latency.hpp"

namespace servegym_core {

// One InstanceConfig a unit kind deploys, as the engine takes it (CompiledCluster._add_instance).
struct ScalingConfig {
  ScalingConfig(InstanceSettings settings, LatencyEvaluator latency, std::int32_t gpu_type, std::int64_t num_gpus,
                double usd_per_gpu_s, double load_s, std::vector<double> static_features);

  InstanceSettings settings;  // its model_index and gpu_index are each episode's (ScalingEpisode)
  LatencyEvaluator latency;
  std::int32_t gpu_type;      // index into ScalingSpec::gpu_inventory
  std::int64_t num_gpus;
  double usd_per_gpu_s;
  double load_s;              // weight-load time (hardware.models.weight_load_time_s)
  std::vector<double> static_features;  // InstanceFeatures' 6: role flags, TFLOP/s, GB/s, USD/h
};

// The rewards Scaling-v0's kernel computes: IntervalReward's, then CostReward.
enum class ScalingReward : std::int32_t { Slo = 0, Latency = 1, Cost = 2 };

// What is fixed for every episode of one env configuration, given by envs/scaling_vector.py.
struct ScalingSpec : ObservationSpec {
  // ColumnEncoder's k and c per context position: x / (k |x| + c).
  std::vector<double> context_k, context_c;
  // Positions of scaling_context's cluster fields, then of its per-kind fields (kinds each).
  std::int32_t ctx_arrivals_per_s = 0, ctx_waiting = 0, ctx_running = 0, ctx_swapped = 0, ctx_cost_rate = 0,
               ctx_slo_attainment = 0, ctx_finished = 0, ctx_arrived = 0;
  std::vector<std::int32_t> ctx_serving_units, ctx_starting_units, ctx_draining_units;
  double window_s = 1.0;   // ScalingEnv.scaling_window_s
  bool one_unit = false;   // action="one_unit": Discrete(1 + 2 kinds); else MultiDiscrete([3] * kinds)
  // Unit kind k deploys configs kind_configs[kind_offsets[k] .. kind_offsets[k + 1]), entry first.
  std::vector<std::int32_t> kind_offsets, kind_configs;
  std::vector<double> kind_weights;  // ScalingUnit.routing_weight
  double provisioning_s = 0.0;       // Scenario.provisioning_s: an instance serves load_s + this after its deploy
  // Units are GPU combos (envs.combo_scenario.ComboScalingScenario): each deployed unit is also
  // registered with the engine (Engine::add_combo, ComboCluster.deploy_combo), its decode
  // instances taken in turn (basic_rr) or the least loaded.
  bool combos = false;
  bool combo_basic_rr = false;
  std::vector<ScalingConfig> configs;
  std::vector<std::int64_t> gpu_inventory;  // per GPU type
  double invalid_action_penalty = 0.0;
  std::int32_t reward = 0;              // ScalingReward
  std::vector<double> tier_weights;     // envs.rewards.tier_weights
  double e2e_scale_s = 10.0;            // LatencyReward.E2E_SCALE_S
  double usd_weight = 0.0;              // CostReward.usd_weight
  double waiting_potential = 0.0;       // CostReward.waiting_potential

  std::size_t kinds() const { return kind_weights.size(); }
};

// One episode's numbers that live in Python, given at each reset (after ServingEnv.reset).
struct ScalingEpisode : EpisodeNumbers {
  std::vector<std::int32_t> held_ids;          // Cluster._held's keys, in its order
  std::vector<std::int32_t> held_gpu_types;    // their GPU types
  std::vector<std::int64_t> gpus_in_use;       // per GPU type
  std::vector<std::int32_t> config_models, config_gpus;  // each config's model_index and gpu_index here
  // ScalingEnv._deployed: unit u is of kind unit_kinds[u], instances unit_members[unit_offsets[u] ..).
  std::vector<std::int32_t> unit_kinds, unit_offsets, unit_members;
  std::vector<std::int32_t> slots;             // ScalingEnv._slots (−1: None), max_instances
  double until_s = 0.0;                        // ScalingEnv._until_s
  std::int64_t window_first_outcome = 0;       // ScalingEnv._window_first_outcome
  std::int64_t seen = 0;                       // ServingEnv._seen
  double last_cost_usd = 0.0, potential = 0.0; // CostReward's state
};

// Where one env's step writes: rows of the vector engine's buffers.
struct ScalingRow {
  float* instances;  // max_instances x features
  float* context;
  float* mask;
};

// The step's scalars (ServingEnv.step's reward and info).
struct ScalingStepResult : IntervalStepResult {
  bool invalid_action = false;
};

// A deployment (config ≥ 0: the instance `instance_id` of that config, GPUs held from time_s) or a
// release (config −1: instance_id stopped at time_s), in the order the kernel made them.
struct ScalingEvent {
  std::int32_t config;
  std::int32_t instance_id;
  double time_s;
};

class ScalingMDP {
 public:
  explicit ScalingMDP(ScalingSpec spec);

  // Take over `engine` where Python's reset left it, and write the observation.
  void attach(Engine* engine, ScalingEpisode episode, const ScalingRow& row);
  // ServingEnv.step(action) after its checks: kinds choices (per_kind) or one index (one_unit).
  ScalingStepResult step(const std::int64_t* action, const ScalingRow& row);
  std::size_t features() const { return observation_.features(); }
  std::size_t mask_size() const { return spec_.one_unit ? 1 + 2 * spec_.kinds() : 3 * spec_.kinds(); }
  std::size_t action_size() const { return spec_.one_unit ? 1 : spec_.kinds(); }
  bool attached() const { return engine_ != nullptr; }

  // What Python's env and cluster need at the episode's end (envs/scaling_vector.py).
  const std::vector<ScalingEvent>& events() const { return events_; }
  const std::vector<std::int32_t>& slots() const { return slots_; }
  const std::vector<std::int32_t>& unit_kinds() const { return unit_kinds_; }
  std::vector<std::int32_t> unit_offsets() const;
  std::vector<std::int32_t> unit_members() const;
  double until_s() const { return until_s_; }
  std::int64_t window_first_outcome() const { return static_cast<std::int64_t>(window_first_outcome_); }

 private:
  struct Held {
    bool open;
    double since_s;
    std::int64_t gpus;
    double usd_per_gpu_s;
    std::int32_t gpu_type;
  };

  // ScalingEnv.unit_lifecycle of every deployed unit, and the counts per kind (serving, starting, draining).
  void unit_states();
  std::size_t free_slots() const;
  // ScalingEnv._fits: one unit of each kind with adds[k] set fits the free slots and GPUs.
  bool fits(const std::vector<std::uint8_t>& adds, std::size_t free) const;
  // ScalingEnv.per_kind_choices.
  void choices(const std::int64_t* action);
  bool is_valid(const std::int64_t* action);
  void apply();
  void drain(std::int32_t instance_id);  // Cluster.drain of a serving or starting instance
  void deploy_unit(std::size_t kind);    // Scenario.deploy_unit, and the slots
  void release(std::int32_t instance_id, double stopped_s);  // Cluster._release
  void push_units();
  double cost_usd() const;
  double cost_rate_usd_per_s() const;
  double potential() const;  // CostReward.potential
  void fill(const ScalingRow& row);

  ScalingSpec spec_;
  Engine* engine_ = nullptr;
  EpisodeNumbers numbers_;
  bool over_ = false;
  std::vector<std::int32_t> config_models_, config_gpus_;
  std::vector<Held> held_;                  // by instance id
  std::vector<std::int64_t> gpus_in_use_;
  std::vector<std::int32_t> unit_kinds_;    // ScalingEnv._deployed, in order
  std::vector<std::vector<std::int32_t>> unit_members_;
  std::vector<std::int32_t> slots_;
  std::vector<double> static_;              // 6 per instance
  double until_s_ = 0.0;
  std::size_t window_first_outcome_ = 0, seen_ = 0;
  double last_cost_usd_ = 0.0, potential_ = 0.0;
  std::vector<ScalingEvent> events_;
  // The last fill's unit states and mask, and one step's choices.
  std::vector<std::uint8_t> unit_codes_;    // Lifecycle per deployed unit
  std::vector<std::int64_t> counts_;        // kinds x 3
  std::vector<std::uint8_t> mask_;
  std::vector<std::int64_t> choices_;
  InstanceObservation observation_;
};

}  // namespace servegym_core
