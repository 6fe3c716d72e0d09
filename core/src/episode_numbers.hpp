// What an env kernel of the native vector env needs of one episode that lives in Python (the
// hardware features, the workload's arrival times and SLO targets, the GPUs held), given by
// envs/native_pool.py at each reset, and the formulas every kernel computes from them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine.hpp"

namespace servegym_core {

// The interval rewards Tier-v0's and Migration-v0's kernels compute (envs.rewards.REWARDS' names): slo, latency.
enum class IntervalReward : std::int32_t { Slo = 0, Latency = 1 };

// What one interval step of Tier-v0's or Migration-v0's kernel reports: ServingEnv.step's reward and
// the step info's counters.
struct IntervalStepResult {
  double reward = 0.0;
  bool done = false;
  std::int64_t finished = 0;
  std::int64_t slo_met = 0;
  double time_s = 0.0;
  double cost_usd = 0.0;
};

// envs.rewards.tier_weights' entry for `tier`; std::out_of_range for a tier without one.
double tier_weight(const std::vector<double>& tier_weights, std::int64_t tier);

struct EpisodeNumbers {
  std::vector<double> static_features;  // per instance: role aggregated / prefill / decode, TFLOP/s, GB/s, USD/h
  std::vector<double> arrival_s;        // the submitted requests' arrival times, sorted
  // Each request row's SLO targets (NaN: none): TTFT, TTFAT, E2E, TBT (as TPOT).
  std::vector<double> slo_ttft_s, slo_ttfat_s, slo_e2e_s, slo_tbt_s;
  // The GPUs held (Cluster._held, in its order): since when, how many, USD per GPU-second.
  std::vector<double> held_since_s;
  std::vector<std::int64_t> held_gpus;
  std::vector<double> held_usd_per_gpu_s;
  double cost_closed_usd = 0.0;
  double cost_rate_usd_per_s = 0.0;  // Cluster.cost_rate_usd_per_s()
  std::int64_t submitted = 0;        // requests submitted (Cluster.pending_requests + outcomes); interval kernels

  // std::invalid_argument unless `engine` keeps instance arrays, has at most `max_instances`
  // instances, and the columns fit it (one SLO value per request row, six static features per
  // instance, the held columns of one length).
  void check(const Engine* engine, std::int32_t max_instances) const;
  // simulator.metrics.slo.meets_slo with tbt_slo="tpot", on outcome `o` of the engine's log.
  bool meets_slo(const Engine& engine, std::size_t o) const;
  // The step that ends now, from the engine's outcomes after `seen` (which moves to the log's end):
  // SLOReward's Σ w_tier · ±1 or LatencyReward's −Σ (E2E / scale if completed else 1) over them (+0
  // when there are none), how many finished and completed within their SLO, the clock, the cost,
  // and whether every submitted request has ended.
  IntervalStepResult close_interval(const Engine& engine, std::size_t& seen, IntervalReward reward,
                                    const std::vector<double>& tier_weights, double e2e_scale_s) const;
  // Cluster.cost_usd at `now_s`: closed + Σ (now − since) · GPUs · USD per GPU-second, in the held order.
  double cost_usd(double now_s) const;
  // ServingEnv.recent_arrivals: of the first `arrived` requests, those after now − window.
  std::size_t recent_arrivals(std::size_t arrived, double now_s, double window_s) const;
};

}  // namespace servegym_core
