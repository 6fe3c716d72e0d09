"""PASCAL's intra-instance scheduler (PASCAL §IV-C, Fig. 6)."""

from __future__ import annotations

from simulator.request import Phase
from simulator.schedulers.round_robin import RoundRobinScheduler
from simulator.sequence import Sequence


class PascalScheduler(RoundRobinScheduler):
    """Two-level queue (PASCAL §IV-C): reasoning requests in the high-priority queue,
    answering requests in the low-priority queue, round-robin with a token quantum (500) inside
    each; a reasoning request whose KV exceeds ``demotion_kv_tokens`` (5,000, §V-A) is demoted
    to the low-priority queue. Answering requests get the memory left after reasoning ones.
    The token pacer (§IV-C) paces delivery to the user; it does not change the batch, so it
    lives in the metrics (QoE) and the instance's SLO flag (``simulator.pacer``), not here."""

    name = "pascal"

    def __init__(self, quantum_tokens: int = 500, demotion_kv_tokens: int = 5000) -> None:
        super().__init__(quantum_tokens)
        if demotion_kv_tokens <= 0:
            raise ValueError(f"demotion_kv_tokens must be positive, got {demotion_kv_tokens}")
        self.demotion_kv_tokens = demotion_kv_tokens

    @staticmethod
    def queue_level(seq: Sequence) -> int:
        """0: high-priority (reasoning), 1: low-priority (answering or demoted)."""
        return 1 if seq.demoted or seq.generated_tokens >= seq.reasoning_tokens else 0

    def priority_key(self, seq: Sequence) -> tuple:
        return (self.queue_level(seq), seq.queue_order)

    def iterations_until_change(self, seq: Sequence) -> int | None:
        until = super().iterations_until_change(seq)
        if self.queue_level(seq) == 0:
            until = min(until, self.demotion_kv_tokens - seq.kv_tokens + 1)
        return until

    def on_boundary(self, running: list[Sequence]) -> None:
        for seq in running:
            if not seq.demoted and seq.kv_tokens > self.demotion_kv_tokens and seq.decode_phase == Phase.REASONING:
                seq.demoted = True
                self.on_enqueue(seq)
        super().on_boundary(running)

    def on_phase_change(self, seq: Sequence) -> None:
        if not seq.demoted:
            self.on_enqueue(seq)
