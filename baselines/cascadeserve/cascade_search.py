"""SP1, cascade search (CascadeServe §4.2): sample cascades (threshold vectors) at random,
evaluate them on validation samples (App. C.2) and keep the Pareto front of accuracy vs cost.

A cascade here is a vector of threshold *levels*, one per stage but the last, over the ordered
model list (servegym/Cascade-v0's action): level k sets h = 100·k / (levels − 1); a request is
accepted at stage i when its score there is >= h_i, the last stage always accepts, so level 0
ends the cascade at that stage. Cost is the work a request causes, Σ_i (share reaching stage i)
· runtime per sample of model i at batch 1 (GPU-seconds); accuracy is the mean accepted score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from baselines.cascadeserve.profiles import ModelProfile

SCORE_MAX = 100.0


@dataclass(frozen=True)
class CascadeStats:
    """One evaluated cascade: its levels, mean accepted score, share of requests reaching each
    stage (``stage_shares[0] == 1``) and work per request (seconds of GPU time at batch 1)."""

    levels: tuple[int, ...]
    quality: float
    stage_shares: tuple[float, ...]
    work_s: float

    @property
    def entry_stage(self) -> int:
        """The first stage any request reaches (0 for a cascade; the served model for a single
        model, ``model_switching``)."""
        return next(i for i, share in enumerate(self.stage_shares) if share > 0)

    def demand_qps(self, models: Sequence[str], qps: float) -> dict[str, float]:
        """QPS_m of §4.4 footnote 2: the share forwarded to each model times the total QPS."""
        return {m: share * qps for m, share in zip(models, self.stage_shares) if share > 0}


def thresholds(levels: Sequence[int], threshold_levels: int) -> list[float]:
    return [SCORE_MAX * k / (threshold_levels - 1) for k in levels]


def evaluate_cascade(
    levels: Sequence[int], scores: np.ndarray, threshold_levels: int, profiles: Sequence[ModelProfile]
) -> CascadeStats:
    """Run the validation ``scores`` (samples x models, 0-100) through the cascade (App. C.2)."""
    num_samples, num_models = scores.shape
    if len(levels) != num_models - 1 or len(profiles) != num_models:
        raise ValueError(f"{num_models} models need {num_models - 1} levels and {num_models} profiles, got {list(levels)}")
    for k in levels:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < threshold_levels:
            raise ValueError(f"threshold levels must be integers in [0, {threshold_levels - 1}], got {list(levels)}")
    reaching = np.ones(num_samples, dtype=bool)
    accepted_sum = 0.0
    shares = []
    for stage in range(num_models):
        shares.append(float(reaching.mean()))
        if stage == num_models - 1:
            accepts = reaching
        else:
            accepts = reaching & (scores[:, stage] >= thresholds(levels, threshold_levels)[stage])
        accepted_sum += float(scores[accepts, stage].sum())
        reaching = reaching & ~accepts
    work_s = sum(share * p.runtime_per_sample_s for share, p in zip(shares, profiles))
    return CascadeStats(tuple(int(k) for k in levels), accepted_sum / num_samples, tuple(shares), work_s)


def pareto_front(cascades: Sequence[CascadeStats]) -> list[CascadeStats]:
    """The cascades no other is at least as cheap and strictly more accurate than, cheapest first
    (ties in work: the more accurate; then the lexicographically smaller levels)."""
    ordered = sorted(cascades, key=lambda c: (c.work_s, -c.quality, c.levels))
    front: list[CascadeStats] = []
    for cascade in ordered:
        if not front or cascade.quality > front[-1].quality:
            front.append(cascade)
    return front


def search_cascades(
    scores: np.ndarray,
    threshold_levels: int,
    profiles: Sequence[ModelProfile],
    num_samples: int,
    rng: np.random.Generator,
) -> list[CascadeStats]:
    """§4.2: ``num_samples`` random level vectors plus the cheapest (all 0: first model only) and
    the most accurate candidate (all top levels: nearly everything reaches the last model);
    returns the Pareto front, cheapest first."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 0:
        raise ValueError(f"num_samples must be a non-negative integer, got {num_samples!r}")
    stages = scores.shape[1] - 1
    candidates = {(0,) * stages, (threshold_levels - 1,) * stages}
    candidates.update(tuple(int(k) for k in row) for row in rng.integers(0, threshold_levels, (num_samples, stages)))
    evaluated = [evaluate_cascade(levels, scores, threshold_levels, profiles) for levels in sorted(candidates)]
    return pareto_front(evaluated)
