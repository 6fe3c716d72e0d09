#include "schedulers/base.hpp"

#include "admission.hpp"
#include "instance.hpp"
#include "queue_order.hpp"

namespace servegym_core {

void LocalScheduler::form_batch(Instance& instance, double now, std::vector<Prefill>& prefills,
                                std::vector<Req>& decode) {
  on_boundary(instance);
  schedule(instance, now, prefills);
  if (!prefills.empty() && !chunked_prefill_tokens) return;
  const RequestTable& t = instance.requests;
  for (const Req r : instance.running) {
    if (t.decodes_here(r)) decode.push_back(r);
  }
}

void LocalScheduler::schedule(Instance& instance, double now, std::vector<Prefill>& prefills) {
  const RequestTable& t = instance.requests;
  std::vector<Req>& waiting = instance.waiting;
  if (instance.swapped.empty() && !waiting.empty()) {
    order_waiting(instance);
    const auto max_batch_size = static_cast<std::size_t>(instance.max_batch_size);
    std::int64_t budget = instance.settings.max_batched_tokens;
    const bool cached = instance.cache != nullptr;
    while (!waiting.empty() && instance.running.size() < max_batch_size) {
      const Req r = waiting.front();
      const std::int64_t tokens = cached ? admission_plan(instance, r).first : t.remaining_prefill_tokens(r);
      if (!prefills.empty() && tokens > budget) break;
      if (!admit(instance, r, now)) break;
      prefills.push_back(Prefill{r, tokens});
      budget -= tokens;
    }
    if (!prefills.empty()) return;
  }
  reserve_decode_slots(instance);
  swap_in_in_order(instance, now);
}

void LocalScheduler::order_waiting(Instance& instance) const {
  const RequestTable& t = instance.requests;
  order_queue(instance.waiting, instance.waiting_ordered, [this, &t](Req r) { return priority_key(t, r); });
  instance.waiting_ordered = instance.waiting.size();
}

void LocalScheduler::order_swapped(Instance& instance) const {
  const RequestTable& t = instance.requests;
  order_queue(instance.swapped, instance.swapped_ordered, [this, &t](Req r) { return priority_key(t, r); });
  instance.swapped_ordered = instance.swapped.size();
}

void LocalScheduler::swap_in_in_order(Instance& instance, double now) const {
  std::vector<Req>& swapped = instance.swapped;
  if (swapped.empty()) return;
  order_swapped(instance);
  const auto max_batch_size = static_cast<std::size_t>(instance.max_batch_size);
  while (!swapped.empty() && instance.running.size() < max_batch_size) {
    const Req r = swapped.front();
    if (!instance.kv.can_admit(decode_slot_blocks(instance, r))) break;
    swap_in(instance, r, now);
  }
}

}  // namespace servegym_core
