"""agents.policies: the instance-scoring actor-critic is permutation-equivariant (logits) and
invariant (value), masks actions from the observation, saves and loads, and trains under
MaskablePPO and PPO through agents.train."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces

import envs  # noqa: F401  (registers the IDs)
from agents.config import ALGORITHMS, build_config
from agents.evaluate import evaluate_policies
from agents.policies import (
    MASKED_LOGIT,
    InstanceScoringPolicy,
    MaskableInstanceScoringPolicy,
    check_slot_observation,
)
from agents.train import train
from envs.presets import make_scenario
from envs.scenario import InstanceGroup

ROUTING = "servegym/Routing-v0"
POLICY_CLASSES = {"ppo": InstanceScoringPolicy, "maskable_ppo": MaskableInstanceScoringPolicy}


def constant_lr(_progress: float) -> float:
    return 3e-4


def routing_env(**kwargs) -> gym.Env:
    return gym.make(ROUTING, scenario="default", episode_requests=40, **kwargs)


def busy_observation(env: gym.Env, seed: int, steps: int) -> dict[str, np.ndarray]:
    """An observation after ``steps`` decisions of round robin: instances with unequal loads."""
    observation, _ = env.reset(seed=seed)
    for step in range(steps):
        observation, *_ = env.step(step % env.action_space.n)
    return observation


def with_slot_features(observation: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``observation`` with random per-slot values in the context's last max_instances entries
    and two slots masked out, so permutations move something in every part of the input."""
    slots = observation["action_mask"].shape[0]
    changed = {k: v.copy() for k, v in observation.items()}
    changed["context"][-slots:] = rng.uniform(0.0, 1.0, slots)
    changed["action_mask"][rng.choice(slots, 2, replace=False)] = 0.0
    return changed


def permuted(observation: dict[str, np.ndarray], order: np.ndarray) -> dict[str, np.ndarray]:
    """Row ``k`` of the result is slot ``order[k]`` of ``observation`` (rows, mask, per-slot context)."""
    slots = order.size
    context = observation["context"].copy()
    context[-slots:] = observation["context"][-slots:][order]
    return {"instances": observation["instances"][order], "context": context,
            "action_mask": observation["action_mask"][order]}


def logits_and_value(policy, observation: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
    obs_tensor, _ = policy.obs_to_tensor(observation)
    with th.no_grad():
        features = policy.extract_features(obs_tensor)
        logits = policy.mlp_extractor.forward_actor(features)
        value = policy.value_net(policy.mlp_extractor.forward_critic(features))
    return logits[0].numpy(), float(value[0, 0])


def make_policy(algo: str, env: gym.Env, **kwargs):
    th.manual_seed(0)
    return POLICY_CLASSES[algo](env.observation_space, env.action_space, constant_lr, **kwargs)


@pytest.mark.parametrize("algo", sorted(POLICY_CLASSES))
def test_permuting_instance_rows_permutes_logits_and_keeps_the_value(algo):
    env = routing_env()
    rng = np.random.default_rng(3)
    policy = make_policy(algo, env, ortho_init=False)  # default init: logits well away from 0
    observation = with_slot_features(busy_observation(env, seed=1, steps=25), rng)
    logits, value = logits_and_value(policy, observation)
    valid = observation["action_mask"] > 0.5
    assert np.all(logits[~valid] == MASKED_LOGIT)
    assert np.ptp(logits[valid]) > 1e-3  # rows differ, so a wrong permutation would show
    for _ in range(3):
        order = rng.permutation(valid.size)
        permuted_logits, permuted_value = logits_and_value(policy, permuted(observation, order))
        np.testing.assert_allclose(permuted_logits, logits[order], rtol=0, atol=1e-5)
        assert permuted_value == pytest.approx(value, abs=1e-5)


@pytest.mark.parametrize("algo", sorted(POLICY_CLASSES))
def test_forward_gives_both_heads_exactly(algo):
    env = routing_env()
    policy = make_policy(algo, env, ortho_init=False)
    observations = [with_slot_features(busy_observation(env, seed=seed, steps=15), np.random.default_rng(seed))
                    for seed in (4, 5)]
    batch = {key: np.stack([o[key] for o in observations]) for key in observations[0]}
    obs_tensor, _ = policy.obs_to_tensor(batch)
    with th.no_grad():
        features = policy.extract_features(obs_tensor)
        logits, latent_value = policy.mlp_extractor(features)
        assert th.equal(logits, policy.mlp_extractor.forward_actor(features))
        assert th.equal(latent_value, policy.mlp_extractor.forward_critic(features))
    assert logits.shape == (2, env.action_space.n)


def test_absent_slots_do_not_move_the_value():
    env = routing_env()
    policy = make_policy("maskable_ppo", env, ortho_init=False)
    observation = busy_observation(env, seed=2, steps=10)
    observation["instances"][-1] = 0.0  # an empty slot: present = 0
    observation["action_mask"][-1] = 0.0
    _, value = logits_and_value(policy, observation)
    observation["instances"][-1, 1:] = 0.7  # garbage in an absent row
    logits, garbage_value = logits_and_value(policy, observation)
    assert garbage_value == pytest.approx(value, abs=1e-6)
    assert logits[-1] == MASKED_LOGIT


@pytest.mark.parametrize("algo", sorted(POLICY_CLASSES))
def test_masked_actions_get_zero_probability(algo):
    env = routing_env()
    policy = make_policy(algo, env)
    observation = busy_observation(env, seed=4, steps=5)
    observation["action_mask"][[0, 3, 6]] = 0.0  # the mask in the observation alone
    obs_tensor, _ = policy.obs_to_tensor(observation)
    with th.no_grad():
        probs = policy.get_distribution(obs_tensor).distribution.probs[0].numpy()
    assert probs[[0, 3, 6]].max() == 0.0
    assert probs.sum() == pytest.approx(1.0, abs=1e-6)
    # a fresh (near-uniform) policy spreads the remaining mass over the 5 valid slots
    np.testing.assert_allclose(probs[[1, 2, 4, 5, 7]], 0.2, atol=0.02)
    actions = {int(policy.predict(observation, deterministic=False)[0]) for _ in range(200)}
    assert actions <= {1, 2, 4, 5, 7} and len(actions) == 5


def test_maskable_policy_also_applies_action_masks():
    env = routing_env()
    policy = make_policy("maskable_ppo", env)
    observation = busy_observation(env, seed=4, steps=5)
    action_masks = np.array([True, False, True, True, True, True, True, False])
    obs_tensor, _ = policy.obs_to_tensor(observation)
    with th.no_grad():
        probs = policy.get_distribution(obs_tensor, action_masks=action_masks).distribution.probs[0].numpy()
    assert probs[[1, 7]].max() == 0.0 and probs.sum() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("algo", sorted(POLICY_CLASSES))
def test_saved_policy_loads_with_the_same_outputs(algo, tmp_path):
    env = routing_env()
    model = ALGORITHMS[algo].cls("InstanceScoringPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0,
                                 device="cpu", policy_kwargs={"net_arch": [16], "slot_context": False})
    model.save(tmp_path / "model.zip")
    loaded = ALGORITHMS[algo].cls.load(tmp_path / "model.zip", device="cpu")
    assert type(loaded.policy) is POLICY_CLASSES[algo]
    assert loaded.policy.slot_context is False and loaded.policy.net_arch == [16]
    observation = busy_observation(env, seed=5, steps=12)
    np.testing.assert_array_equal(logits_and_value(loaded.policy, observation)[0],
                                  logits_and_value(model.policy, observation)[0])


@pytest.mark.parametrize("algo", sorted(POLICY_CLASSES))
def test_short_training_run_and_evaluation(algo, tmp_path):
    config = build_config(ROUTING, "default", algo, 0, n_timesteps=256, n_envs=1, device="cpu",
                          overrides=["policy=InstanceScoringPolicy", "n_steps=128", "batch_size=64", "n_epochs=2",
                                     "policy_kwargs.net_arch=[32]", "env_kwargs.episode_requests=40"])
    assert not config.flat_observation
    result = train(config, tmp_path)
    assert result.num_timesteps == 256
    (evaluated,) = evaluate_policies(ROUTING, "default", [str(result.run_dir / "final_model.zip")], [10_000, 10_001],
                                     config.env_kwargs)
    assert [e["steps"] for e in evaluated.episodes] == [40.0, 40.0]
    assert [e["invalid_actions"] for e in evaluated.episodes] == [0.0, 0.0]  # the policy reads the mask


def test_routing_hyperparameters_use_the_instance_scoring_policy():
    for algo in ("maskable_ppo", "ppo"):
        assert build_config(ROUTING, "default", algo, 0).policy == "InstanceScoringPolicy"


def test_spaces_the_policy_cannot_score_are_rejected():
    env = routing_env()
    with pytest.raises(ValueError, match=r"Discrete\(8\).*got Discrete\(5\)"):
        check_slot_observation(env.observation_space, spaces.Discrete(5))
    with pytest.raises(ValueError, match="Dict observation"):
        check_slot_observation(spaces.Box(0.0, 1.0, (8,)), env.action_space)
    with pytest.raises(ValueError, match="net_arch must be a non-empty list.*\\[\\]"):
        InstanceScoringPolicy(env.observation_space, env.action_space, constant_lr, net_arch=[])


@pytest.mark.parametrize("reward", ["latency_dense", "latency_balance"])
def test_dense_rewards_sum_to_minus_the_time_requests_spent_in_the_system(reward):
    """Little's law: Σ_steps ∫ N dt = Σ_requests (end − arrival); the balance shaping telescopes
    to Φ(end) − Φ(start) = 0 because the cluster is empty at both ends."""
    env = routing_env(reward=reward)
    env.reset(seed=7)
    total, truncated, step = 0.0, False, 0
    while not truncated:
        _, step_reward, _, truncated, _ = env.step(step % 3)  # three of the eight instances: long queues
        total += step_reward
        step += 1
    outcomes = env.unwrapped.cluster.outcomes
    assert len(outcomes) == 40
    assert total == pytest.approx(-sum(o.finish_s - o.arrival_s for o in outcomes) / 10.0, rel=1e-9)


def test_balance_shaping_charges_the_routing_decision_at_once():
    """Routing to an instance holding n requests lowers Φ by ((n + 1)² − n²) / 256 right away.
    On an engine without a front end (``vidur-2024``): under ``vllm-v1`` a routed request joins
    its instance's queue after the engine's HTTP front-end time (``frontend_ms``), and the
    potential counts it from then."""
    instances = tuple(InstanceGroup(dataclasses.replace(group.config, engine="vidur-2024"), group.count)
                      for group in make_scenario("default").instances)
    env = routing_env(reward="latency_balance", instances=instances)
    busy_observation(env, seed=8, steps=12)
    reward_fn = env.unwrapped.reward_fn
    counts = [i.num_requests for i in env.unwrapped.cluster.instances.values()]
    before = reward_fn.potential(env.unwrapped.cluster)
    assert before == pytest.approx(-sum(n * n for n in counts) / 256.0)
    target = int(np.argmax(counts))
    env.unwrapped.apply(target, True)
    after = reward_fn.potential(env.unwrapped.cluster)
    assert before - after == pytest.approx((2 * counts[target] + 1) / 256.0)
