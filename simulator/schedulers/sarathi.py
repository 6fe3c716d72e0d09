"""Sarathi-Serve: chunked prefill with stall-free decodes (Agrawal et al., OSDI 2024)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.admission import admit, reserve_decode_slots
from simulator.schedulers.base import LocalScheduler
from simulator.sequence import Sequence

if TYPE_CHECKING:
    from simulator.instance import Instance


class SarathiScheduler(LocalScheduler):
    """FCFS order; every iteration carries all running decodes plus prompt chunks that fill
    the remaining token budget (default 512), so decodes never stall behind a long prefill
    (vLLM v0's ``Scheduler._schedule_chunked_prefill``, Vidur's ``SarathiReplicaScheduler``)."""

    name = "sarathi"

    def __init__(self, chunk_tokens: int = 512) -> None:
        super().__init__()
        if chunk_tokens <= 0:
            raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
        self.chunked_prefill_tokens = chunk_tokens

    def schedule(self, instance: Instance, now: float) -> list[tuple[Sequence, int]]:
        """Reserve the decode slots and swap back in first; the budget left after one token per
        decode goes to running prefills in priority order, then, when nothing is swapped out,
        to waiting requests admitted in order into free memory."""
        key = self.priority_key
        reserve_decode_slots(instance)
        self._swap_in_in_order(instance, now)
        running = instance.running
        budget = self.chunked_prefill_tokens - sum(1 for s in running if _decoding(s))
        prefills: list[tuple[Sequence, int]] = []
        for seq in sorted((s for s in running if not s.in_decode), key=key):
            if budget <= 0:
                break
            tokens = min(seq.remaining_prefill_tokens, budget)
            prefills.append((seq, tokens))
            budget -= tokens
        if not instance.swapped and budget > 0:
            self._order_waiting(instance)
            waiting = instance.waiting
            while waiting and budget > 0 and len(running) < instance.max_batch_size:
                seq = waiting[0]
                if not admit(instance, seq, now):
                    break
                tokens = min(seq.remaining_prefill_tokens, budget)
                prefills.append((seq, tokens))
                budget -= tokens
        return prefills


def _decoding(seq: Sequence) -> bool:
    """Running and between tokens: its next iteration is a decode step."""
    return (
        seq.generated_tokens > 0
        and not seq.pd_handoff
        and seq.kv_tokens == seq.prompt_tokens + seq.generated_tokens - 1
    )
