"""Cauchy's planner applied to the autoscaling experiment (Cauchy §4.6, Fig. 10): which
GPU combos are Scaling-v0's unit kinds, the static plan for the mean load, and the autoscaler's
windows on a compressed clock. The scenario itself (``ComboScalingScenario``, the
``cauchy_autoscaling`` preset) lives in ``envs``; ``autoscaling_scenario`` here builds one for
any workload, load profile and start deployment from the planner's output.
"""

from __future__ import annotations

from collections.abc import Mapping

from baselines.cauchy.combos import AGGREGATED_SIZES
from baselines.cauchy.goodput import engine_goodput_table
from baselines.cauchy.ilp import ComboPlan, plan_combos
from baselines.cauchy.selection import build_candidates, pareto_filter, rank_by_ce
from baselines.cauchy.workloads import DEFAULT_ENGINE, INVENTORY, CauchyWorkload, engine_options
from envs.combo_scenario import ComboScalingScenario
from envs.presets import make_scenario
from envs.scenarios.cauchy import CAUCHY_GPUS, SCALING_WINDOW_S
from envs.scenarios.cauchy_autoscaling import combo_autoscaling_scenario
from simulator.combos import Combo
from simulator.workloads import LoadProfile
from simulator.workloads._checks import positive_float

AGGREGATED_COMBOS: tuple[Combo, ...] = tuple(Combo(gpu, n) for gpu in CAUCHY_GPUS for n in AGGREGATED_SIZES)
GRACE_S = 30.0  # §3.5.1: graceful termination
GLOBAL_WINDOW_S = 1800.0  # §3.5.2: stable period before the global refinement


def autoscaler_options(time_compression: float) -> dict[str, float]:
    """``cauchy_autoscaler``'s windows (§3.5.1-§3.5.2) on the compressed clock."""
    k = positive_float("time_compression", time_compression)
    return {"window_s": SCALING_WINDOW_S / k, "grace_s": GRACE_S / k, "global_window_s": GLOBAL_WINDOW_S / k}


def scaling_combos(workload: CauchyWorkload, engine: str = DEFAULT_ENGINE) -> tuple[Combo, ...]:
    """The Scaling-v0 unit kinds for ``workload``: the Pareto-filtered combos of §3.3.1 (CE
    ranked, goodputs profiled with ``engine``), then the aggregated combos the filter dropped
    (Cauchy*'s options)."""
    table = engine_goodput_table(engine)
    goodputs = table.combo_goodputs(workload.lengths)
    ranked = [c.combo for c in rank_by_ce(pareto_filter(build_candidates(table.combos_of(workload.lengths), workload, goodputs)))]
    aggregated = [c for c in AGGREGATED_COMBOS if goodputs.get(c.name, 0.0) > 0 and c not in ranked]
    return tuple(ranked + aggregated)


def mean_load_plan(
    workload: CauchyWorkload, mean_rate_rps: float, aggregated_only: bool = False, engine: str = DEFAULT_ENGINE
) -> ComboPlan:
    """The static deployment of §4.6 (Cauchy w/o autoscaling) and the autoscalers' start: the
    CO-LP plan (§3.3.2) for the mean QPS on the §4.1 inventory, over every combo, or over the
    aggregated combos only (Cauchy*), with the goodputs profiled with ``engine``."""
    combos = AGGREGATED_COMBOS if aggregated_only else scaling_combos(workload, engine)
    table = engine_goodput_table(engine)
    candidates = build_candidates(combos, workload, table.combo_goodputs(workload.lengths))
    return plan_combos(candidates, positive_float("mean_rate_rps", mean_rate_rps), INVENTORY, "co")


def autoscaling_scenario(
    workload: CauchyWorkload,
    initial: Mapping[Combo, int],
    profile: LoadProfile,
    mean_rate_rps: float,
    time_compression: float,
    load_compression: float | None = None,
    engine: str = DEFAULT_ENGINE,
) -> ComboScalingScenario:
    """The workload's ``cauchy`` preset with ``initial`` combos serving and every combo of
    ``scaling_combos`` a Scaling-v0 unit kind with its goodput profiled with ``engine``, every
    instance batching as ``engine`` does (see ``envs.scenarios.cauchy_autoscaling.combo_autoscaling_scenario``
    for the clock and the load)."""
    combos = scaling_combos(workload, engine)
    unknown = [c.name for c in initial if c not in combos]
    if unknown:
        raise ValueError(f"not scaling combos of {workload.lengths}: {unknown}; known: {[c.name for c in combos]}")
    goodputs = engine_goodput_table(engine).combo_goodputs(workload.lengths)
    return combo_autoscaling_scenario(
        make_scenario(workload.scenario), [(c, goodputs[c.name]) for c in combos], [initial.get(c, 0) for c in combos],
        profile, mean_rate_rps, time_compression, load_compression, engine_options(engine),
    )


def plan_counts(plan: ComboPlan) -> dict[Combo, int]:
    """Combo -> count of a plan."""
    return {candidate.combo: n for candidate, n in plan.entries}
