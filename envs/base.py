"""What every servegym environment shares: scenario and cluster set-up, seeding, the
observation dictionary, action masking with fallback, rewards and episode metrics."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs.observation import InstanceFeatures
from envs.presets import make_scenario
from envs.rewards import REWARDS, RewardFunction
from envs.scenario import Scenario
from simulator.cluster import Cluster
from simulator.metrics import flat_metrics, summarize
from simulator.outcome import RequestOutcome


class InvalidActionError(ValueError):
    """A masked-out action in ``strict`` mode."""


class ServingEnv(gym.Env):
    """Base class: subclasses define ``action_space``, the context vector, the mask, how an
    action is applied and how the simulation advances to the next decision.

    Observation (``spaces.Dict``): ``instances`` (max_instances x features, see
    ``envs.observation``), ``context`` (the decision's context, subclass-specific) and
    ``action_mask`` (1.0 for valid actions; the same as ``action_masks()`` flattened).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    env_id: ClassVar[str] = ""  # the registered ID, e.g. "servegym/Routing-v0"

    def __init__(
        self,
        scenario: str | Scenario = "default",
        *,
        reward: str = "slo",
        strict: bool = False,
        invalid_action_penalty: float = 1.0,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        self.scenario = make_scenario(scenario, **overrides) if isinstance(scenario, str) else scenario.with_overrides(**overrides)
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; known: {sorted(REWARDS)}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"unknown render_mode {render_mode!r}; known: ['ansi']")
        if not invalid_action_penalty >= 0:
            raise ValueError(f"invalid_action_penalty must be >= 0, got {invalid_action_penalty}")
        self.reward_name = reward
        self.reward_fn: RewardFunction = REWARDS[reward](self.scenario)
        self.strict = strict
        self.invalid_action_penalty = invalid_action_penalty
        self.render_mode = render_mode
        tpot = self.scenario.qoe.expected_tpot_s if self.scenario.qoe is not None else None
        self.features = InstanceFeatures(
            self.scenario.max_instances, self.scenario.num_tiers, tpot, reasoning=self.scenario.reasoning
        )
        self.observation_space = spaces.Dict(
            {
                "instances": spaces.Box(-1.0, 1.0, self.features.matrix.shape, dtype=np.float32),
                "context": spaces.Box(-1.0, 1.0, (self.context_size(),), dtype=np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (self.mask_size(),), dtype=np.float32),
            }
        )
        self.cluster: Cluster | None = None
        self._seen = 0
        self._arrival_times: list[float] = []

    # ----------------------------------------------------------------- subclass interface
    def context_size(self) -> int:
        raise NotImplementedError

    def mask_size(self) -> int:
        raise NotImplementedError

    def cluster_options(self) -> dict[str, Any]:
        """Keyword arguments for ``Cluster`` (routers, external decisions)."""
        return {}

    def context(self) -> np.ndarray:
        raise NotImplementedError

    def slot_instance_ids(self) -> list[int | None]:
        """The instance id in each observation row (None: empty); by default deployment order."""
        assert self.cluster is not None
        return list(self.cluster.instances)

    def action_masks(self) -> np.ndarray:
        """Valid actions as booleans (sb3-contrib MaskablePPO reads this through VecEnvs)."""
        raise NotImplementedError

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
        self.cluster = self.scenario.build_cluster(**self.cluster_options())
        self.cluster.submit(requests)
        self._seen = 0
        self.reward_fn.reset(self.cluster)
        self.on_reset()
        self.advance()
        return self.observation(), self.step_info()

    def on_reset(self) -> None:
        """Hook for subclasses after the cluster is built."""

    def step(self, action: Any):
        if self.cluster is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is outside the action space {self.action_space}")
        mask = self.action_masks()
        valid = self.is_valid(action, mask)
        if not valid:
            if self.strict:
                raise InvalidActionError(f"action {action!r} is masked out (strict=True)")
            action = self.fallback_action()
        self.apply(action, valid)
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
        terminated = False
        return self.observation(), float(reward), terminated, done, info

    def observation(self) -> dict[str, np.ndarray]:
        assert self.cluster is not None
        return {
            "instances": self.features.fill(self.cluster, self.slot_instance_ids()).copy(),
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
        """The episode's serving metrics (flat, stable names) for logging and Monitor."""
        assert self.cluster is not None
        summary = summarize(
            self.cluster.outcomes, duration_s=self.cluster.events.now_s, cost_usd=self.cluster.cost_usd(),
            qoe_targets=self.scenario.qoe,
        )
        return {k: float(v) for k, v in flat_metrics(summary).items() if isinstance(v, (int, float))}

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.cluster is None:
            return None
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
        assert self.cluster is not None
        now = self.cluster.events.now_s
        requests = self.cluster.submitted_requests
        arrived = self.cluster.arrived
        count = 0
        index = arrived - 1
        while index >= 0 and requests[index].arrival_s > now - window_s:
            count += 1
            index -= 1
        return count / window_s
