// The outcome log: which request ended when, and why if rejected, in the order the cluster
// records them (Cluster.on_complete / on_reject). The request's own fields stay in its row.
#pragma once

#include <cstdint>
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

}  // namespace servegym_core
