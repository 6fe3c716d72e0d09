"""What every servegym environment shares: scenario and cluster set-up, seeding, the
observation dictionary and its schema, action masking with fallback, rewards and episode metrics."""

from __future__ import annotations

import bisect
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.action_space import action_in_space
from envs.episode_outcomes import episode_outcomes
from envs.frame import cluster_frame
from envs.observation import InstanceFeatures, instance_fields
from envs.presets import make_scenario
from envs.rewards import RewardFunction, make_reward
from envs.scenario import Scenario
from envs.schema import Entry, MaskPart, ObservationSchema
from simulator.backends import DEFAULT_BACKEND, check_backend
from simulator.cluster import Cluster
from simulator.metrics import flat_metrics, summarize
from simulator.metrics.prefix_cache import prefix_cache_metrics
from simulator.outcome import RequestOutcome
from simulator.request_table import arrival_times_s
from simulator.sequence import Sequence


def boolean(name: str, value: Any) -> bool:
    """``value`` when it is True or False; anything else (``"yes"``, 1) raises naming ``name``:
    a truthy string must not switch a mode on."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} {value!r}: must be True or False")
    return value


class InvalidActionError(ValueError):
    """A masked-out action in ``strict`` mode."""


class ServingEnv(gym.Env):
    """Base class: subclasses define ``action_space``, the context vector, the mask, how an
    action is applied and how the simulation advances to the next decision.

    Observation (``spaces.Dict``): ``instances`` (max_instances x features, see
    ``envs.observation``), ``context`` (the decision's context, subclass-specific) and
    ``action_mask`` (1.0 for valid actions; the same as ``action_masks()`` flattened). Its
    layout is ``self.schema`` (``envs.schema.ObservationSchema``): names, units and encodings,
    and ``schema.decode(observation)`` for raw values by name. The action mask is computed once
    per step and ``action_masks()`` returns it read-only, until the next step (or a change to
    the cluster through its public methods, ``Cluster.version``).
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    env_id: ClassVar[str] = ""  # the registered ID, e.g. "servegym/Routing-v0"
    observes_prefix_match: ClassVar[bool] = False  # the routed request's cached prefix per instance (Routing-v0)

    def __init__(
        self,
        scenario: str | Scenario = "default",
        *,
        reward: str = "slo",
        reward_kwargs: dict[str, Any] | None = None,
        strict: bool = False,
        invalid_action_penalty: float = 1.0,
        render_mode: str | None = None,
        backend: str = DEFAULT_BACKEND,
        **overrides: Any,
    ) -> None:
        if not isinstance(scenario, (str, Scenario)):
            raise ValueError(f"scenario must be a scenario name or a Scenario, got {scenario!r}")
        self.scenario = make_scenario(scenario, **overrides) if isinstance(scenario, str) else scenario.with_overrides(**overrides)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unknown render_mode {render_mode!r}; known: {self.metadata['render_modes']}")
        if not invalid_action_penalty >= 0:
            raise ValueError(f"invalid_action_penalty must be >= 0, got {invalid_action_penalty}")
        self.backend = check_backend(backend)
        self.reward_name = reward
        self.reward_fn: RewardFunction = make_reward(reward, self.scenario, **(reward_kwargs or {}))
        self.strict = boolean("strict", strict)
        self.invalid_action_penalty = invalid_action_penalty
        self.render_mode = render_mode
        tpot = self.scenario.qoe.expected_tpot_s if self.scenario.qoe is not None else None
        caching = self.scenario.prefix_caching
        self.features = InstanceFeatures(
            self.scenario.max_instances, self.scenario.num_tiers, tpot, reasoning=self.scenario.reasoning,
            prefix_caching=caching, prefix_match=self.observes_prefix_match,
        )
        self.schema = ObservationSchema(
            self.env_id, self.scenario.max_instances,
            instance_fields(self.scenario.num_tiers, caching, self.observes_prefix_match),
            self.context_entries(), self.mask_parts(), self.schema_constants(),
        )
        self.observation_space = spaces.Dict(
            {
                "instances": spaces.Box(-1.0, 1.0, self.features.matrix.shape, dtype=np.float32),
                "context": spaces.Box(-1.0, 1.0, (self.context_size(),), dtype=np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (self.mask_size(),), dtype=np.float32),
            }
        )
        self.cluster: Cluster | None = None
        self._episode_over = False
        self._seen = 0
        self._arrival_times_s: list[float] = []
        self._mask: np.ndarray | None = None
        self._mask_version = -1

    # ----------------------------------------------------------------- subclass interface
    def context_entries(self) -> tuple[Entry, ...]:
        """The context's fields in order (``envs.schema``)."""
        raise NotImplementedError

    def mask_parts(self) -> tuple[MaskPart, ...]:
        """The named parts of the flat action mask, in order."""
        raise NotImplementedError

    def schema_constants(self) -> dict[str, float]:
        """Fixed values the observation's encodings use, published in ``schema.constants``."""
        return {
            "max_instances": self.scenario.max_instances, "num_tiers": self.scenario.num_tiers,
            "episode_requests": self.scenario.episode_requests, "control_interval_s": self.scenario.control_interval_s,
        }

    def context_size(self) -> int:
        return self.schema.context_size

    def mask_size(self) -> int:
        return self.schema.mask_size

    def cluster_options(self) -> dict[str, Any]:
        """Keyword arguments for ``Cluster`` (routers, external decisions)."""
        return {}

    def context(self) -> np.ndarray:
        raise NotImplementedError

    def routed_request(self) -> Sequence | None:
        """The request the current decision routes (its cached prefix is observed per instance
        with ``observes_prefix_match``); None by default."""
        return None

    def slot_instance_ids(self) -> list[int | None]:
        """The instance id in each observation row (None: empty); by default deployment order."""
        assert self.cluster is not None
        return list(self.cluster.instances)

    def action_masks(self) -> np.ndarray:
        """Valid actions as booleans (sb3-contrib MaskablePPO reads this through VecEnvs),
        computed once per step and returned read-only."""
        version = self.cluster.version if self.cluster is not None else -1
        if self._mask is None or self._mask_version != version:
            mask = self.compute_action_mask()
            mask.flags.writeable = False
            self._mask, self._mask_version = mask, version
        return self._mask

    def compute_action_mask(self) -> np.ndarray:
        """The valid actions in the current state (called once per step by ``action_masks``)."""
        raise NotImplementedError

    def state_changed(self) -> None:
        """Forget what was computed for the last observation (the mask): the state moves on."""
        self._mask = None

    def apply(self, action: Any, valid: bool) -> None:
        """Carry out ``action`` (already replaced by the fallback when ``valid`` is False)."""
        raise NotImplementedError

    def fallback_action(self) -> Any:
        raise NotImplementedError

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        raise NotImplementedError

    def advance(self) -> bool:
        """Run the simulation to the next decision; return True when the episode is over."""
        raise NotImplementedError

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        requests = self.scenario.requests(self.np_random)
        self.state_changed()
        self.cluster = self.scenario.build_cluster(**self.cluster_options(), track_arrays=True, backend=self.backend)
        self.cluster.submit(requests)
        self._arrival_times_s = arrival_times_s(self.cluster.submitted_requests)
        self._seen = 0
        self._episode_over = False
        self.reward_fn.reset(self.cluster)
        self.on_reset()
        self.advance()
        return self.observation(), self.step_info()

    def on_reset(self) -> None:
        """Hook for subclasses after the cluster is built."""

    def step(self, action: Any):
        if self.cluster is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._episode_over:
            raise gym.error.ResetNeeded("the episode has ended (truncated=True was returned); call reset() before step()")
        if not action_in_space(self.action_space, action):
            raise ValueError(f"action {action!r} is outside the action space {self.action_space}")
        mask = self.action_masks()
        valid = self.is_valid(action, mask)
        if not valid:
            if self.strict:
                raise InvalidActionError(f"action {action!r} is masked out (strict=True)")
            action = self.fallback_action()
        self.apply(action, valid)
        self.state_changed()
        done = self.advance()
        finished = self.cluster.outcomes[self._seen:]
        self._seen = len(self.cluster.outcomes)
        reward = self.reward_fn(self.cluster, finished)
        if not valid:
            reward -= self.invalid_action_penalty
        info = self.step_info(finished)
        info["invalid_action"] = not valid
        if done:
            info["episode_metrics"] = self.episode_metrics()
            info["episode_outcomes"] = episode_outcomes(self.cluster.outcomes)
            self._episode_over = True
        terminated = False
        return self.observation(), float(reward), terminated, done, info

    def observation(self) -> dict[str, np.ndarray]:
        assert self.cluster is not None
        return {
            "instances": self.features.fill(self.cluster, self.slot_instance_ids(), self.routed_request()).copy(),
            "context": self.context(),
            "action_mask": self.action_masks().astype(np.float32).reshape(-1),
        }

    def step_info(self, finished: list[RequestOutcome] | None = None) -> dict[str, Any]:
        assert self.cluster is not None
        finished = finished or []
        return {
            "time_s": self.cluster.events.now_s,
            "finished": len(finished),
            "slo_met": sum(o.completed and self.reward_fn.met(o) for o in finished),
            "cost_usd": self.cluster.cost_usd(),
            "invalid_action": False,
        }

    def episode_metrics(self) -> dict[str, float]:
        """The episode's serving metrics (flat, stable names) for logging and Monitor; with
        prefix caching, the cache's (``simulator.metrics.prefix_cache``) too."""
        assert self.cluster is not None
        summary = summarize(
            self.cluster.outcomes, duration_s=self.cluster.events.now_s, cost_usd=self.cluster.cost_usd(),
            qoe_targets=self.scenario.qoe,
        )
        metrics = {k: float(v) for k, v in flat_metrics(summary).items() if isinstance(v, (int, float))}
        return metrics | prefix_cache_metrics(self.cluster.instances.values())

    def render(self) -> str | np.ndarray | None:
        """``ansi``: a text table of the instances; ``rgb_array``: ``envs.frame.cluster_frame``'s
        picture of the same state (for ``RecordVideo`` and SB3's video tools); None otherwise."""
        if self.cluster is None or self.render_mode is None:
            return None
        if self.render_mode == "rgb_array":
            return cluster_frame(self.cluster, self.slot_instance_ids(), self.scenario.max_instances,
                                 self.scenario.episode_requests)
        lines = [f"t={self.cluster.events.now_s:9.3f} s  cost=${self.cluster.cost_usd():.4f}  "
                 f"done={len(self.cluster.outcomes)}/{self.scenario.episode_requests}",
                 f"{'id':>3} {'gpu':<11}{'role':<11}{'state':<9}{'wait':>5}{'run':>5}{'swap':>5}{'kv%':>6}"]
        for instance in self.cluster.instances.values():
            lines.append(
                f"{instance.instance_id:>3} {instance.gpu.name:<11}{instance.role.value:<11}"
                f"{instance.lifecycle.value:<9}{len(instance.waiting):>5}{len(instance.running):>5}"
                f"{len(instance.swapped):>5}{100 * instance.kv.used_blocks / instance.kv.total_blocks:>6.1f}"
            )
        return "\n".join(lines)

    # ----------------------------------------------------------------- helpers for subclasses
    def recent_qps(self, window_s: float = 10.0) -> float:
        """Arrivals per second over the last ``window_s`` simulated seconds."""
        return self.recent_arrivals(window_s) / window_s

    def recent_arrivals(self, window_s: float) -> int:
        """Requests arrived in the last ``window_s`` simulated seconds (arrival times are sorted)."""
        assert self.cluster is not None
        arrived = self.cluster.arrived
        return arrived - bisect.bisect_right(self._arrival_times_s, self.cluster.events.now_s - window_s, 0, arrived)
