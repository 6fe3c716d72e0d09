"""Scaling-v0 scenarios for Cauchy's autoscaling experiment (cauchy.txt §4.6, Fig. 10): the
§4.1 testbed deployed as GPU combos (disaggregated prefill-decode pairs and aggregated
instances, each added and removed whole), serving a time-varying load taken from a real rate
series, with the scaling machinery's clock compressed like the load.

* ``LoadProfile``: a load curve as rates relative to its mean, one per ``bin_s`` real seconds:
  ``azure_profile`` (the Azure 2023 trace's per-minute arrival counts, the "traffic patterns
  scaled from Azure LLM Inference Trace" of §4.6) or ``servegen_day_profile`` (one day of
  ServeGen's pooled m-large rate series, 10-minute windows).
* ``time_compression`` k: ``bin_s`` real seconds of the profile last ``bin_s / k`` simulated
  seconds, and so do the start-up time of a new instance (§3.5.1: 90 s) and the autoscaler's
  windows (``autoscaler_options``: 2 min, 30 s grace, 30 min global window), so the load
  changes as fast relative to the autoscaler as in real time. Request service times are not
  compressed. A day-long profile may be compressed further (``load_compression``) to fit a
  time budget; its swings are then steeper for the autoscaler than in real time.
* Arrivals are a piecewise-constant Poisson process at the profile's rates scaled to the mean
  QPS: the Azure conv trace is near-Poisson within a minute (inter-arrival CV 1.09), and its
  5.5 req/s cannot be replayed at 50-200 req/s request by request.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from baselines.cauchy.combo_cluster import ComboCluster
from baselines.cauchy.combos import AGGREGATED_SIZES, Combo
from baselines.cauchy.deployment import build_combo_cluster, check_combo_deployment, combo_instance_groups
from baselines.cauchy.goodput import load_goodput_table
from baselines.cauchy.ilp import ComboPlan, plan_combos
from baselines.cauchy.selection import build_candidates, pareto_filter, rank_by_ce
from baselines.cauchy.workloads import INVENTORY, MODEL, CauchyWorkload, get_workload
from envs.presets import make_scenario, register_scenario
from envs.scenario import ScalingUnit, Scenario
from envs.scenarios.cauchy import CAUCHY_GPUS
from simulator.request import Request
from simulator.workloads import servegen_rate_series
from simulator.workloads.data_files import SERVEGEN_RATE_WINDOW_S
from simulator.workloads.traces import AZURE_TRACE_FILES, read_azure_columns

AGGREGATED_COMBOS: tuple[Combo, ...] = tuple(Combo(gpu, n) for gpu in CAUCHY_GPUS for n in AGGREGATED_SIZES)
STARTUP_S = 90.0  # §3.5.1: provisioning, container start, model load, network
WINDOW_S = 120.0  # §3.5.1: the sliding window
GRACE_S = 30.0  # §3.5.1: graceful termination
GLOBAL_WINDOW_S = 1800.0  # §3.5.2: stable period before the global refinement
TICKS_PER_WINDOW = 4  # Scaling-v0 steps (QPS samples of Alg. 1, Line 5) per window
SERVEGEN_WINDOWS_PER_DAY = 144


def _positive(label: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{label} must be a positive finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class LoadProfile:
    """``relative_rates[j]`` (mean 1) holds for ``bin_s`` real seconds each."""

    name: str
    bin_s: float
    relative_rates: tuple[float, ...]

    def __post_init__(self) -> None:
        _positive("bin_s", self.bin_s)
        rates = np.asarray(self.relative_rates, dtype=np.float64)
        if rates.ndim != 1 or rates.size == 0 or not np.all(np.isfinite(rates)) or np.any(rates < 0):
            raise ValueError(f"relative_rates must be a non-empty list of finite rates >= 0, got {self.relative_rates!r}")
        if not math.isclose(float(rates.mean()), 1.0, rel_tol=1e-9):
            raise ValueError(f"relative_rates must have mean 1, got {rates.mean()!r}")

    def duration_s(self, compression: float) -> float:
        """Simulated seconds the whole profile lasts."""
        return len(self.relative_rates) * self.bin_s / _positive("compression", compression)

    def rates_rps(self, mean_rate_rps: float) -> np.ndarray:
        return np.asarray(self.relative_rates) * _positive("mean_rate_rps", mean_rate_rps)

    def boundaries_s(self, compression: float) -> np.ndarray:
        return np.arange(len(self.relative_rates)) * self.bin_s / _positive("compression", compression)

    def expected_requests(self, mean_rate_rps: float, compression: float) -> int:
        """Arrivals the profile holds at ``mean_rate_rps``: the mean rate times its duration."""
        return round(_positive("mean_rate_rps", mean_rate_rps) * self.duration_s(compression))


def _relative(name: str, bin_s: float, rates: np.ndarray) -> LoadProfile:
    return LoadProfile(name, bin_s, tuple((rates / rates.mean()).tolist()))


def azure_profile(source: str = "azure_conv", bin_s: float = 60.0) -> LoadProfile:
    """Arrivals per ``bin_s`` of the shipped Azure 2023 trace (whole bins only), relative to
    their mean. ``azure_conv``: 58 one-minute bins between 0.57 and 1.52 x the mean."""
    if source not in AZURE_TRACE_FILES:
        raise ValueError(f"unknown Azure trace {source!r}; known: {sorted(AZURE_TRACE_FILES)}")
    bin_s = _positive("bin_s", bin_s)
    arrival_s = read_azure_columns(AZURE_TRACE_FILES[source])[0]
    whole_bins = int(arrival_s[-1] // bin_s)
    if whole_bins < 1:
        raise ValueError(f"{source} spans {arrival_s[-1]:.0f} s, less than one {bin_s:g} s bin")
    counts = np.bincount((arrival_s // bin_s).astype(np.int64), minlength=whole_bins)[:whole_bins]
    return _relative(f"{source} per {bin_s:g} s", bin_s, counts.astype(np.float64))


def servegen_day_profile(day: int = 0) -> LoadProfile:
    """Day ``day`` (0-13) of ServeGen's pooled m-large rate series: 144 ten-minute windows."""
    rates = servegen_rate_series().rate_rps
    days = rates.size // SERVEGEN_WINDOWS_PER_DAY
    if isinstance(day, bool) or not isinstance(day, int) or not 0 <= day < days:
        raise ValueError(f"day must be an integer in [0, {days}), got {day!r}")
    window = rates[day * SERVEGEN_WINDOWS_PER_DAY:(day + 1) * SERVEGEN_WINDOWS_PER_DAY]
    return _relative(f"servegen m-large day {day}", SERVEGEN_RATE_WINDOW_S, np.asarray(window, dtype=np.float64))


def tick_s(time_compression: float) -> float:
    """Scaling-v0 step: a quarter of the compressed 2-minute window."""
    return WINDOW_S / _positive("time_compression", time_compression) / TICKS_PER_WINDOW


def autoscaler_options(time_compression: float) -> dict[str, float]:
    """``cauchy_autoscaler``'s windows (§3.5.1-§3.5.2) on the compressed clock."""
    k = _positive("time_compression", time_compression)
    return {"window_s": WINDOW_S / k, "grace_s": GRACE_S / k, "global_window_s": GLOBAL_WINDOW_S / k}


def scaling_combos(workload: CauchyWorkload) -> tuple[Combo, ...]:
    """The Scaling-v0 unit kinds for ``workload``: the Pareto-filtered combos of §3.3.1 (CE
    ranked), then the aggregated combos the filter dropped (Cauchy*'s options)."""
    table = load_goodput_table()
    goodputs = table.combo_goodputs(workload.lengths)
    ranked = [c.combo for c in rank_by_ce(pareto_filter(build_candidates(table.combos_of(workload.lengths), workload, goodputs)))]
    aggregated = [c for c in AGGREGATED_COMBOS if goodputs.get(c.name, 0.0) > 0 and c not in ranked]
    return tuple(ranked + aggregated)


def mean_load_plan(workload: CauchyWorkload, mean_rate_rps: float, aggregated_only: bool = False) -> ComboPlan:
    """The static deployment of §4.6 (Cauchy w/o autoscaling) and the autoscalers' start: the
    CO-LP plan (§3.3.2) for the mean QPS on the §4.1 inventory, over every combo, or over the
    aggregated combos only (Cauchy*)."""
    combos = AGGREGATED_COMBOS if aggregated_only else scaling_combos(workload)
    table = load_goodput_table()
    candidates = build_candidates(combos, workload, table.combo_goodputs(workload.lengths))
    return plan_combos(candidates, _positive("mean_rate_rps", mean_rate_rps), INVENTORY, "co")


@dataclass(frozen=True)
class ComboScalingScenario(Scenario):
    """A scenario with ``piecewise`` arrivals (a load profile whose mean is the workload's
    ``rate_rps``) whose Scaling-v0 units are GPU combos (cauchy.txt §3.1):
    ``combos`` are the unit kinds (each with its profiled goodput, its routing weight),
    ``initial_counts[k]`` of ``combos[k]`` serve at reset; ``instances`` must be those
    combos' instances. The cluster is a ``ComboCluster``, so a request sent to a combo is
    placed inside it by ``instance_scheduler`` (§3.4.2). ``time_compression`` k is how much
    the scaling clock is compressed (``autoscaler_options(k)`` are Alg. 1's windows on it)."""

    time_compression: float = 1.0
    combos: tuple[Combo, ...] = ()
    initial_counts: tuple[int, ...] = ()
    combo_goodput_rps: tuple[float, ...] = ()
    model: str = MODEL
    instance_scheduler: str = "opportunistic"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workload.arrival != "piecewise":
            raise ValueError(f"scenario {self.name!r}: arrivals must be a 'piecewise' load profile, got {self.workload.arrival!r}")
        mean_rps = float(np.mean(self.workload.arrival_options["rates_rps"]))
        if not math.isclose(self.workload.rate_rps, mean_rps, rel_tol=1e-9):
            raise ValueError(
                f"scenario {self.name!r}: rate_rps={self.workload.rate_rps!r} differs from the mean {mean_rps:g} req/s "
                "of its arrival profile; the profile sets the arrivals, so scale it instead"
            )
        if not self.combos or len(set(self.combos)) != len(self.combos):
            raise ValueError(f"scenario {self.name!r}: combos must be distinct and non-empty, got {self.combos!r}")
        if len(self.initial_counts) != len(self.combos):
            raise ValueError(f"{len(self.initial_counts)} counts for {len(self.combos)} combos")
        for combo, count in zip(self.combos, self.initial_counts):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"count of {combo.name} must be a non-negative integer, got {count!r}")
        check_combo_deployment(
            self, self.combos, self.combo_goodput_rps, self.instance_scheduler, self.initial_combos(), self.model
        )
        _positive("time_compression", self.time_compression)

    def initial_combos(self) -> list[Combo]:
        """The combos serving at reset, in deployment order."""
        return [combo for combo, count in zip(self.combos, self.initial_counts) for _ in range(count)]

    def scaling_units(self) -> tuple[ScalingUnit, ...]:
        return tuple(
            ScalingUnit(c.name, tuple(c.instance_configs(self.model)), g) for c, g in zip(self.combos, self.combo_goodput_rps)
        )

    def build_cluster(self, **cluster_options: Any) -> ComboCluster:
        return build_combo_cluster(self, self.initial_combos(), self.model, self.instance_scheduler, **cluster_options)

    def deploy_unit(self, cluster: ComboCluster, unit: int, *, ready_now: bool = False) -> tuple[int, ...]:
        deployed = cluster.combos[cluster.deploy_combo(self.combos[unit], self.model, ready_now=ready_now)]
        return (deployed.entry_id, *deployed.decode_ids)

    def deployed_units(self, cluster: ComboCluster) -> list[tuple[int, tuple[int, ...]]]:
        return [(self.combos.index(d.combo), (d.entry_id, *d.decode_ids)) for d in cluster.combos]


def autoscaling_scenario(
    workload: CauchyWorkload,
    initial: Mapping[Combo, int],
    profile: LoadProfile,
    mean_rate_rps: float,
    time_compression: float,
    load_compression: float | None = None,
) -> ComboScalingScenario:
    """The workload's ``cauchy`` preset with ``initial`` combos serving and every combo of
    ``scaling_combos`` a Scaling-v0 unit kind (deployed or not), arrivals from ``profile`` at
    ``mean_rate_rps``, start-up 90 s / k and one step per ``tick_s`` for ``time_compression``
    k. The profile is compressed by ``load_compression`` (default k; a larger one squeezes a
    long profile, e.g. a day, into the time budget, making its swings steeper for the
    autoscaler than in real time)."""
    load_compression = time_compression if load_compression is None else load_compression
    combos = scaling_combos(workload)
    unknown = [c.name for c in initial if c not in combos]
    if unknown:
        raise ValueError(f"not scaling combos of {workload.lengths}: {unknown}; known: {[c.name for c in combos]}")
    counts = tuple(initial.get(c, 0) for c in combos)
    for combo, count in zip(combos, counts):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count of {combo.name} must be a non-negative integer, got {count!r}")
    goodputs = load_goodput_table().combo_goodputs(workload.lengths)
    base = make_scenario(workload.scenario)
    deployed = [c for c, n in zip(combos, counts) for _ in range(n)]
    values = {f.name: getattr(base, f.name) for f in fields(Scenario)}
    values.update(
        name=f"{base.name}_autoscaling",
        description=f"{base.description}; GPU combos, {profile.name} load at mean {mean_rate_rps:g} req/s, "
        f"clock compressed {time_compression:g}x, load {load_compression:g}x",
        instances=combo_instance_groups(deployed, MODEL),
        max_instances=sum(INVENTORY.values()),
        workload=dataclasses.replace(
            base.workload, rate_rps=mean_rate_rps, arrival="piecewise",
            arrival_options={"boundaries_s": tuple(profile.boundaries_s(load_compression).tolist()),
                             "rates_rps": tuple(profile.rates_rps(mean_rate_rps).tolist())},
        ),
        episode_requests=profile.expected_requests(mean_rate_rps, load_compression),
        control_interval_s=tick_s(time_compression),
        provisioning_s=STARTUP_S / time_compression,
    )
    return ComboScalingScenario(
        **values,
        time_compression=float(time_compression),
        combos=combos,
        initial_counts=counts,
        combo_goodput_rps=tuple(goodputs[c.name] for c in combos),
    )


def plan_counts(plan: ComboPlan) -> dict[Combo, int]:
    """Combo -> count of a plan."""
    return {candidate.combo: n for candidate, n in plan.entries}


PRESET_WORKLOAD = "sharegpt_cauchy"
PRESET_LOAD_SCALE = 4.0  # x the §4.1 QPS, as experiments.cauchy_autoscaling
PRESET_TIME_COMPRESSION = 60.0


def cauchy_autoscaling() -> ComboScalingScenario:
    """Preset ``cauchy_autoscaling``: Fig. 10's ShareGPT cell (cauchy.txt §4.6) on a 60x
    compressed clock, for agents: the Azure conv minute profile at 4 x 50 req/s, every combo of
    ``scaling_combos`` a Scaling-v0 unit kind, the CO-LP plan for the mean serving at reset,
    a scaling step every 0.5 s (58 simulated seconds, 11,600 requests, 116 steps an episode).
    ``cauchy_autoscaler`` takes its windows from the scenario's clock."""
    workload = get_workload(PRESET_WORKLOAD)
    mean_rps = workload.target_rps * PRESET_LOAD_SCALE
    plan = mean_load_plan(workload, mean_rps)
    scenario = autoscaling_scenario(workload, plan_counts(plan), azure_profile(), mean_rps, PRESET_TIME_COMPRESSION)
    return dataclasses.replace(scenario, name="cauchy_autoscaling")


register_scenario("cauchy_autoscaling", cauchy_autoscaling)
