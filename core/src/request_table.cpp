#include "request_table.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace servegym_core {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

Req RequestTable::add(const RequestRow& row) {
  const auto r = static_cast<Req>(request_id.size());
  request_id.push_back(row.request_id);
  arrival_s.push_back(row.arrival_s);
  prompt_tokens.push_back(row.prompt_tokens);
  output_tokens.push_back(row.output_tokens);
  reasoning_tokens.push_back(row.reasoning_tokens);
  tier.push_back(row.tier);
  model_index.push_back(row.model_index);
  kv_tokens.push_back(0);
  generated_tokens.push_back(0);
  blocks.push_back(0);
  queue_order.push_back(0);
  quantum_start_tokens.push_back(0);
  demoted.push_back(0);
  in_flight.push_back(0);
  pd_handoff.push_back(0);
  gate_since_s.push_back(kNaN);
  residency.push_back(Residency::Queued);
  phase.push_back(Phase::Waiting);
  instance_id.push_back(-1);
  num_preemptions.push_back(0);
  num_migrations.push_back(0);
  first_scheduled_s.push_back(kNaN);
  first_token_s.push_back(kNaN);
  first_answer_token_s.push_back(kNaN);
  reasoning_end_s.push_back(kNaN);
  last_token_s.push_back(kNaN);
  max_tbt_s.push_back(0.0);
  preempted_since_s.push_back(kNaN);
  preempted_s.push_back(0.0);
  key_begin.push_back(0);
  key_count.push_back(-1);
  block_tokens.push_back(0);
  cached_count.push_back(0);
  if (record_token_curves_) token_curve.emplace_back();
  return r;
}

void RequestTable::reserve(std::size_t n) {
  for_each_column([n](auto& column) { column.reserve(n); });
  if (record_token_curves_) token_curve.reserve(n);
}

RequestTable RequestTable::gather(const std::vector<Req>& rows) const {
  RequestTable out(record_token_curves_);
  out.reserve(rows.size());
  for (const Req r : rows) {
    out.for_each_column_of(*this, [r](auto& to, const auto& from) { to.push_back(from[static_cast<std::size_t>(r)]); });
    if (record_token_curves_) out.token_curve.push_back(token_curve[static_cast<std::size_t>(r)]);
  }
  return out;
}

void RequestTable::set_block_keys(Req r, const std::int64_t* keys, std::int32_t count, std::int64_t tokens) {
  if (count < 0 || tokens <= 0) {
    throw std::invalid_argument("request " + std::to_string(request_id[r]) + ": " + std::to_string(count) + " keys of " +
                                std::to_string(tokens) + "-token blocks");
  }
  key_begin[r] = static_cast<std::int64_t>(block_keys.size());
  key_count[r] = count;
  block_tokens[r] = tokens;
  block_keys.insert(block_keys.end(), keys, keys + count);
}

void RequestTable::on_tokens(Req r, double first_time_s, double last_time_s, std::int64_t count, double last_gap_s) {
  const std::int64_t before = generated_tokens[r];
  if (before == 0) {
    first_token_s[r] = first_time_s;
  } else {
    const double gap = first_time_s - last_token_s[r];
    if (gap > max_tbt_s[r]) max_tbt_s[r] = gap;  // a NaN gap (no token yet) is not greater
  }
  if (count > 1 && last_gap_s > max_tbt_s[r]) max_tbt_s[r] = last_gap_s;
  const std::int64_t after = before + count;
  const std::int64_t reasoning = reasoning_tokens[r];
  if (after == reasoning) reasoning_end_s[r] = last_time_s;
  if (reasoning && before <= reasoning && reasoning < after) {
    if (reasoning - before != 0) {
      throw std::runtime_error("request " + std::to_string(request_id[r]) +
                               ": reasoning ended inside a coalesced run");
    }
    first_answer_token_s[r] = first_time_s;
  } else if (!reasoning && before == 0) {
    first_answer_token_s[r] = first_time_s;
  }
  generated_tokens[r] = after;
  last_token_s[r] = last_time_s;
  if (record_token_curves_) {
    auto& curve = token_curve[r];
    curve.emplace_back(first_time_s, before + 1);
    if (count > 1) curve.emplace_back(last_time_s, after);
  }
}

}  // namespace servegym_core
