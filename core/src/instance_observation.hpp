// The instance-observation matrix in C++ (envs/observation.py's InstanceFeatures.fill with
// InstanceLoad and ColumnEncoder): one row per observation slot, one column per feature of
// envs.observation.instance_fields, float32 in [-1, 1]. Every value is the Python formula's, in
// the Python order of operations, so the matrix is the numpy path's bit for bit. Used by the
// Routing-v0 kernel (routing_mdp) and, through bind_observation, by every single env on the
// compiled engine. The state it keeps per episode: each instance's static features (given by
// Python) and its service-time EWMA (folded from the engine's outcome log).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine.hpp"

namespace servegym_core {

constexpr double kInfinityStandIn = 1e300;  // envs.schema.INFINITY_STAND_IN

// ColumnEncoder.encode of one value: clipped to ±1e300, then x / (|x| k + c), rounded to float32.
inline float encode_column(double x, double k, double c) {
  if (x > kInfinityStandIn) x = kInfinityStandIn;
  if (x < -kInfinityStandIn) x = -kInfinityStandIn;
  const double denominator = std::fabs(x) * k + c;
  return static_cast<float>(x / denominator);
}

// What InstanceFeatures' constructor fixes.
struct ObservationSpec {
  std::int32_t max_instances = 0;
  std::int32_t num_tiers = 1;
  bool per_request_detail = false;    // InstanceFeatures.per_request_detail (reasoning or several tiers)
  double tpot_target_s = 0.0;         // the scenario's QoE TPOT target; NaN: none
  std::int64_t fresh_quantum_tokens = 500;
  bool prefix_caching = false;        // the cache columns
  bool prefix_match = false;          // the routed request's cached prefix column
  double service_time_ewma_weight = 0.6;
  std::vector<double> headroom_fractions;  // default_headroom_fractions(num_tiers)
  // ColumnEncoder's k and c per instance column: x / (k |x| + c).
  std::vector<double> instance_k, instance_c;
};

class InstanceObservation {
 public:
  static constexpr std::size_t kStaticFeatures = 6;  // role aggregated / prefill / decode, TFLOP/s, GB/s, USD/h

  explicit InstanceObservation(ObservationSpec spec);

  // The instance columns, in order (envs.observation.instance_fields' names).
  static std::vector<std::string> columns(std::int32_t num_tiers, bool prefix_caching, bool prefix_match);

  // A new episode: no static features, no EWMA, no outcome seen.
  void reset();
  // The static features of instances 0 .. n − 1, 6 per instance (instance-major); n only grows.
  void set_static(const std::vector<double>& per_instance);
  // InstanceFeatures.fill: row k of `out` (max_instances x features, zeroed first) describes
  // instance slots[k] (−1: an empty slot); a stopped instance leaves its row empty. `request`:
  // the routed request's row (its cached prefix, with prefix_match), or −1.
  void fill(Engine& engine, const std::int32_t* slots, std::size_t count, Req request, float* out);

  std::size_t features() const { return columns_; }
  const ObservationSpec& spec() const { return spec_; }

  // The last fill's InstanceLoad, one entry per live slot: the slots and instance ids, the
  // table rows as gathered (live x kArrayWidth), KV blocks in use, head-of-line demand, the
  // per-tier requests (live x num_tiers, the last tier counting higher ones) and whether a
  // request of a tier beyond num_tiers was there.
  const std::vector<std::int64_t>& rows() const { return rows_; }
  const std::vector<std::int64_t>& ids() const { return ids_; }
  const std::vector<std::int64_t>& table() const { return snapshot_; }
  const std::vector<std::int64_t>& used_blocks() const { return used_; }
  const std::vector<std::int64_t>& head_of_line_blocks() const { return hol_; }
  const std::vector<std::int64_t>& tier_requests() const { return tiers_; }
  bool beyond_tiers() const { return beyond_tiers_; }
  const std::vector<double>& service_ewma_s() const { return service_ewma_s_; }
  // InstanceLoad.freeness_full of the last fill's load under `headroom_fractions` (at most
  // num_tiers): F_full per live slot, −∞ draining, +∞ with B = 0.
  std::vector<double> freeness_full(const std::vector<double>& headroom_fractions) const;

 private:
  void update_service_time(const Engine& engine);

  ObservationSpec spec_;
  std::size_t columns_;
  bool any_headroom_ = false;
  std::vector<double> static_;  // 6 per instance
  std::size_t service_seen_ = 0;  // outcomes folded into the service-time EWMAs
  std::vector<double> service_ewma_s_;
  std::vector<std::uint8_t> service_measured_;
  // The last fill's load (see the accessors) and scratch.
  std::vector<std::int64_t> rows_, ids_, snapshot_, used_, hol_, tiers_, requests_, batch_;
  bool beyond_tiers_ = false;
  std::vector<double> raw_, totals_;
};

}  // namespace servegym_core
