"""Local (per-instance) schedulers, chosen by name."""

from __future__ import annotations

from typing import Any

from simulator.schedulers.base import LocalScheduler
from simulator.schedulers.fcfs import FCFSScheduler
from simulator.schedulers.pascal import PascalScheduler
from simulator.schedulers.priority import PriorityScheduler
from simulator.schedulers.round_robin import RoundRobinScheduler
from simulator.schedulers.sarathi import SarathiScheduler

SCHEDULERS: dict[str, type[LocalScheduler]] = {
    cls.name: cls
    for cls in (FCFSScheduler, RoundRobinScheduler, SarathiScheduler, PascalScheduler, PriorityScheduler)
}


def make_scheduler(name: str, **options: Any) -> LocalScheduler:
    """Build the local scheduler registered under ``name`` (``fcfs``, ``rr``, ``sarathi``, ``pascal``, ``priority``)."""
    if name not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {name!r}; known: {sorted(SCHEDULERS)}")
    return SCHEDULERS[name](**options)


__all__ = ["LocalScheduler", "SCHEDULERS", "make_scheduler"]
