#include "schedulers/sarathi.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "admission.hpp"
#include "instance.hpp"

namespace servegym_core {

SarathiScheduler::SarathiScheduler(std::int64_t chunk_tokens) {
  if (chunk_tokens <= 0) throw std::invalid_argument("chunk_tokens must be positive, got " + std::to_string(chunk_tokens));
  chunked_prefill_tokens = chunk_tokens;
}

void SarathiScheduler::schedule(Instance& instance, double now, std::vector<Prefill>& prefills) {
  const RequestTable& t = instance.requests;
  reserve_decode_slots(instance);
  swap_in_in_order(instance, now);
  const std::vector<Req>& running = instance.running;
  std::int64_t budget = *chunked_prefill_tokens;
  std::vector<Req> prefilling;
  for (const Req r : running) {
    if (t.decodes_here(r)) {
      --budget;  // one token per decode (Sarathi's _decoding)
    } else {
      prefilling.push_back(r);
    }
  }
  std::stable_sort(prefilling.begin(), prefilling.end(),
                   [this, &t](Req x, Req y) { return priority_key(t, x) < priority_key(t, y); });
  for (const Req r : prefilling) {
    if (budget <= 0) break;
    const std::int64_t tokens = std::min(t.remaining_prefill_tokens(r), budget);
    prefills.push_back(Prefill{r, tokens});
    budget -= tokens;
  }
  if (instance.swapped.empty() && budget > 0) {
    order_waiting(instance);
    std::vector<Req>& waiting = instance.waiting;
    const auto max_batch_size = static_cast<std::size_t>(instance.max_batch_size);
    while (!waiting.empty() && budget > 0 && running.size() < max_batch_size) {
      const Req r = waiting.front();
      if (!admit(instance, r, now)) break;
      const std::int64_t tokens = std::min(t.remaining_prefill_tokens(r), budget);
      prefills.push_back(Prefill{r, tokens});
      budget -= tokens;
    }
  }
}

}  // namespace servegym_core
