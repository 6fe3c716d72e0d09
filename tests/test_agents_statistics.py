"""agents.statistics: rliable's IQM, probability of improvement and performance profile on small
hand-made score matrices (runs = training seeds, tasks = evaluation seeds)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from rliable import library as rly_library
from rliable import metrics as rly_metrics

from agents.statistics import (
    BOOTSTRAP_SEED,
    PROFILE_POINTS,
    Interval,
    improvement_probability,
    iqm,
    iqm_by_metric,
    iqm_of_each_metric,
    iqm_value,
    performance_profile,
    plot_performance_profile,
    probability_of_improvement,
    score_matrix,
)


def test_iqm_is_the_mean_of_the_middle_half():
    # 8 scores 1..8: the 25%-trimmed mean drops 1, 2 and 7, 8 -> mean(3, 4, 5, 6) = 4.5
    scores = [[1.0, 8.0, 3.0, 6.0], [5.0, 2.0, 7.0, 4.0]]
    result = iqm(scores, reps=200)
    assert result.value == 4.5 and (result.runs, result.tasks) == (2, 4)
    assert result.low <= 4.5 <= result.high and 1.0 <= result.low < result.high <= 8.0
    constant = iqm([[0.75, 0.75, 0.75, 0.75]], reps=200)  # exact in binary: no rounding in the mean
    assert (constant.value, constant.low, constant.high) == (0.75, 0.75, 0.75)


def test_iqm_leaves_out_evaluation_seeds_with_a_nan():
    result = iqm([[1.0, math.nan, 3.0], [1.0, 2.0, 3.0]], reps=100)
    assert result.value == 2.0 and result.tasks == 2
    assert iqm_value([[1.0, math.nan, 3.0], [1.0, 2.0, 3.0]]) == 2.0 and math.isnan(iqm_value([[math.nan]]))
    assert math.isnan(iqm([[math.nan]], reps=10).value) and str(iqm([[math.nan]], reps=10)) == "–"


def test_probability_of_improvement_of_a_dominating_and_an_identical_policy():
    heuristic = [[0.5, 0.6, 0.4, 0.55]]
    agent = [[0.9, 0.8, 0.7, 0.95], [0.6, 0.7, 0.5, 0.6], [0.8, 0.9, 0.6, 0.7]]
    dominating = probability_of_improvement(agent, heuristic, reps=300)
    assert (dominating.value, dominating.low, dominating.high) == (1.0, 1.0, 1.0)
    assert (dominating.runs, dominating.tasks) == (3, 4)
    assert probability_of_improvement(heuristic, agent, reps=300).high == 0.0
    same = probability_of_improvement(agent, agent, reps=300)
    assert same.value == 0.5 and same.low < 0.5 < same.high
    # latency: lower is better, so the agent's larger values lose
    assert probability_of_improvement(agent, heuristic, higher_is_better=False, reps=50).value == 0.0


def test_probability_of_improvement_counts_pairs_and_ties():
    # seed 0: agent runs 1, 3 vs heuristic 2 -> 1/2; seed 1: 2, 2 vs 2 -> two ties -> 1/2; seed 2: both above -> 1
    result = probability_of_improvement([[1.0, 2.0, 5.0], [3.0, 2.0, 6.0]], [[2.0, 2.0, 4.0]], reps=100)
    assert result.value == pytest.approx((0.5 + 0.5 + 1.0) / 3)


def test_vectorised_improvement_probability_equals_rliables():
    rng = np.random.default_rng(3)
    for runs_x, runs_y in [(3, 1), (3, 3), (1, 4), (5, 2)]:
        x = rng.integers(0, 4, (runs_x, 6)).astype(float)  # small integers: many ties
        y = rng.integers(0, 4, (runs_y, 6)).astype(float)
        assert improvement_probability(x, y) == pytest.approx(rly_metrics.probability_of_improvement(x, y), abs=1e-12)


def test_bootstrap_is_reproducible_and_leaves_numpys_global_state_alone():
    scores = np.random.default_rng(0).random((3, 5))
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = iqm(scores, reps=200)
    assert np.array_equal(np.random.get_state()[1], before)
    np.random.seed(999)
    assert iqm(scores, reps=200) == first
    assert probability_of_improvement(scores, scores[:1], reps=100) == probability_of_improvement(scores, scores[:1], reps=100)
    assert iqm(scores, reps=200, seed=1) != first


def test_bad_score_matrices_are_rejected():
    with pytest.raises(ValueError, match="ragged"):
        score_matrix([[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match=r"got shape \(3,\)"):
        score_matrix([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"got shape \(0,\)"):
        iqm([])
    with pytest.raises(ValueError, match="same evaluation seeds, got 2 and 3 columns"):
        probability_of_improvement([[1.0, 2.0]], [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="equal run counts or a single-run side, got 2 and 3"):
        probability_of_improvement([[1.0], [2.0]], [[1.0], [2.0], [3.0]])


def test_performance_profile_is_a_png(tmp_path):
    scores = {"agent": np.array([[0.9, 0.8], [0.7, 0.6]]), "heuristic": np.array([[0.5, 0.6]])}
    drawn = {"profile.png": plot_performance_profile(scores, tmp_path / "profile.png", "slo_attainment"),
             "latency.png": plot_performance_profile(scores, tmp_path / "latency.png", "ttft_p99_s",
                                                     higher_is_better=False, reps=50, seed=3)}
    expected = {"profile.png": performance_profile(scores, "slo_attainment"),
                "latency.png": performance_profile(scores, "ttft_p99_s", higher_is_better=False, reps=50, seed=3)}
    for name, figure in drawn.items():  # one curve and one band per policy: performance_profile's answer
        (axes,) = figure.axes
        taus, profiles, bands = expected[name]
        assert [line.get_label() for line in axes.lines] == list(scores)
        for line, policy in zip(axes.lines, scores, strict=True):
            np.testing.assert_array_equal(line.get_xdata(), taus)
            np.testing.assert_array_equal(line.get_ydata(), profiles[policy])
        for band, policy in zip(axes.collections, scores, strict=True):
            outline = band.get_paths()[0].vertices[:, 1]
            np.testing.assert_array_equal(np.unique(outline), np.unique(bands[policy]))
    for name in ("profile.png", "latency.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    with pytest.raises(ValueError, match="no policy has a slo_attainment score"):
        plot_performance_profile({"a": np.array([[math.nan]])}, tmp_path / "x.png", "slo_attainment")


def test_performance_profile_by_hand():
    """Thresholds from the lowest to the highest score; each policy's curve is the fraction of its
    episodes above tau (below it when lower is better), by hand; its band brackets it, is the
    same for the same seed and differs for another seed or replicate count. A policy without a
    finite score is left out; a NaN seed column is dropped."""
    scores = {"agent": np.array([[0.9, 0.8, math.nan], [0.7, 0.6, 0.5]]), "heuristic": np.array([[0.5, 0.6]]),
              "nothing": np.array([[math.nan]])}
    taus, profiles, bands = performance_profile(scores, "slo_attainment", reps=50)
    assert taus.shape == (PROFILE_POINTS,) and (taus[0], taus[-1]) == (0.5, 0.9)
    assert list(profiles) == list(bands) == ["agent", "heuristic"]
    agent, heuristic = np.array([0.9, 0.8, 0.7, 0.6]), np.array([0.5, 0.6])
    for name, episodes in (("agent", agent), ("heuristic", heuristic)):
        np.testing.assert_array_equal(profiles[name], (episodes[:, None] > taus).mean(axis=0))
        assert bands[name].shape == (2, PROFILE_POINTS) and np.all(bands[name][0] <= bands[name][1])
    _, lower_profiles, _ = performance_profile(scores, "ttft_p99_s", higher_is_better=False, reps=50)
    np.testing.assert_array_equal(lower_profiles["agent"], (agent[:, None] < taus).mean(axis=0))
    again = performance_profile(scores, "slo_attainment", reps=50)[2]
    assert all(np.array_equal(bands[name], again[name]) for name in bands)
    for other in (performance_profile(scores, "slo_attainment", reps=50, seed=BOOTSTRAP_SEED + 1)[2],
                  performance_profile(scores, "slo_attainment", reps=7)[2]):
        assert not np.array_equal(bands["agent"], other["agent"])
    state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)  # the docstring's call: rliable's stratified bootstrap, a 95 % interval
    _, reference = rly_library.create_performance_profile(
        {"agent": agent.reshape(2, 2), "heuristic": heuristic.reshape(1, 2)}, taus,
        custom_profile_func=lambda s, t: (s.reshape(-1, 1) > t).mean(axis=0), task_bootstrap=True, reps=50,
        confidence_interval_size=0.95)
    np.random.set_state(state)
    assert all(np.array_equal(bands[name], reference[name]) for name in bands)


def test_interval_prints_value_and_bounds():
    assert str(Interval(0.5, 0.25, 0.75, 3, 5)) == "0.5 [0.25, 0.75]"


def test_iqm_by_metric_bootstraps_metrics_together_and_apart_by_their_nans():
    first = np.array([[1.0, 8.0, 3.0, 6.0], [5.0, 2.0, 7.0, 4.0]])
    second = first.copy()
    second[0, 1] = math.nan
    table = iqm_by_metric(np.stack([first, 10 * first, second], axis=-1), reps=200)
    assert [interval.value for interval in table] == [4.5, 45.0, iqm(second).value]
    assert all(interval.low <= interval.value <= interval.high for interval in table)
    assert table[2] == iqm(second, reps=200) and table[2].tasks == 3  # its own bootstrap, without seed 1
    assert iqm_by_metric(first[..., None], reps=200)[0] == iqm(first, reps=200)
    with pytest.raises(ValueError, match="runs x tasks x metrics"):
        iqm_by_metric(first)


def test_vectorised_iqm_equals_rliables():
    scores = np.random.default_rng(5).random((3, 7, 4))
    expected = [rly_metrics.aggregate_iqm(scores[..., k]) for k in range(4)]
    assert iqm_of_each_metric(scores) == pytest.approx(expected, abs=1e-15)


def test_score_matrix_of_integer_scores_is_a_float_matrix():
    matrix = score_matrix([[1, 2], [3, 4]])
    assert matrix.dtype == np.float64 and matrix.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_a_single_run_gets_its_interval_from_resampling_the_evaluation_seeds():
    # One run (a heuristic): resampling runs within each seed would always draw the same score, a
    # point interval; resampling the seeds (task_bootstrap) spreads the estimate around the value.
    one = iqm([[1.0, 2.0, 3.0, 4.0]], reps=200)  # IQM of 4 scores: mean of the middle two, 2.5
    assert one.value == 2.5 and one.low < 2.5 < one.high
    # Per seed P(X > Y) is 0, 1, 1/2 (a tie), 1: the mean is 0.625.
    poi = probability_of_improvement([[1.0, 3.0, 2.0, 4.0]], [[2.0, 2.0, 2.0, 2.0]], reps=200)
    assert poi.value == 0.625 and poi.low < 0.625 < poi.high


def test_one_bootstrap_replicate_gives_a_point_interval():
    # reps resamples: with a single one, both percentiles are that resample's estimate.
    scores = [[1.0, 2.0, 3.0, 4.0], [2.0, 5.0, 1.0, 0.0]]
    single = iqm(scores, reps=1)
    assert single.low == single.high
    poi = probability_of_improvement([[1.0, 3.0, 2.0, 4.0]], [[2.0, 2.0, 2.0, 2.0]], reps=1)
    assert poi.low == poi.high


def test_iqm_of_a_single_evaluation_seed_is_the_iqm_of_its_runs():
    one_seed = iqm([[1.0], [3.0]], reps=50)  # two scores: nothing trimmed, mean 2
    assert (one_seed.value, one_seed.runs, one_seed.tasks) == (2.0, 2, 1)


def test_a_metric_without_finite_seeds_is_nan_silently_and_later_metrics_still_get_their_iqm():
    scores = np.array([[[math.nan, 1.0], [math.nan, 3.0]]])  # 1 run x 2 seeds x 2 metrics, the first all NaN
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no empty-sample warning from the bootstrap or the IQM
        first, second = iqm_by_metric(scores, reps=50)
        assert math.isnan(iqm_value([[math.nan, math.nan]]))
    assert math.isnan(first.value) and first.tasks == 0
    assert (second.value, second.tasks) == (2.0, 2)  # mean of 1 and 3
