"""Round-robin with a token quantum (PASCAL §II and §V-A baseline "RR")."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from simulator.admission import admission_plan, admit, decode_slot_blocks, preempt, reserve_decode_slots, swap_in
from simulator.schedulers.base import LocalScheduler
from simulator.sequence import Residency, Sequence

if TYPE_CHECKING:
    from simulator.instance import Instance


class RoundRobinScheduler(LocalScheduler):
    """Each request gets a quantum of decode tokens (default 500, PASCAL §V-A); once it has
    used its quantum it goes to the back of the circular order (its priority is lowered).
    Time-sharing: at each iteration the batch is the longest prefix of that order that fits in
    KV memory, so lower-priority running requests are swapped out to host memory to admit
    higher-priority ones (PASCAL Fig. 2(c))."""

    name = "rr"
    default_preemption = "swap"

    def __init__(self, quantum_tokens: int = 500) -> None:
        super().__init__()
        if quantum_tokens <= 0:
            raise ValueError(f"quantum_tokens must be positive, got {quantum_tokens}")
        self.quantum_tokens = quantum_tokens

    def on_enqueue(self, seq: Sequence) -> None:
        super().on_enqueue(seq)
        seq.quantum_start_tokens = seq.generated_tokens

    def iterations_until_change(self, seq: Sequence) -> int | None:
        return self.quantum_tokens - (seq.generated_tokens - seq.quantum_start_tokens)

    def on_boundary(self, running: list[Sequence]) -> None:
        expired = [s for s in running if s.generated_tokens - s.quantum_start_tokens >= self.quantum_tokens]
        expired.sort(key=self.priority_key)
        for seq in expired:
            self.on_enqueue(seq)

    def schedule(self, instance: Instance, now: float) -> list[tuple[Sequence, int]]:
        """The batch is the longest prefix of the priority order (running, swapped and waiting
        requests together) that fits in KV memory and the batch size; running sequences outside
        it are preempted, swapped ones inside it swapped back in, waiting ones admitted.

        The plan reads each waiting request's prefix-cache hit as the cache is while the batch
        forms. Preempting the running requests that alone held those blocks makes them evictable,
        and the decode slots and admissions before it may evict them, so the request can need more
        blocks than planned: the batch then ends before the first swapped or waiting request that
        no longer fits (it stays queued). Without a prefix cache the plan is exact."""
        key = self.priority_key
        self._order_swapped(instance)
        self._order_waiting(instance)
        kv = instance.kv
        # The stable sort of running + swapped + waiting, read lazily: only the batch's prefix.
        candidates = heapq.merge(sorted(instance.running, key=key), instance.swapped, instance.waiting, key=key)
        capacity = instance.batch_capacity_blocks
        used = 0
        chosen: list[Sequence] = []
        budget = instance.max_batched_tokens
        new_prefill = False
        for seq in candidates:
            if len(chosen) >= instance.max_batch_size:
                break
            if seq.residency == Residency.QUEUED:
                tokens, need = admission_plan(instance, seq)
                if (new_prefill and tokens > budget) or used + need > capacity - kv.watermark_blocks:
                    break
                budget -= tokens
                new_prefill = True
            else:
                need = decode_slot_blocks(seq, kv.block_size)
                if used + need > capacity:
                    break
            chosen.append(seq)
            used += need
        chosen_ids = {id(s) for s in chosen}
        for seq in [s for s in instance.running if id(s) not in chosen_ids]:
            preempt(instance, seq)
        reserve_decode_slots(instance)
        prefills: list[tuple[Sequence, int]] = []
        for seq in chosen:
            if seq.residency == Residency.SWAPPED:
                if decode_slot_blocks(seq, kv.block_size) > kv.free_blocks:
                    break
                swap_in(instance, seq, now)
            elif seq.residency == Residency.QUEUED:
                if not admit(instance, seq, now, watermark=False):
                    break
                prefills.append((seq, seq.remaining_prefill_tokens))
        return prefills
