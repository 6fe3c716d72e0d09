"""What a golden case is and what it records: a named simulator run, its per-case counters,
and the proof that the run exercises the feature it is named for."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from simulator.cluster import Cluster
from simulator.metrics.prefix_cache import PREFIX_CACHE_METRICS, prefix_cache_metrics
from simulator.outcome import RequestOutcome


@dataclass(frozen=True)
class Run:
    """A finished run: its outcomes in the order the cluster recorded them, and its counters."""

    outcomes: list[RequestOutcome]
    counters: dict[str, Any]


Proof = Callable[[Run, Mapping[str, Run]], list[str]]
"""``proof(run, runs)``: why ``run`` fails to exercise its feature (empty: it does); ``runs`` holds
every case's run by name, for proofs that compare a case with its twin."""


@dataclass(frozen=True)
class Case:
    """A golden case: ``run`` builds a cluster through the public simulator API, submits a seeded
    workload and serves it to the end; ``feature`` says what it covers; ``proof`` checks that it
    did (a counter above zero, a difference from its twin)."""

    name: str
    feature: str
    run: Callable[[], Run]
    proof: Proof


def finished(cluster: Cluster, **extra: Any) -> Run:
    """The run of ``cluster`` after it served its workload: its outcomes and the counters that
    locate an engine difference (``extra``: the case's own counters)."""
    outcomes = list(cluster.outcomes)
    counters: dict[str, Any] = {
        "requests": len(outcomes),
        "rejected": sum(not o.completed for o in outcomes),
        "preemptions": sum(o.num_preemptions for o in outcomes),
        "migrations": sum(o.num_migrations for o in outcomes),
        "migrations_started": cluster.migrations_started,
        "migrations_done": cluster.migrations_done,
        "migrations_aborted": cluster.migrations_aborted,
        "context_truncated": cluster.context_truncated,
        "token_curve_points": sum(len(o.token_curve) for o in outcomes),
        "end_s": cluster.events.now_s,
        "cost_usd": cluster.cost_usd(),
        "iterations": [instance.iterations for instance in cluster.instances.values()],
        "busy_s": [instance.busy_time_s for instance in cluster.instances.values()],
    }
    cache = prefix_cache_metrics(cluster.instances.values())
    counters |= {name: cache[name] for name in PREFIX_CACHE_METRICS if name in cache}
    return Run(outcomes, counters | extra)


def positive(*names: str) -> Proof:
    """The run's counters ``names`` are all above zero."""

    def proof(run: Run, runs: Mapping[str, Run]) -> list[str]:
        return [f"counter {name} is {run.counters.get(name)!r}, not > 0" for name in names
                if not run.counters.get(name, 0) > 0]

    return proof


def same_outcomes(first: Run, second: Run) -> bool:
    """Whether two runs recorded equal outcomes in the same order (NaN equal to NaN)."""
    return [repr(o) for o in first.outcomes] == [repr(o) for o in second.outcomes]


def differs_from(twin: str) -> Proof:
    """The run's outcomes differ from those of the case ``twin`` (the one setting that tells
    them apart changed something)."""

    def proof(run: Run, runs: Mapping[str, Run]) -> list[str]:
        return [f"outcomes equal those of {twin}"] if same_outcomes(run, runs[twin]) else []

    return proof


def all_of(*proofs: Proof) -> Proof:
    """Every one of ``proofs`` holds."""

    def proof(run: Run, runs: Mapping[str, Run]) -> list[str]:
        return [problem for check in proofs for problem in check(run, runs)]

    return proof
