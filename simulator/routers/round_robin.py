"""Round-robin over the instances that take new requests (the cluster's default router)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.sequence import Sequence


class RoundRobinRouter:
    """The i-th arrival goes to ``routable_ids()[i mod n]`` (n the routable instances then)."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, cluster: Cluster, seq: Sequence) -> int:
        ids = cluster.routable_ids()
        if not ids:
            raise RuntimeError(f"no serving instance can take request {seq.request_id}")
        choice = ids[self.next % len(ids)]
        self.next += 1
        return choice
