"""Load balancing LP of CascadeServe §4.4, eq. 1-3.

Variables ``q_r >= 0``, the QPS replica r serves. Minimise Σ q_r (eq. 1) subject to
Σ_{r ∈ R[m]} q_r >= QPS_m for every model m of the cascade (eq. 2) and
Σ_{r ∈ R[d]} q_r · runtime(r) <= u for every device d (eq. 3), runtime(r) the seconds per
sample at batch 1. The paper decreases u from 100% step by step until the LP turns infeasible
and keeps the last feasible u; that descent converges to the smallest u for which eq. 2-3 hold,
which ``min_utilization`` computes exactly with u as an LP variable (one solve instead of many).

The pruning step (§4.3, eq. 4) solves this LP thousands of times per plan, so it runs in process
with HiGHS (``scipy.optimize.linprog``): a CBC subprocess per solve made process start-up 99% of
a plan's time. ``min_utilization`` keeps its answers per process by the exact inputs (replicas in
order, demand in order, runtimes): a plan's pruning steps and the plans of a grid (other SLOs,
other systems on the same GPUs) pose the same LPs again and again, and HiGHS answers a given LP
with the same bits every time, so a kept answer is the one a new solve would give.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from scipy.optimize import linprog

from baselines.cascadeserve.profiles import ModelProfile, Replica

_TOLERANCE = 1e-9
_OPTIMAL, _INFEASIBLE = 0, 2  # scipy.optimize.linprog's status codes
_KEPT_SOLVES = 200_000  # min_utilization's answers kept per process (a few hundred bytes each)


class LoadBalancingError(ValueError):
    """Eq. 1-3 are infeasible at u = 100%: the placement cannot serve the demand."""


def _check_demand(demand_qps: Mapping[str, float], replicas: Sequence[Replica]) -> None:
    placed = {r.model for r in replicas}
    for model, qps in demand_qps.items():
        if not (isinstance(qps, (int, float)) and not isinstance(qps, bool) and math.isfinite(qps) and qps >= 0):
            raise ValueError(f"QPS of {model} must be a finite number >= 0, got {qps!r}")
        if qps > 0 and model not in placed:
            raise LoadBalancingError(f"{model} must serve {qps:g} QPS but has no replica; placed: {sorted(placed)}")


def _constraints(
    replicas: Sequence[Replica], demand_qps: Mapping[str, float], runtime_s: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. 2 as ``-Σ_{r ∈ R[m]} q_r <= -QPS_m`` (rows of ``demand``, right-hand side ``bound``)
    and eq. 3's left-hand side per device (rows of ``device_load``), over the ``q_r``."""
    demanded = [(model, qps) for model, qps in demand_qps.items() if qps > 0]
    demand = np.array([[-1.0 if r.model == model else 0.0 for r in replicas] for model, _ in demanded]).reshape(-1, len(replicas))
    bound = np.array([-qps for _, qps in demanded], dtype=float)
    devices = sorted({d for r in replicas for d in r.devices})
    device_load = np.array(
        [[runtime_s[r.model] if device in r.devices else 0.0 for r in replicas] for device in devices]
    ).reshape(-1, len(replicas))
    return demand, bound, device_load


def _runtimes(profiles: Sequence[ModelProfile]) -> dict[str, float]:
    return {p.name: p.runtime_per_sample_s for p in profiles}


def balance_load(
    replicas: Sequence[Replica],
    demand_qps: Mapping[str, float],
    profiles: Sequence[ModelProfile],
    utilization: float,
) -> dict[Replica, float] | None:
    """Eq. 1-3 at utilisation bound ``utilization``: the QPS per replica, or None if infeasible."""
    if not (isinstance(utilization, (int, float)) and math.isfinite(utilization) and utilization > 0):
        raise ValueError(f"utilization must be a positive finite number, got {utilization!r}")
    _check_demand(demand_qps, replicas)
    demand, bound, device_load = _constraints(replicas, demand_qps, _runtimes(profiles))
    result = linprog(np.ones(len(replicas)), A_ub=np.vstack([demand, device_load]),
                     b_ub=np.concatenate([bound, np.full(len(device_load), float(utilization))]),
                     bounds=(0, None), method="highs")
    if result.status == _INFEASIBLE:
        return None
    if result.status != _OPTIMAL:
        raise RuntimeError(f"the load-balancing LP ended with status {result.status}: {result.message}")
    return {r: max(0.0, float(q)) for r, q in zip(replicas, result.x)}


def min_utilization(
    replicas: Sequence[Replica], demand_qps: Mapping[str, float], profiles: Sequence[ModelProfile]
) -> float:
    """The smallest u for which eq. 2-3 are feasible (the limit of §4.4's descent from 100%);
    raises ``LoadBalancingError`` when even u = 100% is infeasible."""
    _check_demand(demand_qps, replicas)
    if not any(qps > 0 for qps in demand_qps.values()):
        return 0.0
    runtimes = tuple((p.name, p.runtime_per_sample_s) for p in profiles)
    answer = _solved_min_utilization(tuple(replicas), tuple(demand_qps.items()), runtimes)
    if isinstance(answer, str):
        raise LoadBalancingError(answer)
    return answer


@lru_cache(maxsize=_KEPT_SOLVES)
def _solved_min_utilization(
    replicas: tuple[Replica, ...], demand: tuple[tuple[str, float], ...], runtimes: tuple[tuple[str, float], ...]
) -> float | str:
    """``min_utilization``'s LP for checked inputs: u, or the ``LoadBalancingError`` message."""
    demand_qps = dict(demand)
    rows_demand, bound, device_load = _constraints(replicas, demand_qps, dict(runtimes))
    n = len(replicas)
    objective = np.zeros(n + 1)
    objective[n] = 1.0  # the variables are q_0 .. q_{n-1}, u
    rows = np.vstack([np.hstack([rows_demand, np.zeros((len(rows_demand), 1))]),
                      np.hstack([device_load, -np.ones((len(device_load), 1))])])
    result = linprog(objective, A_ub=rows, b_ub=np.concatenate([bound, np.zeros(len(device_load))]), bounds=(0, None),
                     method="highs")
    if result.status != _OPTIMAL:
        return f"eq. 1-3 have no solution for demand {demand_qps}: {result.message}"
    value = float(result.x[n])
    if value > 1.0 + _TOLERANCE:
        return f"the placement needs GPU utilisation {value:.3f} > 100% for demand {demand_qps}"
    return value
