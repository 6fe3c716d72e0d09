"""Cascadia's routing level: thresholds, the quality they give, and the Chebyshev-guided
latency-quality score (Cascadia §3.3, App. D).

A routing strategy θ is the threshold vector H = (h_1, ..., h_{C-1}) (§3.3, Fig. 4): a request
starts at model 1 and is accepted at the first stage i whose judge score is >= h_i (the last stage
always accepts). Q(θ) is estimated as footnote 3 says: profile a subsample of the workload on
every model, then for any H replay the acceptance rule on the profiled scores and average the
accepted scores. The same replay gives the share ``p_i`` of requests reaching stage i, which
sets the load (w_i) the deployment solver sees (Alg. 1, line 3).

J(θ) = L(θ) + μ · max(0, (q_min − Q(θ)) / (z₁* − z₂*)) with the utopia z₁* (every request on the
largest model) and nadir z₂* (every request on the smallest).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from simulator.cascade_quality import SCORE_MAX
from simulator.request import Request


def latency_quality_score(
    latency_s: float, quality: float, quality_min: float, utopia: float, nadir: float, penalty_mu: float
) -> float:
    """J(θ) of §3.3: latency plus μ times the quality shortfall normalised by z₁* − z₂*."""
    if not utopia > nadir:
        raise ValueError(f"utopia z1 ({utopia!r}) must exceed nadir z2 ({nadir!r})")
    if not penalty_mu >= 0:
        raise ValueError(f"penalty_mu must be >= 0, got {penalty_mu!r}")
    return latency_s + penalty_mu * max(0.0, (quality_min - quality) / (utopia - nadir))


def threshold_grid(levels: int) -> np.ndarray:
    """The thresholds a stage may take: 100 · k / (levels − 1), k = 0..levels−1 (Cascade-v0's grid)."""
    if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or levels < 2:
        raise ValueError(f"threshold levels must be an integer >= 2, got {levels!r}")
    return SCORE_MAX * np.arange(levels) / (levels - 1)


@dataclass(frozen=True)
class Routing:
    """What thresholds H do to the profiled subsample."""

    thresholds: tuple[float, ...]
    reach_fractions: tuple[float, ...]  # p_i: share of requests that reach stage i (p_1 = 1)
    accept_fractions: tuple[float, ...]  # share accepted at stage i
    quality: float  # Q(θ): mean accepted score


class QualityProfile:
    """Per-model scores of a profiled subsample (footnote 3): ``scores[r, i]`` is request r's
    score (0-100) on model i, models smallest first. ``signals`` is what the judge compares
    with the thresholds (default: the scores themselves; ``simulator.cascade`` gives another
    signal for its ``"correct"`` kind)."""

    def __init__(self, scores: np.ndarray, signals: np.ndarray | None = None) -> None:
        matrix = np.asarray(scores, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 1:
            raise ValueError(f"scores must be a (requests x models) matrix, got shape {matrix.shape}")
        judged = matrix if signals is None else np.asarray(signals, dtype=np.float64)
        if judged.shape != matrix.shape:
            raise ValueError(f"signals have shape {judged.shape}, scores {matrix.shape}")
        for name, values in (("scores", matrix), ("signals", judged)):
            if not np.all((values >= 0) & (values <= SCORE_MAX)):
                raise ValueError(f"{name} must be in [0, {SCORE_MAX:g}]")
        self.scores = matrix
        self.signals = judged

    @staticmethod
    def from_requests(
        requests: Sequence[Request], models: Sequence[str], signals: Mapping[int, Mapping[str, float]] | None = None
    ) -> QualityProfile:
        """From requests carrying ``quality_by_model`` and, optionally, the judge signals by
        request id (both from ``simulator.cascade.assign_cascade_quality``)."""
        rows, judged = [], []
        for request in requests:
            scores = request.quality_by_model
            if scores is None or any(m not in scores for m in models):
                raise ValueError(f"request {request.request_id} has no score for every model of {list(models)}")
            rows.append([scores[m] for m in models])
            if signals is not None:
                if request.request_id not in signals:
                    raise ValueError(f"no judge signal for request {request.request_id}")
                judged.append([signals[request.request_id][m] for m in models])
        return QualityProfile(np.array(rows), np.array(judged) if signals is not None else None)

    @property
    def num_models(self) -> int:
        return self.scores.shape[1]

    @property
    def utopia(self) -> float:
        """z₁*: mean score with every request on the largest model."""
        return float(self.scores[:, -1].mean())

    @property
    def nadir(self) -> float:
        """z₂*: mean score with every request on the smallest model."""
        return float(self.scores[:, 0].mean())

    def route(self, thresholds: Sequence[float]) -> Routing:
        """Replay the acceptance rule of §3.3 (score >= h_i accepts at stage i)."""
        if len(thresholds) != self.num_models - 1:
            raise ValueError(f"{self.num_models} models need {self.num_models - 1} thresholds, got {list(thresholds)}")
        for h in thresholds:
            if not 0.0 <= h <= SCORE_MAX:
                raise ValueError(f"thresholds must be in [0, {SCORE_MAX:g}], got {h!r}")
        n = self.scores.shape[0]
        pending = np.ones(n, dtype=bool)
        reach, accept, total = [], [], 0.0
        for stage in range(self.num_models):
            reach.append(pending.sum() / n)
            last = stage == self.num_models - 1
            accepted = pending if last else pending & (self.signals[:, stage] >= thresholds[stage])
            accept.append(accepted.sum() / n)
            total += float(self.scores[accepted, stage].sum())
            pending = pending & ~accepted
        return Routing(tuple(float(t) for t in thresholds), tuple(float(p) for p in reach), tuple(float(a) for a in accept), total / n)

    def route_all(self, grid: np.ndarray) -> list[Routing]:
        """``route`` for every threshold vector on ``grid`` per stage (levels^(C−1) of them)."""
        return [self.route(h) for h in itertools.product(grid.tolist(), repeat=self.num_models - 1)]

    def proportional_thresholds(self, grid: np.ndarray) -> tuple[float, ...]:
        """θ₀ of §3.3: proportional routing, model i receives 1/i of the requests. Stage by
        stage, the grid threshold whose reach share of the next stage is closest to 1/(i+1)."""
        chosen: list[float] = []
        for stage in range(self.num_models - 1):
            target = 1.0 / (stage + 2)
            best, best_gap = float(grid[0]), math.inf
            for h in grid.tolist():
                trial = chosen + [h] + [0.0] * (self.num_models - 2 - stage)
                gap = abs(self.route(trial).reach_fractions[stage + 1] - target)
                if gap < best_gap - 1e-12:
                    best, best_gap = h, gap
            chosen.append(best)
        return tuple(chosen)
