"""Model placement by greedy pruning (CascadeServe §4.4, eq. 4).

Start from a placement (§4.1: every model on every device) and prune, one replica at a time, the
one with the highest pruning utility until no device's memory is over-allocated:

    util(r) = freed(r) / u_max(r),  freed(r) = Σ_d min(m_over(d), m_freed(d, r))

``u_max(r)`` is the largest minimal GPU utilisation (eq. 1-3, ``load_balancer``) over the
demands (one per QPS range's cascade) that use r's model, with r pruned. util(r) = −∞ when r is
the last replica a used model may keep (or ``min_replicas`` forbids pruning it, §4.4 "Error
handling") or the load balancer fails without r.

Eq. 4 as printed puts Σ_d max(0, m_over(d) − m_freed(d, r)) — the over-allocation *left* after
pruning r — in the numerator; that rewards pruning replicas that free nothing and is 0 exactly
when a pruning resolves all over-allocation, contradicting §4.4's text ("how much over-allocated
memory is freed by pruning it"; an error when no utility is > 0). We use the freed part.
A replica no demand uses has u_max = 0 and is pruned first (utility +∞ when it frees memory).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from baselines.cascadeserve.load_balancer import LoadBalancingError, min_utilization
from baselines.cascadeserve.profiles import Device, ModelProfile, Replica


class PlacementError(ValueError):
    """No pruning step with positive utility is left while memory is still over-allocated."""


def overallocation_gb(
    replicas: Sequence[Replica], profiles: Mapping[str, ModelProfile], devices: Sequence[Device]
) -> dict[int, float]:
    """``m_over(d)``: memory placed on each device beyond its capacity (GB, >= 0)."""
    used = {d.index: 0.0 for d in devices}
    for r in replicas:
        for d in r.devices:
            used[d] += profiles[r.model].memory_gb_per_device
    return {d.index: max(0.0, used[d.index] - d.memory_gb) for d in devices}


def freed_overallocation_gb(replica: Replica, over_gb: Mapping[int, float], profiles: Mapping[str, ModelProfile]) -> float:
    """Σ_d min(m_over(d), m_freed(d, r)): over-allocated memory that pruning ``replica`` frees."""
    return sum(min(over_gb[d], profiles[replica.model].memory_gb_per_device) for d in replica.devices)


def _distinct_peaks(demands: list[dict[str, float]]) -> list[dict[str, float]]:
    """The demands that matter for u_max: the minimal u of eq. 2-3 scales linearly with the
    demand, so of demands proportional to each other (one cascade at several QPS) only the
    largest is kept."""
    kept: list[dict[str, float]] = []
    for demand in sorted(demands, key=lambda d: -sum(d.values())):
        total = sum(demand.values())
        shape = {m: q / total for m, q in demand.items()} if total > 0 else {}
        if not any(
            set(k) == set(demand) and all(abs(k[m] / sum(k.values()) - shape[m]) < 1e-12 for m in k) for k in kept
        ):
            kept.append(demand)
    return kept


class _Utilization:
    """``u_max`` with a cache over placements equal up to node and device permutations."""

    def __init__(self, profiles: Sequence[ModelProfile], devices: Sequence[Device], demands: Sequence[Mapping[str, float]],
                 cache: dict[tuple, float] | None = None):
        self.profiles = list(profiles)
        self.devices = {d.index: d for d in devices}
        self.demands = _distinct_peaks([dict(x) for x in demands])
        self._demand_keys = [tuple(sorted(demand.items())) for demand in self.demands]
        self._cache: dict[tuple, float] = {} if cache is None else cache

    def _placement_key(self, replicas: Sequence[Replica]) -> tuple:
        """The placement up to node and device permutations: per node, its devices' (memory,
        replicas on it as (model, devices spanned)), sorted."""
        return _PlacementKeys(self.devices, replicas).without(None)

    def u_max(self, replicas: Sequence[Replica], model: str, placement: tuple | None = None) -> float:
        """Max over the demands that use ``model`` of the minimal utilisation; +inf if infeasible.
        ``placement``: ``replicas``' placement key when the caller has it."""
        worst = 0.0
        for i, demand in enumerate(self.demands):
            if demand.get(model, 0.0) <= 0:
                continue
            placement = self._placement_key(replicas) if placement is None else placement
            key = self._demand_keys[i], placement
            if key not in self._cache:
                try:
                    self._cache[key] = min_utilization(replicas, demand, self.profiles)
                except LoadBalancingError:
                    self._cache[key] = math.inf
            worst = max(worst, self._cache[key])
        return worst


class _PlacementKeys:
    """``_Utilization._placement_key`` of a placement with one replica taken out, for each of its
    replicas in turn: the devices' sorted contents are worked out once, and taking a replica out
    redoes only the nodes it spans (the same key, value for value)."""

    def __init__(self, devices: Mapping[int, Device], replicas: Sequence[Replica]) -> None:
        self.devices = devices
        self.on_device: dict[int, list[tuple[str, int]]] = {i: [] for i in devices}
        for r in replicas:
            for d in r.devices:
                self.on_device[d].append((r.model, len(r.devices)))
        self.node_devices: dict[int, list[int]] = {}
        for index, device in devices.items():
            self.node_devices.setdefault(device.node, []).append(index)
        self.node_keys = {node: self._node_key(node, None) for node in self.node_devices}

    def _node_key(self, node: int, taken: Replica | None) -> tuple:
        entries = []
        for index in self.node_devices[node]:
            contents = self.on_device[index]
            if taken is not None and index in taken.devices:
                contents = list(contents)
                contents.remove((taken.model, len(taken.devices)))
            entries.append((self.devices[index].memory_gb, tuple(sorted(contents))))
        return tuple(sorted(entries))

    def without(self, taken: Replica | None) -> tuple:
        """The key of the placement without ``taken`` (None: the whole placement)."""
        spanned = set() if taken is None else {self.devices[d].node for d in taken.devices}
        return tuple(sorted(self._node_key(node, taken) if node in spanned else key
                            for node, key in self.node_keys.items()))


def pruning_utility(
    replica: Replica,
    replicas: Sequence[Replica],
    profiles: Sequence[ModelProfile],
    devices: Sequence[Device],
    demands: Sequence[Mapping[str, float]],
    min_replicas: Mapping[str, int] | None = None,
    _utilization: _Utilization | None = None,
    _step: tuple[list[Replica], dict[int, float], _PlacementKeys] | None = None,
) -> float:
    """Eq. 4 (freed reading, module docstring) for pruning ``replica`` from ``replicas``.
    ``_step``: what ``prune_placement`` works out once per step for every candidate (``replicas``
    without ``replica``, the over-allocation, the placement keys)."""
    by_name = {p.name: p for p in profiles}
    utilization = _utilization or _Utilization(profiles, devices, demands)
    remaining = [r for r in replicas if r != replica] if _step is None else _step[0]
    left = sum(r.model == replica.model for r in remaining)
    used = any(d.get(replica.model, 0.0) > 0 for d in utilization.demands)
    if left < (min_replicas or {}).get(replica.model, 0) or (used and left == 0):
        return -math.inf
    u_max = utilization.u_max(remaining, replica.model, None if _step is None else _step[2].without(replica))
    if math.isinf(u_max):
        return -math.inf
    over_gb = overallocation_gb(replicas, by_name, devices) if _step is None else _step[1]
    freed = freed_overallocation_gb(replica, over_gb, by_name)
    if freed <= 0:
        return 0.0
    return math.inf if u_max == 0 else freed / u_max


def prune_placement(
    replicas: Sequence[Replica],
    profiles: Sequence[ModelProfile],
    devices: Sequence[Device],
    demands: Sequence[Mapping[str, float]],
    min_replicas: Mapping[str, int] | None = None,
    u_cache: dict[tuple, float] | None = None,
) -> tuple[Replica, ...]:
    """§4.4 greedy pruning: drop the highest-utility replica until memory fits; ties go to the
    earlier replica in sorted order. Raises ``PlacementError`` when no utility is > 0.
    ``u_cache``: the minimal utilisations by (demand, placement up to permutations), shared by
    the calls of one planner (the same ``profiles`` and ``devices``), which prune for overlapping
    demands again and again."""
    by_name = {p.name: p for p in profiles}
    utilization = _Utilization(profiles, devices, demands, u_cache)
    placement = sorted(replicas)
    distinct = len(set(placement)) == len(placement)  # pruning keeps it so
    while any(v > 0 for v in overallocation_gb(placement, by_name, devices).values()):
        best, best_utility = None, 0.0
        over_gb = overallocation_gb(placement, by_name, devices)
        keys = _PlacementKeys(utilization.devices, placement)
        for position, replica in enumerate(placement):
            # distinct replicas: the rest is the placement without this position
            step = (placement[:position] + placement[position + 1:], over_gb, keys) if distinct else None
            utility = pruning_utility(replica, placement, profiles, devices, demands, min_replicas, utilization, step)
            if utility > best_utility:
                best, best_utility = replica, utility
        if best is None:
            over = {d: round(v, 3) for d, v in overallocation_gb(placement, by_name, devices).items() if v > 0}
            raise PlacementError(f"no replica can be pruned with positive utility; over-allocated GB by device: {over}")
        placement.remove(best)
    return tuple(placement)
