"""Cascadia under a fluctuating workload (cascadia.txt §4.4, Fig. 11): the trace 1 -> 2 -> 3
stream, the shift detector, the rolling update (App. G) and a quick end-to-end run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from experiments import cascadia_fluctuating as cf
from experiments.cascadia_reproduction import GPU, TRACES, trace_requests
from envs.scenario import InstanceGroup
from envs.scenarios.cascadia import CASCADIA_MODELS
from simulator.cascade import CascadeRouter
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig, Lifecycle
from simulator.workloads import PARAMETRIC_PRESETS

SMALL, MEDIUM, LARGE = CASCADIA_MODELS


def test_stream_phases_have_the_traces_rates_lengths_and_difficulty():
    requests, phases = cf.fluctuating_stream((40.0, 80.0, 40.0), seed=3)
    assert [p.trace for p in phases] == list(TRACES)
    assert [(p.start_s, p.end_s) for p in phases] == [(0.0, 40.0), (40.0, 120.0), (120.0, 160.0)]
    arrivals = np.array([r.arrival_s for r in requests])
    assert np.all(np.diff(arrivals) >= 0) and arrivals[0] >= 0 and arrivals[-1] < 160.0
    assert [r.request_id for r in requests] == list(range(len(requests)))
    for phase in phases:
        inside = [r for r in requests if phase.start_s <= r.arrival_s < phase.end_s]
        expected = phase.trace.rate_rps * (phase.end_s - phase.start_s)
        assert abs(len(inside) - expected) < 4 * math.sqrt(expected)  # Poisson count, 4 sigma
        prompt_mean, output_mean = PARAMETRIC_PRESETS[phase.trace.lengths]
        n = len(inside)
        # exponential lengths: standard error of the mean = mean / sqrt(n)
        assert abs(np.mean([r.prompt_tokens for r in inside]) - prompt_mean) < 4 * prompt_mean / math.sqrt(n)
        assert abs(np.mean([r.output_tokens for r in inside]) - output_mean) < 4 * output_mean / math.sqrt(n)
        assert abs(np.mean([r.difficulty for r in inside]) - phase.trace.difficulty_mean) < 0.15
        assert all(set(r.quality_by_model) == set(CASCADIA_MODELS) for r in inside)
    again, _ = cf.fluctuating_stream((40.0, 80.0, 40.0), seed=3)
    assert [(r.arrival_s, r.prompt_tokens, r.quality_by_model) for r in again] == [
        (r.arrival_s, r.prompt_tokens, r.quality_by_model) for r in requests]


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="segment lengths"):
        cf.fluctuating_stream((40.0, 40.0), seed=0)
    with pytest.raises(ValueError, match="multiples of window_s"):
        cf.Settings((45.0, 40.0, 40.0), 20.0, 0.05, 100, 11, (90.0,))
    with pytest.raises(ValueError, match="subsample_fraction"):
        cf.Settings((40.0, 40.0, 40.0), 20.0, 0.0, 100, 11, (90.0,))


def stats(rate: float, prompt: float, output: float, scores: np.ndarray) -> cf.WorkloadStats:
    return cf.WorkloadStats(rate, prompt, output, scores)


def test_detector_reasons_on_hand_made_windows():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 100, size=(200, 3))
    detector = cf.ShiftDetector(stats(50.0, 290.0, 207.0, base))
    assert detector.reasons(stats(62.0, 290.0, 207.0, base)) == []  # +24%
    assert detector.reasons(stats(63.0, 290.0, 207.0, base)) == ["rate"]  # +26%
    assert detector.reasons(stats(50.0, 702.0, 42.0, base)) == ["prompt_tokens", "output_tokens"]
    harder = np.clip(base - 20.0, 0, 100)  # mean -20 points, standard error ~4 -> z ~ 5
    assert detector.reasons(stats(50.0, 290.0, 207.0, harder)) == ["complexity"]
    assert detector.reasons(stats(50.0, 290.0, 207.0, np.clip(base - 5.0, 0, 100))) == []
    assert detector.reasons(stats(50.0, 290.0, 207.0, harder[:10])) == []  # too few to judge


def test_detector_pools_quiet_windows_and_resets_on_a_shift():
    scores = np.full((30, 3), 50.0) + np.arange(30)[:, None]
    detector = cf.ShiftDetector(stats(40.0, 100.0, 100.0, scores))
    assert detector.observe(stats(44.0, 110.0, 90.0, scores)) == []
    assert detector.reference.rate_rps == pytest.approx(42.0)
    assert detector.reference.mean_prompt_tokens == pytest.approx(105.0)
    assert detector.reference.scores.shape == (60, 3)
    assert detector.observe(stats(80.0, 110.0, 90.0, scores)) == ["rate"]
    assert detector.reference.rate_rps == 80.0 and detector.windows_pooled == 1


@pytest.mark.parametrize("settings", [cf.QUICK, cf.FULL], ids=["quick", "full"])
def test_rescheduling_triggers_once_after_each_shift_and_never_otherwise(settings):
    """The monitor's windows over the real stream: a shift is found in the first window of
    trace 2 and of trace 3, in no other window."""
    requests, phases = cf.fluctuating_stream(settings.segment_s, settings.seed)
    profiled = trace_requests(TRACES[0], CASCADIA_MODELS, settings.profile_requests, seed=7)
    reference = cf.WorkloadStats.of(profiled, 1.0, [True] * len(profiled))
    detector = cf.ShiftDetector(cf.WorkloadStats(TRACES[0].rate_rps, reference.mean_prompt_tokens,
                                                 reference.mean_output_tokens, reference.scores))
    subsampled = np.random.default_rng(settings.seed + 7).random(len(requests)) < settings.subsample_fraction
    arrivals = np.array([r.arrival_s for r in requests])
    triggered = []
    for end_s in np.arange(settings.window_s, phases[-1].end_s + 1e-9, settings.window_s):
        lo, hi = np.searchsorted(arrivals, [end_s - settings.window_s, end_s])
        window = cf.WorkloadStats.of(requests[lo:hi], settings.window_s, subsampled[lo:hi].tolist())
        if detector.observe(window):
            triggered.append(float(end_s))
    assert triggered == [phases[1].start_s + settings.window_s, phases[2].start_s + settings.window_s]


def test_nearest_lengths_picks_the_cached_distribution():
    empty = np.zeros((0, 3))
    names = ["sharegpt_cauchy", "cnn_dailymail"]
    assert cf.nearest_lengths(stats(1.0, 690.0, 45.0, empty), names) == "cnn_dailymail"
    assert cf.nearest_lengths(stats(1.0, 280.0, 220.0, empty), names) == "sharegpt_cauchy"


def test_needed_models_follow_the_thresholds():
    assert cf.needed_models(CASCADIA_MODELS, (50.0, 50.0)) == set(CASCADIA_MODELS)
    assert cf.needed_models(CASCADIA_MODELS, (50.0, 0.0)) == {SMALL, MEDIUM}
    assert cf.needed_models(CASCADIA_MODELS, (0.0, 80.0)) == {SMALL}


def group(model: str, tp: int, count: int) -> InstanceGroup:
    return InstanceGroup(InstanceConfig(gpu=GPU, model=model, tp=tp, dtype="int4" if model == LARGE else "fp16"), count)


def rolled(start: tuple[InstanceGroup, ...], target: tuple[InstanceGroup, ...], thresholds: tuple[float, float]):
    """Serve 40 s of trace 1 at 10 req/s on ``start``, roll to ``target`` at t = 10 s."""
    requests = trace_requests(TRACES[0], CASCADIA_MODELS, 400, seed=5)
    for r in requests:
        r.arrival_s *= TRACES[0].rate_rps / 10.0
    router = CascadeRouter(CASCADIA_MODELS, (50.0, 50.0))
    cluster = Cluster({GPU: 32}, provisioning_s=2.0, **router.cluster_options())
    for g in start:
        for _ in range(g.count):
            cluster.deploy(g.config, ready_now=True)
    updates = []

    def begin(_):
        updates.append(cf.RollingUpdate(cluster, router, target, thresholds))
        updates[0].run()

    cluster.events.schedule(10.0, begin, None)
    outcomes = cluster.run(requests)  # raises if a needed model ever had no serving replica
    live = sorted(cf.config_key(i.config) for i in cluster.instances.values() if i.lifecycle != Lifecycle.STOPPED)
    return updates[0], router, live, outcomes


def test_rolling_update_reaches_the_target_one_replica_at_a_time():
    start = (group(SMALL, 1, 1), group(MEDIUM, 4, 3), group(LARGE, 8, 2))
    target = (group(SMALL, 1, 1), group(MEDIUM, 8, 2), group(LARGE, 8, 1))
    update, router, live, outcomes = rolled(start, target, (60.0, 40.0))
    assert live == sorted([(SMALL, 1, 1, "fp16"), (MEDIUM, 8, 1, "fp16"), (MEDIUM, 8, 1, "fp16"), (LARGE, 8, 1, "int4")])
    assert (update.removed, update.added, update.abandoned) == (4, 2, False)  # 3 x 70B TP4 and a 671B out
    assert router.thresholds == (60.0, 40.0) and update.thresholds_applied_s == pytest.approx(10.0)
    assert update.finished_s is not None and update.finished_s > 10.0
    assert all(o.completed for o in outcomes) and len(outcomes) == 400


def test_rolling_update_drops_a_model_the_plan_gives_no_gpus():
    start = (group(SMALL, 1, 2), group(MEDIUM, 8, 2), group(LARGE, 8, 1))
    target = (group(SMALL, 1, 4), group(MEDIUM, 8, 3), group(LARGE, 8, 0))
    update, router, live, outcomes = rolled(start, target, (60.0, 40.0))
    assert router.thresholds == (60.0, 0.0)  # nothing is forwarded to the 671B any more
    assert live == sorted([(SMALL, 1, 1, "fp16")] * 4 + [(MEDIUM, 8, 1, "fp16")] * 3)
    assert update.removed == 1 and update.added == 3
    assert all(o.completed for o in outcomes)


def test_quick_run_writes_the_report_and_reschedules_at_the_shifts(tmp_path):
    assert cf.main(["--quick", "--out", str(tmp_path)]) == 0
    for name in ("report.md", "results.json", "fig11_fluctuating.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert any((tmp_path / "tensorboard").rglob("events.out.tfevents.*"))
    results = json.loads((tmp_path / "results.json").read_text())
    cell = results["runs"]["q90"]
    boundaries = [p["start_s"] for p in results["phases"][1:]]
    for system in (cf.RESCHEDULING, cf.THRESHOLDS_ONLY):
        assert [e["detected_s"] for e in cell[system]["reschedules"]] == [b + cf.QUICK.window_s for b in boundaries]
    for system in (cf.STATIC, cf.STANDALONE):
        assert cell[system]["reschedules"] == []
    last = cell[cf.RESCHEDULING]["reschedules"][-1]
    assert last["applied_s"] == pytest.approx(last["detected_s"] + cf.QUICK.planning_delay_s)
    assert last["rollout_done_s"] is not None
    final_gpus = cell[cf.RESCHEDULING]["gpus_timeline"][-1][1]
    assert final_gpus == last["target_gpus"] and sum(final_gpus) <= 32  # the last plan is deployed
    assert cell[cf.THRESHOLDS_ONLY]["gpus_timeline"][-1][1] == cell[cf.RESCHEDULING]["gpus_timeline"][0][1]
    for system in cf.SYSTEMS:
        assert cell[system]["total"]["lost"] == 0
        assert len(cell[system]["windows"]["p95_e2e_s"]) == len(results["window_edges_s"]) - 1
    report = (tmp_path / "report.md").read_text()
    assert "8.99" in report and "Fig. 11" in report and "goodput_gain_mean" in report
