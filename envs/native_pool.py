"""What the native vector envs of servegym/Routing-v0 (``envs.vector``) and servegym/Tier-v0
(``envs.tier_vector``) share: the coverage checks, the episode numbers that live in Python (the
core's ``EpisodeNumbers``), and ``NativePool``, N envs whose episodes the compiled core steps
while Python resets them (their workloads are drawn from each env's ``np_random``).

Between resets the Python envs' clusters are not brought up to date: ``get_attr`` /
``env_method`` read them as the episode began (``action_masks`` excepted, which reads the core's
masks), and at each episode's end.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from servegym_core import _core

from envs.base import ServingEnv
from envs.episode_outcomes import episode_outcomes
from envs.scenario import Scenario
from simulator.compiled import CompiledCluster

class NotCoveredError(ValueError):
    """An env configuration the native vector env's kernel does not compute."""


def not_covered(piece: str) -> NotCoveredError:
    """``NotCoveredError`` naming ``piece`` and the alternative."""
    return NotCoveredError(f"the native vector env does not cover {piece}; use a DummyVecEnv / SyncVectorEnv of the "
                           "env instead")


def check_common(env: ServingEnv, env_type: type[ServingEnv], scenario_types: tuple[type, ...] = (Scenario,)) -> None:
    """``NotCoveredError`` unless ``env`` (unwrapped) is exactly ``env_type`` on the compiled
    backend, renders nothing, runs a scenario of exactly one of ``scenario_types`` (a plain
    ``Scenario`` by default), and has the instance columns the core writes."""
    if type(env) is not env_type:
        raise not_covered(f"env {type(env).__name__} (here: {env_type.env_id}'s {env_type.__name__})")
    if env.backend != "compiled":
        raise not_covered(f"backend={env.backend!r} (the kernel drives the compiled engine: backend='compiled')")
    if env.render_mode is not None:
        raise not_covered(f"render_mode={env.render_mode!r}")
    if type(env.scenario) not in scenario_types:
        raise not_covered(f"scenario type {type(env.scenario).__name__}")
    features = env.features
    columns = _core.instance_columns(features.num_tiers, features.prefix_caching, features.prefix_match)
    names = list(env.schema.instance_feature_names)
    if names != columns:
        differ = next((a, b) for a, b in zip(names + [None] * len(columns), columns + [None] * len(names)) if a != b)
        raise not_covered(f"instance field {differ[0]!r} (the kernel writes {differ[1]!r} there)")


def fill_episode_numbers(env: ServingEnv, episode: Any, cluster_types: tuple[type, ...] = (CompiledCluster,)) -> Any:
    """Fill the core's ``EpisodeNumbers`` part of ``episode`` from ``env`` just reset (hardware
    features, arrival times, SLO targets, GPUs held); ``NotCoveredError`` for a cluster the kernel
    cannot step without Python. Returns ``episode``."""
    cluster = env.cluster
    if type(cluster) not in cluster_types:
        raise not_covered(f"cluster type {type(cluster).__name__}")
    if cluster._callbacks or cluster.completion_hook is not None or cluster.phase_router is not None:
        raise not_covered("Python callbacks, a completion hook or a phase router in the cluster (the kernel steps "
                          "the engine without the GIL)")
    count = len(cluster.instances)
    slots = env.slot_instance_ids()
    if slots[:count] != list(range(count)) or any(slot is not None for slot in slots[count:]):
        raise not_covered("instance slots other than the instances in deployment order, then empty ones")
    episode.static_features = env.features.static_features.T.ravel().tolist()
    episode.arrival_s = list(map(float, env._arrival_times_s))
    targets = cluster.row_slo_targets()
    for column, name in enumerate(("ttft_s", "tbt_s", "ttfat_s", "e2e_s")):
        setattr(episode, f"slo_{name}", targets[:, column].tolist())
    held = list(cluster._held.values())
    episode.held_since_s = [float(since_s) for since_s, _, _ in held]
    episode.held_gpus = [int(gpus) for _, gpus, _ in held]
    episode.held_usd_per_gpu_s = [float(usd) for _, _, usd in held]
    episode.cost_closed_usd = float(cluster._cost_closed_usd)
    episode.cost_rate_usd_per_s = float(cluster.cost_rate_usd_per_s())
    return episode


def reset_seeds(seed: int | list[int | None] | None, num_envs: int) -> list[int | None]:
    """Per-env seeds: None for none, an int s for s, s + 1, ..., or one per env."""
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, int) and not isinstance(seed, bool):
        return [seed + i for i in range(num_envs)]
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"seed {seed!r}: need one seed per env ({num_envs})")
    return seeds


class NativePool:
    """N envs of one ID (compiled backend) and the core's vector engine stepping them: what
    ``envs.vector.NativeVectorEnv`` and ``agents.vec_env.NativeVecEnv`` drive. A subclass sets
    ``env_type``, builds ``core`` from the first env (``make_core``), gives each reset's episode
    numbers (``episode``) and steps the core (``step``)."""

    env_type: type[ServingEnv]

    def __init__(self, num_envs: int, env_id: str, num_threads: int | None, env_kwargs: dict[str, Any]) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs {num_envs!r}: must be an integer >= 1")
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                        or num_threads < 1):
            raise ValueError(f"num_threads {num_threads!r}: must be an integer >= 1 (None: one per env, at most "
                             "the hardware's)")
        if env_id != self.env_type.env_id:
            raise not_covered(f"env_id {env_id!r} here (this pool steps {self.env_type.env_id})")
        kwargs = {"backend": "compiled", **env_kwargs}
        self.envs: list[Any] = [gym.make(env_id, **kwargs).unwrapped for _ in range(num_envs)]
        self.strict = self.envs[0].strict
        self.num_envs = num_envs
        self.core = self.make_core(num_threads or 0)
        self._engines: list[Any] = [None] * num_envs  # each env's engine, alive while the core steps it
        self.instances, self.context = self.core.instances, self.core.context
        self.reward, self.done = self.core.reward, self.core.done
        self.time_s, self.cost_usd, self.finished, self.slo_met = (self.core.time_s, self.core.cost_usd,
                                                                    self.core.finished, self.core.slo_met)

    def make_core(self, num_threads: int) -> Any:
        """The core's vector engine for ``self.envs`` (``num_threads`` 0: one per env, at most the hardware's)."""
        raise NotImplementedError

    def episode(self, env: Any) -> Any:
        """The core's episode numbers of ``env`` just reset."""
        raise NotImplementedError

    def step(self, actions: Any) -> None:
        """Step every env with ``actions`` (one per env, in the action space, else ``ValueError`` naming it)."""
        raise NotImplementedError

    @property
    def mask(self) -> np.ndarray:
        """Every env's observed action mask (float32, num_envs x mask size): the core's buffer."""
        return self.core.mask

    def action_masks(self) -> np.ndarray:
        """The valid actions of every env (booleans, num_envs x mask size, a copy)."""
        return self.mask.astype(bool)

    def info_arrays(self) -> dict[str, np.ndarray]:
        """The last step's info numbers, one row per env (views of the core's buffers but
        ``invalid_action``)."""
        return {"time_s": self.time_s, "finished": self.finished, "slo_met": self.slo_met, "cost_usd": self.cost_usd,
                "invalid_action": self.invalid_action.astype(bool)}

    @property
    def invalid_action(self) -> np.ndarray:
        """Whether each env's last action was masked out (the core's buffer, 0 or 1)."""
        return self.core.invalid_action

    def step_infos(self) -> list[dict[str, Any]]:
        """``ServingEnv.step``'s info of every env's last step: ``info_arrays`` row by row, as
        Python numbers (and lists)."""
        arrays = self.info_arrays()
        return [dict(zip(arrays, row)) for row in zip(*(values.tolist() for values in arrays.values()))]

    def step_info(self, i: int) -> dict[str, Any]:
        """``ServingEnv.step``'s info of env i's last step."""
        return self.step_infos()[i]

    def reset_env(self, i: int, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Reset env i in Python (its workload drawn from its ``np_random``) and hand the engine to
        the core, which writes row i of the observation; returns the reset's info."""
        env = self.envs[i]
        _, info = env.reset(seed=seed, options=options)
        self.core.attach(i, env.cluster.engine, self.episode(env))
        self._engines[i] = env.cluster.engine
        return info

    def observation(self, i: int) -> dict[str, np.ndarray]:
        """Env i's observation now (copies)."""
        return {"instances": self.instances[i].copy(), "context": self.context[i].copy(),
                "action_mask": self.mask[i].copy()}

    def observations(self) -> dict[str, np.ndarray]:
        """Every env's observation now, stacked (copies)."""
        return {"instances": self.instances.copy(), "context": self.context.copy(), "action_mask": self.mask.copy()}

    def end_episode(self, i: int) -> dict[str, Any]:
        """Bring env i's Python cluster up to its engine at the episode's end; its final info
        entries (``episode_metrics``, ``episode_outcomes``), as ``ServingEnv.step`` gives them."""
        env = self.envs[i]
        cluster = env.cluster
        cluster.collect_columns()
        cluster.version += 1
        self.end_env(i)
        env._seen = len(cluster.outcomes)
        env._episode_over = True
        env.state_changed()
        return {"episode_metrics": env.episode_metrics(), "episode_outcomes": episode_outcomes(cluster.outcomes)}

    def end_env(self, i: int) -> None:
        """Bring env i's own state (beyond its cluster) to the episode's end."""
