"""What a global router is: a callable ``router(cluster, seq) -> instance id`` the cluster asks
at every arrival (``Cluster(router=...)``), and the load measure several routers share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.sequence import Sequence

Router = Callable[["Cluster", "Sequence"], int]


def fewest_requests(cluster: Cluster, ids: Iterable[int], seq: Sequence | None) -> int:
    """The instance among ``ids`` holding the fewest requests (waiting, running or swapped),
    the lowest id on ties; raises (naming ``seq``) when ``ids`` is empty."""
    instances = cluster.instances
    best_id, best_load = -1, 0
    for instance_id in ids:
        load = instances[instance_id].num_requests
        if best_id < 0 or load < best_load or (load == best_load and instance_id < best_id):
            best_id, best_load = instance_id, load
    if best_id < 0:
        raise RuntimeError("no serving instance can take " + ("a request" if seq is None else f"request {seq.request_id}"))
    return best_id
