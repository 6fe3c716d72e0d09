"""Session affinity: every turn of a conversation to the same instance, by consistent hashing
of its session id (the vLLM production stack's ``SessionRouter``, vllm-project/production-stack
``src/vllm_router/routers/routing_logic.py``: a ``uhashring`` ring of the endpoints, and the
endpoint with the lowest QPS for a request without a session id).

The ring places ``VIRTUAL_NODES`` points per routable instance (uhashring's default, 160) at
MD5 hashes of ``"<instance id>-<point>"``; a session goes to the first point at or after the
MD5 of its id, wrapping around. Adding or removing an instance moves only the sessions whose
points it takes or gives up. Requests without a session go to the instance with the fewest
requests (the simulator keeps no per-instance QPS; fewest requests is the load it does keep)."""

from __future__ import annotations

import bisect
import hashlib
from typing import TYPE_CHECKING

from simulator.routers.base import fewest_requests

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.sequence import Sequence

VIRTUAL_NODES = 160


def _point(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "big")


class SessionAffinityRouter:
    """Consistent hashing of ``request.session_id`` over the routable instances."""

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._points: list[int] = []
        self._owners: list[int] = []

    def _ring(self, ids: list[int]) -> None:
        if ids == self._ids:
            return
        points = sorted((_point(f"{instance_id}-{k}"), instance_id) for instance_id in ids for k in range(VIRTUAL_NODES))
        self._ids = ids
        self._points = [point for point, _ in points]
        self._owners = [owner for _, owner in points]

    def owner(self, session_id: int, ids: list[int]) -> int:
        """The instance among ``ids`` (non-empty) that session ``session_id`` maps to."""
        self._ring(ids)
        position = bisect.bisect_left(self._points, _point(str(session_id))) % len(self._points)
        return self._owners[position]

    def __call__(self, cluster: Cluster, seq: Sequence) -> int:
        ids = cluster.routable_ids()
        session = seq.request.session_id
        if session is None or not ids:
            return fewest_requests(cluster, ids, seq)
        return self.owner(session, ids)
