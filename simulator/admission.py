"""Moving sequences into and out of an instance's GPU KV blocks while a batch forms: admitting
a waiting request, swapping one back in, preempting one (swap to host memory, or drop its KV
to recompute it), and reserving the block each decode step needs (vLLM v0's
``Scheduler._allocate_and_set_running``, ``_swap_in``, ``_preempt`` and ``_append_slots``;
the block manager's watermark is ``KVBlockManager.can_admit``).

The local schedulers (``simulator.schedulers``) decide whom; these functions do it on the
instance, which owns the queues, the KV pool and the swap traffic charged to its next iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.instance_arrays import RUNNING, SWAPPED, WAITING
from simulator.kv_blocks import blocks_for_tokens
from simulator.queue_order import take_from_queue
from simulator.sequence import Residency, Sequence

if TYPE_CHECKING:
    from simulator.instance import Instance


def decode_slot_blocks(seq: Sequence, block_size: int) -> int:
    """Blocks ``seq`` holds after reserving the slot for its next decode token."""
    return -(-(seq.kv_tokens + 1) // block_size)


def admission_plan(instance: Instance, seq: Sequence) -> tuple[int, int]:
    """For the waiting ``seq``: (prompt tokens its prefill would compute, free blocks admitting
    it would take), after the instance's prefix-cache hit when it has a cache."""
    kv = instance.kv
    full = blocks_for_tokens(seq.prefill_target_tokens, kv.block_size)
    cache = kv.cache
    if cache is None or seq.block_keys is None:
        return seq.remaining_prefill_tokens, full
    need, (gpu, host, _) = cache.admission_need(seq, full)
    return seq.remaining_prefill_tokens - (gpu + host) * seq.block_tokens, need


def admit(instance: Instance, seq: Sequence, now: float, watermark: bool = True) -> bool:
    """Give the waiting ``seq`` the blocks its prefill fills and move it to ``running``; False
    (and nothing done) if they do not fit, above the watermark unless ``watermark`` is False.
    With a prefix cache it takes the cached blocks of its prefix (``simulator.prefix_cache``),
    starts its prefill after them, and the host tier's part of them crosses the host link
    before the next iteration."""
    kv = instance.kv
    need = full = blocks_for_tokens(seq.prefill_target_tokens, kv.block_size)
    cache = kv.cache
    if cache is not None:
        need, found = cache.admission_need(seq, full)
    fits = kv.can_admit(need) if watermark else need <= kv.free_blocks
    if not fits:
        return False
    if cache is None:
        kv.allocate(need)
        seq.blocks = need
    instance.waiting_ordered = take_from_queue(instance.waiting, seq, instance.waiting_ordered)
    instance.gate.leave(seq)
    if seq.first_scheduled_s != seq.first_scheduled_s:
        seq.first_scheduled_s = now
    _run(instance, seq, now, WAITING)
    if cache is not None:  # after _run: the arrays took the queued request out with its tokens as they were
        instance.swap_tokens += cache.acquire(seq, full, found)
    return True


def swap_in(instance: Instance, seq: Sequence, now: float) -> None:
    """Bring the swapped-out ``seq`` back into GPU blocks (the caller checked they fit); its KV
    crosses the host link before the next iteration."""
    need = decode_slot_blocks(seq, instance.kv.block_size)
    instance.kv.allocate(need)
    seq.blocks = need
    instance.swapped_ordered = take_from_queue(instance.swapped, seq, instance.swapped_ordered)
    _run(instance, seq, now, SWAPPED)
    instance.swap_tokens += seq.kv_tokens
    instance.memory_moved = True


def preempt(instance: Instance, seq: Sequence) -> None:
    """Move a running sequence out of GPU memory: swapped to host (``instance.preemption ==
    "swap"`` and it has decoded) or back to the waiting queue to recompute its KV."""
    instance.running.remove(seq)
    arrays = instance.arrays
    if arrays is not None:
        arrays.remove(instance.instance_id, seq, RUNNING)
    instance.kv.free(seq)
    now = instance.events.now_s
    seq.num_preemptions += 1
    seq.preempted_since_s = now
    instance.memory_moved = True
    if instance.preemption == "swap" and seq.generated_tokens > 0:
        seq.residency = Residency.SWAPPED
        instance.swapped.append(seq)
        if arrays is not None:
            arrays.add(instance.instance_id, seq, SWAPPED)
        instance.swap_tokens += seq.kv_tokens
        return
    seq.kv_tokens = 0
    seq.residency = Residency.QUEUED
    instance.waiting.append(seq)
    if arrays is not None:
        arrays.add(instance.instance_id, seq, WAITING)
    instance.gate.enter(seq, now)


def reserve_decode_slots(instance: Instance) -> None:
    """Give every running decode sequence the block its next token needs, preempting the
    lowest-priority running sequences (largest ``priority_key``) while memory is short."""
    kv = instance.kv
    block_size = kv.block_size
    running = instance.running
    while True:
        need = 0
        growing = []
        for seq in running:
            if (
                seq.generated_tokens
                and not seq.pd_handoff
                and seq.kv_tokens == seq.prompt_tokens + seq.generated_tokens - 1
            ):
                extra = (seq.kv_tokens + block_size) // block_size - seq.blocks
                if extra:
                    need += extra
                    growing.append((seq, extra))
        if need <= kv.free_blocks:
            break
        preempt(instance, max(running, key=instance.scheduler.priority_key))
    kv.allocate(need)
    for seq, extra in growing:
        seq.blocks += extra


def _run(instance: Instance, seq: Sequence, now: float, left: int) -> None:
    """``seq``, just given its blocks, joins ``running`` from the queue ``left`` (``WAITING`` or
    ``SWAPPED``); a preemption it was in ends now."""
    seq.residency = Residency.RUNNING
    _end_preemption(seq, now)
    instance.running.append(seq)
    arrays = instance.arrays
    if arrays is not None:
        arrays.remove(instance.instance_id, seq, left)
        arrays.add(instance.instance_id, seq, RUNNING)


def _end_preemption(seq: Sequence, now: float) -> None:
    if seq.preempted_since_s == seq.preempted_since_s:
        seq.preempted_s += now - seq.preempted_since_s
        seq.preempted_since_s = float("nan")
