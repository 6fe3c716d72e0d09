"""vLLM's default scheduler: first come, first served; preempt the newest (recompute)."""

from __future__ import annotations

from simulator.schedulers.base import LocalScheduler


class FCFSScheduler(LocalScheduler):
    """Admit in arrival order into free KV memory; prefill-only iterations; under memory
    pressure preempt the most recently arrived running request (vLLM v0 ``_schedule_default``)."""

    name = "fcfs"
