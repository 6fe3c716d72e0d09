"""Per-request quality of every model of a cascade: a latent-difficulty model fitted to real
per-prompt data, and a replay of that data.

Model. Request r has a latent difficulty d_r ~ N(δ, 1) (δ = ``difficulty_mean``, 0 by
default, > 0 for a harder workload); model m has a skill a_m. Two kinds of score, 0-100:

- ``"judge"`` (Cascadia §4.1: GPT-4o grades answers 0-100): the score is
  100 · sigmoid(a_m − b_J · d_r + s_J · ε_rm), ε_rm ~ N(0, 1) independent per (request, model).
  The judge sees this score; it is also the quality that counts.
- ``"correct"`` (CascadeServe §6.1: accuracy on HellaSwag): model m answers request r
  correctly with probability c_rm = sigmoid(a_m − b_C · d_r); the quality is 100 if correct
  else 0 (so a mean quality is an accuracy in %). The cascade's judge sees the model's certainty
  100 · c_rm (CascadeServe §4.1: the softmax of the predicted token, here calibrated).

Models are conditionally independent given d_r, so the loading b (against the noise) sets the
cross-model correlation. Both are fitted to lm-sys/RouteLLM's per-prompt data of
Mixtral-8x7B and GPT-4 on the same prompts (``simulator/data/routellm/``):

- ``fit_correctness``: b_C and per-dataset skills by maximum likelihood on the 2 x 2 tables
  (Mixtral correct?, GPT-4 correct?) of MMLU and GSM8K; the skills reproduce each table's
  marginals exactly, b_C trades off the two joint cells.
- ``fit_judge``: b_J, s_J and two skills by matching the MT-Bench judge scores (1-10, times 10):
  both means and standard deviations and their correlation.

Skills of catalog models. Judge kind: a_m = α + β · ln(P_m / 1e9), P_m the total parameter
count. The DeepSeek cascade of Cascadia (7B, 70B, 671B) gets the skills that best reproduce
its Appendix E Table 2 on trace 1 (thresholds -> processing ratios and attained quality
q_min for q_min = 90, 85, 80), and (α, β) is the least-squares line through them
(``fit_catalog_skills``). The mean scores this gives (about 51 / 75 / 90 for 7B / 70B / 671B,
``expected_quality``) are the trace-1 averages; Table 2's other traces are easier:
``TRACE_DIFFICULTY_MEAN`` holds δ for traces 2 and 3 fitted to their rows. Correct kind: the
same size effect measured in difficulty units, β_C = β · b_C / b_J, anchored so that a model of
Mixtral-8x7B's size (46.7 B total parameters, Jiang et al. 2024) has Mixtral's MMLU skill.

Replay kinds ``"mt_bench"``, ``"mmlu"`` and ``"gsm8k"`` serve a two-model cascade with the real
rows: each request draws one prompt (uniformly, with replacement) and takes Mixtral's score as
the first model's and GPT-4's as the second's.

Integrals over d use a uniform grid; over ε, Gauss-Hermite (smooth parts) and Gauss-Legendre on
the accepted tail. The fits run in about a second; the shipped constants below are their
results, and a test re-fits them.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping
from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from hardware.models import get_model
from simulator.request import Request

SCORE_MAX = 100.0
DATA_DIR = Path(__file__).resolve().parent / "data" / "routellm"
FITTED_KINDS = ("judge", "correct")
REPLAY_KINDS = ("mt_bench", "mmlu", "gsm8k")
QUALITY_KINDS = FITTED_KINDS + REPLAY_KINDS
MIXTRAL_PARAMS = 46.7e9  # Mixtral-8x7B total parameters (Jiang et al. 2024, "Mixtral of Experts", §2)

# Cascadia Appendix E, Table 2: (q_min, trace) -> thresholds (h1, h2), processing ratios (p2, p3).
CASCADIA_TABLE2 = {
    (90, 1): ((99.0, 91.0), (0.94, 0.50)),
    (85, 1): ((74.0, 64.0), (0.62, 0.21)),
    (80, 1): ((69.0, 25.0), (0.54, 0.11)),
    (80, 2): ((61.0, 18.0), (0.31, 0.03)),
    (80, 3): ((32.0, 0.0), (0.23, 0.00)),
    (70, 3): ((10.0, 0.0), (0.05, 0.00)),
}
CASCADIA_MODELS = ("DeepSeek-R1-Distill-Qwen-7B", "DeepSeek-R1-Distill-Llama-70B", "DeepSeek-R1-671B")

@dataclass(frozen=True)
class KindParameters:
    """One score kind's loading b, judge noise s (0 for ``"correct"``) and skill line α + β ln(P / 1e9)."""

    kind: str
    loading: float
    noise: float
    skill_intercept: float
    skill_per_log_param: float

    def skill(self, params: float) -> float:
        return self.skill_intercept + self.skill_per_log_param * math.log(params / 1e9)


# Shipped results of ``fit_catalog_skills`` (re-fitted by tests/test_cascade_quality.py).
JUDGE_PARAMETERS = KindParameters("judge", loading=3.1039, noise=1.8448, skill_intercept=-2.1566, skill_per_log_param=1.1318)
CORRECT_PARAMETERS = KindParameters("correct", loading=2.5360, noise=0.0, skill_intercept=-2.1083, skill_per_log_param=0.9247)
TRACE_DIFFICULTY_MEAN = {1: 0.0, 2: -0.6043, 3: -0.5986}  # δ of Cascadia's traces 1-3 (Table 2)
PARAMETERS_BY_KIND = {"judge": JUDGE_PARAMETERS, "correct": CORRECT_PARAMETERS}

# ----------------------------------------------------------------------------- numerics
_D_GRID = np.linspace(-8.0, 8.0, 801)
_HERMITE_X, _HERMITE_W = np.polynomial.hermite_e.hermegauss(32)
_HERMITE_W = _HERMITE_W / math.sqrt(2.0 * math.pi)
_LEGENDRE_X, _LEGENDRE_W = np.polynomial.legendre.leggauss(32)
_TAIL_END = 8.0


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def _logit_of_score(score: np.ndarray | float) -> np.ndarray:
    """logit(score / 100), ±inf at 100 and 0."""
    p = np.asarray(score, dtype=float) / SCORE_MAX
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Φ(x) through erf of Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7), vectorised."""
    z = np.abs(np.asarray(x, dtype=float)) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * erf)


def _difficulty_weights(difficulty_mean: float) -> np.ndarray:
    density = np.exp(-0.5 * (_D_GRID - difficulty_mean) ** 2)
    return density / density.sum()


def _mean_judge_score_given_d(skill: float, loading: float, noise: float) -> np.ndarray:
    """E[100 sigmoid(a − b d + s ε) | d] on the difficulty grid."""
    x = skill - loading * _D_GRID[:, None] + noise * _HERMITE_X[None, :]
    return SCORE_MAX * sigmoid(x) @ _HERMITE_W


def _accepted_judge_score_given_d(skill: float, loading: float, noise: float, threshold: float) -> np.ndarray:
    """E[score · 1{score ≥ threshold} | d] on the difficulty grid (Gauss-Legendre on the ε tail)."""
    if noise == 0:
        score = SCORE_MAX * sigmoid(skill - loading * _D_GRID)
        return np.where(score >= threshold, score, 0.0)
    start = (_logit_of_score(threshold) - skill + loading * _D_GRID) / noise
    start = np.clip(start, -_TAIL_END, _TAIL_END)[:, None]
    half = (_TAIL_END - start) / 2.0
    eps = start + half * (_LEGENDRE_X[None, :] + 1.0)
    density = np.exp(-0.5 * eps**2) / math.sqrt(2.0 * math.pi)
    score = SCORE_MAX * sigmoid(skill - loading * _D_GRID[:, None] + noise * eps)
    return (score * density * half) @ _LEGENDRE_W


def _below_judge_threshold_given_d(skill: float, loading: float, noise: float, threshold: float) -> np.ndarray:
    """P(score < threshold | d) on the difficulty grid."""
    margin = _logit_of_score(threshold) - skill + loading * _D_GRID
    if noise == 0:
        return (margin > 0).astype(float)
    return _normal_cdf(margin / noise)


def minimize(objective: Callable[[np.ndarray], float], start: SequenceOf[float], step: float = 0.5,
             tolerance: float = 1e-10, max_iterations: int = 4000) -> np.ndarray:
    """Nelder-Mead simplex minimisation (standard coefficients 1, 2, 0.5, 0.5); numpy has no optimiser."""
    points = [np.asarray(start, dtype=float)]
    for i in range(len(points[0])):
        vertex = points[0].copy()
        vertex[i] += step
        points.append(vertex)
    values = [objective(p) for p in points]
    for _ in range(max_iterations):
        order = np.argsort(values)
        points = [points[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] <= tolerance and np.max(np.abs(points[-1] - points[0])) <= 1e-7:
            break
        centroid = np.mean(points[:-1], axis=0)
        reflected = centroid + (centroid - points[-1])
        value = objective(reflected)
        if value < values[0]:
            expanded = centroid + 2.0 * (centroid - points[-1])
            expanded_value = objective(expanded)
            points[-1], values[-1] = (expanded, expanded_value) if expanded_value < value else (reflected, value)
        elif value < values[-2]:
            points[-1], values[-1] = reflected, value
        else:
            contracted = centroid + 0.5 * (points[-1] - centroid)
            contracted_value = objective(contracted)
            if contracted_value < values[-1]:
                points[-1], values[-1] = contracted, contracted_value
            else:
                points = [points[0] + 0.5 * (p - points[0]) for p in points]
                values = [values[0]] + [objective(p) for p in points[1:]]
    return points[int(np.argmin(values))]


def _solve_increasing(function: Callable[[float], float], target: float, low: float = -30.0, high: float = 30.0) -> float:
    """x with function(x) = target for an increasing function, by bisection."""
    for _ in range(80):
        middle = 0.5 * (low + high)
        if function(middle) < target:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


# ----------------------------------------------------------------------------- data
@cache
def correctness_rows(dataset: str) -> np.ndarray:
    """RouteLLM per-prompt correctness of (Mixtral-8x7B, GPT-4-1106) on ``"mmlu"`` or ``"gsm8k"``,
    one row per prompt, 0/1 (read-only)."""
    if dataset not in ("mmlu", "gsm8k"):
        raise ValueError(f"unknown correctness dataset {dataset!r}; known: ['gsm8k', 'mmlu']")
    with open(DATA_DIR / "correctness.csv", newline="") as file:
        rows = [(int(r["mixtral_correct"]), int(r["gpt4_correct"])) for r in csv.DictReader(file) if r["dataset"] == dataset]
    table = np.array(rows, dtype=np.int8)
    table.setflags(write=False)
    return table


@cache
def mt_bench_scores() -> np.ndarray:
    """RouteLLM's GPT-4 judge scores of (Mixtral-8x7B, GPT-4-1106) on MT-Bench, one row per
    (question, turn), scaled from 1-10 to 10-100 (read-only)."""
    with open(DATA_DIR / "mt_bench_scores.csv", newline="") as file:
        rows = [(float(r["mixtral_score"]), float(r["gpt4_score"])) for r in csv.DictReader(file)]
    scores = 10.0 * np.array(rows)
    scores.setflags(write=False)
    return scores


def replay_rows(kind: str) -> np.ndarray:
    """The real (first model, second model) scores 0-100 that replay kind ``kind`` draws from."""
    if kind == "mt_bench":
        return mt_bench_scores()
    if kind in ("mmlu", "gsm8k"):
        return SCORE_MAX * correctness_rows(kind)
    raise ValueError(f"unknown replay kind {kind!r}; known: {list(REPLAY_KINDS)}")


def joint_table_counts(rows: np.ndarray) -> np.ndarray:
    """2 x 2 counts [first correct][second correct] of 0/1 rows."""
    counts = np.zeros((2, 2))
    np.add.at(counts, (rows[:, 0].astype(int), rows[:, 1].astype(int)), 1)
    return counts


# ----------------------------------------------------------------------------- correctness fit
def joint_correct_table(skill_first: float, skill_second: float, loading: float, difficulty_mean: float = 0.0) -> np.ndarray:
    """Probabilities [first correct][second correct] of the correct kind for two models."""
    weights = _difficulty_weights(difficulty_mean)
    first = sigmoid(skill_first - loading * _D_GRID)
    second = sigmoid(skill_second - loading * _D_GRID)
    both = np.array([[(1 - first) * (1 - second), (1 - first) * second], [first * (1 - second), first * second]])
    return both @ weights


@dataclass(frozen=True)
class CorrectnessFit:
    loading: float
    skills: tuple[float, float]  # (Mixtral, GPT-4)


def _marginal_skill(loading: float, accuracy: float) -> float:
    weights = _difficulty_weights(0.0)
    return _solve_increasing(lambda a: float(sigmoid(a - loading * _D_GRID) @ weights), accuracy)


def fit_correctness(dataset: str) -> CorrectnessFit:
    """Maximum-likelihood b_C on ``dataset``'s 2 x 2 table (Mixtral correct?, GPT-4 correct?), the
    two skills set so the marginal accuracies are exact (the likelihood's optimum given b_C); with
    three free cells and three parameters the fitted table equals the data's."""
    counts = joint_table_counts(correctness_rows(dataset))
    total = counts.sum()
    accuracies = (counts[1].sum() / total, counts[:, 1].sum() / total)

    def skills_for(loading: float) -> tuple[float, float]:
        return _marginal_skill(loading, accuracies[0]), _marginal_skill(loading, accuracies[1])

    def negative_log_likelihood(x: np.ndarray) -> float:
        loading = abs(float(x[0]))
        return -float(np.sum(counts * np.log(joint_correct_table(*skills_for(loading), loading))))

    loading = abs(float(minimize(negative_log_likelihood, [1.5], step=0.5, tolerance=1e-9)[0]))
    return CorrectnessFit(loading, skills_for(loading))


# ----------------------------------------------------------------------------- judge fit
@dataclass(frozen=True)
class JudgeMoments:
    mean_first: float
    mean_second: float
    std_first: float
    std_second: float
    correlation: float


def judge_moments(skill_first: float, skill_second: float, loading: float, noise: float) -> JudgeMoments:
    """Means, standard deviations and correlation of two models' judge scores (d ~ N(0, 1))."""
    weights = _difficulty_weights(0.0)
    x = _D_GRID[:, None]
    moments = []
    for skill in (skill_first, skill_second):
        score = SCORE_MAX * sigmoid(skill - loading * x + noise * _HERMITE_X[None, :])
        moments.append((score @ _HERMITE_W, (score**2) @ _HERMITE_W))
    (mean1_d, square1_d), (mean2_d, square2_d) = moments
    mean1, mean2 = float(mean1_d @ weights), float(mean2_d @ weights)
    var1, var2 = float(square1_d @ weights) - mean1**2, float(square2_d @ weights) - mean2**2
    covariance = float((mean1_d * mean2_d) @ weights) - mean1 * mean2
    return JudgeMoments(mean1, mean2, math.sqrt(var1), math.sqrt(var2), covariance / math.sqrt(var1 * var2))


def data_moments(scores: np.ndarray) -> JudgeMoments:
    mean = scores.mean(axis=0)
    std = scores.std(axis=0)
    return JudgeMoments(float(mean[0]), float(mean[1]), float(std[0]), float(std[1]), float(np.corrcoef(scores.T)[0, 1]))


@dataclass(frozen=True)
class JudgeFit:
    loading: float
    noise: float
    skills: tuple[float, float]  # (Mixtral, GPT-4)


def fit_judge(scores: np.ndarray | None = None) -> JudgeFit:
    """b_J, s_J and the two skills that match MT-Bench's score means, standard deviations (in
    score points) and correlation (weighted by 100, so 0.01 of correlation counts as one point)."""
    target = data_moments(mt_bench_scores() if scores is None else scores)

    def error(x: np.ndarray) -> float:
        got = judge_moments(x[0], x[1], abs(x[2]), abs(x[3]))
        return ((got.mean_first - target.mean_first) ** 2 + (got.mean_second - target.mean_second) ** 2
                + (got.std_first - target.std_first) ** 2 + (got.std_second - target.std_second) ** 2
                + (100.0 * (got.correlation - target.correlation)) ** 2)

    best = minimize(error, [2.0, 3.0, 2.0, 2.0], step=0.5, tolerance=1e-8)
    return JudgeFit(abs(float(best[2])), abs(float(best[3])), (float(best[0]), float(best[1])))


# ----------------------------------------------------------------------------- routing through a cascade
@dataclass(frozen=True)
class RouteStats:
    """Expected routing of a threshold cascade (Cascadia Fig. 4): ``processing_ratios[i]``
    the share of requests stage i processes (p_i of Table 2, p_1 = 1), ``accepted_shares[i]`` the
    share it answers, ``quality`` the mean accepted score Q(θ) (§3.3)."""

    processing_ratios: tuple[float, ...]
    accepted_shares: tuple[float, ...]
    quality: float


def route_stats_from_skills(skills: SequenceOf[float], thresholds: SequenceOf[float], kind: KindParameters,
                            difficulty_mean: float = 0.0) -> RouteStats:
    """``RouteStats`` of stages with skills ``skills`` (smallest first) under thresholds h_1..h_{C-1}."""
    weights = _difficulty_weights(difficulty_mean)
    reach = np.ones_like(_D_GRID)
    processing, accepted, quality = [], [], 0.0
    for stage, skill in enumerate(skills):
        processing.append(1.0 if stage == 0 else float(reach @ weights))
        if kind.kind == "correct":
            certainty = SCORE_MAX * sigmoid(skill - kind.loading * _D_GRID)
            if stage == len(skills) - 1:
                below, accepted_score = np.zeros_like(reach), certainty
            else:
                below = (certainty < thresholds[stage]).astype(float)
                accepted_score = certainty * (1.0 - below)
        elif stage == len(skills) - 1:
            below = np.zeros_like(reach)
            accepted_score = _mean_judge_score_given_d(skill, kind.loading, kind.noise)
        else:
            below = _below_judge_threshold_given_d(skill, kind.loading, kind.noise, thresholds[stage])
            accepted_score = _accepted_judge_score_given_d(skill, kind.loading, kind.noise, thresholds[stage])
        accepted.append(float((reach * (1.0 - below)) @ weights))
        quality += float((reach * accepted_score) @ weights)
        reach = reach * below
    return RouteStats(tuple(processing), tuple(accepted), quality)


def _table2_residuals(kind: KindParameters, rows: SequenceOf[tuple[int, int]], difficulty_mean: float) -> list[float]:
    skills = [kind.skill(get_model(m).params_total) for m in CASCADIA_MODELS]
    residuals = []
    for quality_min, trace in rows:
        thresholds, (p2, p3) = CASCADIA_TABLE2[(quality_min, trace)]
        stats = route_stats_from_skills(skills, thresholds, kind, difficulty_mean)
        residuals += [stats.processing_ratios[1] - p2, stats.processing_ratios[2] - p3, (stats.quality - quality_min) / SCORE_MAX]
    return residuals


@dataclass(frozen=True)
class CatalogFit:
    judge: KindParameters
    correct: KindParameters
    trace_difficulty_mean: dict[int, float]


def fit_catalog_skills() -> CatalogFit:
    """The judge kind's (b_J, s_J) from MT-Bench (``fit_judge``); its skill line (α, β) by least
    squares on Cascadia Table 2's trace-1 rows (processing ratios p_2, p_3 and attained quality
    = q_min, the quality in units of 100); δ of traces 2 and 3 on their rows. The correct kind:
    b_C of MMLU, β_C = β · b_C / b_J, α_C so a 46.7 B model has Mixtral's MMLU skill."""
    judge_fit = fit_judge()
    trace_rows = {t: [key for key in CASCADIA_TABLE2 if key[1] == t] for t in (1, 2, 3)}

    def judge_kind(x: np.ndarray) -> KindParameters:
        return KindParameters("judge", judge_fit.loading, judge_fit.noise, float(x[0]), float(x[1]))

    line = minimize(lambda x: float(np.sum(np.square(_table2_residuals(judge_kind(x), trace_rows[1], 0.0)))),
                    [0.0, 0.5], step=0.5, tolerance=1e-10)
    judge = judge_kind(line)
    shifts = {1: 0.0}
    for trace in (2, 3):
        best = minimize(lambda x: float(np.sum(np.square(_table2_residuals(judge, trace_rows[trace], float(x[0]))))),
                        [0.0], step=0.5, tolerance=1e-10)
        shifts[trace] = float(best[0])
    mmlu = fit_correctness("mmlu")
    slope = judge.skill_per_log_param * mmlu.loading / judge.loading
    correct = KindParameters("correct", mmlu.loading, 0.0, mmlu.skills[0] - slope * math.log(MIXTRAL_PARAMS / 1e9), slope)
    return CatalogFit(judge, correct, shifts)


# ----------------------------------------------------------------------------- public model
def check_kind(kind: str) -> None:
    if kind not in QUALITY_KINDS:
        raise ValueError(f"unknown quality kind {kind!r}; known: {list(QUALITY_KINDS)}")


def _check_models(models: SequenceOf[str], kind: str) -> None:
    if len(models) == 0:
        raise ValueError("a cascade needs at least one model")
    for model in models:
        get_model(model)
    if kind in REPLAY_KINDS and len(models) != 2:
        raise ValueError(f"replay kind {kind!r} serves exactly two models (Mixtral-8x7B, GPT-4 rows), got {list(models)}")


def _check_difficulty_mean(difficulty_mean: float) -> None:
    if not math.isfinite(difficulty_mean):
        raise ValueError(f"difficulty_mean must be finite, got {difficulty_mean!r}")


def model_skill(model: str, kind: str = "judge") -> float:
    """Skill a_m of catalog ``model`` for fitted kind ``kind``: α + β ln(total parameters / 1e9)."""
    if kind not in FITTED_KINDS:
        raise ValueError(f"model skills exist for the fitted kinds {list(FITTED_KINDS)}, got {kind!r}")
    return PARAMETERS_BY_KIND[kind].skill(get_model(model).params_total)


def expected_model_quality(model: str, kind: str = "judge", difficulty_mean: float = 0.0) -> float:
    """Mean score (0-100) of ``model`` answering every request; for ``"correct"`` its accuracy in %."""
    _check_difficulty_mean(difficulty_mean)
    return route_stats_from_skills([model_skill(model, kind)], [], PARAMETERS_BY_KIND[kind], difficulty_mean).quality


def stage_mean_scores(models: SequenceOf[str], kind: str = "judge", difficulty_mean: float = 0.0) -> list[float]:
    """Each stage's mean score when it answers every request: the fitted model's expectation, or
    for a replay kind the data's column mean (Mixtral's for the first stage, GPT-4's for the second).
    The first and last entries are Cascadia §3.3's nadir z₂ and utopia z₁."""
    check_kind(kind)
    _check_models(models, kind)
    if kind in REPLAY_KINDS:
        return [float(v) for v in replay_rows(kind).mean(axis=0)]
    return [expected_model_quality(m, kind, difficulty_mean) for m in models]


def _check_thresholds(models: SequenceOf[str], thresholds: SequenceOf[float]) -> None:
    if len(thresholds) != len(models) - 1:
        raise ValueError(f"{len(models)} stages need {len(models) - 1} thresholds, got {list(thresholds)}")
    for threshold in thresholds:
        if not 0.0 <= threshold <= SCORE_MAX:
            raise ValueError(f"thresholds must be in [0, {SCORE_MAX:g}], got {threshold!r}")


def cascade_route_stats(models: SequenceOf[str], thresholds: SequenceOf[float], kind: str = "judge",
                        difficulty_mean: float = 0.0) -> RouteStats:
    """Expected processing ratios, accepted shares and quality Q(θ) of the cascade ``models`` under
    thresholds h_1..h_{C-1} (Cascadia §3.3 footnote 3 estimates the same from profiled
    scores): integrals of the fitted model, or exact averages over a replay kind's rows."""
    check_kind(kind)
    _check_models(models, kind)
    _check_thresholds(models, thresholds)
    _check_difficulty_mean(difficulty_mean)
    if kind in REPLAY_KINDS:
        rows = replay_rows(kind)
        accept_first = rows[:, 0] >= thresholds[0]
        forwarded = 1.0 - float(accept_first.mean())
        quality = float(np.where(accept_first, rows[:, 0], rows[:, 1]).mean())
        return RouteStats((1.0, forwarded), (1.0 - forwarded, forwarded), quality)
    skills = [model_skill(m, kind) for m in models]
    return route_stats_from_skills(skills, thresholds, PARAMETERS_BY_KIND[kind], difficulty_mean)


@dataclass(frozen=True)
class CascadeScores:
    """Scores of n requests on a cascade's models: ``difficulty`` (n,) the latent d (NaN for a
    replay), ``quality`` (n, models) what an accepted answer scores, ``signal`` (n, models) what
    the judge compares with the threshold (the same array except for kind ``"correct"``)."""

    difficulty: np.ndarray
    quality: np.ndarray
    signal: np.ndarray


def sample_cascade_scores(num_requests: int, models: SequenceOf[str], rng: np.random.Generator, kind: str = "judge",
                          difficulty_mean: float = 0.0, noise: float | None = None) -> CascadeScores:
    """Draw the scores of ``num_requests`` requests. Draw order (so a generator state fixes the
    result): judge: d (n), then ε (n x models); correct: d (n), then uniforms (n x models),
    correct iff u < certainty; replay: row indices (n). ``noise`` overrides s_J (judge kind only)."""
    if isinstance(num_requests, bool) or not isinstance(num_requests, (int, np.integer)) or num_requests < 0:
        raise ValueError(f"num_requests must be a non-negative integer, got {num_requests!r}")
    check_kind(kind)
    _check_models(models, kind)
    _check_difficulty_mean(difficulty_mean)
    if noise is not None and (kind != "judge" or not noise >= 0):
        raise ValueError(f"noise overrides the judge kind's s_J and must be >= 0; got noise={noise!r} for kind {kind!r}")
    if kind in REPLAY_KINDS:
        rows = replay_rows(kind)
        picked = rows[rng.integers(0, len(rows), num_requests)]
        return CascadeScores(np.full(num_requests, np.nan), picked, picked)
    parameters = PARAMETERS_BY_KIND[kind]
    skills = np.array([model_skill(m, kind) for m in models])
    difficulty = rng.normal(difficulty_mean, 1.0, num_requests)
    margin = skills[None, :] - parameters.loading * difficulty[:, None]
    if kind == "judge":
        spread = parameters.noise if noise is None else noise
        scores = SCORE_MAX * sigmoid(margin + spread * rng.normal(0.0, 1.0, (num_requests, len(models))))
        return CascadeScores(difficulty, scores, scores)
    certainty = sigmoid(margin)
    correct = rng.uniform(0.0, 1.0, (num_requests, len(models))) < certainty
    return CascadeScores(difficulty, SCORE_MAX * correct, SCORE_MAX * certainty)
