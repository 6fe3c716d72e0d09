"""Which measured points a calibration may fit, and which it is judged on.

The split is by model, never by row: ``vllm-v1``'s free parameters are fitted on the BLIS runs
of Llama-2-7B (TP 1) and CodeLlama-34B (TP 2) on H100, and judged on everything else the same
engine generation measured (other models, TP 4, MoE, other GPUs, other vLLM versions). Points
of ``vllm-0.6`` are not fitted at all; points of other engines are reported apart.
"""

from __future__ import annotations

from experiments.validation.cases import V1_ENGINE, Case

TRAIN_MODELS = ("Llama-2-7B", "CodeLlama-34B")
TRAIN_SOURCE = "blis_vllm"

TRAIN, HELD_OUT, OTHER_ENGINE = "train", "held-out", "other engine"


def role(case: Case) -> str:
    """``train``, ``held-out`` or ``other engine``."""
    if not case.own_engine:
        return OTHER_ENGINE
    point = case.point
    if case.engine == V1_ENGINE and point.source == TRAIN_SOURCE and point.model_catalog in TRAIN_MODELS:
        return TRAIN
    return HELD_OUT
