"""The local-scheduler interface: how one instance orders, admits and preempts its requests."""

from __future__ import annotations

from typing import ClassVar

from simulator.sequence import Sequence


class LocalScheduler:
    """Ordering and preemption rules of one instance's iteration-level scheduler.

    The instance (``simulator.instance.Instance``) forms every batch; a scheduler only says
    - ``priority_key(seq)``: smaller runs first; the preemption victim is the largest key. Its
      value must not change while ``seq`` waits or is swapped out (the instance keeps those
      queues ordered as sequences join them); it may change while ``seq`` runs (a new
      ``queue_order`` at a quantum's end, PASCAL's demotion and phase change);
    - ``preemptive``: whether waiting / swapped requests of higher priority displace running
      ones at each iteration (time-sharing) or are admitted only into free memory (vLLM);
    - ``chunked_prefill_tokens``: Sarathi-style token budget per iteration (``None``: whole
      prefills in prefill-only iterations, as vLLM);
    - ``default_preemption``: ``"recompute"`` or ``"swap"``;
    - ``iterations_until_change(seq)``: decode iterations until ``seq``'s priority changes (the
      instance re-plans at that point), or ``None``;
    - ``on_boundary(instance)`` / ``on_enqueue(seq)``: bookkeeping before a batch is formed.
    """

    name: ClassVar[str] = ""
    preemptive: ClassVar[bool] = False
    default_preemption: ClassVar[str] = "recompute"
    chunked_prefill_tokens: int | None = None

    def __init__(self) -> None:
        self._order = 0

    def next_order(self) -> int:
        self._order += 1
        return self._order

    def on_enqueue(self, seq: Sequence) -> None:
        seq.queue_order = self.next_order()

    def priority_key(self, seq: Sequence) -> tuple:
        return (seq.queue_order,)

    def iterations_until_change(self, seq: Sequence) -> int | None:
        return None

    def on_boundary(self, running: list[Sequence]) -> None:
        """Called at every iteration boundary, before the batch is formed."""

    def on_phase_change(self, seq: Sequence) -> None:
        """Called when ``seq`` finished reasoning (its next token is the first answer token)."""
