"""Strict tier priority, FCFS within a tier: the Llumlet queue of Llumnix-K §3."""

from __future__ import annotations

from simulator.schedulers.base import LocalScheduler
from simulator.sequence import Sequence


class PriorityScheduler(LocalScheduler):
    """Llumlet local scheduler (Llumnix-K §3, "priority-ordered request queue"):
    waiting requests are admitted in (tier, arrival) order, tier 0 first; under memory pressure
    the lowest-tier, most recent running request is preempted."""

    name = "priority"

    def priority_key(self, seq: Sequence) -> tuple:
        return (seq.tier, seq.queue_order)
