"""Cascadia's deployment solver: the resource-allocation MILP of Cascadia §3.2, with PuLP + CBC.

Binaries ``x[i, f]`` (model type i gets f GPUs), continuous ``L >= 0``::

    minimise L
    s.t.  Σ_f x[i, f] = 1                    for every model type i   (one allocation each)
          Σ_i Σ_f f · x[i, f] = N                                      (all N GPUs assigned)
          L >= Σ_f l_i(f) · x[i, f]          for every model type i   (L is the max latency)
          x[i, f] = 0                        where l_i(f) is infeasible (``inf``)

``l_i(f)`` comes from the parallelism search's lookup table (``parallelism.py``), f = 0..N.
``brute_force_allocation`` enumerates every allocation instead (App. J's exhaustive search,
and the check of the MILP in the tests).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np
import pulp


class InfeasibleAllocationError(ValueError):
    """No allocation of exactly N GPUs gives every model type a feasible GPU count."""


@dataclass(frozen=True)
class Allocation:
    """GPUs per model type, each one's table latency, their max ``L`` and the solve time."""

    gpus_by_model: tuple[int, ...]
    stage_latency_s: tuple[float, ...]
    latency_s: float
    solve_time_s: float


def _check_table(latency_s: np.ndarray, total_gpus: int) -> np.ndarray:
    if isinstance(total_gpus, bool) or not isinstance(total_gpus, (int, np.integer)) or total_gpus < 0:
        raise ValueError(f"total_gpus must be a non-negative integer, got {total_gpus!r}")
    table = np.asarray(latency_s, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] != total_gpus + 1:
        raise ValueError(f"latency table must be (models x {total_gpus + 1}) for f = 0..{total_gpus}, got shape {table.shape}")
    if np.isnan(table).any() or (table < 0).any():
        raise ValueError("latency table entries must be >= 0 (inf marks an infeasible pair), got NaN or a negative value")
    return table


def _infeasible(table: np.ndarray, total_gpus: int) -> InfeasibleAllocationError:
    options = [np.flatnonzero(np.isfinite(row)).tolist() for row in table]
    described = "; ".join(f"model {i}: f in {o if len(o) <= 12 else o[:6] + ['...'] + o[-3:]}" for i, o in enumerate(options))
    return InfeasibleAllocationError(f"no allocation of exactly {total_gpus} GPUs has a feasible GPU count for every model ({described})")


def solve_allocation(latency_s: np.ndarray, total_gpus: int) -> Allocation:
    """§3.2's MILP on ``latency_s[i, f]`` (seconds, ``inf`` = infeasible); raises
    ``InfeasibleAllocationError`` when no allocation of exactly ``total_gpus`` exists."""
    table = _check_table(latency_s, total_gpus)
    finite = np.isfinite(table)
    if not finite.any(axis=1).all():
        raise _infeasible(table, total_gpus)
    problem = pulp.LpProblem("cascadia_allocation", pulp.LpMinimize)
    worst = float(table[finite].max())
    bound = problem.add_variable("L", lowBound=0)
    x = {
        (i, f): problem.add_variable(f"x_{i}_{f}", cat="Binary")
        for i in range(table.shape[0]) for f in range(total_gpus + 1) if finite[i, f]
    }
    problem += bound
    for i in range(table.shape[0]):
        choices = [f for f in range(total_gpus + 1) if finite[i, f]]
        problem += pulp.lpSum(x[i, f] for f in choices) == 1
        problem += bound >= pulp.lpSum(float(table[i, f]) * x[i, f] for f in choices)
    problem += pulp.lpSum(f * var for (_, f), var in x.items()) == total_gpus
    problem += bound <= worst  # keeps CBC's bound finite; any feasible allocation meets it
    started = time.perf_counter()
    status = problem.solve(pulp.PULP_CBC_CMD(msg=False))
    solve_time_s = time.perf_counter() - started
    if pulp.LpStatus[status] != "Optimal":
        raise _infeasible(table, total_gpus)
    gpus = tuple(next(f for f in range(total_gpus + 1) if finite[i, f] and round(x[i, f].value() or 0) == 1) for i in range(table.shape[0]))
    stages = tuple(float(table[i, f]) for i, f in enumerate(gpus))
    return Allocation(gpus, stages, max(stages), solve_time_s)


def brute_force_allocation(latency_s: np.ndarray, total_gpus: int) -> Allocation:
    """The same optimum by enumerating every allocation with Σ f = N (exponential in the
    number of models; ties go to the lexicographically first allocation)."""
    table = _check_table(latency_s, total_gpus)
    started = time.perf_counter()
    best: tuple[int, ...] | None = None
    best_latency = math.inf
    for head in itertools.product(range(total_gpus + 1), repeat=table.shape[0] - 1):
        last = total_gpus - sum(head)
        if last < 0:
            continue
        gpus = (*head, last)
        latency = max(table[i, f] for i, f in enumerate(gpus))
        if latency < best_latency:
            best, best_latency = gpus, latency
    if best is None:
        raise _infeasible(table, total_gpus)
    stages = tuple(float(table[i, f]) for i, f in enumerate(best))
    return Allocation(best, stages, float(best_latency), time.perf_counter() - started)
