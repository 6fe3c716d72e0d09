"""Routing between groups of instances deployed together (Scaling-v0's units: an aggregated
instance, or a prefill instance with its decode instances, Cauchy §3.1): the serving unit
with the fewest outstanding requests per unit of its routing weight, counting the new one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from simulator.instance import Lifecycle

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.sequence import Sequence

Units = Callable[[], Iterable[tuple[tuple[int, ...], float]]]
"""The units now: (instance ids, entry first; routing weight) each."""


class WeightedUnitRouter:
    """To the entry of the unit whose entry serves and whose (requests on its instances + 1) /
    weight is lowest; the first such unit on ties."""

    def __init__(self, units: Units) -> None:
        self.units = units

    def __call__(self, cluster: Cluster, seq: Sequence) -> int:
        best_id, best_load = -1, 0.0
        instances = cluster.instances
        for instance_ids, weight in self.units():
            entry = instances[instance_ids[0]]
            if entry.lifecycle != Lifecycle.SERVING:
                continue
            outstanding = sum(instances[i].num_requests for i in instance_ids)
            load = (outstanding + 1) / weight
            if best_id < 0 or load < best_load:
                best_id, best_load = entry.instance_id, load
        if best_id < 0:
            raise RuntimeError(f"no serving unit can take request {seq.request_id}")
        return best_id
