"""Cauchy's combo autoscaler (Cauchy §3.5, Algorithm 1) on Scaling-v0: it acts only once a
full 2-minute window has passed, covers the deficit with a CO-LP plan, never exceeds the
inventory, scales in after the 30 s grace period; and the static baseline never acts."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401
from agents.rollout import run_episode
from envs.scaling import ADD, HOLD, REMOVE

GOODPUT = {"<2xH800-SXM>": 20.0, "<2xA800-PCIe>": 10.0, "<2xH20-NVL>": 15.0}
KINDS = ("H800-SXM", "A800-PCIe", "H20-NVL")  # the cauchy preset's kinds, TP 2 each, 2 deployed
SLOTS = 24


class FakeCluster:
    """What Scaling-v0 shows the policy: per kind serving / starting / draining and its masks
    (add needs 2 free GPUs of the type and a free slot; remove needs one serving and two
    serving overall). Added instances serve at the next tick; removed ones stop at once."""

    def __init__(self) -> None:
        self.serving = np.array([2, 2, 2])

    def observation(self, schema, qps: float) -> dict[str, np.ndarray]:
        mask = np.zeros((len(KINDS), 3), dtype=np.float32)
        mask[:, HOLD] = 1.0
        mask[:, ADD] = (2 * self.serving + 2 <= 8) & (self.serving.sum() < SLOTS)
        mask[:, REMOVE] = (self.serving > 0) & (self.serving.sum() >= 2)
        return schema.encode(context={"arrivals_per_s": qps, "serving_units": self.serving}, action_mask=mask.reshape(-1))

    def apply(self, action: np.ndarray) -> None:
        self.serving = self.serving + (action == ADD) - (action == REMOVE)
        assert np.all(2 * self.serving <= 8), "more GPUs than the inventory"


@pytest.fixture(scope="module")
def env():
    return gym.make("servegym/Scaling-v0", scenario="cauchy", scaling_window_s=30.0, episode_requests=50)


def run(env, qps_per_tick: list[float], **options) -> tuple[list[np.ndarray], FakeCluster]:
    policy = baselines.make("cauchy_autoscaler", env, goodput_rps=GOODPUT, **options)
    cluster, actions = FakeCluster(), []
    for qps in qps_per_tick:
        action, _ = policy.predict(cluster.observation(env.unwrapped.schema, qps))
        cluster.apply(action)
        actions.append(action)
    return actions, cluster


def test_scales_out_only_after_a_full_window_above_the_threshold(env):
    # provisioned: 2 x (20 + 10 + 15) = 90 req/s; 130 req/s is 44% above it (threshold 20%)
    actions, cluster = run(env, [0.0, 130.0, 130.0, 130.0, 130.0, 130.0])
    assert all(np.all(a == HOLD) for a in actions[:4])  # ticks 0-3: the 2-minute window is not full
    assert np.any(actions[4] == ADD)  # tick 4 = 120 s
    added = cluster.serving - 2
    assert added @ np.array([20.0, 10.0, 15.0]) >= 40.0  # the plan covers the 40 req/s deficit


def test_decides_on_the_window_average_not_a_single_sample(env):
    # Alg. 1 Lines 7-11: a 130 req/s sample in a window of 90s averages 100 (11% over 90):
    # hold; one more lifts the 4-sample window (90, 90, 130, 130) to 110, 22% over: scale out
    actions, cluster = run(env, [0.0, 90.0, 90.0, 90.0, 130.0, 130.0])
    assert all(np.all(a == HOLD) for a in actions[:5])
    assert actions[5].tolist() == [ADD, HOLD, HOLD] and cluster.serving.tolist() == [3, 2, 2]  # +20 covers 20


def test_waits_a_full_window_after_scaling(env):
    # tick 4 scales out for the 40 req/s deficit: 2 x H800 + 1 x A800 (+50), carried out at
    # ticks 4-5, so 140 req/s are provisioned. The window at tick 7 (130, 185, 185, 185)
    # averages 171 > 1.2 x 140, but Line 7 holds until tick 8 = 4 ticks after the scaling,
    # where (185, 185, 185, 150) averages 176: deficit 36 the free GPUs can cover (A800 +10,
    # 2 x H20 +30)
    actions, cluster = run(env, [0.0] + [130.0] * 4 + [185.0] * 3 + [150.0])
    assert actions[4].tolist() == [ADD, ADD, HOLD] and actions[5].tolist() == [ADD, HOLD, HOLD]
    assert all(np.all(a == HOLD) for a in actions[6:8])
    assert np.any(actions[8] == ADD)


def test_no_scaling_within_the_threshold(env):
    actions, cluster = run(env, [0.0] + [105.0] * 12)  # 105 - 90 = 15 < 0.2 x 90
    assert all(np.all(a == HOLD) for a in actions) and cluster.serving.tolist() == [2, 2, 2]


def test_never_scales_beyond_the_inventory(env):
    # 170 req/s: a deficit of 80 the free GPUs (2 more of each kind: +90) can cover; then a
    # demand no inventory can meet, which must add nothing more
    actions, cluster = run(env, [0.0] + [170.0] * 6 + [10_000.0] * 12)
    assert np.all(2 * cluster.serving <= 8)
    assert cluster.serving @ np.array([20.0, 10.0, 15.0]) >= 170.0
    late = actions[8:]
    assert all(not np.any(a == ADD) for a in late)


def test_scales_in_after_the_grace_period(env):
    # 38 req/s against 90 provisioned: excess 52 -> largest first while it fits: H800 (20),
    # H800 (20), not H20 (15 > 12 left), A800 (10); 40 req/s stay
    actions, cluster = run(env, [0.0, 38.0, 38.0, 38.0, 38.0, 38.0, 38.0])
    assert np.all(actions[4] == HOLD)  # decided at 120 s, carried out 30 s later
    assert actions[5].tolist() == [REMOVE, REMOVE, HOLD]
    assert actions[6].tolist() == [REMOVE, HOLD, HOLD]  # one per kind per step
    assert cluster.serving.tolist() == [0, 1, 2]


def test_static_holds_and_an_episode_runs(env):
    static = baselines.make("cauchy_static", env)
    assert static.predict(FakeCluster().observation(env.unwrapped.schema, 500.0))[0].tolist() == [HOLD] * 3
    metrics = run_episode(env, baselines.make("cauchy_autoscaler", env, goodput_rps=GOODPUT), seed=0)
    assert metrics["invalid_actions"] == 0 and metrics["completed"] == 50


def test_bad_options_raise(env):
    with pytest.raises(ValueError, match="window_s=100 s is not a whole number of the env's 30 s"):
        baselines.make("cauchy_autoscaler", env, goodput_rps=GOODPUT, window_s=100.0)
    with pytest.raises(ValueError, match="ratio must be a positive number, got -0.2"):
        baselines.make("cauchy_autoscaler", env, goodput_rps=GOODPUT, ratio=-0.2)
    with pytest.raises(ValueError, match=r"no positive goodput for <2xH20-NVL>"):
        baselines.make("cauchy_autoscaler", env, goodput_rps={"<2xH800-SXM>": 1.0, "<2xA800-PCIe>": 1.0})


def test_one_unit_action_mode_static_holds_and_multi_change_policies_refuse_it():
    def make(action: str) -> gym.Env:
        return gym.make("servegym/Scaling-v0", scenario="cauchy", action=action, scaling_window_s=30.0,
                        episode_requests=50)

    one_unit, per_kind = make("one_unit"), make("per_kind")
    static = baselines.make("cauchy_static", one_unit)
    assert static.predict(one_unit.reset(seed=0)[0])[0] == 0  # Discrete hold
    assert run_episode(one_unit, static, seed=0) == run_episode(per_kind, baselines.make("cauchy_static", per_kind), seed=0)
    for name in ("cauchy_autoscaler", "cauchy_aggregated", "llumnix_scaling"):
        with pytest.raises(ValueError, match=rf"policy '{name}' drives servegym/Scaling-v0 with action in \['per_kind'\], not 'one_unit'"):
            baselines.make(name, one_unit)
