"""``cauchy_autoscaling``: Cauchy's autoscaling experiment (Cauchy §4.6, Fig. 10) for
servegym/Scaling-v0: the §4.1 testbed deployed as GPU combos, each added and removed whole,
serving a time-varying load taken from a real rate series, with the scaling machinery's clock
compressed like the load.

Time compression k: ``bin_s`` real seconds of the load profile last ``bin_s / k`` simulated
seconds, and so do the start-up time of a new instance (§3.5.1: 90 s) and the scaling step (a
quarter of the 2-minute window), so the load changes as fast relative to the autoscaler as in
real time. Request service times are not compressed. A day-long profile may be compressed
further (``load_compression``) to fit a time budget; its swings are then steeper for the
autoscaler than in real time.

The preset's unit kinds, their goodputs and the combos serving at reset are Cauchy's planner's
output (``baselines.cauchy.scaling_scenario``: the Pareto-filtered, CE-ranked combos of §3.3.1
with the aggregated ones after them, and the CO-LP plan of §3.3.2 for the mean QPS), stored
here as data so the scenario exists after ``import envs``;
``tests/test_cauchy_autoscaling.py`` checks that the planner still computes exactly these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from envs.combo_scenario import (
    ComboScalingScenario,
    check_combo_counts,
    combo_instance_groups,
    instance_options_with_engine,
)
from envs.scenario import Scenario
from envs.scenarios.cauchy import CAUCHY_MODEL, SCALING_WINDOW_S, STARTUP_S, cauchy
from simulator.combos import Combo, parse_combo
from simulator.workloads import LoadProfile, azure_profile
from simulator.workloads._checks import positive_float

TICKS_PER_WINDOW = 4  # Scaling-v0 steps (QPS samples of Alg. 1, Line 5) per 2-minute window

PRESET_LENGTHS = "sharegpt_cauchy"  # Fig. 10's ShareGPT cell
PRESET_MEAN_RPS = 200.0  # 4 x the §4.1 QPS of 50 req/s
PRESET_TIME_COMPRESSION = 60.0
# (unit kind, profiled goodput req/s, count serving at reset), planner order.
PRESET_PLAN: tuple[tuple[str, float, int], ...] = (
    ("<1xH800-SXM,3xH20-NVL>", 66.8335, 0),
    ("<1xH800-SXM,3xA800-PCIe>", 103.0714, 2),
    ("<1xH800-SXM,2xH800-SXM>", 117.3765, 0),
    ("<1xH800-SXM>", 34.8962, 0),
    ("<1xA800-PCIe,2xH20-NVL>", 43.3362, 0),
    ("<1xA800-PCIe,1xA800-PCIe>", 33.4168, 0),
    ("<1xA800-PCIe>", 12.3377, 0),
    ("<1xH20-NVL,1xH20-NVL>", 22.6274, 0),
    ("<1xH20-NVL>", 9.5137, 0),
    ("<2xH800-SXM>", 49.3507, 0),
    ("<2xA800-PCIe>", 20.7494, 0),
    ("<2xH20-NVL>", 16.0, 0),
)


def tick_s(time_compression: float) -> float:
    """Scaling-v0 step: a quarter of the compressed 2-minute window."""
    return SCALING_WINDOW_S / positive_float("time_compression", time_compression) / TICKS_PER_WINDOW


def combo_autoscaling_scenario(
    base: Scenario,
    unit_kinds: Sequence[tuple[Combo, float]],
    initial_counts: Sequence[int],
    profile: LoadProfile,
    mean_rate_rps: float,
    time_compression: float,
    load_compression: float | None = None,
    instance_options: dict[str, Any] | None = None,
) -> ComboScalingScenario:
    """``base`` (a ``cauchy`` preset) with ``initial_counts[k]`` of ``unit_kinds[k]`` (combo,
    goodput) serving and every kind a Scaling-v0 unit (deployed or not), arrivals from
    ``profile`` at ``mean_rate_rps``, start-up 90 s / k and one step per ``tick_s`` for
    ``time_compression`` k. The profile is compressed by ``load_compression`` (default k);
    every instance has ``instance_options`` (``ComboCluster``)."""
    load_compression = time_compression if load_compression is None else load_compression
    combos = tuple(combo for combo, _ in unit_kinds)
    counts = tuple(initial_counts)
    check_combo_counts(combos, counts)
    deployed = [combo for combo, n in zip(combos, counts) for _ in range(n)]
    values = {f.name: getattr(base, f.name) for f in dataclasses.fields(Scenario)}
    values.update(
        name=f"{base.name}_autoscaling",
        description=f"{base.description}; GPU combos, {profile.name} load at mean {mean_rate_rps:g} req/s, "
        f"clock compressed {time_compression:g}x, load {load_compression:g}x",
        instances=combo_instance_groups(deployed, CAUCHY_MODEL, instance_options),
        max_instances=sum(base.gpu_inventory.values()),
        workload=dataclasses.replace(
            base.workload, rate_rps=mean_rate_rps, arrival="piecewise",
            arrival_options=profile.arrival_options(mean_rate_rps, load_compression),
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
        combo_goodput_rps=tuple(float(goodput) for _, goodput in unit_kinds),
        instance_options=instance_options_with_engine(instance_options),
    )


def cauchy_autoscaling() -> ComboScalingScenario:
    """Preset ``cauchy_autoscaling``: Fig. 10's ShareGPT cell (Cauchy §4.6) on a 60x
    compressed clock, for agents: the Azure conv minute profile at 4 x 50 req/s, every planner
    combo a Scaling-v0 unit kind, the CO-LP plan for the mean serving at reset, a scaling step
    every 0.5 s (58 simulated seconds, 11,600 requests, 116 steps an episode)."""
    unit_kinds = [(parse_combo(name), goodput) for name, goodput, _ in PRESET_PLAN]
    scenario = combo_autoscaling_scenario(
        cauchy(PRESET_LENGTHS), unit_kinds, [count for _, _, count in PRESET_PLAN], azure_profile(),
        PRESET_MEAN_RPS, PRESET_TIME_COMPRESSION,
    )
    return dataclasses.replace(scenario, name="cauchy_autoscaling")
