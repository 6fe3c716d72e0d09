"""Model switching (MS, CascadeServe §6.2 baseline [72]; §6.6 "No cascade"): serve each
request with one model, picked by the measured QPS, planned with CascadeServe's own machinery.

The gear planner (Alg. 1) runs unchanged except for SP1: instead of sampled cascades its
candidates (``plan_gears(..., candidates=...)``) are the single models, each alone (``single_model_front``: the Pareto front of
accuracy vs work, cheapest first). SP2 then gives every QPS range the most accurate model and
downgrades ranges on errors, SP3 places and load-balances the models (eq. 1-4) and SP4 tunes the
minimum queue length (§4.5): MS with CascadeServe's placement and batching, as the §6.6 ablation
"No cascade" (the paper's MS+ uses Clipper's batching and greedy co-location instead).
"""

from __future__ import annotations

import numpy as np

from baselines.cascadeserve.cascade_search import CascadeStats, pareto_front
from baselines.cascadeserve.planner import GearPlan, PlanningProblem, plan_gears


def single_model_cascade(problem: PlanningProblem, index: int) -> CascadeStats:
    """Model ``index`` alone: every request reaches only it (one-hot stage shares), accuracy its mean
    validation score, work its runtime per sample. Its levels forward every request past the
    smaller models (top level) and accept at ``index`` (level 0): the closest threshold vector."""
    models = len(problem.models)
    if not 0 <= index < models:
        raise ValueError(f"model index must be in [0, {models - 1}], got {index!r}")
    top = problem.threshold_levels - 1
    levels = tuple(top if stage < index else 0 for stage in range(models - 1))
    shares = tuple(1.0 if stage == index else 0.0 for stage in range(models))
    return CascadeStats(levels, float(problem.scores[:, index].mean()), shares,
                        problem.profiles[index].runtime_per_sample_s)


def single_model_front(problem: PlanningProblem) -> list[CascadeStats]:
    """The single models on the accuracy-work Pareto front, cheapest first."""
    return pareto_front([single_model_cascade(problem, i) for i in range(len(problem.models))])


def plan_model_switching(problem: PlanningProblem, rng: np.random.Generator) -> GearPlan:
    """Alg. 1 (``planner.plan_gears``) over single-model candidates: a gear per QPS range, each
    serving one model; raises ``PlanningInfeasibleError`` when even the cheapest model misses
    the SLO."""
    return plan_gears(problem, rng, candidates=single_model_front(problem))
