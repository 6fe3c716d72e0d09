"""Every refusal of ``envs.observation`` says what is wrong in its whole message (anchored
matches): a cluster without instance arrays, F_full before any fill, and the two ways a compiled
cluster stops being one the observation kernel may fill (a Python completion hook set after it
took over, outcomes the engine's log does not hold)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.observation import InstanceFeatures, InstanceLoad
from simulator.backends import make_cluster
from simulator.instance import InstanceConfig
from simulator.request import Request

NO_ARRAYS = "^the cluster keeps no instance arrays: build it with track_arrays=True$"


def cluster_of(track_arrays: bool):
    cluster = make_cluster({"A100-80GB": 2}, router=None, track_arrays=track_arrays, backend="compiled")
    for _ in range(2):
        cluster.deploy(InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024"), ready_now=True)
    cluster.submit([Request(request_id=i, arrival_s=0.1 * i, prompt_tokens=100, output_tokens=5) for i in range(3)])
    return cluster


def test_a_cluster_without_instance_arrays_is_refused_by_load_and_fill():
    cluster = cluster_of(track_arrays=False)
    with pytest.raises(ValueError, match=NO_ARRAYS):
        InstanceLoad(cluster, np.arange(2), 1)
    with pytest.raises(ValueError, match=NO_ARRAYS):
        InstanceFeatures(2, 1, None, reasoning=False).fill(cluster)


def test_freeness_full_before_any_fill_is_refused():
    with pytest.raises(ValueError, match=r"^freeness_full\(\) before any fill$"):
        InstanceFeatures(2, 1, None, reasoning=False).freeness_full(np.zeros(1))


def test_a_hook_set_after_the_kernel_took_over_is_refused():
    cluster = cluster_of(track_arrays=True)
    features = InstanceFeatures(2, 1, None, reasoning=False)
    features.fill(cluster)
    assert features._kernel_filled
    cluster.completion_hook = lambda cluster, instance, seq: True
    with pytest.raises(ValueError, match="^a Python completion hook was set after the observation kernel took over the "
                                         "cluster$"):
        features.fill(cluster)


def test_outcomes_outside_the_engines_log_are_refused_naming_both_counts():
    """Once the kernel folds the engine's outcome log into the service-time EWMAs, an outcome the
    cluster holds beyond that log (here one appended by hand) would make them differ."""
    cluster = cluster_of(track_arrays=True)
    features = InstanceFeatures(2, 1, None, reasoning=False)
    features.fill(cluster)
    cluster.outcomes.append(object())
    with pytest.raises(ValueError, match="^1 outcomes in the cluster, 0 in the engine's log: the observation kernel's "
                                         "service-time EWMAs would differ$"):
        features.fill(cluster)
