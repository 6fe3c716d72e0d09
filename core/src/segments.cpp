#include "segments.hpp"

#include <stdexcept>
#include <string>

namespace servegym_core {

SegmentPlanner::SegmentPlanner(LatencyEvaluator& latency, const KVBlocks& kv, RequestTable& requests,
                               const LocalScheduler& scheduler, std::int64_t max_iterations)
    : latency_(latency), kv_(kv), requests_(requests), scheduler_(scheduler), max_iterations_(max_iterations) {}

double SegmentPlanner::mixed_iteration_s(const std::vector<Prefill>& prefills, const std::vector<Req>& decode) {
  RequestTable& t = requests_;
  std::int64_t prefill_tokens = 0;
  double pairs = 0.0;
  for (const Prefill& chunk : prefills) {
    prefill_tokens += chunk.tokens;
    // tokens * (kv_tokens + (tokens + 1) / 2), each int converted once as Python converts it
    pairs += static_cast<double>(chunk.tokens) *
             (static_cast<double>(t.kv_tokens[chunk.req]) + static_cast<double>(chunk.tokens + 1) / 2.0);
    if (t.phase[chunk.req] == Phase::Waiting) t.phase[chunk.req] = Phase::Prefill;
  }
  std::int64_t context = 0;
  for (const Req r : decode) context += t.kv_tokens[r] + 1;
  return latency_.iteration_time_s(prefill_tokens, pairs, static_cast<std::int64_t>(decode.size()), context);
}

void SegmentPlanner::decode_ends(double now, const std::vector<Req>& decode, double extra_s, bool single_iteration,
                                 std::vector<double>& ends) {
  const RequestTable& t = requests_;
  const auto batch = static_cast<std::int64_t>(decode.size());
  std::int64_t horizon = single_iteration ? 1 : max_iterations_;
  std::int64_t context = 0;
  for (const Req r : decode) {
    context += t.kv_tokens[r];
    const std::int64_t generated = t.generated_tokens[r];
    const std::int64_t reasoning = t.reasoning_tokens[r];
    std::int64_t left = t.output_tokens[r] - generated;
    if (generated < reasoning && reasoning - generated < left) left = reasoning - generated;
    if (left < horizon) horizon = left;
  }
  if (scheduler_.priority_may_change() && horizon > 1) {
    for (const Req r : decode) {
      const std::int64_t change = scheduler_.iterations_until_change(t, r);
      if (change < horizon) horizon = change;
    }
  }
  if (horizon < 1) throw std::logic_error("decode_ends: a segment of " + std::to_string(horizon) + " iterations");
  // Cheap bound first: each sequence crosses at most ceil((horizon-1)/block_size)+1 blocks.
  if (horizon > 1 && batch * (ceil_div(horizon - 1, kv_.block_size) + 1) > kv_.free_blocks()) {
    horizon = memory_horizon(decode, horizon);
  }
  const auto [base_s, per_token_s] = latency_.decode_coefficients(batch);
  ends.clear();
  double end_s = now;
  for (std::int64_t j = 1; j <= horizon; ++j) {
    const double dt = static_cast<double>(context + batch * j) * per_token_s + base_s;
    end_s += j == 1 ? dt + extra_s : dt;
    ends.push_back(end_s);
  }
}

std::int64_t SegmentPlanner::memory_horizon(const std::vector<Req>& decode, std::int64_t horizon) const {
  const RequestTable& t = requests_;
  const std::int64_t block_size = kv_.block_size;
  const std::int64_t free = kv_.free_blocks();
  // Blocks k iterations add beyond those allocated for the first one.
  const auto growth = [&](std::int64_t k) {
    std::int64_t total = 0;
    for (const Req r : decode) total += ceil_div(t.kv_tokens[r] + k, block_size) - ceil_div(t.kv_tokens[r] + 1, block_size);
    return total;
  };
  if (growth(horizon) <= free) return horizon;
  std::int64_t low = 1;  // 1 iteration always fits (its blocks are allocated)
  std::int64_t high = horizon;
  while (low < high) {
    const std::int64_t mid = (low + high + 1) / 2;
    if (growth(mid) <= free) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

}  // namespace servegym_core
