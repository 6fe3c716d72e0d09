// PASCAL's intra-instance scheduler (simulator/schedulers/pascal.py, PASCAL §IV-C): reasoning
// requests in a high-priority queue, answering ones in a low-priority queue, round-robin with
// a token quantum inside each; a reasoning request whose KV exceeds demotion_kv_tokens is
// demoted to the low-priority queue.
#pragma once

#include <cstdint>

#include "schedulers/round_robin.hpp"

namespace servegym_core {

class PascalScheduler : public RoundRobinScheduler {
 public:
  // Throws std::invalid_argument unless both are > 0.
  PascalScheduler(std::int64_t quantum_tokens, std::int64_t demotion_kv_tokens);

  // 0: high-priority (reasoning), 1: low-priority (answering or demoted).
  static std::int64_t queue_level(const RequestTable& requests, Req r) {
    return requests.demoted[r] || requests.generated_tokens[r] >= requests.reasoning_tokens[r] ? 1 : 0;
  }
  Key priority_key(const RequestTable& requests, Req r) const override {
    return Key{queue_level(requests, r), requests.queue_order[r]};
  }
  std::int64_t iterations_until_change(const RequestTable& requests, Req r) const override;
  void on_phase_change(RequestTable& requests, Req r) override;

 protected:
  void on_boundary(Instance& instance) override;

 private:
  const std::int64_t demotion_kv_tokens_;
};

}  // namespace servegym_core
