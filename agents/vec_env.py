"""``NativeVecEnv``: the native vector env of servegym/Routing-v0, Tier-v0, Migration-v0 or
Scaling-v0 (``envs.vector``) as a Stable-Baselines3 ``VecEnv``, for MaskablePPO: one call steps every env in the compiled core, ``action_masks()`` (and
``env_method("action_masks")``, which sb3-contrib calls) read the core's masks.

Its step returns what ``DummyVecEnv`` over the same envs returns: observations, float64 rewards (as
``SubprocVecEnv``; ``DummyVecEnv`` would round them to float32), dones, and each env's step info with
``TimeLimit.truncated`` (True at an episode's end: servegym episodes are truncated, never
terminated); at an episode's end the info also holds ``episode_metrics``, ``episode_outcomes`` and
``terminal_observation``, and the observation is the next episode's first (its reset info in
``reset_infos``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from envs.base import ServingEnv
from envs.routing import RoutingEnv
from envs.vector import make_pool
from envs.wrappers import FlattenServingObservation, flatten_serving_observation


class NativeVecEnv(VecEnv):
    """``num_envs`` envs of ``env_id`` (Routing-v0, Tier-v0, Migration-v0 or Scaling-v0) in the compiled
    core (module docstring); ``env_kwargs`` are ``gym.make``'s, ``num_threads`` as
    ``envs.vector.NativeVectorEnv``'s. The Python envs behind ``get_attr`` / ``set_attr`` /
    ``env_method`` show each episode as it began and as it ended, not in between (``envs.vector``)."""

    def __init__(self, num_envs: int, *, env_id: str = RoutingEnv.env_id, num_threads: int | None = None,
                 **env_kwargs: Any) -> None:
        self.pool = make_pool(num_envs, env_id, num_threads, env_kwargs)
        first = self.pool.envs[0]
        super().__init__(num_envs, first.observation_space, first.action_space)
        self._actions: np.ndarray | None = None

    def reset(self) -> VecEnvObs:
        for i in range(self.num_envs):
            self.reset_infos[i] = self.pool.reset_env(i, self._seeds[i], self._options[i] or None)
        self._reset_seeds()
        self._reset_options()
        return self.pool.observations()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(actions)")
        pool = self.pool
        actions, self._actions = self._actions, None
        pool.step(actions)
        dones = pool.done.astype(bool)
        rewards = pool.reward.copy()
        infos = pool.step_infos()
        for info, done in zip(infos, dones.tolist()):
            info["TimeLimit.truncated"] = done
        for i in np.flatnonzero(dones).tolist() if dones.any() else ():
            infos[i] |= pool.end_episode(i)
            infos[i]["terminal_observation"] = pool.observation(i)
            self.reset_infos[i] = pool.reset_env(i, self._seeds[i], self._options[i] or None)
        return pool.observations(), rewards, dones, infos

    def action_masks(self) -> np.ndarray:
        """Every env's valid actions (booleans, num_envs x the mask's size)."""
        return self.pool.action_masks()

    def close(self) -> None:
        for env in self.pool.envs:
            env.close()

    def _envs(self, indices: VecEnvIndices) -> list[ServingEnv]:
        return [self.pool.envs[i] for i in self._get_indices(indices)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(env, attr_name) for env in self._envs(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for env in self._envs(indices):
            setattr(env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        if method_name == "action_masks":  # the core's masks; the Python envs' are the episode's first
            masks = self.pool.action_masks()
            return [masks[i] for i in self._get_indices(indices)]
        return [getattr(env, method_name)(*method_args, **method_kwargs) for env in self._envs(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        raise NotImplementedError("NativeVecEnv renders nothing (render_mode=None)")


class VecEpisodeMonitor(VecEnvWrapper):
    """SB3's ``Monitor`` for each env of a ``NativeVecEnv``, as ``agents.train`` wraps single envs:
    env i's finished episodes (return, length, time since ``t_starts[i]``) go to ``filenames[i]``
    (a CSV ``stable_baselines3.common.monitor.load_results`` reads) and to its info's ``episode``;
    ``tier_metrics(outcomes)`` adds to ``episode_metrics`` first (the per-tier SLO
    attainment of ``agents.train.EpisodeTierMetrics``)."""

    def __init__(self, venv: VecEnv, filenames: Sequence[str], t_starts: Sequence[float | None], env_id: str,
                 tier_metrics: Callable[[Any], dict[str, float]]) -> None:
        super().__init__(venv)
        now = time.time()
        self.t_starts = [now if t is None else t for t in t_starts]
        self.writers = [ResultsWriter(name, header={"t_start": now, "env_id": env_id},
                                      override_existing=not Path(name).exists()) for name in filenames]
        self.tier_metrics = tier_metrics
        self.rewards: list[list[float]] = [[] for _ in range(venv.num_envs)]

    def reset(self) -> VecEnvObs:
        self.rewards = [[] for _ in range(self.num_envs)]
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        for i, reward in enumerate(rewards.tolist()):
            self.rewards[i].append(float(reward))
            if dones[i]:
                info = infos[i]
                metrics = info["episode_metrics"]
                info["episode_metrics"] = {**metrics, **self.tier_metrics(info["episode_outcomes"])}
                episode = {"r": round(sum(self.rewards[i]), 6), "l": len(self.rewards[i]),
                           "t": round(time.time() - self.t_starts[i], 6)}
                self.writers[i].write_row(episode)
                info["episode"] = episode
                self.rewards[i] = []
        return observations, rewards, dones, infos

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
        self.venv.close()


class VecFlattenServingObservation(VecEnvWrapper):
    """``envs.wrappers.FlattenServingObservation`` over a ``NativeVecEnv``'s stacked observations
    (and its infos' ``terminal_observation``), for plain MLP policies."""

    def __init__(self, venv: NativeVecEnv) -> None:
        space = FlattenServingObservation(venv.pool.envs[0]).observation_space
        super().__init__(venv, observation_space=space)

    def reset(self) -> VecEnvObs:
        return flatten_serving_observation(self.venv.reset(), batch_dims=1)

    def step_wait(self) -> VecEnvStepReturn:
        observations, rewards, dones, infos = self.venv.step_wait()
        for info in infos:
            if "terminal_observation" in info:
                info["terminal_observation"] = flatten_serving_observation(info["terminal_observation"])
        return flatten_serving_observation(observations, batch_dims=1), rewards, dones, infos
