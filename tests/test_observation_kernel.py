"""The core's instance-observation kernel (``servegym_core``'s ``InstanceObservation``) against
the numpy path of ``envs.observation.InstanceFeatures``, side by side: two envs on the compiled
engine, seeded alike and driven by the same random masked actions, one filling its matrix in the
kernel and one with numpy (``use_kernel=False``), give the same float32 matrix bit for bit at every
step, the same live slots and the same load (``InstanceLoad``) that the envs' contexts read. Every
env ID on every scenario it supports: prefix caching and the routed request's cached prefix
(mooncake; default and cascadia cache with no shared prefixes), tiers (multitier), reasoning and a TPOT target (pascal), a PD split
on GPU combos (cauchy_autoscaling), deploys and drains (Scaling-v0)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.observation import InstanceFeatures, InstanceLoad, instance_fields
from envs.random_policy import random_masked_action
from simulator.backends import make_cluster
from simulator.instance import InstanceConfig

SEED = 2026  # not the golden trajectories' seed: other states
STEPS = {"servegym/Routing-v0": 150, "servegym/Tier-v0": 80, "servegym/Migration-v0": 100,
         "servegym/Scaling-v0": 100, "servegym/Cascade-v0": 100}
VARIANTS = {"servegym/Migration-v0": ({}, {"mode": "phase"})}
HEADROOM = np.array([0.0, 0.05, 0.1, 0.3])  # per tier: F_full's charge (Llumnix-K eq. 1-4)
LOAD_FIELDS = ("ids", "table", "lifecycle", "total_blocks", "block_size", "requests", "batch", "occupied",
               "used_blocks", "head_of_line_blocks", "tier_requests")


def supported_cases() -> list[tuple[str, str, dict]]:
    found = []
    for env_id in envs.ENV_IDS:
        for scenario in envs.scenario_names():
            for options in VARIANTS.get(env_id, ({},)):
                try:
                    gym.make(env_id, scenario=scenario, **options).close()
                except ValueError:  # the env refuses the scenario (tests/golden/index.json lists them)
                    continue
                found.append((env_id, scenario, options))
    return found


CASES = supported_cases()


def assert_same_load(kernel: InstanceLoad, reference: InstanceLoad, where: str) -> None:
    for name in LOAD_FIELDS:
        np.testing.assert_array_equal(getattr(kernel, name), getattr(reference, name), err_msg=f"{where}: load.{name}")
    assert kernel.beyond_tiers == reference.beyond_tiers, where
    assert np.array_equal(kernel.freeness(), reference.freeness()), where


@pytest.mark.parametrize(("env_id", "scenario", "options"), CASES,
                         ids=[f"{e.split('/')[1]}-{s}{''.join(f'-{k}_{v}' for k, v in o.items())}" for e, s, o in CASES])
def test_kernel_matrix_equals_the_numpy_path(env_id, scenario, options):
    kernel_env = gym.make(env_id, scenario=scenario, backend="compiled", **options).unwrapped
    numpy_env = gym.make(env_id, scenario=scenario, backend="compiled", **options).unwrapped
    numpy_env.features.use_kernel = False
    rng = np.random.default_rng(SEED)
    observations = (kernel_env.reset(seed=SEED)[0], numpy_env.reset(seed=SEED)[0])
    seen_rows = set()
    for step in range(STEPS[env_id]):
        where = f"{env_id} {scenario} step {step}"
        kernel_matrix, numpy_matrix = observations[0]["instances"], observations[1]["instances"]
        assert kernel_env.features._kernel_filled and not numpy_env.features._kernel_filled, where
        assert kernel_matrix.dtype == numpy_matrix.dtype == np.float32
        assert np.array_equal(kernel_matrix, numpy_matrix), (
            f"{where}: columns {sorted({kernel_env.features.names[c] for c in np.argwhere(kernel_matrix != numpy_matrix)[:, 1]})}")
        np.testing.assert_array_equal(kernel_env.features.slots, numpy_env.features.slots, err_msg=where)
        for headroom in (kernel_env.features.default_headroom, HEADROOM[:kernel_env.features.num_tiers]):
            freeness = kernel_env.features.freeness_full(headroom)
            assert np.array_equal(freeness, numpy_env.features.freeness_full(headroom)), where
            assert np.array_equal(freeness, numpy_env.features.load.freeness_full(headroom)), where
        assert_same_load(kernel_env.features.load, numpy_env.features.load, where)
        seen_rows.update(np.flatnonzero(kernel_matrix[:, 0]).tolist())
        mask = np.asarray(kernel_env.action_masks()).reshape(-1)
        np.testing.assert_array_equal(mask, np.asarray(numpy_env.action_masks()).reshape(-1), err_msg=where)
        action = random_masked_action(kernel_env.action_space, mask, rng)
        results = kernel_env.step(action), numpy_env.step(action)
        assert results[0][1] == results[1][1], where
        observations = results[0][0], results[1][0]
        if results[0][3]:
            observations = (kernel_env.reset()[0], numpy_env.reset()[0])
    assert seen_rows  # some slot held a live instance


def seeded_run(env_id: str, scenario: str):
    """The kernel env of a side-by-side run, and its observation, at each step."""
    env = gym.make(env_id, scenario=scenario, backend="compiled").unwrapped
    rng = np.random.default_rng(SEED)
    observation = env.reset(seed=SEED)[0]
    for _ in range(STEPS[env_id]):
        yield env, observation
        action = random_masked_action(env.action_space, np.asarray(env.action_masks()).reshape(-1), rng)
        observation, _, _, done, _ = env.step(action)
        if done:
            observation = env.reset()[0]


@pytest.mark.parametrize(("env_id", "scenario", "column"), [
    ("servegym/Routing-v0", "mooncake", "prefix_match_tokens"),
    ("servegym/Routing-v0", "mooncake", "cache_occupancy"),
    ("servegym/Routing-v0", "mooncake", "prefix_hit_rate"),
    ("servegym/Routing-v0", "multitier", "tier_3"),
    ("servegym/Routing-v0", "pascal", "reasoning"),
    ("servegym/Tier-v0", "pascal", "pacer_behind"),
    ("servegym/Routing-v0", "cauchy_autoscaling", "role_prefill"),
    ("servegym/Routing-v0", "cauchy_autoscaling", "role_decode"),
    ("servegym/Scaling-v0", "cascadeserve", "starting"),
    ("servegym/Scaling-v0", "default", "draining"),
    ("servegym/Routing-v0", "default", "service_time_ewma"),
])
def test_the_side_by_side_runs_reach_each_family(env_id, scenario, column):
    """The comparison above is not vacuous: its runs set each scenario family's columns."""
    assert any(observation["instances"][:, env.features.column[column]].any()
               for env, observation in seeded_run(env_id, scenario))


def test_the_side_by_side_runs_reach_empty_and_stopped_slots():
    """Scaling-v0 on cauchy_autoscaling (a PD split on GPU combos) has empty slots (None) and
    slots whose instance stopped: rows the kernel leaves empty."""
    empty = stopped = 0
    for env, _ in seeded_run("servegym/Scaling-v0", "cauchy_autoscaling"):
        slots = env.slot_instance_ids()
        empty += None in slots
        stopped += len(env.features.slots) < sum(slot is not None for slot in slots)
    assert empty and stopped


def compiled_cluster(**options):
    cluster = make_cluster({"A100-80GB": 3}, router=None, track_arrays=True, backend="compiled", **options)
    for _ in range(3):
        cluster.deploy(InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024"), ready_now=True)
    return cluster


def test_kernel_slots_leave_empty_and_stopped_rows_empty():
    """Row k describes slots[k]; None rows and rows of stopped instances stay all zeros, as numpy's;
    requests of a tier beyond the features' tiers count in the last one, and F_full refuses them."""
    from simulator.request import Request

    kernel_cluster, numpy_cluster = compiled_cluster(), compiled_cluster()
    features = [InstanceFeatures(5, 1, None, reasoning=False), InstanceFeatures(5, 1, None, reasoning=False,
                                                                              use_kernel=False)]
    matrices = []
    for cluster, feature in zip((kernel_cluster, numpy_cluster), features):
        cluster.submit([Request(request_id=i, arrival_s=0.1 * i, prompt_tokens=300 + 10 * i, output_tokens=20,
                                tier=i % 2)
                        for i in range(6)])
        for _ in range(4):
            decision = cluster.advance()
            cluster.dispatch(decision.seq, decision.seq.request_id % 3)
        cluster.drain(2)
        matrices.append(feature.fill(cluster, [None, 2, 0, None, 1]).copy())
    assert features[0]._kernel_filled and not features[1]._kernel_filled
    assert np.array_equal(matrices[0], matrices[1])
    assert not matrices[0][[0, 3]].any() and matrices[0][[1, 2, 4], 0].tolist() == [1.0, 1.0, 1.0]
    assert matrices[0][1, features[0].column["draining"]] == 1.0
    assert features[0].slots.tolist() == [1, 2, 4]
    requests = features[0].load.requests  # every tier's, folded into tier 0
    assert requests.sum() == 4 and features[0].load.tier_requests[:, 0].tolist() == requests.tolist()
    assert matrices[0][[1, 2, 4], features[0].column["tier_0"]].tolist() == (requests / (requests + 16.0)).astype(
        np.float32).tolist()
    for feature in features:
        with pytest.raises(ValueError, match="requests of a tier beyond the 1 headroom fractions"):
            feature.freeness_full(np.zeros(1))
    with pytest.raises(ValueError, match="6 instance slots asked, more than the 5"):
        features[0].fill(kernel_cluster, [0, 1, 2, None, None, None])
    with pytest.raises(ValueError, match="instance 7 does not exist"):
        features[0].fill(kernel_cluster, [7])


def test_a_python_completion_hook_keeps_the_numpy_path():
    """Outcomes a Python hook records are not in the engine's log, which the kernel folds into the
    service-time EWMAs: such a cluster is observed with numpy; a hook set after the kernel took
    over a cluster raises, naming it."""
    from simulator.request import Request

    hooked = compiled_cluster(completion_hook=lambda cluster, instance, seq: True)
    hooked.submit([Request(request_id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=5)])
    features = InstanceFeatures(3, 1, None, reasoning=False)
    features.fill(hooked, None, hooked.advance().seq)
    assert not features._kernel_filled
    plain = compiled_cluster()
    plain.submit([Request(request_id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=5)])
    features.fill(plain)
    assert features._kernel_filled
    plain.completion_hook = lambda cluster, instance, seq: True
    with pytest.raises(ValueError, match="a Python completion hook was set after the observation kernel took over"):
        features.fill(plain)


def test_an_instance_without_a_prefix_cache_has_empty_cache_columns_beside_caching_ones():
    """Prefix-cache columns on a cluster where one instance caches and one does not: the one
    without a cache, still decoding its request, reports occupancy and hit rate 0 (its counters are −1), the caching one its
    blocks over its KV capacity and its hits over its lookups; the routed request's cached
    prefix is read only with ``prefix_match`` (without it the column does not exist). The kernel
    and numpy fill the same matrix."""
    from simulator.request import BlockHashes, Request

    def cluster():
        made = make_cluster({"A100-80GB": 2}, router=None, track_arrays=True, backend="compiled")
        for caching in (True, False):
            made.deploy(InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024",
                                       prefix_caching=caching, block_size=16), ready_now=True)
        made.submit([Request(i, 0.5 * i, 64, 400, block_hashes=BlockHashes(16, (1, 2, 3, 4 + i))) for i in range(4)])
        for i in range(3):  # requests 0 and 2 on the caching instance, 1 on the other; 3 is routed next
            decision = made.advance()
            made.dispatch(decision.seq, i % 2)
        return made, made.advance().seq

    matrices = {}
    for prefix_match in (True, False):
        for use_kernel in (True, False):
            made, routed = cluster()
            features = InstanceFeatures(2, 1, None, reasoning=False, prefix_caching=True, prefix_match=prefix_match,
                                        use_kernel=use_kernel)
            matrices[prefix_match, use_kernel] = (features.fill(made, None, routed).copy(), features.column)
    for prefix_match in (True, False):
        (kernel, column), (numpy_matrix, _) = matrices[prefix_match, True], matrices[prefix_match, False]
        np.testing.assert_array_equal(kernel, numpy_matrix)
        assert kernel[1, column["cache_occupancy"]] == kernel[1, column["prefix_hit_rate"]] == 0.0
        assert kernel[0, column["cache_occupancy"]] > 0.0 and kernel[0, column["prefix_hit_rate"]] > 0.0
        assert ("prefix_match_tokens" in column) == prefix_match
    column = matrices[True, True][1]
    assert matrices[True, True][0][0, column["prefix_match_tokens"]] > 0.0
    assert matrices[True, True][0][1, column["prefix_match_tokens"]] == 0.0


def test_slots_with_no_live_instance_give_an_empty_matrix():
    """Every slot empty or stopped: no live row, an all-zero matrix, in numpy as in the kernel; the
    live slots stay an integer array (the envs' contexts index with it)."""
    for use_kernel in (True, False):
        cluster = compiled_cluster()
        cluster.drain(0)
        cluster.advance()  # the drained instance stops at once: it serves nothing
        features = InstanceFeatures(3, 1, None, reasoning=False, use_kernel=use_kernel)
        matrix = features.fill(cluster, [None, 0, None])
        assert features.slots.tolist() == [] and features.slots.dtype == np.int64 and not matrix.any()


def test_a_cache_emptied_by_evictions_keeps_its_hit_rate():
    """``prefix_hit_rate`` is hits over lookups for every instance that has a cache, also one
    whose entries all went (evictions under memory pressure: ``entry_blocks`` 0 after hits);
    only an instance without a cache (counters −1) reads 0. Counters given by hand: instance 0
    emptied after 40 GPU and 10 host hits of 100 looked-up tokens, instance 1 holding 8 of its
    32 blocks after 30 of 60, instance 2 without a cache."""

    class Counters:
        def prefix_cache_counters(self, ids: list[int]) -> np.ndarray:
            return np.array([[0, 100, 40, 10], [8, 60, 30, 0], [-1, -1, -1, -1]], dtype=np.int64)[ids]

    features = InstanceFeatures(3, 1, None, reasoning=False, prefix_caching=True, use_kernel=False)
    column = features.column
    raw = np.zeros((max(column.values()) + 1, 3))
    features._prefix_cache(Counters(), np.arange(3), raw, np.array([32.0, 32.0, 32.0]), None)
    np.testing.assert_array_equal(raw[column["prefix_hit_rate"]], [0.5, 0.5, 0.0])
    np.testing.assert_array_equal(raw[column["cache_occupancy"]], [0.0, 0.25, 0.0])


def test_the_numpy_path_equals_the_kernel_under_swaps_and_overdue_answers():
    """PASCAL's scheduler on two small KV pools (40 blocks) that preempt by swapping, reasoning
    requests arriving every 20 ms, a 20 ms TPOT target: swapped requests and answers overdue
    (reasoning ended over one TPOT target ago, no answer token since) fill the matrix most of
    the run. With and without the per-request counts, and without a target (nothing is ever
    overdue then), numpy's matrix is the kernel's every 50 ms."""
    from simulator.request import Request

    def cluster():
        made = make_cluster({"A100-80GB": 2}, router="round_robin", track_arrays=True, backend="compiled")
        for _ in range(2):
            made.deploy(InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024", scheduler="pascal",
                                       kv_blocks=40, block_size=16, preemption="swap"), ready_now=True)
        rng = np.random.default_rng(3)
        made.submit([Request(i, 0.02 * i, int(rng.integers(30, 120)), 240, reasoning_tokens=int(rng.integers(20, 200)))
                     for i in range(60)])
        return made

    for detailed, tpot_target_s in ((True, 0.02), (False, 0.02), (True, None)):
        kernel_cluster, numpy_cluster = cluster(), cluster()
        kernel = InstanceFeatures(2, 1, tpot_target_s, reasoning=detailed)
        numpy_features = InstanceFeatures(2, 1, tpot_target_s, reasoning=detailed, use_kernel=False)
        column = kernel.column
        swapped = overdue = 0
        for now_s in np.arange(0.05, 4.0, 0.05).tolist():
            kernel_cluster.advance(until_s=now_s)
            numpy_cluster.advance(until_s=now_s)
            matrix = kernel.fill(kernel_cluster)
            np.testing.assert_array_equal(matrix, numpy_features.fill(numpy_cluster), err_msg=f"t={now_s}")
            swapped += matrix[:, column["swapped"]].any()
            overdue += matrix[:, column["answers_overdue"]].any()
        assert kernel._kernel_filled and not numpy_features._kernel_filled
        assert swapped > 10 and (overdue > 10 if detailed and tpot_target_s else overdue == 0)


def test_requests_beyond_the_features_tiers_fold_into_the_last_with_several_tiers():
    """Two tiers observed, requests of tiers 0, 1 and 2: tier_1 counts tiers 1 and 2, in the
    kernel and in numpy alike, and the load keeps one column per observed tier."""
    from simulator.request import Request

    matrices, loads = [], []
    for use_kernel in (True, False):
        cluster = compiled_cluster()
        cluster.submit([Request(request_id=i, arrival_s=0.0, prompt_tokens=100, output_tokens=50, tier=i % 3)
                        for i in range(6)])
        for _ in range(6):
            decision = cluster.advance()
            cluster.dispatch(decision.seq, 0)
        features = InstanceFeatures(3, 2, None, reasoning=False, use_kernel=use_kernel)
        matrices.append(features.fill(cluster).copy())
        loads.append(features.load)
    np.testing.assert_array_equal(matrices[0], matrices[1])
    for load in loads:
        assert load.tier_requests.shape == (3, 2) and load.tier_requests[0].tolist() == [2, 4] and load.beyond_tiers


def test_features_moved_to_another_cluster_read_its_hardware():
    """One ``InstanceFeatures`` filled from a one-instance H100 cluster, then from a one-instance
    A100 cluster (as an env's features across resets), gives the A100's matrix that features
    new to it give, in the kernel and in numpy."""

    def cluster(gpu: str):
        made = make_cluster({gpu: 1}, router="round_robin", track_arrays=True, backend="compiled")
        made.deploy(InstanceConfig(gpu=gpu, model="Llama-3.1-8B", engine="vidur-2024"), ready_now=True)
        made.submit([])
        return made

    for use_kernel in (True, False):
        moved = InstanceFeatures(1, 1, None, reasoning=False, use_kernel=use_kernel)
        moved.fill(cluster("H100-80GB"))
        a100 = cluster("A100-80GB")
        matrix = moved.fill(a100).copy()
        assert moved._kernel_filled == use_kernel
        np.testing.assert_array_equal(matrix, InstanceFeatures(1, 1, None, reasoning=False).fill(a100))
        h100 = InstanceFeatures(1, 1, None, reasoning=False).fill(cluster("H100-80GB"))
        assert matrix[0, moved.column["gpu_tflops"]] < h100[0, moved.column["gpu_tflops"]]


def test_the_live_slots_are_read_only_after_either_fill():
    """``InstanceFeatures.slots`` is the fill's own array, documented read-only: writing to it raises."""
    for use_kernel in (True, False):
        cluster = compiled_cluster()
        cluster.submit([])
        features = InstanceFeatures(3, 1, None, reasoning=False, use_kernel=use_kernel)
        features.fill(cluster, [2, None, 0])
        assert features.slots.tolist() == [0, 2]
        with pytest.raises(ValueError, match="read-only"):
            features.slots[0] = 1


def test_static_features_are_each_instances_role_and_hardware_by_hand():
    """Role flags and the hardware of all the instance's GPUs, by hand: an aggregated H100 at
    TP 2, a prefill-only A100 and a decode-only A100 at TP 4 (TFLOP/s, GB/s and USD/h are the
    GPU's times its count); the matrix's role columns say the same."""
    from hardware.gpus import get_gpu
    from simulator.instance import Role

    cluster = make_cluster({"H100-80GB": 2, "A100-80GB": 5}, router=None, track_arrays=True, backend="compiled")
    configs = [("H100-80GB", 2, Role.AGGREGATED), ("A100-80GB", 1, Role.PREFILL), ("A100-80GB", 4, Role.DECODE)]
    for gpu, tp, role in configs:
        cluster.deploy(InstanceConfig(gpu=gpu, model="Llama-3.1-8B", engine="vidur-2024", tp=tp, role=role),
                       ready_now=True)
    cluster.submit([])
    features = InstanceFeatures(3, 1, None, reasoning=False)
    matrix = features.fill(cluster)
    expected = np.array([[role == Role.AGGREGATED, role == Role.PREFILL, role == Role.DECODE,
                          get_gpu(gpu).fp16_tflops * tp, get_gpu(gpu).mem_bandwidth_gbps * tp,
                          get_gpu(gpu).price_per_hour_usd * tp] for gpu, tp, role in configs], dtype=float).T
    np.testing.assert_array_equal(features.static_features, expected)
    roles = [features.column[name] for name in ("role_aggregated", "role_prefill", "role_decode")]
    np.testing.assert_array_equal(matrix[:, roles], np.eye(3, dtype=np.float32))


def test_feature_defaults():
    """Before any fill there is no load, no live slot and no static feature; by default no prefix-cache columns, PASCAL's 500-token
    token quantum (PASCAL §V's setup), and per-request counts only with reasoning or more than one tier."""
    features = InstanceFeatures(2, 1, None, reasoning=False)
    assert features.load is None and features.fresh_quantum_tokens == 500
    assert features.slots.dtype == np.int64 and features.slots.shape == (0,) and features.static_features.shape == (6, 0)
    assert "cache_occupancy" not in features.column and "prefix_match_tokens" not in features.column
    assert tuple(field.name for field in instance_fields(1)) == features.names
    caching = InstanceFeatures(2, 1, None, reasoning=False, prefix_caching=True)  # the routed request's prefix: only asked
    assert "cache_occupancy" in caching.column and "prefix_match_tokens" not in caching.column
    assert tuple(field.name for field in instance_fields(1, prefix_caching=True)) == caching.names
    assert not features.per_request_detail
    assert InstanceFeatures(2, 2, None, reasoning=False).per_request_detail
    assert InstanceFeatures(2, 1, None, reasoning=True).per_request_detail
