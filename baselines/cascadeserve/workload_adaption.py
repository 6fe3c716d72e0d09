"""SP2, workload adaption (CascadeServe §4.3): split [0, qps_max] into n_ranges equal QPS
ranges and give each a cascade from the Pareto front (cheapest first).

With a latency SLO the non-SLO metric is accuracy, so every range starts with the most accurate
cascade; an infeasibility error for range i *downgrades* it to the next cheaper cascade. Which
range an error names is the later submodules' call (SP4: the range missing the SLO; SP3: the
first range, by time share, whose cascade cannot be placed, ``planner``). Our one addition:
ranges above i are capped at i's new cascade, so a higher QPS never gets a costlier cascade than
a lower one (the error at i would recur at any higher QPS with a costlier cascade).
"""

from __future__ import annotations

import math


def qps_ranges(qps_max: float, n_ranges: int) -> list[tuple[float, float]]:
    """``n_ranges`` equal ranges (low, high] covering (0, qps_max]."""
    if isinstance(n_ranges, bool) or not isinstance(n_ranges, int) or n_ranges < 1:
        raise ValueError(f"n_ranges must be a positive integer, got {n_ranges!r}")
    if not (isinstance(qps_max, (int, float)) and math.isfinite(qps_max) and qps_max > 0):
        raise ValueError(f"qps_max must be a positive finite number, got {qps_max!r}")
    width = qps_max / n_ranges
    return [(i * width, (i + 1) * width) for i in range(n_ranges)]


def initial_assignment(front_size: int, n_ranges: int) -> list[int]:
    """Every range gets the most accurate cascade (index ``front_size - 1`` of a cheapest-first front)."""
    if front_size < 1:
        raise ValueError(f"the Pareto front is empty (size {front_size})")
    return [front_size - 1] * n_ranges


def downgrade(assignment: list[int], range_index: int) -> list[int] | None:
    """Range ``range_index`` gets the next cheaper cascade and no higher range keeps a costlier
    one; None when it already has the cheapest (the error goes back to cascade search)."""
    if not 0 <= range_index < len(assignment):
        raise ValueError(f"range_index must be in [0, {len(assignment) - 1}], got {range_index!r}")
    if assignment[range_index] == 0:
        return None
    cap = assignment[range_index] - 1
    return [a if i < range_index else min(a, cap) for i, a in enumerate(assignment)]
