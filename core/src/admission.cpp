#include "admission.hpp"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "instance.hpp"
#include "queue_order.hpp"

namespace servegym_core {

namespace {

// A preemption r was in ends now.
void end_preemption(RequestTable& t, Req r, double now) {
  if (!std::isnan(t.preempted_since_s[r])) {
    t.preempted_s[r] += now - t.preempted_since_s[r];
    t.preempted_since_s[r] = std::numeric_limits<double>::quiet_NaN();
  }
}

// r, just given its blocks, joins running from the queue `left` (kWaiting or kSwapped).
void run(Instance& instance, Req r, double now, std::int32_t left) {
  RequestTable& t = instance.requests;
  t.residency[r] = Residency::Running;
  end_preemption(t, r, now);
  instance.running.push_back(r);
  if (InstanceArrays* arrays = instance.arrays) {
    arrays->remove(instance.instance_id, t, r, left);
    arrays->add(instance.instance_id, t, r, kRunning);
  }
}

}  // namespace

std::int64_t decode_slot_blocks(const Instance& instance, Req r) {
  return ceil_div(instance.requests.kv_tokens[r] + 1, instance.kv.block_size);
}

std::pair<std::int64_t, std::int64_t> admission_plan(const Instance& instance, Req r) {
  const RequestTable& t = instance.requests;
  const std::int64_t full = ceil_div(t.prefill_target_tokens(r), instance.kv.block_size);
  if (!instance.cache || !t.has_block_keys(r)) return {t.remaining_prefill_tokens(r), full};
  PrefixMatch found;
  const std::int64_t need = instance.cache->admission_need(t, r, full, found);
  return {t.remaining_prefill_tokens(r) - (found.gpu + found.host) * t.block_tokens[r], need};
}

bool admit(Instance& instance, Req r, double now, bool watermark) {
  RequestTable& t = instance.requests;
  KVBlocks& kv = instance.kv;
  PrefixCache* cache = instance.cache.get();
  const std::int64_t full = ceil_div(t.prefill_target_tokens(r), kv.block_size);
  std::int64_t need = full;
  PrefixMatch found;
  if (cache) need = cache->admission_need(t, r, full, found);
  const bool fits = watermark ? kv.can_admit(need) : need <= kv.free_blocks();
  if (!fits) return false;
  if (!cache) {
    kv.allocate(need);
    t.blocks[r] = need;
  }
  instance.waiting_ordered = take_from_queue(instance.waiting, r, instance.waiting_ordered);
  QueueGate::leave(t, r);
  if (std::isnan(t.first_scheduled_s[r])) t.first_scheduled_s[r] = now;
  run(instance, r, now, kWaiting);
  if (cache) instance.swap_tokens += cache->acquire(t, r, full, found);
  return true;
}

void swap_in(Instance& instance, Req r, double now) {
  RequestTable& t = instance.requests;
  const std::int64_t need = decode_slot_blocks(instance, r);
  instance.kv.allocate(need);
  t.blocks[r] = need;
  instance.swapped_ordered = take_from_queue(instance.swapped, r, instance.swapped_ordered);
  run(instance, r, now, kSwapped);
  instance.swap_tokens += t.kv_tokens[r];
  instance.memory_moved = true;
}

void preempt(Instance& instance, Req r) {
  RequestTable& t = instance.requests;
  remove_first(instance.running, r);
  InstanceArrays* arrays = instance.arrays;
  if (arrays) arrays->remove(instance.instance_id, t, r, kRunning);
  instance.free_kv(r);
  const double now = instance.events.now_s;
  ++t.num_preemptions[r];
  t.preempted_since_s[r] = now;
  instance.memory_moved = true;
  if (instance.settings.preempt_by_swap && t.generated_tokens[r] > 0) {
    t.residency[r] = Residency::Swapped;
    instance.swapped.push_back(r);
    if (arrays) arrays->add(instance.instance_id, t, r, kSwapped);
    instance.swap_tokens += t.kv_tokens[r];
    return;
  }
  t.kv_tokens[r] = 0;
  t.residency[r] = Residency::Queued;
  instance.waiting.push_back(r);
  if (arrays) arrays->add(instance.instance_id, t, r, kWaiting);
  instance.gate.enter(t, r, now);
}

void reserve_decode_slots(Instance& instance) {
  RequestTable& t = instance.requests;
  KVBlocks& kv = instance.kv;
  const std::int64_t block_size = kv.block_size;
  std::vector<Req>& running = instance.running;
  std::vector<std::pair<Req, std::int64_t>>& growing = instance.growing;
  std::int64_t need = 0;
  while (true) {
    need = 0;
    growing.clear();
    for (const Req r : running) {
      if (t.decodes_here(r)) {
        const std::int64_t extra = (t.kv_tokens[r] + block_size) / block_size - t.blocks[r];
        if (extra) {
          need += extra;
          growing.emplace_back(r, extra);
        }
      }
    }
    if (need <= kv.free_blocks()) break;
    Req victim = running.front();
    Key worst = instance.scheduler->priority_key(t, victim);
    for (const Req r : running) {
      const Key key = instance.scheduler->priority_key(t, r);
      if (worst < key) {
        worst = key;
        victim = r;
      }
    }
    preempt(instance, victim);
  }
  kv.allocate(need);
  for (const auto& [r, extra] : growing) t.blocks[r] += extra;
}

}  // namespace servegym_core
