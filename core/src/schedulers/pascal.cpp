#include "schedulers/pascal.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "instance.hpp"

namespace servegym_core {

PascalScheduler::PascalScheduler(std::int64_t quantum_tokens, std::int64_t demotion_kv_tokens)
    : RoundRobinScheduler(quantum_tokens), demotion_kv_tokens_(demotion_kv_tokens) {
  if (demotion_kv_tokens <= 0) {
    throw std::invalid_argument("demotion_kv_tokens must be positive, got " + std::to_string(demotion_kv_tokens));
  }
}

std::int64_t PascalScheduler::iterations_until_change(const RequestTable& requests, Req r) const {
  std::int64_t until = RoundRobinScheduler::iterations_until_change(requests, r);
  if (queue_level(requests, r) == 0) until = std::min(until, demotion_kv_tokens_ - requests.kv_tokens[r] + 1);
  return until;
}

void PascalScheduler::on_boundary(Instance& instance) {
  RequestTable& t = instance.requests;
  for (const Req r : instance.running) {
    if (!t.demoted[r] && t.kv_tokens[r] > demotion_kv_tokens_ && t.decode_phase(r) == Phase::Reasoning) {
      t.demoted[r] = 1;
      on_enqueue(t, r);
    }
  }
  RoundRobinScheduler::on_boundary(instance);
}

void PascalScheduler::on_phase_change(RequestTable& requests, Req r) {
  if (!requests.demoted[r]) on_enqueue(requests, r);
}

}  // namespace servegym_core
