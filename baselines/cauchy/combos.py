"""The combos Cauchy's planner considers (Cauchy §3.3.2): counts run "from 1:1 to 2:6", so
with one prefill instance of TP = prefill count the shapes are 1P1D, 1P2D, 1P3D at TP 1 (1:1,
1:2, 1:3) and at TP 2 (2:2, 2:4, 2:6), plus the aggregated ``<1 x G>`` and ``<2 x G>`` of each
GPU type (§3.3.1). A ``Combo`` itself is a deployment unit of the simulator
(``simulator.combos``)."""

from __future__ import annotations

from collections.abc import Iterable

from simulator.combos import Combo

COUNT_SHAPES: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (1, 3), (2, 2), (2, 4), (2, 6))
AGGREGATED_SIZES: tuple[int, ...] = (1, 2)


def enumerate_combos(
    gpu_types: Iterable[str],
    count_shapes: Iterable[tuple[int, int]] = COUNT_SHAPES,
    aggregated_sizes: Iterable[int] = AGGREGATED_SIZES,
) -> list[Combo]:
    """Every ordered (prefill type, decode type) pair, the same type included, at every count
    shape, then the aggregated combos of each type (§3.3.2: "both homogeneous and
    heterogeneous combinations with different prefill-decode counts")."""
    types = list(dict.fromkeys(gpu_types))
    if not types:
        raise ValueError("no GPU types to combine")
    shapes = list(count_shapes)
    combos = [Combo(p, np_, d, nd) for p in types for d in types for np_, nd in shapes]
    return combos + [Combo(g, n) for g in types for n in aggregated_sizes]
