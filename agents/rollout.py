"""Run any policy (a baseline name's ``Policy`` or a trained SB3 model) for whole episodes on
the same seeds, and collect each episode's serving metrics."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import envs  # noqa: F401  (registers the IDs)
from baselines import make as make_policy
from simulator.outcome import RequestOutcome

PolicyLike = Any  # anything with SB3's predict(observation, state, episode_start, deterministic)


@dataclass(frozen=True)
class Episode:
    """One finished episode: the env's episode metrics plus ``return``, ``steps`` and
    ``invalid_actions``; every request's outcome (the last step's ``info["episode_outcomes"]``)."""

    metrics: dict[str, float]
    outcomes: tuple[RequestOutcome, ...]


def play_episode(env: gym.Env, policy: PolicyLike, seed: int, deterministic: bool = True) -> Episode:
    """One episode from ``env.reset(seed=seed)``. ``deterministic=False`` samples a trained
    policy's actions, from torch's generator seeded with ``seed`` for the episode (the caller's
    generator state is restored after), so the episode repeats bit for bit; heuristics ignore
    the flag."""
    if deterministic:
        return _episode(env, policy, seed, deterministic=True)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return _episode(env, policy, seed, deterministic=False)


def run_episode(env: gym.Env, policy: PolicyLike, seed: int, deterministic: bool = True) -> dict[str, float]:
    """``play_episode``'s metrics: the env's episode metrics plus ``return`` (sum of rewards),
    ``steps`` and ``invalid_actions``."""
    return play_episode(env, policy, seed, deterministic).metrics


def _episode(env: gym.Env, policy: PolicyLike, seed: int, deterministic: bool) -> Episode:
    obs, _ = env.reset(seed=seed)
    if hasattr(policy, "reset"):
        policy.reset()
    state = None
    start = np.ones((1,), dtype=bool)
    total, steps, invalid = 0.0, 0, 0
    masks = env.unwrapped.action_masks
    takes_masks = _takes_masks(policy)  # once: inspect.signature is slow
    while True:
        kwargs: dict[str, Any] = {"state": state, "episode_start": start, "deterministic": deterministic}
        if takes_masks:
            kwargs["action_masks"] = masks()
        action, state = policy.predict(obs, **kwargs)
        start = np.zeros((1,), dtype=bool)
        obs, reward, terminated, truncated, info = env.step(_as_action(env, action))
        total += float(reward)
        steps += 1
        invalid += int(info["invalid_action"])
        if terminated or truncated:
            metrics = dict(info["episode_metrics"])
            metrics.update({"return": total, "steps": float(steps), "invalid_actions": float(invalid)})
            return Episode(metrics, info["episode_outcomes"])


def play_episodes(
    policy_factory: Callable[[gym.Env], PolicyLike] | str,
    env_id: str,
    seeds: Sequence[int],
    **env_kwargs: Any,
) -> list[Episode]:
    """One episode per seed. ``policy_factory`` is a baseline name or a function env -> policy
    (for a saved model: ``lambda env: MaskablePPO.load(path)``)."""
    env = gym.make(env_id, **env_kwargs)
    policy = make_policy(policy_factory, env) if isinstance(policy_factory, str) else policy_factory(env)
    return [play_episode(env, policy, seed) for seed in seeds]


def evaluate(
    policy_factory: Callable[[gym.Env], PolicyLike] | str,
    env_id: str,
    seeds: Sequence[int],
    **env_kwargs: Any,
) -> list[dict[str, float]]:
    """Metrics of one episode per seed (``play_episodes``' metrics)."""
    return [episode.metrics for episode in play_episodes(policy_factory, env_id, seeds, **env_kwargs)]


def _takes_masks(policy: PolicyLike) -> bool:
    """sb3-contrib's MaskablePPO.predict takes ``action_masks``."""
    return "action_masks" in inspect.signature(policy.predict).parameters


def _as_action(env: gym.Env, action: Any) -> Any:
    if isinstance(env.action_space, gym.spaces.Discrete):
        return int(np.asarray(action).reshape(-1)[0])
    return np.asarray(action).reshape(env.action_space.shape)
