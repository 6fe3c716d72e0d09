"""The accuracy-SLO pieces of the gear planner (CascadeServe §3 "accuracy SLO", §4.3, App. C.2).

With an SLO on accuracy CascadeServe "optimize[s] latency while achieving the desired accuracy"
(§3). The accuracy of a gear plan is "the time-weighted average of all cascades being used in the
gear plan" (App. C.2), the time share of each QPS range following a Zipf distribution by default:
low-QPS ranges occur more often, so the planner "will assign accurate cascades to low-QPS regimes"
(App. C.2). The user may instead re-plan with a measured QPS distribution (App. C.2), which
``measured_weights`` turns into range weights.

Workload adaption (§4.3) starts from "the cheapest cascade if the SLO is on accuracy" and changes a
range's cascade only on an error. Our SP2 makes that choice exact: among the assignments of
Pareto-front cascades to ranges, it takes the one with the least expected load
``Σ_i w_i · qps_i · work(c_i)`` (GPU-seconds per second, ``qps_i`` the range's mid-point; less
load on the same hardware is less queueing, so lower latency) subject to the time-weighted
accuracy ``Σ_i w_i · accuracy(c_i) >= SLO``, higher ranges never getting a costlier cascade than
lower ones, and range i at most ``cap_i`` (an SP3 error at range i caps it below its cascade:
§4.3's downgrade). A small MILP (PuLP + CBC) solves it; all cheapest is its answer whenever the
cheapest cascade meets the SLO.

SP4 (§4.5) has no latency target to meet here, so it picks the minimum queue length with the
lowest simulated p95 (``fastest_min_queue_length``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pulp

from baselines.cascadeserve.batch_tuning import GearSimulation, simulate_gear
from baselines.cascadeserve.cascade_search import CascadeStats
from baselines.cascadeserve.profiles import ModelProfile, Replica

ZIPF_EXPONENT = 1.0  # App. C.2 names no exponent; 1 is the classic Zipf law
_SOLVER = pulp.PULP_CBC_CMD(msg=False)
_TOLERANCE = 1e-9


def zipf_weights(n_ranges: int, exponent: float = ZIPF_EXPONENT) -> np.ndarray:
    """App. C.2's default QPS distribution: range i (0 = lowest QPS) has time share ∝ (i + 1)^-s."""
    if isinstance(n_ranges, bool) or not isinstance(n_ranges, int) or n_ranges < 1:
        raise ValueError(f"n_ranges must be a positive integer, got {n_ranges!r}")
    if not (isinstance(exponent, (int, float)) and math.isfinite(exponent) and exponent >= 0):
        raise ValueError(f"the Zipf exponent must be a finite number >= 0, got {exponent!r}")
    weights = np.arange(1, n_ranges + 1, dtype=np.float64) ** -float(exponent)
    return weights / weights.sum()


def measured_weights(qps_samples: Sequence[float], qps_max: float, n_ranges: int) -> np.ndarray:
    """The time share of each of the ``n_ranges`` equal ranges of (0, qps_max] among measured QPS
    values (one per measurement interval; App. C.2's re-planning with the measured distribution).
    A sample goes to the range ``GearPlan.gear_index`` would pick (above qps_max: the last)."""
    samples = np.asarray(qps_samples, dtype=np.float64)
    if samples.ndim != 1 or samples.size == 0 or not np.all(np.isfinite(samples)) or np.any(samples < 0):
        raise ValueError(f"qps_samples must be a non-empty list of finite values >= 0, got {list(qps_samples)[:8]}")
    if not (isinstance(qps_max, (int, float)) and math.isfinite(qps_max) and qps_max > 0):
        raise ValueError(f"qps_max must be a positive finite number, got {qps_max!r}")
    if isinstance(n_ranges, bool) or not isinstance(n_ranges, int) or n_ranges < 1:
        raise ValueError(f"n_ranges must be a positive integer, got {n_ranges!r}")
    index = np.minimum((samples // (qps_max / n_ranges)).astype(np.int64), n_ranges - 1)
    return np.bincount(index, minlength=n_ranges) / samples.size


def normalized_weights(weights: Sequence[float], n_ranges: int) -> np.ndarray:
    """``weights`` checked (one per range, >= 0, some > 0) and scaled to sum to 1."""
    values = np.asarray(weights, dtype=np.float64)
    if values.shape != (n_ranges,) or not np.all(np.isfinite(values)) or np.any(values < 0) or values.sum() <= 0:
        raise ValueError(f"QPS weights must be {n_ranges} finite values >= 0 with a positive sum, got {list(weights)}")
    return values / values.sum()


def plan_accuracy(qualities: Sequence[float], weights: Sequence[float]) -> float:
    """App. C.2: the time-weighted average accuracy of the gears' cascades."""
    return float(np.dot(np.asarray(qualities, dtype=np.float64), np.asarray(weights, dtype=np.float64)))


def expected_load(front: Sequence[CascadeStats], assignment: Sequence[int], weights: Sequence[float],
                  ranges: Sequence[tuple[float, float]]) -> float:
    """SP2's objective: Σ_i w_i · mid-QPS_i · work of range i's cascade (GPU-seconds per second)."""
    return float(sum(w * 0.5 * (low + high) * front[c].work_s for w, c, (low, high) in zip(weights, assignment, ranges)))


def assign_for_accuracy(
    front: Sequence[CascadeStats],
    weights: Sequence[float],
    ranges: Sequence[tuple[float, float]],
    accuracy_slo: float,
    caps: Sequence[int] | None = None,
) -> list[int] | None:
    """SP2 with an accuracy SLO (module docstring): front indices per range (cheapest-first
    front), or None when no assignment within ``caps`` reaches ``accuracy_slo``."""
    n, size = len(ranges), len(front)
    if size == 0:
        raise ValueError("the Pareto front is empty")
    if len(weights) != n:
        raise ValueError(f"{n} ranges need {n} weights, got {len(weights)}")
    limits = [size - 1] * n if caps is None else list(caps)
    if len(limits) != n or any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < size for c in limits):
        raise ValueError(f"caps must be {n} front indices in [0, {size - 1}], got {caps!r}")
    problem = pulp.LpProblem("cascadeserve_accuracy_assignment", pulp.LpMinimize)
    x = {(i, c): problem.add_variable(f"x_{i}_{c}", cat="Binary") for i in range(n) for c in range(limits[i] + 1)}
    mids = [0.5 * (low + high) for low, high in ranges]
    problem += pulp.lpSum(weights[i] * mids[i] * front[c].work_s * var for (i, c), var in x.items())
    for i in range(n):
        problem += pulp.lpSum(x[i, c] for c in range(limits[i] + 1)) == 1
    index = [pulp.lpSum(c * x[i, c] for c in range(limits[i] + 1)) for i in range(n)]
    for i in range(n - 1):
        problem += index[i] >= index[i + 1]
    problem += pulp.lpSum(weights[i] * front[c].quality * var for (i, c), var in x.items()) >= accuracy_slo - _TOLERANCE
    problem.solve(_SOLVER)
    if pulp.LpStatus[problem.status] != "Optimal":
        return None
    return [next(c for c in range(limits[i] + 1) if (x[i, c].value() or 0.0) > 0.5) for i in range(n)]


def fastest_min_queue_length(
    cascade: CascadeStats,
    models: Sequence[str],
    profiles: Sequence[ModelProfile],
    load_qps: Mapping[Replica, float],
    qps: float,
    scores: np.ndarray,
    threshold_levels: int,
    duration_s: float,
) -> tuple[int, GearSimulation]:
    """§4.5 without a latency target: the first model's minimum queue length (1 up to its profiled
    maximum batch) with the lowest simulated p95, the shorter on ties; the search stops once p95
    exceeds twice the best seen (longer queues only add waiting from there)."""
    first = next(m for m, share in zip(models, cascade.stage_shares) if share > 0)
    max_batch = next(p.max_batch for p in profiles if p.name == first)
    best_length, best = 0, None
    for length in range(1, max_batch + 1):
        result = simulate_gear(cascade, models, profiles, load_qps, qps, length, scores, threshold_levels, duration_s)
        if best is None or result.latency_p95_s < best.latency_p95_s:
            best_length, best = length, result
        elif result.latency_p95_s > 2 * best.latency_p95_s:
            break
    assert best is not None
    return best_length, best
