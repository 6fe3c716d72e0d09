"""The native vector env of servegym/Routing-v0 (EnvPool's style): N environments stepped by one
call into the compiled core (``servegym_core``'s ``VectorEngine``), which runs each env's MDP
(action, simulation to the next decision, observation, mask, reward) in C++ without the GIL, on a
pool of threads with fixed slices of the envs.

``NativeVectorEnv`` is the Gymnasium vector env (same-step autoreset); ``agents.vec_env.NativeVecEnv``
the Stable-Baselines3 ``VecEnv``. Both are built from ``gym.make("servegym/Routing-v0", ...)``'s
keyword arguments and give, env by env, the trajectories of single envs seeded alike: the same
float32 observations and masks, float64 rewards, ends, step infos and episode metrics.

What the kernel covers, checked at construction (anything else raises ``NotCoveredError`` naming
it): ``RoutingEnv`` itself on the compiled backend; the rewards of ``COVERED_REWARDS``; ``render_mode=None``; the
observation fields of ``envs.observation`` and ``routing_context`` (every scenario feature they
depend on: tiers, reasoning, a TPOT target, prefix caching), for scenarios whose cluster is a plain
``CompiledCluster`` with no Python callback. Resets run in Python (the workload is drawn from each
env's ``np_random``), then hand the engine to the core. Between resets the Python envs' clusters are
not brought up to date: ``get_attr`` / ``env_method`` read them as the episode began (``action_masks``
excepted, which reads the core's masks), and at each episode's end.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from servegym_core import _core

from envs.base import InvalidActionError
from envs.episode_outcomes import EpisodeOutcomes
from envs.rewards import (
    BalancedDenseLatencyReward,
    BalancedSLOMissReward,
    DenseLatencyReward,
    LoadBalanceShaping,
    SLOMissReward,
    SLOReward,
    tier_weights,
)
from envs.routing import RoutingEnv
from envs.scenario import Scenario
from simulator.compiled import CompiledCluster

COVERED_REWARDS = {"slo": (0, SLOReward), "slo_dense": (1, SLOMissReward), "slo_balance": (2, BalancedSLOMissReward),
                   "latency_dense": (3, DenseLatencyReward), "latency_balance": (4, BalancedDenseLatencyReward)}
"""The rewards the kernel computes, by name: the kernel's code and the Python class it ports."""
ROUTING_CONTEXT = ("is_arrival", "is_phase_change", "prompt_tokens", "generated_tokens", "tier", "recent_qps",
                   "cost_rate", "arrived", "source_slot")
"""``routing_context``'s fields, in the order the kernel writes them."""


class NotCoveredError(ValueError):
    """An env configuration the native vector env's kernel does not compute."""


def _not_covered(piece: str) -> NotCoveredError:
    return NotCoveredError(f"the native vector env does not cover {piece}; use a DummyVecEnv / SyncVectorEnv of the "
                           "env instead")


def kernel_spec(env: gym.Env) -> Any:
    """The core's ``RoutingSpec`` of ``env`` (an unwrapped env), or ``NotCoveredError`` naming what
    the kernel does not compute."""
    if type(env) is not RoutingEnv:
        raise _not_covered(f"env {type(env).__name__} (only servegym/Routing-v0's RoutingEnv)")
    if env.backend != "compiled":
        raise _not_covered(f"backend={env.backend!r} (the kernel drives the compiled engine: backend='compiled')")
    if env.reward_name not in COVERED_REWARDS or type(env.reward_fn) is not COVERED_REWARDS[env.reward_name][1]:
        raise _not_covered(f"reward={env.reward_name!r} (covered: {', '.join(COVERED_REWARDS)})")
    if env.render_mode is not None:
        raise _not_covered(f"render_mode={env.render_mode!r}")
    if type(env.scenario) is not Scenario:
        raise _not_covered(f"scenario type {type(env.scenario).__name__}")
    schema, features = env.schema, env.features
    columns = _core.instance_columns(features.num_tiers, features.prefix_caching, features.prefix_match)
    if list(schema.instance_feature_names) != columns:
        differ = next((a, b) for a, b in zip(list(schema.instance_feature_names) + [None] * len(columns),
                                             columns + [None] * len(schema.instance_feature_names)) if a != b)
        raise _not_covered(f"instance field {differ[0]!r} (the kernel writes {differ[1]!r} there)")
    if schema.context_names != ROUTING_CONTEXT:
        raise _not_covered(f"context fields {schema.context_names} (the kernel writes {ROUTING_CONTEXT})")
    if [part.name for part in schema.mask_parts] != ["instance"]:
        raise _not_covered(f"mask parts {[part.name for part in schema.mask_parts]}")
    spec = features.observation_spec(_core.RoutingSpec())
    spec.context_k, spec.context_c = (a.tolist() for a in schema.context_encoder.coefficients)
    for name in ("is_arrival", "is_phase_change", "prompt_tokens", "generated_tokens", "recent_qps", "cost_rate",
                 "arrived"):
        setattr(spec, f"ctx_{name}", int(schema.context_positions(name)[0]))
    spec.ctx_tier = schema.context_positions("tier").tolist()
    spec.ctx_source_slot = schema.context_positions("source_slot").tolist()
    spec.reward = COVERED_REWARDS[env.reward_name][0]
    spec.load_count_scale = LoadBalanceShaping.COUNT_SCALE
    spec.e2e_scale_s = DenseLatencyReward.E2E_SCALE_S
    spec.tier_weights = tier_weights(env.scenario)
    spec.invalid_action_penalty = float(env.invalid_action_penalty)
    return spec


def episode_numbers(env: RoutingEnv) -> Any:
    """The core's ``RoutingEpisode`` of ``env`` just reset: what the kernel needs that lives in
    Python (hardware features, arrival times, SLO targets, GPUs held, the pending decision)."""
    cluster = env.cluster
    if type(cluster) is not CompiledCluster:
        raise _not_covered(f"cluster type {type(cluster).__name__}")
    if cluster._callbacks or cluster.completion_hook is not None or cluster.phase_router is not None:
        raise _not_covered("Python callbacks, a completion hook or a phase router in the cluster (the kernel steps "
                           "the engine without the GIL)")
    if env.slot_instance_ids() != list(range(len(cluster.instances))):
        raise _not_covered("instance slots other than the instances in deployment order")
    requests = cluster._row_requests
    if isinstance(env.reward_fn, SLOMissReward):  # its state is keyed by request id, the kernel's by row
        if not cluster.keep_sequences:
            raise _not_covered(f"reward={env.reward_name!r} with keep_sequences=False")
        if len({request.request_id for request in requests}) != len(requests):
            raise _not_covered(f"reward={env.reward_name!r} over a workload with repeated request ids")
    episode = _core.RoutingEpisode()
    episode.static_features = env.features.static_features.T.ravel().tolist()
    episode.arrival_s = [float(t) for t in env._arrival_times_s]
    slos = [request.slo for request in requests]
    for name in ("ttft_s", "ttfat_s", "e2e_s", "tbt_s"):
        setattr(episode, f"slo_{name}", [math.nan if getattr(s, name) is None else float(getattr(s, name)) for s in slos])
    held = list(cluster._held.values())
    episode.held_since_s = [float(since_s) for since_s, _, _ in held]
    episode.held_gpus = [int(gpus) for _, gpus, _ in held]
    episode.held_usd_per_gpu_s = [float(usd) for _, _, usd in held]
    episode.cost_closed_usd = float(cluster._cost_closed_usd)
    episode.cost_rate_usd_per_s = float(cluster.cost_rate_usd_per_s())
    reward = env.reward_fn
    if isinstance(reward, LoadBalanceShaping):
        episode.potential = reward._potential
    if isinstance(reward, DenseLatencyReward):
        episode.latency_last_s, episode.latency_arrived, episode.latency_ended = reward._last_s, reward._arrived, reward._ended
    decision = env._decision
    if decision is not None:
        episode.decision_kind = 1 if decision.kind == "route" else 2
        episode.decision_row = decision.seq.row
        episode.decision_instance = decision.instance_id
    return episode


class RoutingPool:
    """N ``RoutingEnv``s (compiled backend) and the core's ``VectorEngine`` stepping them: the
    common part of ``NativeVectorEnv`` and ``agents.vec_env.NativeVecEnv``."""

    def __init__(self, num_envs: int, env_id: str, num_threads: int | None, env_kwargs: dict[str, Any]) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs {num_envs!r}: must be an integer >= 1")
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                        or num_threads < 1):
            raise ValueError(f"num_threads {num_threads!r}: must be an integer >= 1 (None: one per env, at most "
                             "the hardware's)")
        if env_id != RoutingEnv.env_id:
            raise _not_covered(f"env_id {env_id!r} (only {RoutingEnv.env_id})")
        kwargs = {"backend": "compiled", **env_kwargs}
        self.envs: list[RoutingEnv] = [gym.make(env_id, **kwargs).unwrapped for _ in range(num_envs)]
        self.strict = self.envs[0].strict
        self.core = _core.VectorEngine(kernel_spec(self.envs[0]), num_envs, num_threads or 0)
        self._engines: list[Any] = [None] * num_envs  # each env's engine, alive while the core steps it
        core = self.core
        self.instances, self.context, self.mask, self.valid = core.instances, core.context, core.mask, core.valid
        self.reward, self.done, self.invalid_action = core.reward, core.done, core.invalid_action
        self.time_s, self.cost_usd, self.finished, self.slo_met = core.time_s, core.cost_usd, core.finished, core.slo_met
        self.num_envs = num_envs

    def reset_env(self, i: int, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Reset env i in Python (its workload drawn from its ``np_random``) and hand the engine to
        the core, which writes row i of the observation; returns the reset's info."""
        env = self.envs[i]
        _, info = env.reset(seed=seed, options=options)
        self.core.attach(i, env.cluster.engine, episode_numbers(env))
        self._engines[i] = env.cluster.engine
        return info

    def step(self, actions: Any) -> None:
        """Step every env: ``actions`` one integer per env, in the action space (else ``ValueError``
        naming it); with ``strict`` a masked-out action raises ``InvalidActionError``."""
        array = np.asarray(actions)
        if array.shape != (self.num_envs,) or array.dtype.kind not in "iu":
            raise ValueError(f"actions {actions!r}: need {self.num_envs} integers (shape ({self.num_envs},)), got "
                             f"shape {array.shape} of {array.dtype}")
        array = np.ascontiguousarray(array, dtype=np.int64)
        if self.strict:
            slots = self.valid.shape[1]
            for i, action in enumerate(array.tolist()):
                if 0 <= action < slots and not self.valid[i, action]:
                    raise InvalidActionError(f"action {action} of env {i} is masked out (strict=True)")
        self.core.step(array)

    def observation(self, i: int) -> dict[str, np.ndarray]:
        """Env i's observation now (copies)."""
        return {"instances": self.instances[i].copy(), "context": self.context[i].copy(),
                "action_mask": self.mask[i].copy()}

    def observations(self) -> dict[str, np.ndarray]:
        """Every env's observation now, stacked (copies)."""
        return {"instances": self.instances.copy(), "context": self.context.copy(), "action_mask": self.mask.copy()}

    def step_info(self, i: int) -> dict[str, Any]:
        """``ServingEnv.step``'s info of env i's last step."""
        return {"time_s": float(self.time_s[i]), "finished": int(self.finished[i]), "slo_met": int(self.slo_met[i]),
                "cost_usd": float(self.cost_usd[i]), "invalid_action": bool(self.invalid_action[i])}

    def end_episode(self, i: int) -> dict[str, Any]:
        """Bring env i's Python cluster up to its engine at the episode's end; its final info
        entries (``episode_metrics``, ``episode_outcomes``), as ``ServingEnv.step`` gives them."""
        env = self.envs[i]
        cluster = env.cluster
        cluster._collect()
        cluster.version += 1
        env._decision = None
        env._seen = len(cluster.outcomes)
        env._episode_over = True
        env.state_changed()
        return {"episode_metrics": env.episode_metrics(), "episode_outcomes": EpisodeOutcomes(cluster.outcomes)}

    def action_masks(self) -> np.ndarray:
        """The valid actions of every env (booleans, num_envs x max_instances, a copy)."""
        return self.valid.astype(bool)


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


class NativeVectorEnv(VectorEnv):
    """``num_envs`` servegym/Routing-v0 envs stepped by one call into the compiled core (module
    docstring): a Gymnasium ``VectorEnv`` with same-step autoreset (a finished env's last
    observation and info are in ``infos["final_obs"]`` / ``infos["final_info"]``; the observation
    returned is its next episode's first). ``num_threads`` (default: one per env, at most the
    hardware's threads) never changes the results. ``env_kwargs`` are ``gym.make``'s."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, *, env_id: str = RoutingEnv.env_id, num_threads: int | None = None,
                 **env_kwargs: Any) -> None:
        self.pool = RoutingPool(num_envs, env_id, num_threads, env_kwargs)
        first = self.pool.envs[0]
        self.num_envs = num_envs
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, num_envs)
        self.action_space = batch_space(first.action_space, num_envs)
        self.autoreset_mode = AutoresetMode.SAME_STEP

    def action_masks(self) -> np.ndarray:
        return self.pool.action_masks()

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        infos: dict[str, Any] = {}
        for i, env_seed in enumerate(reset_seeds(seed, self.num_envs)):
            infos = self._add_info(infos, self.pool.reset_env(i, env_seed, options), i)
        return self.pool.observations(), infos

    def step(self, actions: Any):
        pool = self.pool
        pool.step(actions)
        done = pool.done.astype(bool)
        rewards = pool.reward.copy()
        infos: dict[str, Any] = {}
        every = np.ones(self.num_envs, dtype=bool)
        for name, values in (("time_s", pool.time_s), ("finished", pool.finished), ("slo_met", pool.slo_met),
                             ("cost_usd", pool.cost_usd), ("invalid_action", pool.invalid_action.astype(bool))):
            infos[name], infos[f"_{name}"] = values.copy(), every.copy()
        for i in np.flatnonzero(done).tolist():
            final_info = pool.step_info(i) | pool.end_episode(i)
            infos = self._add_info(infos, {"final_obs": pool.observation(i), "final_info": final_info}, i)
            infos = self._add_info(infos, pool.reset_env(i), i)
        return pool.observations(), rewards, np.zeros(self.num_envs, dtype=bool), done, infos

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.pool.envs:
            env.close()
