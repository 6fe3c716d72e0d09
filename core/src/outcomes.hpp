// The outcome log: which request ended when, and why if rejected, in the order the cluster
// records them (Cluster.on_complete / on_reject), and the outcome table that gathers the
// request rows' fields in that order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim_types.hpp"

namespace servegym_core {

struct OutcomeLog {
  std::vector<Req> rows;
  std::vector<double> finish_s;
  std::vector<std::uint8_t> reasons;  // RejectReason codes

  void add(Req r, double finish, RejectReason reason) {
    rows.push_back(r);
    finish_s.push_back(finish);
    reasons.push_back(static_cast<std::uint8_t>(reason));
  }
  std::size_t size() const { return rows.size(); }
};

// Every RequestOutcome field the engine knows, one column each, in the order of the log.
struct OutcomeTable {
  std::vector<Req> rows;
  std::vector<std::int32_t> instance_id;
  std::vector<std::int64_t> output_tokens;
  std::vector<std::int64_t> reasoning_tokens;
  std::vector<double> first_scheduled_s;
  std::vector<double> first_token_s;
  std::vector<double> first_answer_token_s;
  std::vector<double> reasoning_end_s;
  std::vector<double> finish_s;
  std::vector<double> max_tbt_s;
  std::vector<double> preempted_s;
  std::vector<std::int32_t> num_preemptions;
  std::vector<std::int32_t> num_migrations;
  std::vector<std::vector<std::pair<double, std::int64_t>>> token_curve;  // empty without token curves
  std::vector<std::uint8_t> reasons;
};

}  // namespace servegym_core
