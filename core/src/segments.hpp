// Coalesced decode segments (simulator/segments.py): when each iteration of an instance's next
// segment ends. A decode batch is fixed between events that can change it, so all of its
// iterations are planned at once, cut where a sequence ends its output or its reasoning, where
// its priority may change, or where KV memory runs out; a planner capped at one iteration is coalesce=False.
#pragma once

#include <cstdint>
#include <vector>

#include "kv_blocks.hpp"
#include "latency.hpp"
#include "request_table.hpp"
#include "schedulers/base.hpp"
#include "sim_types.hpp"

namespace servegym_core {

class SegmentPlanner {
 public:
  SegmentPlanner(LatencyEvaluator& latency, const KVBlocks& kv, RequestTable& requests, const LocalScheduler& scheduler,
                 std::int64_t max_iterations);

  // Latency of one iteration with prefill chunks (their requests enter Prefill).
  double mixed_iteration_s(const std::vector<Prefill>& prefills, const std::vector<Req>& decode);
  // End times of the decode iterations of `decode` from `now` until the batch could change,
  // the first lengthened by extra_s (swap traffic); one iteration after a preemption or
  // swap-in (single_iteration). ends[j] = now + dt[0] + ... + dt[j], summed left to right as
  // one iteration at a time (and numpy's cumsum) would.
  void decode_ends(double now, const std::vector<Req>& decode, double extra_s, bool single_iteration,
                   std::vector<double>& ends);

 private:
  // Largest k <= horizon such that k decode iterations fit in the free KV blocks.
  std::int64_t memory_horizon(const std::vector<Req>& decode, std::int64_t horizon) const;

  LatencyEvaluator& latency_;
  const KVBlocks& kv_;
  RequestTable& requests_;
  const LocalScheduler& scheduler_;
  std::int64_t max_iterations_;
};

}  // namespace servegym_core
