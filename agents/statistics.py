"""Aggregate statistics over training seeds and evaluation seeds, as Agarwal et al., "Deep RL at
the Edge of the Statistical Precipice" (NeurIPS 2021) recommend, with their ``rliable`` library:
the interquartile mean (IQM, §4.3) with stratified-bootstrap confidence intervals (§4.1), the
probability of improvement P(X > Y) (§4.3) and performance profiles (§4.2).

A score matrix is ``runs x tasks``: one row per training seed (one row for a heuristic), one
column per held-out evaluation seed, each cell one episode's metric. The held-out seeds are a
sample of the scenario's workloads, so the bootstrap resamples evaluation seeds as well as
training seeds within each (rliable's ``task_bootstrap``): a deterministic heuristic still gets
an interval, and one training seed does not give a point interval. Bootstraps use a fixed seed,
so a report is the same bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import scipy.stats
from matplotlib.figure import Figure
from rliable import library as rly
from rliable import metrics as rly_metrics
from rliable import plot_utils

BOOTSTRAP_REPS = 2_000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
PROFILE_POINTS = 101


@dataclass(frozen=True)
class Interval:
    """A point estimate and its ``CONFIDENCE`` bootstrap interval over ``runs`` x ``tasks`` scores
    (tasks: the evaluation seeds where every score is a number)."""

    value: float
    low: float
    high: float
    runs: int
    tasks: int

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "–"
        return f"{self.value:.4g} [{self.low:.4g}, {self.high:.4g}]"


def score_matrix(scores: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """``scores`` as a float ``runs x tasks`` array; a ragged, empty or non-2-D input raises."""
    try:
        matrix = np.array(scores, dtype=float)
    except ValueError:
        raise ValueError(f"scores must be a runs x tasks matrix, got ragged rows {scores!r}") from None
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"scores must be a non-empty runs x tasks matrix, got shape {matrix.shape}")
    return matrix


def iqm(scores: Sequence[Sequence[float]] | np.ndarray, reps: int = BOOTSTRAP_REPS,
        seed: int = BOOTSTRAP_SEED) -> Interval:
    """IQM (``rliable.metrics.aggregate_iqm``: the 25%-trimmed mean of all runs x tasks scores)
    with its stratified-bootstrap interval (``rliable.library.get_interval_estimates``);
    evaluation seeds where a score is NaN are left out (NaN when none is left)."""
    return iqm_by_metric(score_matrix(scores)[..., None], reps, seed)[0]


def iqm_value(scores: Sequence[Sequence[float]] | np.ndarray) -> float:
    """``iqm``'s point estimate alone (no bootstrap); NaN when every evaluation seed has a NaN."""
    matrix = _finite_tasks(score_matrix(scores))
    return float(rly_metrics.aggregate_iqm(matrix)) if matrix.shape[1] else math.nan


def iqm_by_metric(scores: np.ndarray, reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED) -> list[Interval]:
    """``iqm`` of each metric of a ``runs x tasks x metrics`` array in one bootstrap (the
    resampled evaluation seeds shared by the metrics, which makes a table of many metrics
    affordable); metrics whose NaNs fall on different evaluation seeds are bootstrapped apart."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 3 or scores.size == 0:
        raise ValueError(f"scores must be a non-empty runs x tasks x metrics array, got shape {scores.shape}")
    finite = ~np.isnan(scores).any(axis=0)  # tasks x metrics
    by_pattern: dict[bytes, list[int]] = {}
    for metric in range(scores.shape[2]):
        by_pattern.setdefault(finite[:, metric].tobytes(), []).append(metric)
    intervals: dict[int, Interval] = {}
    for metrics in by_pattern.values():
        matrix = scores[:, finite[:, metrics[0]], :][:, :, metrics]
        if matrix.shape[1] == 0:
            intervals.update({m: Interval(math.nan, math.nan, math.nan, matrix.shape[0], 0) for m in metrics})
            continue
        with _seeded_global_numpy(seed):
            point, interval = rly.get_interval_estimates(
                {"iqm": matrix}, iqm_of_each_metric, task_bootstrap=True, reps=reps, confidence_interval_size=CONFIDENCE)
        for k, metric in enumerate(metrics):
            intervals[metric] = Interval(float(point["iqm"][k]), float(interval["iqm"][0, k]),
                                         float(interval["iqm"][1, k]), matrix.shape[0], matrix.shape[1])
    return [intervals[metric] for metric in range(scores.shape[2])]


def iqm_of_each_metric(scores: np.ndarray) -> np.ndarray:
    """``rliable.metrics.aggregate_iqm`` (``scipy.stats.trim_mean`` of all runs x tasks scores,
    a quarter cut at each end) of every metric of a ``runs x tasks x metrics`` array in one call
    (a test checks the two agree): a bootstrap calls it thousands of times."""
    return scipy.stats.trim_mean(scores.reshape(-1, scores.shape[2]), proportiontocut=0.25, axis=0)


def improvement_probability(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) averaged over tasks, ties counting one half: what
    ``rliable.metrics.probability_of_improvement`` computes with one Mann-Whitney U test per
    task (U / (runs_x runs_y)), here for every task at once by counting the pairs (a test checks
    the two agree): a bootstrap of thousands of resamples calls it each time."""
    pairs_x, pairs_y = x[:, None, :], y[None, :, :]
    return float(np.mean(np.mean(pairs_x > pairs_y, axis=(0, 1)) + 0.5 * np.mean(pairs_x == pairs_y, axis=(0, 1))))


def probability_of_improvement(x: Sequence[Sequence[float]] | np.ndarray, y: Sequence[Sequence[float]] | np.ndarray,
                               higher_is_better: bool = True, reps: int = BOOTSTRAP_REPS,
                               seed: int = BOOTSTRAP_SEED) -> Interval:
    """P(X better than Y) on the same evaluation seeds (columns) with its stratified-bootstrap
    interval: training seeds of each side resampled independently within each evaluation seed,
    evaluation seeds resampled jointly (the pairing kept). ``higher_is_better=False`` (latency,
    cost) compares the negated scores. The two sides need as many runs, or one side a single run
    (a heuristic); seeds where either side has a NaN are left out (NaN when none is left)."""
    x_matrix, y_matrix = score_matrix(x), score_matrix(y)
    if x_matrix.shape[1] != y_matrix.shape[1]:
        raise ValueError(f"both sides need the same evaluation seeds, got {x_matrix.shape[1]} and {y_matrix.shape[1]} columns")
    runs_x, runs_y = x_matrix.shape[0], y_matrix.shape[0]
    if runs_x != runs_y and 1 not in (runs_x, runs_y):
        raise ValueError(f"probability of improvement needs equal run counts or a single-run side, got {runs_x} and {runs_y}")
    runs = max(runs_x, runs_y)
    sign = 1.0 if higher_is_better else -1.0
    stacked = np.stack([np.repeat(sign * x_matrix, runs // runs_x, axis=0),
                        np.repeat(sign * y_matrix, runs // runs_y, axis=0)], axis=-1)
    stacked = stacked[:, ~np.isnan(stacked).any(axis=(0, 2)), :]
    tasks = stacked.shape[1]
    if tasks == 0:
        return Interval(math.nan, math.nan, math.nan, runs, 0)
    with _seeded_global_numpy(seed):
        point, interval = rly.get_interval_estimates(
            {"poi": stacked}, lambda s: np.array([improvement_probability(s[..., 0], s[..., 1])]),
            task_bootstrap=True, reps=reps, confidence_interval_size=CONFIDENCE)
    return Interval(float(point["poi"][0]), float(interval["poi"][0, 0]), float(interval["poi"][1, 0]), runs, tasks)


def performance_profile(scores_by_policy: Mapping[str, np.ndarray], metric: str, higher_is_better: bool = True,
                        reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED,
                        ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Performance profile (Agarwal et al. §4.2, ``rliable.library.create_performance_profile``):
    ``PROFILE_POINTS`` thresholds tau from the lowest to the highest score, and per policy the
    fraction of its episodes (training x evaluation seeds) scoring better than each tau (above
    it, or below it when lower is better) with its 95% stratified-bootstrap band (2 x taus)."""
    matrices = {name: _finite_tasks(score_matrix(scores)) for name, scores in scores_by_policy.items()}
    matrices = {name: matrix for name, matrix in matrices.items() if matrix.shape[1]}
    if not matrices:
        raise ValueError(f"no policy has a {metric} score to profile")
    values = np.concatenate([matrix.ravel() for matrix in matrices.values()])
    taus = np.linspace(values.min(), values.max(), PROFILE_POINTS)
    better: Callable[[np.ndarray, np.ndarray], np.ndarray] = np.greater if higher_is_better else np.less
    with _seeded_global_numpy(seed):
        profiles, bands = rly.create_performance_profile(
            matrices, taus, custom_profile_func=lambda s, t: better(s.reshape(-1, 1), t).mean(axis=0),
            task_bootstrap=True, reps=reps, confidence_interval_size=CONFIDENCE)
    return taus, profiles, bands


def plot_performance_profile(scores_by_policy: Mapping[str, np.ndarray], path: Path, metric: str,
                             higher_is_better: bool = True, reps: int = BOOTSTRAP_REPS,
                             seed: int = BOOTSTRAP_SEED) -> Figure:
    """``performance_profile``'s curves and bands, one colour per policy, saved to ``path``;
    returns the figure."""
    taus, profiles, bands = performance_profile(scores_by_policy, metric, higher_is_better, reps, seed)
    figure = Figure(figsize=(9.0, 4.8), layout="constrained")
    axes = figure.add_subplot()
    palette = matplotlib.colormaps["tab10" if len(profiles) <= 10 else "tab20"].colors
    colors = {name: palette[index % len(palette)] for index, name in enumerate(profiles)}
    plot_utils.plot_performance_profiles(
        profiles, taus, performance_profile_cis=bands, ax=axes, colors=colors,
        xlabel=f"{metric} (tau)", ylabel=f"fraction of episodes with {metric} {'>' if higher_is_better else '<'} tau",
        labelsize="medium", ticklabelsize="small")
    axes.set_title(f"Performance profile of {metric} ({'higher' if higher_is_better else 'lower'} is better; "
                   f"bands: {CONFIDENCE:.0%} interval)", fontsize="medium")
    axes.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5))
    figure.savefig(path, dpi=120)
    return figure


def _finite_tasks(matrix: np.ndarray) -> np.ndarray:
    """The columns (evaluation seeds) of ``matrix`` without a NaN."""
    return matrix[:, ~np.isnan(matrix).any(axis=0)]


@contextmanager
def _seeded_global_numpy(seed: int) -> Iterator[None]:
    """rliable's bootstraps draw from NumPy's global generator (its ``StratifiedBootstrap``
    ignores ``random_state``): seed it for the call and give the caller's state back after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)
