"""K-tier Llumnix dispatch (Llumnix-K §3.4): the instance with the highest full
freeness F_full under per-tier headroom budgets (``simulator.headroom``, eq. 1-4). Tier-v0's
router (its action sets the budgets), and Migration-v0's ``router="llumnix"`` with the paper's
default budgets."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from simulator.headroom import check_headroom_fractions, freeness_full, head_of_line_demand_blocks
from simulator.instance_arrays import (
    KV_TOTAL_BLOCKS,
    KV_USED_BLOCKS,
    LIFECYCLE,
    LIFECYCLE_CODES,
    RUNNING,
    SWAPPED,
    WAITING,
    WIDTH,
)

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.sequence import Sequence

SERVING = LIFECYCLE_CODES["serving"]


class FreestInstanceRouter:
    """``freest_instance`` under ``headroom_fractions`` (checked once here; Tier-v0 replaces
    them between decisions through ``set_headroom``)."""

    def __init__(self, headroom_fractions: np.ndarray) -> None:
        self.headroom_fractions = check_headroom_fractions(headroom_fractions)

    def set_headroom(self, fractions: np.ndarray) -> None:
        """Budgets already checked by the caller (Tier-v0 checks them when its action sets them)."""
        self.headroom_fractions = fractions

    def __call__(self, cluster: Cluster, seq: Sequence) -> int:
        return _freest_instance(cluster, seq, self.headroom_fractions)


def freest_instance(cluster: Cluster, seq: Sequence, headroom_fractions: np.ndarray) -> int:
    """Dispatch rule of Llumnix-K §3.4: the serving, non-draining instance that can
    take ``seq`` (not decode-only, same model) with the highest F_full under
    ``headroom_fractions`` (``simulator.headroom.freeness_full``; from the cluster's arrays when it
    keeps them, else instance by instance); ties go to the lowest instance id."""
    return _freest_instance(cluster, seq, check_headroom_fractions(headroom_fractions))


def _freest_instance(cluster: Cluster, seq: Sequence, fractions: np.ndarray) -> int:
    """``freest_instance`` for ``fractions`` already checked (``TierEnv`` checks its budgets
    when they are set, not at every arrival)."""
    if cluster.arrays is None:
        return _freest_instance_by_instance(cluster, seq, fractions)
    ids = np.flatnonzero(cluster.accepting(seq)).tolist()
    if not ids:
        raise RuntimeError(f"no serving instance can take request {seq.request_id}")
    freeness = serving_freeness_full(cluster, ids, fractions)
    return ids[freeness.index(max(freeness))]


def serving_freeness_full(cluster: Cluster, ids: list[int], headroom_fractions: np.ndarray) -> list[float]:
    """F_full of the serving instances ``ids``, read entry by entry from the cluster's array
    buffers: the float operations of ``InstanceLoad.freeness_full`` (so the same values, bit for
    bit), without its ~25 numpy calls, which cost more than the arithmetic for the few
    instances of a cluster and ran at every arrival."""
    arrays = cluster.arrays
    assert arrays is not None
    instances, values, tier_values, tiers = cluster.instances, arrays.values, arrays.tier_values, arrays.tiers
    fractions = headroom_fractions.tolist()
    charged = any(fractions)
    num_tiers = len(fractions)
    result = []
    for instance_id in ids:
        start = instance_id * WIDTH
        if values[start + LIFECYCLE] != SERVING:
            raise ValueError(f"instance {instance_id} is not serving")
        counts = tier_values[instance_id * tiers:(instance_id + 1) * tiers]
        if any(counts[num_tiers:]):
            raise ValueError(f"requests of a tier beyond the {num_tiers} headroom fractions")
        running = values[start + RUNNING]
        queued = values[start + WAITING] + values[start + SWAPPED] > 0
        batch = running + queued
        if batch == 0:
            result.append(math.inf)
            continue
        instance = instances[instance_id]
        usage_blocks = values[start + KV_USED_BLOCKS] + instance.unsynced_kv_blocks()
        if queued:
            usage_blocks += head_of_line_demand_blocks(instance)
        usage = float(usage_blocks)
        total = values[start + KV_TOTAL_BLOCKS]
        if charged:
            present = 0.0
            for tier, fraction in enumerate(fractions):
                if tier < tiers and counts[tier] > 0:
                    present = present + fraction
            usage = usage + total * present
        result.append((total - usage) / batch)
    return result


def _freest_instance_by_instance(cluster: Cluster, seq: Sequence, headroom_fractions: np.ndarray) -> int:
    best_id, best_freeness = -1, -math.inf
    for instance_id in np.flatnonzero(cluster.accepting(seq)).tolist():
        instance = cluster.instances[instance_id]
        value = freeness_full(instance, headroom_fractions)
        if best_id < 0 or value > best_freeness:
            best_id, best_freeness = instance.instance_id, value
    if best_id < 0:
        raise RuntimeError(f"no serving instance can take request {seq.request_id}")
    return best_id
