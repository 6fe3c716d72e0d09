"""Cascadia's re-scheduling pieces (Cascadia §4.4, App. G): the shift detector on
hand-made windows, the nearest cached length distribution, the models the thresholds need,
and the rolling update on a small cluster."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.cascadia import rescheduling as rs
from envs.scenario import InstanceGroup
from envs.scenarios.cascadia import CASCADIA_MODELS
from experiments.cascadia_reproduction import GPU, TRACES, trace_requests
from simulator.routers.cascade import CascadeRouter
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig, Lifecycle
from simulator.request import Request

SMALL, MEDIUM, LARGE = CASCADIA_MODELS


def stats(rate: float, prompt: float, output: float, scores: np.ndarray) -> rs.WorkloadStats:
    return rs.WorkloadStats(rate, prompt, output, scores)


def test_workload_stats_of_a_window_by_hand():
    requests = [Request(k, float(k), prompt, output, quality_by_model={SMALL: 10.0 * k, MEDIUM: 50.0, LARGE: 90.0})
                for k, (prompt, output) in enumerate([(100, 10), (300, 30), (200, 50), (400, 70)])]
    window = rs.WorkloadStats.of(requests, 2.0, [True, False, True, False], CASCADIA_MODELS)
    assert window.rate_rps == 2.0  # 4 arrivals in 2 s
    assert (window.mean_prompt_tokens, window.mean_output_tokens) == (250.0, 40.0)
    assert window.scores.tolist() == [[0.0, 50.0, 90.0], [20.0, 50.0, 90.0]]  # the subsampled requests only
    empty = rs.WorkloadStats.of([], 2.0, [], CASCADIA_MODELS)
    assert empty.rate_rps == 0.0 and empty.scores.shape == (0, 3)


def test_bad_rescheduling_settings_raise():
    with pytest.raises(ValueError, match="window_s"):
        rs.ReschedulingSettings(0.0, 0.05, 11, 20.0, 0)
    with pytest.raises(ValueError, match="subsample_fraction"):
        rs.ReschedulingSettings(60.0, 1.5, 11, 20.0, 0)
    with pytest.raises(ValueError, match="planning_delay_s"):
        rs.ReschedulingSettings(60.0, 0.05, 11, -1.0, 0)


def test_detector_reasons_on_hand_made_windows():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 100, size=(200, 3))
    detector = rs.ShiftDetector(stats(50.0, 290.0, 207.0, base))
    assert detector.reasons(stats(62.0, 290.0, 207.0, base)) == []  # +24%
    assert detector.reasons(stats(63.0, 290.0, 207.0, base)) == ["rate"]  # +26%
    assert detector.reasons(stats(50.0, 702.0, 42.0, base)) == ["prompt_tokens", "output_tokens"]
    harder = np.clip(base - 20.0, 0, 100)  # mean -20 points, standard error ~4 -> z ~ 5
    assert detector.reasons(stats(50.0, 290.0, 207.0, harder)) == ["complexity"]
    assert detector.reasons(stats(50.0, 290.0, 207.0, np.clip(base - 5.0, 0, 100))) == []
    assert detector.reasons(stats(50.0, 290.0, 207.0, harder[:10])) == []  # too few to judge


def test_detector_pools_quiet_windows_and_resets_on_a_shift():
    scores = np.full((30, 3), 50.0) + np.arange(30)[:, None]
    detector = rs.ShiftDetector(stats(40.0, 100.0, 100.0, scores))
    assert detector.observe(stats(44.0, 110.0, 90.0, scores)) == []
    assert detector.reference.rate_rps == pytest.approx(42.0)
    assert detector.reference.mean_prompt_tokens == pytest.approx(105.0)
    assert detector.reference.scores.shape == (60, 3)
    assert detector.observe(stats(80.0, 110.0, 90.0, scores)) == ["rate"]
    assert detector.reference.rate_rps == 80.0 and detector.windows_pooled == 1


def test_nearest_lengths_picks_the_cached_distribution():
    empty = np.zeros((0, 3))
    names = ["sharegpt_cauchy", "cnn_dailymail"]
    assert rs.nearest_lengths(stats(1.0, 690.0, 45.0, empty), names) == "cnn_dailymail"
    assert rs.nearest_lengths(stats(1.0, 280.0, 220.0, empty), names) == "sharegpt_cauchy"


def test_needed_models_follow_the_thresholds():
    assert rs.needed_models(CASCADIA_MODELS, (50.0, 50.0)) == set(CASCADIA_MODELS)
    assert rs.needed_models(CASCADIA_MODELS, (50.0, 0.0)) == {SMALL, MEDIUM}
    assert rs.needed_models(CASCADIA_MODELS, (0.0, 80.0)) == {SMALL}


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
        updates.append(rs.RollingUpdate(cluster, router, target, thresholds))
        updates[0].run()

    cluster.events.schedule(10.0, begin, None)
    outcomes = cluster.run(requests)  # raises if a needed model ever had no serving replica
    live = sorted(rs.config_key(i.config) for i in cluster.instances.values() if i.lifecycle != Lifecycle.STOPPED)
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


def test_rolling_update_replaces_a_models_only_replica_with_another_shape():
    """The 70B's only replica (TP4) gives way to one TP8 replica: the TP8 starts in the free GPUs
    first (so the TP4 is not drained while it is the 70B's last serving replica), then the TP4
    drains; the update is not abandoned although, on its first tick, every surplus replica is
    its model's last serving one (the new replica is starting)."""
    start = (group(SMALL, 1, 1), group(MEDIUM, 4, 1), group(LARGE, 8, 1))
    target = (group(SMALL, 1, 1), group(MEDIUM, 8, 1), group(LARGE, 8, 1))
    update, router, live, outcomes = rolled(start, target, (60.0, 40.0))
    assert live == sorted([(SMALL, 1, 1, "fp16"), (MEDIUM, 8, 1, "fp16"), (LARGE, 8, 1, "int4")])
    assert (update.removed, update.added, update.abandoned) == (1, 1, False)
    assert update.finished_s is not None
    assert all(o.completed for o in outcomes) and len(outcomes) == 400
