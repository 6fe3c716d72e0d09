"""Load balancing LP of cascadeserve.txt §4.4, eq. 1-3 (PuLP + CBC).

Variables ``q_r >= 0``, the QPS replica r serves. Minimise Σ q_r (eq. 1) subject to
Σ_{r ∈ R[m]} q_r >= QPS_m for every model m of the cascade (eq. 2) and
Σ_{r ∈ R[d]} q_r · runtime(r) <= u for every device d (eq. 3), runtime(r) the seconds per
sample at batch 1. The paper decreases u from 100% step by step until the LP turns infeasible
and keeps the last feasible u; that descent converges to the smallest u for which eq. 2-3 hold,
which ``min_utilization`` computes exactly with u as an LP variable (one solve instead of many).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pulp

from baselines.cascadeserve.profiles import ModelProfile, Replica

_SOLVER = pulp.PULP_CBC_CMD(msg=False)
_TOLERANCE = 1e-9


class LoadBalancingError(ValueError):
    """Eq. 1-3 are infeasible at u = 100%: the placement cannot serve the demand."""


def _check_demand(demand_qps: Mapping[str, float], replicas: Sequence[Replica]) -> None:
    placed = {r.model for r in replicas}
    for model, qps in demand_qps.items():
        if not (isinstance(qps, (int, float)) and not isinstance(qps, bool) and math.isfinite(qps) and qps >= 0):
            raise ValueError(f"QPS of {model} must be a finite number >= 0, got {qps!r}")
        if qps > 0 and model not in placed:
            raise LoadBalancingError(f"{model} must serve {qps:g} QPS but has no replica; placed: {sorted(placed)}")


def _problem(
    replicas: Sequence[Replica], demand_qps: Mapping[str, float], runtime_s: Mapping[str, float], utilization: float | None
) -> tuple[pulp.LpProblem, list[pulp.LpVariable], pulp.LpVariable | None]:
    problem = pulp.LpProblem("cascadeserve_load_balancer", pulp.LpMinimize)
    q = [problem.add_variable(f"q_{i}", lowBound=0) for i in range(len(replicas))]
    u = problem.add_variable("u", lowBound=0) if utilization is None else None
    problem += pulp.lpSum(q) if u is None else u
    for model, qps in demand_qps.items():
        if qps > 0:
            problem += pulp.lpSum(q[i] for i, r in enumerate(replicas) if r.model == model) >= qps
    limit = u if u is not None else utilization
    devices = sorted({d for r in replicas for d in r.devices})
    for device in devices:
        on_device = [i for i, r in enumerate(replicas) if device in r.devices]
        problem += pulp.lpSum(q[i] * runtime_s[replicas[i].model] for i in on_device) <= limit
    return problem, q, u


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
    problem, q, _ = _problem(replicas, demand_qps, _runtimes(profiles), float(utilization))
    problem.solve(_SOLVER)
    if pulp.LpStatus[problem.status] != "Optimal":
        return None
    return {r: max(0.0, float(v.value() or 0.0)) for r, v in zip(replicas, q)}


def min_utilization(
    replicas: Sequence[Replica], demand_qps: Mapping[str, float], profiles: Sequence[ModelProfile]
) -> float:
    """The smallest u for which eq. 2-3 are feasible (the limit of §4.4's descent from 100%);
    raises ``LoadBalancingError`` when even u = 100% is infeasible."""
    _check_demand(demand_qps, replicas)
    if not any(qps > 0 for qps in demand_qps.values()):
        return 0.0
    problem, _, u = _problem(replicas, demand_qps, _runtimes(profiles), None)
    problem.solve(_SOLVER)
    if pulp.LpStatus[problem.status] != "Optimal":
        raise LoadBalancingError(f"eq. 1-3 have no solution for demand {dict(demand_qps)}")
    assert u is not None
    value = float(u.value())
    if value > 1.0 + _TOLERANCE:
        raise LoadBalancingError(
            f"the placement needs GPU utilisation {value:.3f} > 100% for demand {dict(demand_qps)}"
        )
    return value
