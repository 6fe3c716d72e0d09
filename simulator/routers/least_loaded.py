"""Least loaded: the routable instance with the fewest requests (vLLM production stack's and
most gateways' baseline; Migration-v0's ``router="least_loaded"``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.routers.base import fewest_requests

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.sequence import Sequence


class LeastLoadedRouter:
    """Fewest requests (waiting + running + swapped) among the routable instances; lowest id on ties."""

    def __call__(self, cluster: Cluster, seq: Sequence) -> int:
        return fewest_requests(cluster, cluster.routable_ids(), seq)
