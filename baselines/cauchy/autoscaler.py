"""Cauchy's adaptive combo-level autoscaler (Cauchy §3.5, Algorithm 1) and the static
baseline, for servegym/Scaling-v0.

A combo is one Scaling-v0 unit kind (``ScalingEnv.units``): a disaggregated
``<n x G1, m x G2>`` combo deployed and removed whole by a combo scenario
(``envs.combo_scenario.ComboScalingScenario``), or an aggregated
``<n x G>`` combo; each with its profiled goodput. One env step is one tick of
Alg. 1's loop (the env's ``scaling_window_s``; use a divisor of the 2-minute window, e.g.
30 s). Each tick pushes the last tick's arrival rate (the ``arrivals_per_s`` context field) into a ring buffer of
``window_s``; once ``window_s`` has passed since the last scaling (Line 7) the window's mean
QPS is compared with the provisioned goodput ``Q_total`` (serving and starting combos, plus
those still to be added) (Lines 8-11):

* deficit above ``ratio x Q_total``: scale out with the CO-LP plan (§3.3.2) for the deficit
  over the free GPUs (Line 14); nothing when the free GPUs cannot cover it (Line 12);
* excess above it: scale in the combos whose goodput sums closest to the excess without
  exceeding it, largest first, always keeping one serving (Line 17); they are drained (no
  new requests, in-flight ones finish) ``grace_s`` (30 s) after the decision;
* otherwise, after ``global_window_s`` (30 min) without scaling, the stable-period refinement
  (Lines 22-27): the CO-LP plan for the mean QPS since the episode began over the whole
  inventory, reconciled by adding what is missing first and removing the surplus after the
  grace period.

The env adds or removes at most one unit per kind per step, so a plan is carried out over
the next steps, and only where the action mask allows it (never beyond the inventory).

``cauchy_aggregated`` is Cauchy* (§4.1 "Comparative Methods"): the same loop planning over the aggregated combos
only, on any combo scenario.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from baselines.cauchy.goodput import load_goodput_table
from baselines.cauchy.ilp import InfeasibleDemandError, ServiceDemand, solve_allocation
from baselines.cauchy.scaling_scenario import autoscaler_options
from baselines.cauchy.selection import Candidate, combo_ce_tokens_per_usd
from baselines.cauchy.workloads import get_workload
from baselines.policy import Policy, register
from envs.scaling import ADD, HOLD, KIND_FEATURES, REMOVE
from envs.schema import DecodedObservation
from simulator.combos import Combo, combo_of_configs

SCALING_ENV_ID = "servegym/Scaling-v0"


def _ticks(label: str, seconds: float, tick_s: float) -> int:
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{label} must be a positive number of seconds, got {seconds!r}")
    ticks = seconds / tick_s
    if abs(ticks - round(ticks)) > 1e-9 or round(ticks) < 1:
        raise ValueError(f"{label}={seconds:g} s is not a whole number of the env's {tick_s:g} s scaling windows")
    return int(round(ticks))


@register
class CauchyStatic(Policy):
    """Cauchy w/o autoscaling (§4.6 baseline): the initial deployment, never changed."""

    name = "cauchy_static"
    env_ids = (SCALING_ENV_ID,)

    def act(self, observation: dict[str, np.ndarray]) -> Any:
        return self.env.hold_action()


@register
class CauchyAutoscaler(Policy):
    """Algorithm 1 (see the module docstring). ``goodput_rps`` maps each kind's combo name
    (``<2xA800-PCIe>``) to its goodput; by default the profiled table for the scenario's
    workload (``baselines/data/cauchy_goodput.json``). The windows default to §3.5's 2 min,
    30 s grace and 30 min, divided by the scenario's ``time_compression`` when it has one."""

    name = "cauchy_autoscaler"
    env_ids = (SCALING_ENV_ID,)
    action_modes = ("per_kind",)

    def __init__(
        self,
        env: gym.Env,
        goodput_rps: Mapping[str, float] | None = None,
        ratio: float = 0.2,
        window_s: float | None = None,
        grace_s: float | None = None,
        global_window_s: float | None = None,
    ) -> None:
        super().__init__(env)
        defaults = autoscaler_options(getattr(self.scenario, "time_compression", 1.0))
        window_s = defaults["window_s"] if window_s is None else window_s
        grace_s = defaults["grace_s"] if grace_s is None else grace_s
        global_window_s = defaults["global_window_s"] if global_window_s is None else global_window_s
        if not (isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0):
            raise ValueError(f"ratio must be a positive number, got {ratio!r}")
        tick_s = float(self.env.scaling_window_s)
        self.ratio = float(ratio)
        self.window_ticks = _ticks("window_s", window_s, tick_s)
        if not (isinstance(grace_s, (int, float)) and math.isfinite(grace_s) and grace_s >= 0):
            raise ValueError(f"grace_s must be a non-negative number of seconds, got {grace_s!r}")
        self.grace_ticks = math.ceil(grace_s / tick_s)
        self.global_ticks = _ticks("global_window_s", global_window_s, tick_s)
        self.max_instances = self.schema.max_instances
        self.inventory = dict(self.scenario.gpu_inventory)
        workload = get_workload(self.scenario.workload.lengths)
        table = dict(goodput_rps) if goodput_rps is not None else load_goodput_table().combo_goodputs(workload.lengths)
        self.candidates: list[Candidate] = []
        for unit in self.env.units:
            combo = combo_of_configs(unit.configs)
            if combo.name not in table or not table[combo.name] > 0:
                raise ValueError(f"no positive goodput for {combo.name}; known: {sorted(table)}")
            model = unit.configs[0].model
            self.candidates.append(Candidate(combo, combo_ce_tokens_per_usd(combo, workload, model), table[combo.name]))
        self.goodputs = np.array([c.goodput_rps for c in self.candidates])
        self.instances_per_combo = np.array([len(unit.configs) for unit in self.env.units])
        self.plannable = [k for k, c in enumerate(self.candidates) if self.may_plan(c.combo)]
        if not self.plannable:
            raise ValueError(f"policy {self.name!r} may plan none of the env's combos {list(self.env.kind_names)}")
        self.reset()

    def may_plan(self, combo: Combo) -> bool:
        """Whether scale-out and refinement may deploy ``combo`` (all combos for Cauchy)."""
        return True

    def reset(self) -> None:
        self.tick = -1
        self.last_scaling_tick = 0
        self.recent_qps: deque[float] = deque(maxlen=self.window_ticks)
        self.qps_sum, self.qps_ticks = 0.0, 0
        self.pending_adds = np.zeros(len(self.candidates), dtype=np.int64)
        self.pending_removes: list[tuple[int, int]] = []  # (due tick, kind)

    # ----------------------------------------------------------------- observation reading
    @staticmethod
    def kind_counts(view: DecodedObservation) -> np.ndarray:
        """(kinds x 3) serving, starting, draining units per kind."""
        return np.stack([view.context[f"{state}_units"] for state in KIND_FEATURES], axis=1)

    def free_gpus(self, counts: np.ndarray, with_pending: bool = True) -> dict[str, int]:
        """Inventory GPUs not held by any instance (serving, starting or draining), minus
        those of the adds still to carry out when ``with_pending``."""
        free = dict(self.inventory)
        held = counts.sum(axis=1) + (self.pending_adds if with_pending else 0)
        for kind, candidate in enumerate(self.candidates):
            for gpu, n in candidate.combo.gpu_counts().items():
                free[gpu] -= n * int(held[kind])
        return free

    # ----------------------------------------------------------------- Algorithm 1
    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        self.tick += 1
        view = self.decode(observation)
        counts = self.kind_counts(view)
        if self.tick > 0:
            qps = view.context["arrivals_per_s"]
            self.recent_qps.append(qps)
            self.qps_sum += qps
            self.qps_ticks += 1
        if self.tick - self.last_scaling_tick >= self.window_ticks:
            self.decide(counts)
        return self.carry_out(view, counts)

    def provisioned(self, counts: np.ndarray) -> np.ndarray:
        """Combos per kind that count as deployed: serving, starting and to be added."""
        return counts[:, 0] + counts[:, 1] + self.pending_adds - self._pending_remove_counts()

    def _pending_remove_counts(self) -> np.ndarray:
        removes = np.zeros(len(self.candidates), dtype=np.int64)
        for _, kind in self.pending_removes:
            removes[kind] += 1
        return removes

    def decide(self, counts: np.ndarray) -> None:
        provisioned = self.provisioned(counts)
        q_total = float(self.goodputs @ provisioned)
        q_avg = float(np.mean(self.recent_qps))
        delta = q_avg - q_total
        if abs(delta) > self.ratio * q_total:
            if delta > 0:
                self.scale_out(delta, self.free_gpus(counts))
            else:
                self.scale_in(-delta, provisioned)
            self.last_scaling_tick = self.tick
        elif self.tick - self.last_scaling_tick >= self.global_ticks:
            self.refine(provisioned, self.qps_sum / self.qps_ticks)
            self.last_scaling_tick = self.tick

    def plan(self, demand_rps: float, inventory: Mapping[str, int]) -> np.ndarray | None:
        """CO-LP combo counts per kind for ``demand_rps`` within ``inventory``, over the combos
        this policy may plan; None if infeasible."""
        allowed = tuple(self.candidates[k] for k in self.plannable)
        try:
            plan = solve_allocation({"s": ServiceDemand(allowed, demand_rps)}, inventory, "co")["s"]
        except InfeasibleDemandError:
            return None
        counts = np.zeros(len(self.candidates), dtype=np.int64)
        for candidate, n in plan.entries:
            counts[self.candidates.index(candidate)] += n
        return counts

    def scale_out(self, deficit_rps: float, free: Mapping[str, int]) -> None:
        added = self.plan(deficit_rps, free)
        if added is not None:
            self.pending_adds += added

    def scale_in(self, excess_rps: float, provisioned: np.ndarray) -> None:
        left = excess_rps
        remaining = provisioned.copy()
        for kind in np.argsort(-self.goodputs, kind="stable"):
            while remaining[kind] > 0 and remaining.sum() > 1 and self.goodputs[kind] <= left:
                self.pending_removes.append((self.tick + self.grace_ticks, int(kind)))
                remaining[kind] -= 1
                left -= self.goodputs[kind]

    def refine(self, provisioned: np.ndarray, mean_qps: float) -> None:
        if mean_qps <= 0:
            return
        target = self.plan(mean_qps, self.inventory)
        if target is None:
            return
        self.pending_adds += np.maximum(target - provisioned, 0)
        for kind, surplus in enumerate(np.maximum(provisioned - target, 0).tolist()):
            self.pending_removes += [(self.tick + self.grace_ticks, kind)] * surplus

    # ----------------------------------------------------------------- acting
    def carry_out(self, view: DecodedObservation, counts: np.ndarray) -> np.ndarray:
        """This step's action: one pending add or one due removal per kind, where the mask and
        the GPUs left allow; a removal that cannot happen when due is dropped."""
        mask = view.mask("choice")
        action = np.full(len(self.candidates), HOLD, dtype=np.int64)
        free = self.free_gpus(counts, with_pending=False)
        serving_left = int(counts[:, 0].sum())
        slots_left = self.max_instances - int(counts.sum(axis=1) @ self.instances_per_combo)
        for kind, candidate in enumerate(self.candidates):
            need = candidate.combo.gpu_counts()
            fits = slots_left >= self.instances_per_combo[kind] and all(free[g] >= n for g, n in need.items())
            if self.pending_adds[kind] > 0 and mask[kind, ADD] and fits:
                action[kind] = ADD
                self.pending_adds[kind] -= 1
                slots_left -= int(self.instances_per_combo[kind])
                for gpu, n in need.items():
                    free[gpu] -= n
                continue
            due = [i for i, (tick, k) in enumerate(self.pending_removes) if k == kind and tick <= self.tick]
            if not due:
                continue
            self.pending_removes.pop(due[0])
            if mask[kind, REMOVE] and serving_left > 1:
                action[kind] = REMOVE
                serving_left -= 1
        return action


@register
class CauchyAggregated(CauchyAutoscaler):
    """Cauchy* (Cauchy §4.1 "Comparative Methods": "a variant of CAUCHY that only supports
    aggregated GPU Combos", its advantage over Mélange "dynamic resource adjustment"): Algorithm 1 with
    scale-out and refinement planned over the aggregated combos only."""

    name = "cauchy_aggregated"

    def may_plan(self, combo: Combo) -> bool:
        return combo.aggregated
