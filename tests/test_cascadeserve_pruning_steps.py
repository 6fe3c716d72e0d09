"""CascadeServe §4.4's greedy pruning (baselines.cascadeserve.pruning) works out once per step
what every candidate shares: the placement keys of "this placement without one replica" equal
the keys built from scratch, and pruning gives the placement that candidate-by-candidate
evaluation gives (pruning_utility without the step's shared values), on random deployments."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.cascadeserve.profiles import Device, ModelProfile, Replica, full_replication
from baselines.cascadeserve.pruning import PlacementError, _PlacementKeys, prune_placement, pruning_utility


def reference_key(devices: list[Device], replicas: list[Replica]) -> tuple:
    """The placement up to node and device permutations, from scratch."""
    on_device: dict[int, list[tuple[str, int]]] = {d.index: [] for d in devices}
    for r in replicas:
        for d in r.devices:
            on_device[d].append((r.model, len(r.devices)))
    nodes: dict[int, list[tuple]] = {}
    for device in devices:
        nodes.setdefault(device.node, []).append((device.memory_gb, tuple(sorted(on_device[device.index]))))
    return tuple(sorted(tuple(sorted(n)) for n in nodes.values()))


def deployment(rng: np.random.Generator) -> tuple[list[ModelProfile], list[Device]]:
    nodes, per_node = int(rng.integers(1, 4)), int(rng.choice([2, 4]))
    memory = [float(rng.choice([16.0, 32.0])) for _ in range(nodes)]
    devices = [Device(n * per_node + i, n, memory[n]) for n in range(nodes) for i in range(per_node)]
    models = [ModelProfile(name, tuple(rt * b for b in range(1, 5)), float(gb), gpus)
              for name, rt, gb, gpus in (("S", 0.02, 3.0, 1), ("M", 0.05, 9.0, 1), ("L", 0.2, 14.0, 2))]
    return models, devices


def test_keys_without_each_replica_equal_keys_from_scratch() -> None:
    rng = np.random.default_rng(3)
    for _ in range(40):
        models, devices = deployment(rng)
        placement = list(full_replication(models, devices))
        kept = [r for r in placement if rng.random() < 0.7] or placement[:1]
        keys = _PlacementKeys({d.index: d for d in devices}, kept)
        assert keys.without(None) == reference_key(devices, kept)
        for position, replica in enumerate(kept):
            assert keys.without(replica) == reference_key(devices, kept[:position] + kept[position + 1:])


def test_pruning_with_shared_step_values_equals_candidate_by_candidate() -> None:
    rng = np.random.default_rng(5)
    pruned = 0
    for _ in range(12):
        models, devices = deployment(rng)
        demands = [{"S": float(rng.uniform(1, 20)), "M": float(rng.uniform(0, 8)), "L": float(rng.uniform(0, 2))}
                   for _ in range(int(rng.integers(1, 4)))]
        placement = full_replication(models, devices)
        try:
            fast = prune_placement(placement, models, devices, demands)
        except PlacementError as error:
            fast = str(error)
        slow = _prune_one_by_one(list(placement), models, devices, demands)
        assert fast == slow
        pruned += isinstance(fast, tuple) and len(fast) < len(placement)
    assert pruned >= 4  # the cases prune something


def _prune_one_by_one(placement: list[Replica], models: list[ModelProfile], devices: list[Device],
                      demands: list[dict[str, float]]) -> tuple[Replica, ...] | str:
    """prune_placement's loop with every candidate evaluated on its own (no shared step values)."""
    placement = sorted(placement)
    used = {m.name: m.memory_gb_per_device for m in models}
    while True:
        load = {d.index: 0.0 for d in devices}
        for r in placement:
            for d in r.devices:
                load[d] += used[r.model]
        if not any(load[d.index] > d.memory_gb for d in devices):
            return tuple(placement)
        utilities = [pruning_utility(r, placement, models, devices, demands) for r in placement]
        best = max(range(len(placement)), key=lambda i: (utilities[i], -i))
        if not utilities[best] > 0:
            return prune_placement_error(placement, models, devices, demands)
        placement.pop(best)


def prune_placement_error(placement: list[Replica], models: list[ModelProfile], devices: list[Device],
                          demands: list[dict[str, float]]) -> str:
    with pytest.raises(PlacementError) as raised:
        prune_placement(placement, models, devices, demands)
    return str(raised.value)
