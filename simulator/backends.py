"""The simulation engines, by name: the compiled core (``"compiled"``, the default) and the Python
reference engine (``"python"``). Both serve the same events in the same order with the same
floating-point operations, so their outcomes are equal bit for bit (``tests/test_compiled_engine.py``,
the golden trajectories). The compiled one raises, naming it, on anything it does not run; the
Python one is for reading or stepping through the simulation in Python (``Sequence`` objects,
every scheduler's queues)."""

from __future__ import annotations

from typing import Any

from simulator.cluster import Cluster
from simulator.combo_cluster import ComboCluster
from simulator.compiled import CompiledCluster
from simulator.compiled_combos import CompiledComboCluster

CLUSTERS: dict[str, type[Cluster]] = {"compiled": CompiledCluster, "python": Cluster}
"""The cluster class of each engine."""
COMBO_CLUSTERS: dict[str, type[ComboCluster]] = {"compiled": CompiledComboCluster, "python": ComboCluster}
"""The GPU-combo cluster class of each engine (``simulator.combo_cluster``)."""
DEFAULT_BACKEND = "compiled"


def check_backend(backend: Any) -> str:
    """``backend`` when it names an engine; anything else raises naming it and the known ones."""
    if not isinstance(backend, str) or backend not in CLUSTERS:
        raise ValueError(f"backend {backend!r}: unknown; known: {', '.join(CLUSTERS)}")
    return backend


def make_cluster(gpu_inventory: dict[str, int], *, backend: str = DEFAULT_BACKEND, **options: Any) -> Cluster:
    """A ``Cluster`` (``Cluster``'s arguments) on the engine ``backend``."""
    return CLUSTERS[check_backend(backend)](gpu_inventory, **options)


def make_combo_cluster(gpu_inventory: dict[str, int], *, backend: str = DEFAULT_BACKEND, **options: Any) -> ComboCluster:
    """A ``ComboCluster`` (its arguments) on the engine ``backend``."""
    return COMBO_CLUSTERS[check_backend(backend)](gpu_inventory, **options)
