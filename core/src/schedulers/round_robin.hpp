// Round-robin with a token quantum (simulator/schedulers/round_robin.py, PASCAL §II and §V-A's
// "RR"): a request that used its quantum of decode tokens goes to the back of the circular
// order; each batch is the longest prefix of that order that fits in KV memory.
#pragma once

#include <cstdint>

#include "schedulers/base.hpp"

namespace servegym_core {

class RoundRobinScheduler : public LocalScheduler {
 public:
  // Throws std::invalid_argument unless quantum_tokens > 0.
  explicit RoundRobinScheduler(std::int64_t quantum_tokens);

  void on_enqueue(RequestTable& requests, Req r) override;
  bool priority_may_change() const override { return true; }
  std::int64_t iterations_until_change(const RequestTable& requests, Req r) const override;

 protected:
  // Requests whose quantum expired go to the back, in priority order.
  void on_boundary(Instance& instance) override;
  // The batch is the longest prefix of the priority order (running, swapped and waiting
  // together) that fits in KV memory and the batch size; running requests outside it are
  // preempted, swapped ones inside it swapped back in, waiting ones admitted.
  void schedule(Instance& instance, double now, std::vector<Prefill>& prefills) override;

  const std::int64_t quantum_tokens_;
};

}  // namespace servegym_core
