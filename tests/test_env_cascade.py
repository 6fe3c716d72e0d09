"""servegym/Cascade-v0 (minimal): API conformance, threshold mechanics, the quality reward."""

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the IDs)
from envs.base import InvalidActionError
from envs.cascade import CascadeEnv
from envs.rewards import EpisodeQualityReward, EpisodeSLOQualityReward, LatencyConstrainedQualityReward, QualityReward
from simulator.metrics import meets_slo
from envs.scenario import InstanceGroup, Scenario, Workload
from simulator.cascade import expected_quality
from simulator.instance import InstanceConfig
from simulator.outcome import RequestOutcome
from simulator.request import SLO

SMALL, LARGE = "Llama-3.1-8B", "Llama-3.1-70B"


def tiny_cascade(large_instances: int = 1, **overrides) -> Scenario:
    """Llama-3.1-8B -> Llama-3.1-70B on H100s (the Llama cascade of Cascadia App. H)."""
    scenario = Scenario(
        name="tiny_cascade",
        description="8B (1 x H100) -> 70B (TP 4 on H100) cascade, 100 requests",
        reference="test scenario",
        instances=(
            InstanceGroup(InstanceConfig(gpu="H100-80GB", model=SMALL), 1),
            InstanceGroup(InstanceConfig(gpu="H100-80GB", model=LARGE, tp=4), large_instances),
        ),
        workload=Workload(rate_rps=4.0, lengths="sharegpt_cauchy", slo_by_tier=(SLO(e2e_s=20.0),)),
        episode_requests=100,
        control_interval_s=1.0,
        cascade=(SMALL, LARGE),
    )
    return scenario.with_overrides(**overrides)


def run_episode(env, action, seed=0):
    env.reset(seed=seed)
    while True:
        _, _, terminated, truncated, info = env.step(np.array(action))
        assert not terminated
        if truncated:
            return info


def test_gymnasium_and_sb3_checkers_pass():
    env = gym.make("servegym/Cascade-v0", scenario=tiny_cascade(episode_requests=50))
    gym_check_env(env.unwrapped)
    sb3_check_env(CascadeEnv(tiny_cascade(episode_requests=50)))


def test_maskable_ppo_learns_without_error():
    from sb3_contrib import MaskablePPO

    model = MaskablePPO("MultiInputPolicy", CascadeEnv(tiny_cascade(episode_requests=60)), n_steps=64, batch_size=64, seed=0)
    model.learn(256)
    assert model.num_timesteps >= 256


def rollout(seed, steps=25):
    env = CascadeEnv(tiny_cascade())
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    for step in range(steps):
        obs, reward, _, truncated, _ = env.step(np.array([(3 * step) % 11]))
        trace.append((obs, reward))
        if truncated:
            break
    return trace


def test_same_seed_same_trajectory():
    first, second = rollout(1), rollout(1)
    for a, b in zip(first[1:], second[1:]):
        assert a[1] == b[1]
        for key in a[0]:
            assert np.array_equal(a[0][key], b[0][key])
    assert any(a[1] != b[1] for a, b in zip(first[1:], rollout(2)[1:]))


@pytest.mark.parametrize("level, threshold", [(0, 0.0), (8, 80.0), (10, 100.0)])
def test_level_k_accepts_scores_at_least_10k_at_the_small_model(level, threshold):
    env = CascadeEnv(tiny_cascade())
    info = run_episode(env, [level])
    assert env.thresholds() == [threshold]
    requests = {r.request_id: r for r in env.cluster.submitted_requests}
    assert sorted(requests) == sorted(o.request_id for o in env.cluster.outcomes)  # each ends once
    for outcome in env.cluster.outcomes:
        scores = requests[outcome.request_id].quality_by_model
        model = env.cluster.instances[outcome.instance_id].model.name
        assert model == (SMALL if scores[SMALL] >= threshold else LARGE)
        assert outcome.quality == scores[model]
    assert info["episode_metrics"]["quality_mean"] == pytest.approx(np.mean([o.quality for o in env.cluster.outcomes]))


def test_context_reports_thresholds_and_stage_shares():
    env = CascadeEnv(tiny_cascade())
    env.reset(seed=0)
    for _ in range(30):
        before = len(env.cluster.outcomes)
        obs, *_ = env.step(np.array([7]))
        finished = env.cluster.outcomes[before:]
        context = obs["context"]
        assert context[-1] == pytest.approx(0.7)
        if finished:
            on_small = sum(env.cluster.instances[o.instance_id].model.name == SMALL for o in finished)
            assert context[9] == pytest.approx(on_small / len(finished))
            assert context[12] == pytest.approx((len(finished) - on_small) / len(finished))
            assert context[6] == pytest.approx(np.mean([o.quality for o in finished]) / 100, rel=1e-6)


def test_step_reward_is_the_negated_chebyshev_score():
    env = CascadeEnv(tiny_cascade(), quality_min=85.0, quality_penalty_mu=50.0)
    env.reset(seed=3)
    utopia, nadir = expected_quality(LARGE), expected_quality(SMALL)
    checked = 0
    for step in range(60):
        before = len(env.cluster.outcomes)
        _, reward, _, truncated, _ = env.step(np.array([step % 11]))
        finished = env.cluster.outcomes[before:]
        if finished:
            latency_s = np.percentile([o.e2e_s for o in finished], 95)
            quality = np.mean([o.quality for o in finished])
            assert reward == pytest.approx(-latency_s - 50.0 * max(0.0, 85.0 - quality) / (utopia - nadir))
            checked += 1
        else:
            assert reward == 0.0
        if truncated:
            break
    assert checked > 5


def outcome(e2e_s: float, quality: float, rejected: bool = False, slo: SLO = SLO()) -> RequestOutcome:
    return RequestOutcome(
        request_id=0, tier=0, instance_id=0, arrival_s=0.0, prompt_tokens=1, output_tokens=1, reasoning_tokens=0,
        first_scheduled_s=0.0, first_token_s=e2e_s, first_answer_token_s=e2e_s, reasoning_end_s=math.nan,
        finish_s=e2e_s, max_tbt_s=0.0, preempted_s=0.0, num_preemptions=0, num_migrations=0, token_curve=(),
        slo=slo, rejected_reason="exceeds_kv_capacity" if rejected else None, quality=quality,
    )


def test_quality_reward_reproduces_cascadias_worked_example():
    """Cascadia §3.3: z1 = 95, z2 = 75, q_min = 90, mu = 100 (scores on 0-100)."""
    reward = QualityReward(tiny_cascade(), quality_min=90.0, penalty_mu=100.0)
    reward.utopia, reward.nadir = 95.0, 75.0
    assert reward(None, [outcome(11.0, 88.0)] * 20) == pytest.approx(-21.0)
    assert reward(None, [outcome(11.4, 91.0)] * 20) == pytest.approx(-11.4)
    assert reward(None, [outcome(12.2, 93.0)] * 20) == pytest.approx(-12.2)
    assert reward(None, []) == 0.0


def test_quality_reward_p95_and_rejections():
    reward = QualityReward(tiny_cascade(), quality_min=50.0, penalty_mu=10.0)
    finished = [outcome(float(s), 90.0) for s in range(1, 21)]  # p95 of 1..20 = 19.05 (linear)
    assert reward(None, finished) == pytest.approx(-19.05)
    # Two rejected requests score 0: Q = (2 x 90 + 2 x 0) / 4 = 45, shortfall 5 / (z1 - z2).
    mixed = [outcome(2.0, 90.0), outcome(4.0, 90.0), outcome(0.0, math.nan, True), outcome(0.0, math.nan, True)]
    spread = expected_quality(LARGE) - expected_quality(SMALL)
    assert reward(None, mixed) == pytest.approx(-(2.0 + 0.95 * 2.0) - 10.0 * 5.0 / spread)


def test_quality_reward_needs_a_cascade():
    with pytest.raises(ValueError, match="needs a cascade"):
        QualityReward(tiny_cascade(cascade=()))
    with pytest.raises(ValueError, match="quality_min"):
        QualityReward(tiny_cascade(), quality_min=120.0)


def test_stage_without_instance_masks_forwarding():
    twins = [CascadeEnv(tiny_cascade(large_instances=0), invalid_action_penalty=3.0) for _ in range(2)]
    for env in twins:
        env.reset(seed=0)
    assert twins[0].action_masks().tolist() == [True] + [False] * 10
    for _ in range(10):
        obs_bad, reward_bad, _, _, info_bad = twins[0].step(np.array([5]))
        obs_ok, reward_ok, _, _, info_ok = twins[1].step(np.array([0]))
        assert info_bad["invalid_action"] and not info_ok["invalid_action"]
        assert twins[0].thresholds() == [0.0]  # fallback keeps the current thresholds
        assert reward_bad == reward_ok - 3.0
        for key in obs_ok:
            assert np.array_equal(obs_bad[key], obs_ok[key])


def test_strict_raises_on_masked_action():
    env = CascadeEnv(tiny_cascade(large_instances=0), strict=True)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(np.array([1]))


@pytest.mark.parametrize("action", [np.array([11]), np.array([-1]), np.array([1, 1])])
def test_out_of_space_action_raises(action):
    env = CascadeEnv(tiny_cascade())
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(action)


def test_episode_truncates_after_every_request_ended():
    env = CascadeEnv(tiny_cascade(), reward="slo")
    info = run_episode(env, [6], seed=5)
    assert sorted(o.request_id for o in env.cluster.outcomes) == list(range(100))
    assert info["episode_metrics"]["completed"] + info["episode_metrics"]["rejected"] == 100


def test_threshold_levels_change_the_grid():
    env = CascadeEnv(tiny_cascade(), threshold_levels=5)
    env.reset(seed=0)
    env.step(np.array([3]))
    assert env.thresholds() == [75.0]
    assert env.action_space.nvec.tolist() == [5]


@pytest.mark.parametrize(
    "scenario, match",
    [
        (tiny_cascade(cascade=(SMALL,)), "at least two models"),
        (tiny_cascade(cascade=(SMALL, "Llama-3.1-70B", "Llama-2-7B")), "no instance group"),
        (tiny_cascade(cascade=(SMALL, "Llama-2-7B")), "no instance group"),
    ],
)
def test_malformed_cascade_raises(scenario, match):
    with pytest.raises(ValueError, match=match):
        CascadeEnv(scenario, reward="slo")


def test_models_outside_the_cascade_or_empty_first_stage_raise():
    scenario = tiny_cascade()
    extra = scenario.with_overrides(
        instances=scenario.instances + (InstanceGroup(InstanceConfig(gpu="H100-80GB", model="Llama-2-7B"), 1),),
        gpu_inventory={"H100-80GB": 6}, max_instances=3,
    )
    with pytest.raises(ValueError, match="not in its cascade"):
        CascadeEnv(extra)
    with pytest.raises(ValueError, match="first model Llama-3.1-70B has no instance"):
        CascadeEnv(tiny_cascade(large_instances=0, cascade=(LARGE, SMALL)), reward="slo")


@pytest.mark.parametrize("levels", [1, 0, 2.5, True])
def test_bad_threshold_levels_raise(levels):
    with pytest.raises(ValueError, match="threshold_levels"):
        CascadeEnv(tiny_cascade(), threshold_levels=levels)


def arrivals_in(env, window_s):
    now = env.cluster.events.now_s
    return sum(now - window_s < r.arrival_s <= now for r in env.cluster.submitted_requests)


def test_context_measures_qps_over_the_interval_and_the_last_100ms():
    env = CascadeEnv(tiny_cascade(rate_rps=40.0, episode_requests=200), control_interval_s=0.5)
    env.reset(seed=4)
    seen_burst = False
    for _ in range(8):
        obs, *_ = env.step(np.array([5]))
        interval_qps, burst_qps = arrivals_in(env, 0.5) / 0.5, arrivals_in(env, 0.1) / 0.1
        assert obs["context"][0] == pytest.approx(interval_qps / (interval_qps + 16.0), rel=1e-6)
        assert obs["context"][1] == pytest.approx(burst_qps / (burst_qps + 16.0), rel=1e-6)
        seen_burst |= burst_qps != interval_qps
    assert seen_burst


def test_context_reports_queues_per_stage():
    env = CascadeEnv(tiny_cascade(rate_rps=40.0, episode_requests=200))
    env.reset(seed=0)
    obs, *_ = env.step(np.array([10]))  # forward everything: both stages get work
    for stage, model in enumerate((SMALL, LARGE)):
        instances = [i for i in env.cluster.active_instances() if i.model.name == model]
        waiting = sum(len(i.waiting) for i in instances)
        running = sum(len(i.running) for i in instances)
        assert obs["context"][7 + 3 * stage] == pytest.approx(waiting / (waiting + 16.0), rel=1e-6)
        assert obs["context"][8 + 3 * stage] == pytest.approx(running / (running + 16.0), rel=1e-6)
    assert obs["context"][7] + obs["context"][8] > 0


GEARS = [[0.0], [60.0], [100.0]]


def test_gear_mode_sets_each_gears_thresholds():
    env = CascadeEnv(tiny_cascade(), action="gear", gears=GEARS)
    assert env.action_space == gym.spaces.Discrete(3)
    obs, _ = env.reset(seed=0)
    assert env.thresholds() == [0.0] and obs["context"][-1] == 0.0
    for gear, expected in ((2, 100.0), (1, 60.0)):
        obs, *_ = env.step(gear)
        assert env.thresholds() == [expected]
        assert obs["context"][-2] == pytest.approx(expected / 100) and obs["context"][-1] == pytest.approx(gear / 2)
    gym_check_env(CascadeEnv(tiny_cascade(episode_requests=30), action="gear", gears=GEARS))


def test_gear_plan_equals_the_same_thresholds_in_threshold_mode():
    geared = CascadeEnv(tiny_cascade(), action="gear", gears=[[30.0], [70.0]])
    levels = CascadeEnv(tiny_cascade())
    geared.reset(seed=2)
    levels.reset(seed=2)
    while True:
        _, reward_gear, _, done, _ = geared.step(1)
        _, reward_level, _, _, _ = levels.step(np.array([7]))
        assert reward_gear == reward_level
        if done:
            break
    assert [(o.request_id, o.quality, o.finish_s) for o in geared.cluster.outcomes] == [
        (o.request_id, o.quality, o.finish_s) for o in levels.cluster.outcomes]


def test_gear_mask_needs_the_next_stage_served():
    env = CascadeEnv(tiny_cascade(large_instances=0), action="gear", gears=GEARS, invalid_action_penalty=2.0)
    env.reset(seed=0)
    assert env.action_masks().tolist() == [True, False, False]
    _, reward, _, _, info = env.step(2)
    assert info["invalid_action"] and env.thresholds() == [0.0]


def test_continuous_mode_maps_the_box_to_real_thresholds():
    env = CascadeEnv(tiny_cascade(), action="continuous")
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    obs, _ = env.reset(seed=0)
    assert env.thresholds() == [0.0] and obs["action_mask"].tolist() == [1.0]
    for action, expected in (([0.5], 75.0), ([-0.5], 25.0), ([0.3], 65.0), ([-1.0], 0.0), ([1.0], 100.0)):
        obs, *_ = env.step(np.array(action, dtype=np.float32))
        assert env.thresholds() == [pytest.approx(expected, abs=1e-5)]
        assert obs["context"][-1] == pytest.approx(expected / 100, abs=1e-6)
    gym_check_env(CascadeEnv(tiny_cascade(episode_requests=30), action="continuous"))
    sb3_check_env(CascadeEnv(tiny_cascade(episode_requests=30), action="continuous"))


def test_continuous_action_equals_the_same_threshold_level():
    continuous = CascadeEnv(tiny_cascade(), action="continuous")
    levels = CascadeEnv(tiny_cascade(), threshold_levels=5)
    continuous.reset(seed=3)
    levels.reset(seed=3)
    while True:
        _, reward_box, _, done, _ = continuous.step(np.array([0.5], dtype=np.float32))  # h = 75
        _, reward_level, _, _, _ = levels.step(np.array([3]))  # 100 * 3 / 4 = 75
        assert reward_box == reward_level
        if done:
            break
    assert [(o.request_id, o.quality, o.finish_s) for o in continuous.cluster.outcomes] == [
        (o.request_id, o.quality, o.finish_s) for o in levels.cluster.outcomes]


def test_continuous_mask_needs_the_next_stage_served():
    env = CascadeEnv(tiny_cascade(large_instances=0), action="continuous", invalid_action_penalty=2.0)
    twin = CascadeEnv(tiny_cascade(large_instances=0), action="continuous", invalid_action_penalty=2.0)
    env.reset(seed=0)
    twin.reset(seed=0)
    assert env.action_masks().tolist() == [False]
    _, reward_bad, _, _, info_bad = env.step(np.array([0.2], dtype=np.float32))
    _, reward_ok, _, _, info_ok = twin.step(np.array([-1.0], dtype=np.float32))  # h = 0 is always allowed
    assert info_bad["invalid_action"] and not info_ok["invalid_action"]
    assert env.thresholds() == [0.0] and reward_bad == reward_ok - 2.0
    strict = CascadeEnv(tiny_cascade(large_instances=0), action="continuous", strict=True)
    strict.reset(seed=0)
    with pytest.raises(InvalidActionError):
        strict.step(np.array([-0.9], dtype=np.float32))


@pytest.mark.parametrize("action", [[1.5], [-1.01], [np.nan], [0.0, 0.0]])
def test_continuous_action_outside_the_box_raises(action):
    env = CascadeEnv(tiny_cascade(), action="continuous")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(np.array(action, dtype=np.float32))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"action": "gear"}, "gears are required"),
        ({"gears": GEARS}, "gears are required"),
        ({"action": "continuous", "gears": GEARS}, "gears are required"),
        ({"action": "continuous", "min_queue_lengths": (1, 2)}, "min_queue_lengths needs action='thresholds'"),
        ({"action": "gear", "gears": []}, "at least one gear"),
        ({"action": "gear", "gears": [[0.0, 5.0]]}, "need 1 thresholds"),
        ({"action": "gear", "gears": [[120.0]]}, "120"),
        ({"action": "knob"}, "unknown action mode 'knob'"),
        ({"quality_kind": "elo"}, "unknown quality_kind 'elo'"),
        ({"observe_episode_quality": 1}, "observe_episode_quality 1: must be True or False"),
    ],
)
def test_bad_action_or_quality_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CascadeEnv(tiny_cascade(), **kwargs)


def test_latency_constrained_reward_follows_appendix_c():
    reward = LatencyConstrainedQualityReward(tiny_cascade(), latency_max_s=10.0, penalty_nu=2.0)
    assert reward(None, [outcome(8.0, 90.0)] * 20) == pytest.approx(0.9)  # within budget: Q / 100
    assert reward(None, [outcome(13.0, 90.0)] * 20) == pytest.approx(0.9 - 2.0 * 3.0 / 10.0)
    assert reward(None, []) == 0.0
    assert LatencyConstrainedQualityReward(tiny_cascade()).latency_max_s == 20.0  # the scenario's E2E SLO
    with pytest.raises(ValueError, match="latency_max_s"):
        LatencyConstrainedQualityReward(tiny_cascade(), latency_max_s=-1.0)


def test_env_with_latency_constrained_reward():
    env = CascadeEnv(tiny_cascade(), reward="quality_latency", latency_max_s=5.0, latency_penalty_nu=3.0)
    env.reset(seed=1)
    checked = 0
    for _ in range(40):
        before = len(env.cluster.outcomes)
        _, reward, _, truncated, _ = env.step(np.array([6]))
        finished = env.cluster.outcomes[before:]
        if finished:
            latency_s = np.percentile([o.e2e_s for o in finished], 95)
            quality = np.mean([o.quality for o in finished])
            assert reward == pytest.approx(quality / 100 - 3.0 * max(0.0, latency_s - 5.0) / 5.0)
            checked += 1
        if truncated:
            break
    assert checked > 5


def test_episode_quality_reward_charges_the_running_deficit():
    """r = 4 rps x 1 s = 4 requests an interval; penalty μ · Δdeficit / ((z1 - z2) · r) = 10 · Δ / 80."""
    reward = EpisodeQualityReward(tiny_cascade(), quality_min=80.0, penalty_mu=10.0)
    reward.utopia, reward.nadir = 95.0, 75.0
    reward.reset(None)
    assert reward(None, [outcome(2.0, 70.0)] * 4) == pytest.approx(-2.0 - 10.0 * 40.0 / 80.0)  # deficit 0 -> 40
    assert reward(None, [outcome(3.0, 90.0)] * 4) == pytest.approx(-3.0 + 10.0 * 40.0 / 80.0)  # mean 80: refunded
    assert reward(None, []) == 0.0
    assert reward(None, [outcome(1.0, 75.0)] * 4) == pytest.approx(-1.0 - 10.0 * 20.0 / 80.0)  # deficit 0 -> 20
    assert reward(None, [outcome(1.0, 95.0)] * 4) == pytest.approx(-1.0 + 10.0 * 20.0 / 80.0)  # above target: no credit beyond 0
    assert reward(None, [outcome(1.0, 79.0)] * 4) == pytest.approx(-1.0)  # the interval is short, the episode is not


def test_episode_quality_env_returns_latency_plus_the_episode_shortfall():
    """Over an episode the quality penalties telescope to μ · deficit(end) / ((z1 - z2) · r)."""
    shaped = CascadeEnv(tiny_cascade(), reward="quality_episode", quality_min=90.0, quality_penalty_mu=10.0)
    latency_only = CascadeEnv(tiny_cascade(), reward="quality", quality_penalty_mu=0.0)
    totals = []
    for env in (shaped, latency_only):
        env.reset(seed=2)
        total, truncated = 0.0, False
        while not truncated:
            _, reward, _, truncated, _ = env.step(np.array([3]))
            total += reward
        totals.append(total)
    scores = [o.quality if o.completed else 0.0 for o in shaped.cluster.outcomes]
    deficit = max(0.0, 90.0 * len(scores) - sum(scores))
    assert deficit > 0
    spread = shaped.reward_fn.utopia - shaped.reward_fn.nadir
    assert totals[0] - totals[1] == pytest.approx(-10.0 * deficit / (spread * 4.0), rel=1e-9)


def test_slo_quality_reward_charges_misses_per_expected_arrival_and_the_deficit():
    """r = 4 requests an interval; a miss costs 1 / r, the deficit as in quality_episode."""
    reward = EpisodeSLOQualityReward(tiny_cascade(), quality_min=80.0, penalty_mu=10.0)
    reward.utopia, reward.nadir = 95.0, 75.0
    reward.reset(None)
    slo = SLO(e2e_s=2.0)
    late, on_time = outcome(3.0, 70.0, slo=slo), outcome(1.0, 70.0, slo=slo)
    assert reward(None, [late, on_time, on_time, on_time]) == pytest.approx(-1.0 / 4.0 - 10.0 * 40.0 / 80.0)
    rejected = outcome(0.5, 90.0, rejected=True, slo=slo)  # a rejection misses and scores 0
    # 8 requests scoring 280 + 270: deficit 640 - 550 = 90, grown by 50
    assert reward(None, [rejected] + [outcome(1.0, 90.0, slo=slo)] * 3) == pytest.approx(-1.0 / 4.0 - 10.0 * 50.0 / 80.0)


def test_slo_quality_episode_return_is_misses_plus_the_episode_shortfall():
    """Episode return = −(SLO misses) / r − μ · deficit(end) / ((z1 − z2) · r), r = 4."""
    env = CascadeEnv(tiny_cascade(slo_by_tier=(SLO(e2e_s=5.0),)), reward="slo_quality_episode", quality_min=90.0,
                     quality_penalty_mu=10.0)
    env.reset(seed=2)
    total, truncated = 0.0, False
    while not truncated:
        _, reward, _, truncated, _ = env.step(np.array([3]))
        total += reward
    outcomes = env.cluster.outcomes
    misses = sum(1 for o in outcomes if not meets_slo(o))
    scores = [o.quality if o.completed else 0.0 for o in outcomes]
    deficit = max(0.0, 90.0 * len(scores) - sum(scores))
    assert 0 < misses < len(outcomes) and deficit > 0
    spread = env.reward_fn.utopia - env.reward_fn.nadir
    assert total == pytest.approx(-misses / 4.0 - 10.0 * deficit / (spread * 4.0), rel=1e-9)


def test_episode_quality_context_is_the_running_count_and_mean_score():
    """observe_episode_quality adds (finished so far / E, mean score so far / 100), rejected = 0, to the
    context's end; without it the context is two entries shorter and otherwise the same."""
    plain = CascadeEnv(tiny_cascade(rate_rps=8.0))
    env = CascadeEnv(tiny_cascade(rate_rps=8.0), observe_episode_quality=True)
    observation, _ = env.reset(seed=3)
    assert observation["context"][-2:].tolist() == [0.0, 0.0]
    plain.reset(seed=3)
    seen, truncated = [], False
    while not truncated:
        observation, _, _, truncated, _ = env.step(np.array([6]))
        plain_observation, *_ = plain.step(np.array([6]))
        assert np.array_equal(observation["context"][:-2], plain_observation["context"])
        outcomes = env.cluster.outcomes
        scores = [o.quality if o.completed else 0.0 for o in outcomes]
        expected_mean = sum(scores) / len(scores) if scores else 0.0
        assert observation["context"][-2:] == pytest.approx([len(outcomes) / 100, expected_mean / 100], rel=1e-6)
        seen.append(len(outcomes))
    assert seen[-1] == 100 and 0 < min(seen[1:]) < 100 and 0 < expected_mean < 100


def test_correct_kind_scores_accuracy_and_routes_on_certainty():
    env = CascadeEnv(tiny_cascade(), quality_kind="correct")
    info = run_episode(env, [6])
    signals = env.router.judge_signals
    for o in env.cluster.outcomes:
        model = env.cluster.instances[o.instance_id].model.name
        assert o.quality in (0.0, 100.0)
        assert model == (SMALL if signals[o.request_id][SMALL] >= 60.0 else LARGE)
    assert info["episode_metrics"]["quality_mean"] == pytest.approx(np.mean([o.quality for o in env.cluster.outcomes]))


def test_replay_kind_serves_real_rows():
    env = CascadeEnv(tiny_cascade(), quality_kind="mt_bench")
    run_episode(env, [8])
    allowed = {10.0 * k for k in range(1, 11)} | {85.0, 95.0}
    for r in env.cluster.submitted_requests:
        assert set(r.quality_by_model.values()) <= allowed


def _two_tier_cascade(**overrides) -> Scenario:
    """tiny_cascade with a tier-0 E2E SLO of 20 s and a tier-1 one of 40 s."""
    workload = Workload(rate_rps=4.0, lengths="sharegpt_cauchy", num_tiers=2,
                        slo_by_tier=(SLO(e2e_s=20.0), SLO(e2e_s=40.0)))
    return tiny_cascade(workload=workload, tier_weights=(2.0, 1.0), **overrides)


def test_latency_constrained_reward_defaults_by_hand():
    """L_max: the tier-0 E2E SLO, 20 s; span L_max; ν = 1: an interval at p95 30 s and mean
    score 90 scores 0.9 - 1 x (30 - 20) / 20 = 0.4. A given span of 5 s makes it 0.9 - 10 / 5."""
    scenario = _two_tier_cascade()
    reward = LatencyConstrainedQualityReward(scenario)
    assert (reward.scenario, reward.latency_max_s, reward.latency_span_s, reward.penalty_nu) == (scenario, 20.0, 20.0, 1.0)
    assert reward(None, [outcome(30.0, 90.0)] * 4) == pytest.approx(0.4)
    spanned = LatencyConstrainedQualityReward(scenario, latency_span_s=5.0)
    assert spanned(None, [outcome(30.0, 90.0)] * 4) == pytest.approx(0.9 - 10.0 / 5.0)


def test_latency_constrained_reward_arguments_at_their_boundaries():
    cascade = tiny_cascade()
    small = LatencyConstrainedQualityReward(cascade, latency_max_s=0.5, latency_span_s=0.5, penalty_nu=0.0)
    assert (small.latency_max_s, small.latency_span_s, small.penalty_nu) == (0.5, 0.5, 0.0)
    assert LatencyConstrainedQualityReward(cascade, penalty_nu=0.5).penalty_nu == 0.5
    cases = [
        ({"latency_max_s": 0.0}, r"^latency_max_s must be > 0, got 0\.0$"),
        ({"latency_span_s": 0.0}, r"^latency_span_s must be > 0, got 0\.0$"),
        ({"penalty_nu": -1.0}, r"^penalty_nu must be >= 0, got -1\.0$"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            LatencyConstrainedQualityReward(cascade, **kwargs)
    no_e2e = tiny_cascade(workload=Workload(rate_rps=4.0, lengths="sharegpt_cauchy", slo_by_tier=(SLO(ttft_s=1.0),)))
    with pytest.raises(ValueError, match=r"^reward 'quality_latency' needs latency_max_s: scenario 'tiny_cascade' has no E2E SLO$"):
        LatencyConstrainedQualityReward(no_e2e)
    with pytest.raises(ValueError, match=r"^reward 'quality_latency' needs a cascade of at least two models; "
                                         r"scenario 'tiny_cascade' has cascade=\[\]$"):
        LatencyConstrainedQualityReward(tiny_cascade(cascade=()))


@pytest.mark.parametrize("reward_class, name", [
    (QualityReward, "quality"), (EpisodeQualityReward, "quality_episode"),
    (LatencyConstrainedQualityReward, "quality_latency"),
])
def test_quality_rewards_name_themselves_when_an_outcome_has_no_score(reward_class, name):
    reward = reward_class(tiny_cascade())
    with pytest.raises(ValueError, match=rf"^reward '{name}' needs outcomes with a quality score \(a cascade router\)$"):
        reward(None, [outcome(1.0, math.nan)])


def test_a_new_episode_quality_reward_starts_as_if_reset():
    """r = 4 rps x 0.5 s = 2 requests an interval; a new reward has no deficit: 2 requests at 70
    against q_min 80 open a deficit of 20, a penalty 10 x 20 / ((95 - 75) x 2) = 5."""
    reward = EpisodeQualityReward(tiny_cascade(control_interval_s=0.5), quality_min=80.0, penalty_mu=10.0)
    reward.utopia, reward.nadir = 95.0, 75.0
    assert reward.requests_per_interval == 2.0
    assert reward(None, [outcome(2.0, 70.0)] * 2) == pytest.approx(-2.0 - 5.0)
    assert reward(None, [outcome(1.0, 90.0)] * 2) == pytest.approx(-1.0 + 5.0)  # mean 80: the deficit closes


def test_an_interval_of_rejections_only_has_no_latency_term():
    """Nothing completed: L = 0, Q = 0 (a rejection scores 0): −μ · (q_min − 0) / (z1 − z2) = −10 x 80 / 20."""
    reward = QualityReward(tiny_cascade(), quality_min=80.0, penalty_mu=10.0)
    reward.utopia, reward.nadir = 95.0, 75.0
    assert reward(None, [outcome(3.0, math.nan, rejected=True)] * 2) == pytest.approx(-40.0)
