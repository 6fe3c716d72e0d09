"""Model cascades (Cascadia §3.3, Fig. 4): requests start at the smallest model, a judge
scores each answer and forwards it to the next, larger model when the score is below that
stage's threshold; the last stage always accepts.

Two parts:

- ``assign_cascade_quality`` gives every request a score per model from
  ``simulator.cascade_quality`` (a latent-difficulty model fitted to RouteLLM's per-prompt
  data, or a replay of that data); the scores stand in for the judge's grades (Cascadia
  uses GPT-4o grading 0-100) or for correctness (CascadeServe's accuracy);
- ``simulator.routers.cascade.CascadeRouter``, the cluster's router and completion hook that
  carries a request through the stages, so each request still ends with exactly one
  ``RequestOutcome``.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf

import numpy as np

from simulator.cascade_quality import expected_model_quality, sample_cascade_scores
from simulator.request import Request


def expected_quality(model: str, kind: str = "judge") -> float:
    """Mean score (0-100) of ``model`` answering every request under the fitted quality model
    (``simulator.cascade_quality``); for ``kind="correct"`` its accuracy in %."""
    return expected_model_quality(model, kind)


def assign_cascade_quality(
    requests: SequenceOf[Request],
    models: SequenceOf[str],
    rng: np.random.Generator,
    noise_std: float | None = None,
    *,
    kind: str = "judge",
    difficulty_mean: float = 0.0,
) -> dict[int, dict[str, float]]:
    """Set ``difficulty`` and ``quality_by_model`` (scores 0-100 for each of ``models``) on every
    request, in place, drawn by ``simulator.cascade_quality.sample_cascade_scores`` (``kind``:
    ``"judge"``, ``"correct"`` or a replay ``"mt_bench"`` / ``"mmlu"`` / ``"gsm8k"``;
    ``difficulty_mean`` δ; ``noise_std`` overrides the judge noise s_J, logit units). Returns
    what the judge sees per request id and model: the same scores, except for ``"correct"``,
    where it is the model's certainty (give it to ``CascadeRouter.set_judge_signals``)."""
    scores = sample_cascade_scores(len(requests), models, rng, kind, difficulty_mean, noise_std)
    signals: dict[int, dict[str, float]] = {}
    for request, d, quality_row, signal_row in zip(
        requests, scores.difficulty.tolist(), scores.quality.tolist(), scores.signal.tolist()
    ):
        request.difficulty = d
        request.quality_by_model = dict(zip(models, quality_row))
        signals[request.request_id] = dict(zip(models, signal_row))
    return signals

