// Strict tier priority, FCFS within a tier: the Llumlet queue of Llumnix-K §3
// (simulator/schedulers/priority.py).
#pragma once

#include "schedulers/base.hpp"

namespace servegym_core {

class PriorityScheduler : public LocalScheduler {
 public:
  Key priority_key(const RequestTable& requests, Req r) const override {
    return Key{requests.tier[r], requests.queue_order[r]};
  }
};

}  // namespace servegym_core
