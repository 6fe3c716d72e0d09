"""Routing by a static plan's GPU shares (Mélange's run-time router, Cauchy §4.2): each
request's class (e.g. its length bucket) has shares per GPU type; the request goes to a GPU type
by smooth weighted round-robin over its class's shares, then to that type's serving instance
with the fewest requests (lowest id on ties)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING

from simulator.instance import Lifecycle
from simulator.request import Request
from simulator.routers.base import fewest_requests
from simulator.routers.weighted_rr import SmoothWeightedRoundRobin

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.sequence import Sequence


class GpuShareRouter:
    """``shares[class][gpu]`` (weights >= 0, some positive per class); ``class_of(request)``
    names a class of ``shares``."""

    def __init__(self, shares: Mapping[Hashable, Mapping[str, float]], class_of: Callable[[Request], Hashable]) -> None:
        self.turns = {key: (list(row), SmoothWeightedRoundRobin(list(row.values()))) for key, row in shares.items()}
        self.class_of = class_of

    def __call__(self, cluster: Cluster, seq: Sequence) -> int:
        key = self.class_of(seq.request)
        if key not in self.turns:
            raise ValueError(f"request {seq.request_id} is of class {key!r}, which the plan lacks: {sorted(map(str, self.turns))}")
        gpus, turn = self.turns[key]
        gpu = gpus[turn.pick()]
        serving = [i.instance_id for i in cluster.instances.values() if i.lifecycle == Lifecycle.SERVING and i.gpu.name == gpu]
        if not serving:
            raise RuntimeError(f"the plan sends class {key} to {gpu}, which has no serving instance")
        return fewest_requests(cluster, serving, seq)
