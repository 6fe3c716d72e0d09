"""The native vector envs (EnvPool's style): N environments stepped by one call into the compiled
core, which runs each env's MDP (action, simulation to the next decision, observation, mask,
reward) in C++ without the GIL, on a pool of threads with fixed slices of the envs. Four IDs have
a kernel: servegym/Routing-v0 (``RoutingPool`` here, the core's ``VectorEngine``),
servegym/Tier-v0 (``envs.tier_vector.TierPool``, the core's ``TierVectorEngine``),
servegym/Migration-v0 in mode="periodic" (``envs.migration_vector.MigrationPool``, the core's
``MigrationVectorEngine``) and servegym/Scaling-v0 (``envs.scaling_vector.ScalingPool``, the
core's ``ScalingVectorEngine``).

``NativeVectorEnv`` is the Gymnasium vector env (same-step autoreset); ``agents.vec_env.NativeVecEnv``
the Stable-Baselines3 ``VecEnv``. Both are built from ``gym.make(env_id, ...)``'s keyword
arguments and give, env by env, the trajectories of single envs seeded alike: the same float32
observations and masks, float64 rewards, ends, step infos and episode metrics.

What Routing-v0's kernel covers, checked at construction (anything else raises
``NotCoveredError`` naming it): ``RoutingEnv`` itself on the compiled backend; the rewards of
``COVERED_REWARDS``; ``render_mode=None``; the observation fields of ``envs.observation`` and
``routing_context`` (every scenario feature they depend on: tiers, reasoning, a TPOT target,
prefix caching), for scenarios whose cluster is a plain ``CompiledCluster`` with no Python
callback. Resets run in Python (``envs.native_pool``), then hand the engine to the core.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from servegym_core import _core

from envs.base import InvalidActionError
from envs.native_pool import (
    NativePool,
    NotCoveredError,
    check_common,
    fill_episode_numbers,
    not_covered,
    reset_seeds,
)
from envs.rewards import (
    BalancedDenseLatencyReward,
    BalancedSLOMissReward,
    DenseLatencyReward,
    LoadBalanceShaping,
    SLOMissReward,
    SLOReward,
    tier_weights,
)
from envs.migration import MigrationEnv
from envs.migration_vector import MigrationPool, migration_kernel_spec
from envs.routing import RoutingEnv
from envs.scaling import ScalingEnv
from envs.scaling_vector import ScalingPool, scaling_kernel_spec
from envs.tier import TierEnv
from envs.tier_vector import TierPool, tier_kernel_spec

COVERED_REWARDS = {"slo": (0, SLOReward), "slo_dense": (1, SLOMissReward), "slo_balance": (2, BalancedSLOMissReward),
                   "latency_dense": (3, DenseLatencyReward), "latency_balance": (4, BalancedDenseLatencyReward)}
"""The rewards the kernel computes, by name: the kernel's code and the Python class it ports."""
ROUTING_CONTEXT = ("is_arrival", "is_phase_change", "prompt_tokens", "generated_tokens", "tier", "recent_qps",
                   "cost_rate", "arrived", "source_slot")
"""``routing_context``'s fields, in the order the kernel writes them."""


def kernel_spec(env: gym.Env) -> Any:
    """The core's spec of ``env`` (an unwrapped Routing-v0, Tier-v0, Migration-v0 or Scaling-v0 env), or
    ``NotCoveredError`` naming what the kernels do not compute."""
    if type(env) is TierEnv:
        return tier_kernel_spec(env)
    if type(env) is MigrationEnv:
        return migration_kernel_spec(env)
    if type(env) is ScalingEnv:
        return scaling_kernel_spec(env)
    check_common(env, RoutingEnv)
    if env.reward_name not in COVERED_REWARDS or type(env.reward_fn) is not COVERED_REWARDS[env.reward_name][1]:
        raise not_covered(f"reward={env.reward_name!r} (covered: {', '.join(COVERED_REWARDS)})")
    schema, features = env.schema, env.features
    if schema.context_names != ROUTING_CONTEXT:
        raise not_covered(f"context fields {schema.context_names} (the kernel writes {ROUTING_CONTEXT})")
    if [part.name for part in schema.mask_parts] != ["instance"]:
        raise not_covered(f"mask parts {[part.name for part in schema.mask_parts]}")
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
    """The core's ``RoutingEpisode`` of ``env`` just reset: the common numbers
    (``envs.native_pool.fill_episode_numbers``), the reward's state and the pending decision."""
    episode = fill_episode_numbers(env, _core.RoutingEpisode())
    cluster = env.cluster
    if isinstance(env.reward_fn, SLOMissReward):  # its state is keyed by request id, the kernel's by row
        requests = cluster._row_requests
        if not cluster.keep_sequences:
            raise not_covered(f"reward={env.reward_name!r} with keep_sequences=False")
        if len({request.request_id for request in requests}) != len(requests):
            raise not_covered(f"reward={env.reward_name!r} over a workload with repeated request ids")
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


class RoutingPool(NativePool):
    """N ``RoutingEnv``s (compiled backend) and the core's ``VectorEngine`` stepping them."""

    env_type = RoutingEnv

    def make_core(self, num_threads: int) -> Any:
        core = _core.VectorEngine(kernel_spec(self.envs[0]), self.num_envs, num_threads)
        self.valid = core.valid
        return core

    def episode(self, env: RoutingEnv) -> Any:
        return episode_numbers(env)

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

    def end_env(self, i: int) -> None:
        self.envs[i]._decision = None


POOLS: dict[str, type[NativePool]] = {RoutingEnv.env_id: RoutingPool, TierEnv.env_id: TierPool,
                                     MigrationEnv.env_id: MigrationPool, ScalingEnv.env_id: ScalingPool}
"""The env IDs with a native vector env, and their pools."""


def make_pool(num_envs: int, env_id: str, num_threads: int | None, env_kwargs: dict[str, Any]) -> NativePool:
    """The pool of ``num_envs`` envs of ``env_id`` (``NotCoveredError`` for an ID without a kernel)."""
    if env_id not in POOLS:
        raise not_covered(f"env_id {env_id!r} (covered: {', '.join(POOLS)})")
    return POOLS[env_id](num_envs, env_id, num_threads, env_kwargs)


class NativeVectorEnv(VectorEnv):
    """``num_envs`` envs of ``env_id`` (Routing-v0, Tier-v0, Migration-v0 or Scaling-v0) stepped by one call into the compiled core (module
    docstring): a Gymnasium ``VectorEnv`` with same-step autoreset (a finished env's last
    observation and info are in ``infos["final_obs"]`` / ``infos["final_info"]``; the observation
    returned is its next episode's first). ``num_threads`` (default: one per env, at most the
    hardware's threads) never changes the results. ``env_kwargs`` are ``gym.make``'s."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, *, env_id: str = RoutingEnv.env_id, num_threads: int | None = None,
                 **env_kwargs: Any) -> None:
        self.pool = make_pool(num_envs, env_id, num_threads, env_kwargs)
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
        for name, values in pool.info_arrays().items():
            infos[name], infos[f"_{name}"] = values.copy(), every.copy()
        for i in np.flatnonzero(done).tolist():
            final_info = pool.step_info(i) | pool.end_episode(i)
            infos = self._add_info(infos, {"final_obs": pool.observation(i), "final_info": final_info}, i)
            infos = self._add_info(infos, pool.reset_env(i), i)
        return pool.observations(), rewards, np.zeros(self.num_envs, dtype=bool), done, infos

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.pool.envs:
            env.close()
