"""The ``cascadia`` policy on servegym/Cascade-v0: thresholds from Cascadia's routing solver for
the env's deployment, re-planned when the measured load shifts (Cascadia §3.3, §4.4).

Cascade-v0 keeps the scenario's deployment fixed, so the policy runs the routing half of Alg. 1
(App. D: argmin over thresholds of J with the deployment held) for that deployment: build the
plan's deployment into the scenario (``CascadePlan.instance_groups``) to run Cascadia whole.

- Profile (footnote 3): ``profile_requests`` requests drawn from the scenario's workload with the
  policy's own generator, scored on every model by ``simulator.cascade`` with the env's quality
  kind and difficulty mean.
- Latency: the replica lookup tables of ``parallelism.py``, precomputed offline (§3.2): the
  cached ones (``baselines/data/cascadia_latency_tables.json``) for the scenario's models,
  GPU and lengths, or ``tables``. A missing table raises, unless ``build_tables=True``
  simulates it now (about half a minute per model on 2 cores).
- Re-planning (§4.4): the observation's measured QPS (``arrivals_per_s``, arrivals per second
  over the last control interval) is compared with the rate the thresholds were planned for; a
  relative shift above ``replan_shift`` re-runs the routing solver at the measured rate, a
  cheap table lookup. The reset observation is not used (no interval measured yet), nor are
  intervals after the last arrival (``arrived`` equals the episode's requests: the stream
  ended, the load did not shift).
- The objective's q_min and μ default to the env's ``quality_min`` and ``quality_penalty_mu``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from baselines.cascadia.parallelism import (
    ModelLatencyTable,
    ParallelismStrategy,
    ReplicaShape,
    TableSettings,
    load_cached_tables,
    model_table,
    table_key,
)
from baselines.cascadia.planner import CascadiaPlanner
from baselines.cascadia.thresholds import QualityProfile
from baselines.policy import Policy, register
from envs.scenario import Scenario
from simulator.cascade import assign_cascade_quality
from simulator.cascade_quality import SCORE_MAX


def deployment_of(scenario: Scenario) -> tuple[tuple[ParallelismStrategy, ...], tuple[str, ...], str]:
    """Each cascade model's strategy in ``scenario``, each model's weight dtype, and the GPU type."""
    gpus = {g.config.gpu for g in scenario.instances}
    if len(gpus) != 1:
        raise ValueError(f"Cascadia plans for one GPU type, scenario {scenario.name!r} uses {sorted(gpus)}")
    strategies, dtypes = [], []
    for model in scenario.cascade:
        groups = [g for g in scenario.instances if g.config.model == model]
        if not groups:
            raise ValueError(f"cascade model {model} has no instance group in scenario {scenario.name!r}")
        dtypes.append(groups[0].config.dtype)
        strategies.append(ParallelismStrategy(tuple(
            (ReplicaShape(g.config.tp, g.config.pp), g.count) for g in groups if g.count > 0
        )))
    return tuple(strategies), tuple(dtypes), gpus.pop()


@register
class CascadiaPolicy(Policy):
    """Cascadia's routing solver on the env's deployment, with §4.4 re-planning."""

    name = "cascadia"
    env_ids = ("servegym/Cascade-v0",)
    action_modes = ("thresholds",)

    def __init__(
        self,
        env: gym.Env,
        quality_min: float | None = None,
        penalty_mu: float | None = None,
        replan_shift: float = 0.25,
        profile_requests: int = 1000,
        seed: int = 0,
        tables: Sequence[ModelLatencyTable] | None = None,
        build_tables: bool = False,
    ) -> None:
        super().__init__(env)
        if not (math.isfinite(replan_shift) and replan_shift > 0):
            raise ValueError(f"replan_shift must be positive, got {replan_shift!r}")
        if isinstance(profile_requests, bool) or not isinstance(profile_requests, int) or profile_requests < 1:
            raise ValueError(f"profile_requests must be a positive integer, got {profile_requests!r}")
        quality_min = self.env.quality_min if quality_min is None else quality_min
        penalty_mu = self.env.quality_penalty_mu if penalty_mu is None else penalty_mu
        scenario: Scenario = self.scenario
        self.strategies, dtypes, gpu = deployment_of(scenario)
        if tables is None:
            tables = self._lookup_tables(scenario, dtypes, gpu, build_tables)
        if [t.model for t in tables] != list(scenario.cascade):
            raise ValueError(f"tables are for {[t.model for t in tables]}, the cascade is {list(scenario.cascade)}")
        rng = np.random.default_rng(seed)
        profiled = scenario.workload.sample(profile_requests, rng)
        signals = assign_cascade_quality(
            profiled, scenario.cascade, rng, kind=self.env.quality_kind, difficulty_mean=self.env.difficulty_mean
        )
        total_gpus = sum(s.num_gpus for s in self.strategies)
        self.planner = CascadiaPlanner(
            tables, total_gpus, QualityProfile.from_requests(profiled, scenario.cascade, signals), quality_min,
            penalty_mu=penalty_mu, threshold_levels=self.env.threshold_levels,
        )
        self.replan_shift = replan_shift
        self.initial_rate_rps = scenario.workload.rate_rps
        self.reset()

    @staticmethod
    def _lookup_tables(scenario: Scenario, dtypes: Sequence[str], gpu: str, build: bool) -> list[ModelLatencyTable]:
        engine = scenario.instances[0].config.engine
        settings = TableSettings(gpu=gpu, engine=engine, lengths=scenario.workload.lengths)
        cache = load_cached_tables()
        missing = [
            key for m, d in zip(scenario.cascade, dtypes)
            if (cached := cache.get(key := table_key(m, d, settings.lengths, gpu, engine))) is None
            or cached.settings != settings
        ]
        if missing and not build:
            raise ValueError(
                f"no cached Cascadia latency table for {missing} (cached: {sorted(cache)}); pass tables=... or "
                "build_tables=True to simulate them now"
            )
        return [model_table(m, d, settings, cache) for m, d in zip(scenario.cascade, dtypes)]

    def reset(self) -> None:
        self.steps = 0
        self.replans = 0
        self.planned_rate_rps = self.initial_rate_rps
        self.thresholds = self.planner.route(self.planned_rate_rps, self.strategies)[0].thresholds

    def act(self, observation: dict[str, np.ndarray]) -> Any:
        view = self.decode(observation)
        stream_open = view.context["arrived"] < self.schema.constants["episode_requests"]
        if self.steps > 0 and stream_open:
            measured = view.context["arrivals_per_s"]
            if measured > 0 and abs(measured - self.planned_rate_rps) > self.replan_shift * self.planned_rate_rps:
                self.planned_rate_rps = measured
                self.thresholds = self.planner.route(measured, self.strategies)[0].thresholds
                self.replans += 1
        self.steps += 1
        levels = self.env.threshold_levels - 1
        return np.array([round(h * levels / SCORE_MAX) for h in self.thresholds], dtype=np.int64)
