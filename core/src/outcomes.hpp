// The outcome log: which request ended when, and why if rejected, in the order the cluster
// records them (Cluster.on_complete / on_reject), with a model cascade's quality of the accepted
// answer (NaN otherwise), and the outcome table that gathers the request rows' fields in that order.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "request_table.hpp"
#include "sim_types.hpp"

namespace servegym_core {

struct OutcomeLog {
  std::vector<Req> rows;
  std::vector<double> finish_s;
  std::vector<std::uint8_t> reasons;  // RejectReason codes
  std::vector<double> quality;

  void add(Req r, double finish, RejectReason reason, double score = std::numeric_limits<double>::quiet_NaN()) {
    rows.push_back(r);
    finish_s.push_back(finish);
    reasons.push_back(static_cast<std::uint8_t>(reason));
    quality.push_back(score);
  }
  std::size_t size() const { return rows.size(); }
};

// The outcomes as columns, in the order of the log: the ended requests' rows gathered, and
// when and why each ended, and their quality.
struct OutcomeTable {
  std::vector<Req> rows;
  RequestTable requests;
  std::vector<double> finish_s;
  std::vector<std::uint8_t> reasons;  // RejectReason codes
  std::vector<double> quality;
};

}  // namespace servegym_core
