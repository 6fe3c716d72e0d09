// Moving sequences into and out of an instance's GPU KV blocks while a batch forms
// (simulator/admission.py: vLLM v0's _allocate_and_set_running, _swap_in, _preempt and
// _append_slots). The schedulers decide whom; these functions do it on the instance.
#pragma once

#include <cstdint>
#include <utility>

#include "sim_types.hpp"

namespace servegym_core {

class Instance;

// Blocks r holds after reserving the slot for its next decode token.
std::int64_t decode_slot_blocks(const Instance& instance, Req r);
// For the waiting r: (prompt tokens its prefill would compute, free blocks admitting it would
// take), after the instance's prefix-cache hit when it has a cache.
std::pair<std::int64_t, std::int64_t> admission_plan(const Instance& instance, Req r);
// Give the waiting r the blocks its prefill fills and move it to running; false (and nothing
// done) if they do not fit, above the watermark unless `watermark` is false. With a prefix cache
// it takes the cached blocks of its prefix, starts its prefill after them, and the host tier's
// part of them crosses the host link before the next iteration.
bool admit(Instance& instance, Req r, double now, bool watermark = true);
// Bring the swapped-out r back into GPU blocks (the caller checked they fit); its KV crosses
// the host link before the next iteration.
void swap_in(Instance& instance, Req r, double now);
// Move a running r out of GPU memory: swapped to host (preemption by swap, and it has decoded)
// or back to the waiting queue to recompute its KV.
void preempt(Instance& instance, Req r);
// Give every running decode sequence the block its next token needs, preempting the
// lowest-priority running sequences (largest priority key, the first of equals) while memory is short.
void reserve_decode_slots(Instance& instance);

}  // namespace servegym_core
