// Routing-v0's MDP in C++ (envs/routing.py on envs/base.py, for the native vector env): apply an
// action to the pending decision of one Engine (dispatch or place_answering, with the masked-action
// fallback and penalty), advance to the next decision, and fill preallocated rows with the
// observation (envs/observation.py's instance matrix, routing_context, the action mask), the reward
// (envs/rewards.py's "slo") and the step's info numbers. Every value is the Python formula's, in the
// Python order of operations, so the float32 observations and the rewards are the same bit for bit.
// Python (envs/vector.py) checks that an env's configuration is one this kernel covers, and resets
// the episodes (they draw from numpy generators); the kernel runs no Python.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine.hpp"
#include "episode_numbers.hpp"
#include "instance_observation.hpp"

namespace servegym_core {

// Reward functions the kernel computes (envs.rewards.REWARDS' names): slo, slo_dense, slo_balance,
// latency_dense, latency_balance.
enum class RoutingReward : std::int32_t { Slo = 0, SloDense = 1, SloBalance = 2, LatencyDense = 3, LatencyBalance = 4 };

// What is fixed for every episode of one env configuration, given by envs/vector.py from the env:
// the instance matrix's (ObservationSpec), then the context's, the reward's and the penalty.
struct RoutingSpec : ObservationSpec {
  // ColumnEncoder's k and c per context position: x / (k |x| + c).
  std::vector<double> context_k, context_c;
  // Positions of routing_context's fields in the context vector (one-hot groups: every position).
  std::int32_t ctx_is_arrival = 0, ctx_is_phase_change = 0, ctx_prompt_tokens = 0, ctx_generated_tokens = 0,
               ctx_recent_qps = 0, ctx_cost_rate = 0, ctx_arrived = 0;
  std::vector<std::int32_t> ctx_tier, ctx_source_slot;
  double recent_window_s = 10.0;
  std::int32_t reward = 0;               // RoutingReward
  std::vector<double> tier_weights;      // envs.rewards.tier_weights
  double load_count_scale = 16.0;        // LoadBalanceShaping.COUNT_SCALE (the *_balance rewards)
  double e2e_scale_s = 10.0;             // DenseLatencyReward.E2E_SCALE_S (latency_dense, latency_balance)
  double invalid_action_penalty = 1.0;
};

// One episode's numbers that live in Python, given at each reset (after ServingEnv.reset): the
// common ones (EpisodeNumbers), then the reward's state and the pending decision.
struct RoutingEpisode : EpisodeNumbers {
  double potential = 0.0;            // the *_balance rewards: LoadBalanceShaping's potential at the reset
  // latency_dense's state at the reset (DenseLatencyReward): the clock, arrivals and ends it saw.
  double latency_last_s = 0.0;
  std::int64_t latency_arrived = 0;
  std::int64_t latency_ended = 0;
  // The pending decision (Decision kind 1 route / 2 phase, its request row, the phase's instance).
  std::int32_t decision_kind = 0;
  Req decision_row = -1;
  std::int32_t decision_instance = -1;
};

// Where one env's step writes: rows of the vector engine's buffers.
struct RoutingRow {
  float* instances;  // max_instances x features
  float* context;
  float* mask;            // the observation's action_mask (1.0 valid)
  std::uint8_t* valid;    // the same as booleans (action_masks())
};

// The step's scalars (ServingEnv.step's reward and info).
struct RoutingStepResult {
  double reward = 0.0;
  bool done = false;
  bool invalid_action = false;
  std::int64_t finished = 0;
  std::int64_t slo_met = 0;
  double time_s = 0.0;
  double cost_usd = 0.0;
};

class RoutingMDP {
 public:
  explicit RoutingMDP(RoutingSpec spec);

  // Take over `engine` at the decision Python's reset left it at, and write the observation.
  void attach(Engine* engine, RoutingEpisode episode, const RoutingRow& row);
  // ServingEnv.step(action) after its checks (action in [0, max_instances), not strict).
  RoutingStepResult step(std::int64_t action, const RoutingRow& row);
  std::size_t features() const { return columns_; }
  bool attached() const { return engine_ != nullptr; }

 private:
  void fill(const RoutingRow& row);
  void fill_instances(float* out);
  void fill_context(float* out) const;
  void fill_mask(const RoutingRow& row);
  // envs.rewards.SLOMissReward.__call__ (slo_dense) and LoadBalanceShaping.potential.
  double slo_misses();
  double dense_latency();  // envs.rewards.DenseLatencyReward.__call__
  double load_potential() const;

  RoutingSpec spec_;
  std::size_t columns_;
  Engine* engine_ = nullptr;
  RoutingEpisode episode_;
  Decision decision_;
  bool over_ = false;
  std::size_t seen_ = 0;  // outcomes the rewards have seen
  InstanceObservation observation_;
  std::vector<std::int32_t> slots_;  // 0 .. n − 1: slot k holds instance k
  // slo_dense's state (SLOMissReward): arrivals admitted, requests ended and charged (by row), and
  // the TTFT and TPOT deadlines due as min-heaps of (deadline, arrival order, row).
  struct Due {
    double deadline_s;
    std::int64_t order;
    Req row;
  };
  std::size_t dense_seen_ = 0;
  std::vector<std::uint8_t> ended_, charged_;
  std::vector<Due> ttft_due_, tpot_due_;
  double potential_ = 0.0;
  double latency_last_s_ = 0.0;
  std::size_t latency_arrived_ = 0, latency_ended_ = 0;
};

}  // namespace servegym_core
