#include "schedulers/round_robin.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "admission.hpp"
#include "instance.hpp"

namespace servegym_core {

RoundRobinScheduler::RoundRobinScheduler(std::int64_t quantum_tokens) : quantum_tokens_(quantum_tokens) {
  if (quantum_tokens <= 0) {
    throw std::invalid_argument("quantum_tokens must be positive, got " + std::to_string(quantum_tokens));
  }
}

void RoundRobinScheduler::on_enqueue(RequestTable& requests, Req r) {
  LocalScheduler::on_enqueue(requests, r);
  requests.quantum_start_tokens[r] = requests.generated_tokens[r];
}

std::int64_t RoundRobinScheduler::iterations_until_change(const RequestTable& requests, Req r) const {
  return quantum_tokens_ - (requests.generated_tokens[r] - requests.quantum_start_tokens[r]);
}

void RoundRobinScheduler::on_boundary(Instance& instance) {
  RequestTable& t = instance.requests;
  std::vector<Req> expired;
  for (const Req r : instance.running) {
    if (t.generated_tokens[r] - t.quantum_start_tokens[r] >= quantum_tokens_) expired.push_back(r);
  }
  std::stable_sort(expired.begin(), expired.end(),
                   [this, &t](Req x, Req y) { return priority_key(t, x) < priority_key(t, y); });
  for (const Req r : expired) on_enqueue(t, r);
}

void RoundRobinScheduler::schedule(Instance& instance, double now, std::vector<Prefill>& prefills) {
  RequestTable& t = instance.requests;
  const auto key = [this, &t](Req r) { return priority_key(t, r); };
  order_swapped(instance);
  order_waiting(instance);
  KVBlocks& kv = instance.kv;
  // heapq.merge(sorted(running), swapped, waiting): the stable sort of the three together (ties
  // from the earlier input), read lazily, only the batch's prefix.
  std::vector<Req> running_sorted = instance.running;
  std::stable_sort(running_sorted.begin(), running_sorted.end(), [&key](Req x, Req y) { return key(x) < key(y); });
  const std::vector<Req>* sources[3] = {&running_sorted, &instance.swapped, &instance.waiting};
  std::size_t next[3] = {0, 0, 0};
  const std::int64_t capacity = instance.batch_capacity_blocks();
  const auto max_batch_size = static_cast<std::size_t>(instance.max_batch_size);
  std::int64_t used = 0;
  std::int64_t budget = instance.settings.max_batched_tokens;
  bool new_prefill = false;
  std::vector<Req> chosen;
  while (true) {
    int source = -1;
    Key best{0, 0};
    for (int s = 0; s < 3; ++s) {
      if (next[s] >= sources[s]->size()) continue;
      const Key candidate = key((*sources[s])[next[s]]);
      if (source < 0 || candidate < best) {
        source = s;
        best = candidate;
      }
    }
    if (source < 0) break;
    const Req r = (*sources[source])[next[source]++];
    if (chosen.size() >= max_batch_size) break;
    std::int64_t need = 0;
    if (t.residency[r] == Residency::Queued) {
      const auto [tokens, blocks] = admission_plan(instance, r);
      need = blocks;
      if ((new_prefill && tokens > budget) || used + need > capacity - kv.watermark_blocks) break;
      budget -= tokens;
      new_prefill = true;
    } else {
      need = decode_slot_blocks(instance, r);
      if (used + need > capacity) break;
    }
    chosen.push_back(r);
    used += need;
  }
  std::vector<Req> outside;
  for (const Req r : instance.running) {
    if (std::find(chosen.begin(), chosen.end(), r) == chosen.end()) outside.push_back(r);
  }
  for (const Req r : outside) preempt(instance, r);
  reserve_decode_slots(instance);
  for (const Req r : chosen) {
    if (t.residency[r] == Residency::Swapped) {
      if (decode_slot_blocks(instance, r) > kv.free_blocks()) break;
      swap_in(instance, r, now);
    } else if (t.residency[r] == Residency::Queued) {
      if (!admit(instance, r, now, false)) break;
      prefills.push_back(Prefill{r, t.remaining_prefill_tokens(r)});
    }
  }
}

}  // namespace servegym_core
