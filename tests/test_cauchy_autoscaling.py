"""Cauchy's Fig. 10 set-up (cauchy.txt §4.6): real load profiles, the compressed clock, the
profiled-arrival scenario both systems run on, and the quick reproduction end to end."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401
from baselines.cauchy.combos import Combo
from baselines.cauchy.scaling_scenario import (
    AGGREGATED_COMBOS,
    LoadProfile,
    autoscaler_options,
    autoscaling_scenario,
    azure_profile,
    mean_load_plan,
    plan_counts,
    servegen_day_profile,
    tick_s,
)
from baselines.cauchy.workloads import INVENTORY, get_workload
from experiments import cauchy_autoscaling as fig10
from simulator.workloads import servegen_rate_series
from simulator.workloads.traces import AZURE_TRACE_FILES, read_azure_columns

LONGWRITER = get_workload("longwriter")


def test_azure_profile_is_the_traces_per_minute_counts():
    profile = azure_profile("azure_conv")
    arrival_s = read_azure_columns(AZURE_TRACE_FILES["azure_conv"])[0]
    assert len(profile.relative_rates) == 58 and profile.bin_s == 60.0  # 3,501.7 s: 58 whole minutes
    counts = np.array([np.sum((arrival_s >= 60 * m) & (arrival_s < 60 * (m + 1))) for m in range(58)])
    assert np.allclose(profile.relative_rates, counts / counts.mean(), rtol=1e-12)
    assert np.mean(profile.relative_rates) == pytest.approx(1.0)
    assert min(profile.relative_rates) == pytest.approx(0.573, abs=0.001)
    assert max(profile.relative_rates) == pytest.approx(1.521, abs=0.001)


def test_servegen_day_is_144_ten_minute_windows_of_the_series():
    profile = servegen_day_profile(1)
    day = servegen_rate_series().rate_rps[144:288]
    assert profile.bin_s == 600.0 and np.allclose(profile.relative_rates, day / day.mean(), rtol=1e-12)
    with pytest.raises(ValueError, match=r"day must be an integer in \[0, 14\), got 14"):
        servegen_day_profile(14)


def test_compression_shortens_the_profile_and_keeps_its_mean():
    profile = LoadProfile("two bins", 100.0, (0.5, 1.5))
    assert profile.duration_s(1.0) == 200.0 and profile.duration_s(4.0) == 50.0
    assert profile.boundaries_s(4.0).tolist() == [0.0, 25.0]
    assert profile.rates_rps(20.0).tolist() == [10.0, 30.0]
    assert profile.expected_requests(20.0, 4.0) == 1000  # 20 req/s x 50 s
    # Alg. 1's windows on the same clock: 2 min, 30 s, 30 min at 6x; four steps per window
    assert autoscaler_options(6.0) == {"window_s": 20.0, "grace_s": 5.0, "global_window_s": 300.0}
    assert tick_s(6.0) == 5.0


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: LoadProfile("x", 60.0, (0.5, 1.0)), "relative_rates must have mean 1"),
        (lambda: LoadProfile("x", 60.0, (2.0, -0.0, float("nan"))), "finite rates >= 0"),
        (lambda: LoadProfile("x", -1.0, (1.0,)), "bin_s must be a positive finite number, got -1.0"),
        (lambda: LoadProfile("x", 60.0, (1.0,)).duration_s(0.0), "compression must be a positive finite number, got 0.0"),
        (lambda: azure_profile("azure_chat"), "unknown Azure trace 'azure_chat'; known: \\['azure_code', 'azure_conv'\\]"),
        (lambda: tick_s(float("nan")), "time_compression must be a positive finite number, got nan"),
    ],
)
def test_bad_profiles_raise(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_profiled_arrivals_follow_the_piecewise_rates():
    profile = LoadProfile("two bins", 100.0, (0.5, 1.5))
    scenario = autoscaling_scenario(LONGWRITER, {Combo("H800-SXM", 1): 2}, profile, 20.0, 1.0)
    requests = scenario.requests(np.random.default_rng(0))
    assert len(requests) == scenario.episode_requests == 4000
    arrival_s = np.array([r.arrival_s for r in requests])
    # Poisson counts: 1,000 expected in [0, 100) s at 10 req/s (sd 32), 3,000 after (sd 55)
    assert abs(np.sum(arrival_s < 100.0) - 1000) < 5 * np.sqrt(1000)
    assert np.all(np.diff(arrival_s) >= 0)
    assert requests[0].slo.ttft_s == LONGWRITER.ttft_s and requests[0].slo.tbt_s == LONGWRITER.tbt_s
    prompts = np.array([r.prompt_tokens for r in requests])
    assert prompts.mean() == pytest.approx(LONGWRITER.mean_prompt_tokens, rel=0.1)


def test_scenario_exposes_every_aggregated_combo_as_a_scaling_kind():
    initial = {Combo("H800-SXM", 1): 3, Combo("A800-PCIe", 2): 1}
    scenario = autoscaling_scenario(LONGWRITER, initial, azure_profile(), 24.0, 6.0)
    assert [(g.config.gpu, g.config.tp, g.count) for g in scenario.instances] == [
        ("H800-SXM", 1, 3), ("H800-SXM", 2, 0), ("A800-PCIe", 1, 0), ("A800-PCIe", 2, 1), ("H20-NVL", 1, 0), ("H20-NVL", 2, 0)
    ]
    assert scenario.provisioning_s == 15.0 and scenario.control_interval_s == 5.0  # 90 s and 30 s at 6x
    assert scenario.episode_requests == 24 * 58 * 10  # 24 req/s over 58 minutes lasting 10 s each
    assert scenario.gpu_inventory == INVENTORY and scenario.workload.rate_rps == 24.0
    env = gym.make("servegym/Scaling-v0", scenario=scenario)
    assert env.action_space.nvec.tolist() == [3] * 6 and env.unwrapped.scaling_window_s == 5.0
    with pytest.raises(ValueError, match=r"not aggregated Cauchy combos: \['<1xH800-SXM,1xH20-NVL>'\]"):
        autoscaling_scenario(LONGWRITER, {Combo("H800-SXM", 1, "H20-NVL", 1): 1}, azure_profile(), 24.0, 6.0)
    with pytest.raises(ValueError, match="count of <1xH800-SXM> must be a non-negative integer, got -1"):
        autoscaling_scenario(LONGWRITER, {Combo("H800-SXM", 1): -1}, azure_profile(), 24.0, 6.0)


def test_mean_load_plan_covers_the_mean_with_aggregated_combos():
    plan = mean_load_plan(LONGWRITER, 24.0)
    assert plan.goodput_rps >= 24.0 and not plan.fallback
    assert all(c in AGGREGATED_COMBOS for c in plan_counts(plan))
    assert all(plan.gpu_counts()[g] <= INVENTORY[g] for g in plan.gpu_counts())


def test_quick_run_compares_both_systems_on_both_loads(tmp_path):
    assert fig10.main(["--quick", "--workloads", "longwriter", "--jobs", "1", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "| LongWriter | 36.77 | 32.83 | -10.7% |" in report  # the paper's P90 beside ours
    results = json.loads((tmp_path / "results.json").read_text())
    for load in fig10.LOADS:
        static, auto = (results[load]["longwriter"][s] for s in fig10.SYSTEMS)
        assert static["plan"] == auto["plan"] == "3 x <1xH800-SXM>, 1 x <1xA800-PCIe>"
        for cell in (static, auto):
            assert cell["completed"] == cell["requests"] and cell["invalid_actions"] == 0
            assert cell["peak_gpus"] <= sum(INVENTORY.values())
        # static never changes its 4 GPUs; the autoscaler does, and only with valid actions
        assert static["instances_added"] == static["instances_removed"] == 0 and set(static["series"]["gpus"]) == {4}
        assert auto["instances_added"] > 0 and len(set(auto["series"]["gpus"])) > 1
        # dollars: static holds 3 x H800 (2.69 $/h) + 1 x A800 (1.19 $/h) for the whole episode
        assert static["cost_usd"] == pytest.approx((3 * 2.69 + 1.19) / 3600 * static["duration_s"], rel=1e-9)
        assert np.all(np.diff(auto["series"]["cost_usd"]) >= 0)
    for name in ("fig10_latency", "fig10_gpus_azure", "fig10_gpus_servegen"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (tmp_path / "tensorboard").iterdir()) == sorted(fig10.SYSTEMS)


def test_bad_arguments_raise(tmp_path):
    with pytest.raises(ValueError, match="unknown Cauchy workload 'alpaca'"):
        fig10.main(["--workloads", "alpaca", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="--jobs positive; got \\[0\\], 0"):
        fig10.main(["--jobs", "0", "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="unknown load 'poisson'; known: \\['azure', 'servegen'\\]"):
        fig10.load_profile("poisson")
