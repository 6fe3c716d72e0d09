"""``cascadeserve``: online gear switching on servegym/Cascade-v0 (CascadeServe §3, §5), and
``model_switching`` (MS, §6.2), the same QPS lookup over a plan of single models.

Every control interval (100 ms in the ``cascadeserve`` scenario) the producer measures the QPS
by counting the arrivals of the last interval (from the observation's ``arrived`` count),
looks the gear up in the gear plan and sets its thresholds.
Hysteresis (§5): the gear is kept while qps < α·Q₀, Q₀ the queue length of the cascade's first
model (waiting requests on its instances, from the observation), α = 8 by default, so a backlog
left by a burst keeps the burst's gear until the queue has drained.

Batching (§4.5): on a Cascade-v0 env built with ``min_queue_lengths`` the policy also sets each
model's minimum queue length, the gear's for the cascade's first model and 1 for the others (the
planner tunes only the first, §4.5), each rounded down to the largest allowed choice (the
smallest choice when none is lower). Without ``min_queue_lengths`` the instances batch
continuously, as vLLM does.

Without a ``plan`` the policy plans on the env's own deployment (``fixed_placement``) with the
scenario's E2E SLO and ``qps_max`` (default 3x the workload's mean rate).

``model_switching`` drives Cascade-v0 in gear mode, built with ``gear_env_options(plan)`` for a
``model_switching.plan_model_switching`` plan: each gear's requests enter its one model.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from baselines.cascadeserve.cascade_search import thresholds
from baselines.cascadeserve.planner import Gear, GearPlan, plan_gears
from baselines.cascadeserve.scenario_inputs import problem_for_scenario
from baselines.policy import Policy, register

ALPHA = 8.0  # §5: "α = 8 works well for most scenarios"


def choice_index(choices: Sequence[int], length: int) -> int:
    """Index of the largest choice <= ``length`` (0 when every choice is larger)."""
    return max(0, bisect.bisect_right(list(choices), length) - 1)


def gear_env_options(plan: GearPlan) -> dict[str, Any]:
    """Cascade-v0 options serving ``plan`` in gear mode: each gear's thresholds and the stage its
    requests enter (its cascade's first; a single model's own stage)."""
    return {
        "action": "gear",
        "gears": [thresholds(g.cascade.levels, plan.threshold_levels) for g in plan.gears],
        "entry_stages": [g.cascade.entry_stage for g in plan.gears],
        "threshold_levels": plan.threshold_levels,
    }


def keep_gear(qps: float, first_queue_length: float, alpha: float = ALPHA) -> bool:
    """§5: the gear is not changed while qps < α·Q₀."""
    return qps < alpha * first_queue_length


@register
class CascadeServePolicy(Policy):
    """Gear-plan lookup by measured QPS with §5's α hysteresis (module docstring)."""

    name = "cascadeserve"
    env_ids = ("servegym/Cascade-v0",)
    action_modes = ("thresholds",)

    def __init__(
        self,
        env: gym.Env,
        plan: GearPlan | None = None,
        alpha: float = ALPHA,
        qps_max: float | None = None,
        n_ranges: int = 6,
        seed: int = 0,
    ) -> None:
        super().__init__(env)
        if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
        scenario = self.scenario
        if plan is None:
            problem = problem_for_scenario(
                scenario, np.random.default_rng(seed), qps_max=qps_max or 3 * scenario.workload.rate_rps,
                n_ranges=n_ranges, threshold_levels=self.env.threshold_levels, fixed_placement=True,
            )
            plan = plan_gears(problem, np.random.default_rng(seed))
        if plan.models != tuple(self.env.models) or plan.threshold_levels != self.env.threshold_levels:
            raise ValueError(
                f"the plan is for {list(plan.models)} with {plan.threshold_levels} levels; the env has "
                f"{list(self.env.models)} with {self.env.threshold_levels}"
            )
        self.plan = plan
        self.alpha = float(alpha)
        self.interval_s = float(self.schema.constants["control_interval_s"])
        self.reset()

    def reset(self) -> None:
        self.gear: int | None = None
        self.arrived = 0
        self.gear_trace: list[int] = []

    def measure(self, observation: dict[str, np.ndarray]) -> tuple[float, int]:
        """(QPS over the last interval, Q₀: requests waiting on the first model) from the observation."""
        view = self.decode(observation)
        arrived = view.context["arrived"]
        qps = max(0, arrived - self.arrived) / self.interval_s
        self.arrived = arrived
        return qps, int(view.context["waiting"][0])

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        qps, first_queue = self.measure(observation)
        if self.gear is None or not keep_gear(qps, first_queue, self.alpha):
            self.gear = self.plan.gear_index(qps)
        self.gear_trace.append(self.gear)
        gear = self.plan.gears[self.gear]
        levels = np.array(gear.cascade.levels, dtype=np.int64)
        choices = self.env.min_queue_lengths
        if choices is None:
            return levels
        return np.concatenate([levels, [choice_index(choices, n) for n in self.planned_min_queue_lengths(gear)]])

    def planned_min_queue_lengths(self, gear: Gear) -> list[int]:
        """§4.5: the gear's minimum queue length for the cascade's first model, 1 for the others."""
        first = gear.cascade.entry_stage
        return [gear.min_queue_length if i == first else 1 for i in range(len(self.plan.models))]


@register
class ModelSwitchingPolicy(Policy):
    """MS (CascadeServe §6.2, [72]): "switches between single models based on the measured
    QPS". Every control interval (100 ms) the measured QPS picks the gear of a model-switching
    plan (one model per QPS range, ``model_switching.plan_model_switching``); requests enter
    that model (Cascade-v0 built with ``gear_env_options(plan)``). No α hysteresis (§5 is
    CascadeServe's); instances batch continuously (MS+'s Clipper batching is not modelled)."""

    name = "model_switching"
    env_ids = ("servegym/Cascade-v0",)

    def __init__(self, env: gym.Env, plan: GearPlan | None = None) -> None:
        super().__init__(env)
        if plan is None:
            raise ValueError("model_switching needs plan=, a model-switching gear plan "
                             "(baselines.cascadeserve.model_switching.plan_model_switching), and a Cascade-v0 "
                             "built with gear_env_options(plan)")
        expected = gear_env_options(plan)
        actual = {"action": self.env.action_mode, "gears": [list(g) for g in self.env.gears],
                  "entry_stages": list(self.env.entry_stages), "threshold_levels": self.env.threshold_levels}
        if plan.models != tuple(self.env.models) or actual != expected:
            raise ValueError(f"build Cascade-v0 with gear_env_options(plan) for this plan: it needs {expected}, "
                             f"the env has {actual} for {list(self.env.models)}")
        self.plan = plan
        self.interval_s = float(self.schema.constants["control_interval_s"])
        self.reset()

    def reset(self) -> None:
        self.arrived = 0
        self.gear_trace: list[int] = []

    def act(self, observation: dict[str, np.ndarray]) -> int:
        arrived = self.decode(observation).context["arrived"]
        gear = self.plan.gear_index(max(0, arrived - self.arrived) / self.interval_s)
        self.arrived = arrived
        self.gear_trace.append(gear)
        return gear
