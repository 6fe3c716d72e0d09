"""Length samplers by name, for scenario configs."""

from __future__ import annotations

from simulator.workloads.lengths import (
    EMPIRICAL_DATASETS,
    PARAMETRIC_PRESETS,
    BucketLengths,
    EmpiricalLengths,
    FixedLengths,
    ParametricLengths,
    multitier_table,
    parametric_preset,
)
from simulator.workloads.reasoning import ServeGenReasoning

SERVEGEN_REASONING_NAME = "servegen_deepseek_r1"
OTHER_SAMPLERS = ("fixed", "multitier_table")
LENGTH_SAMPLER_NAMES = tuple(sorted([*EMPIRICAL_DATASETS, *PARAMETRIC_PRESETS, SERVEGEN_REASONING_NAME, *OTHER_SAMPLERS]))


def length_sampler(
    name: str, **options
) -> EmpiricalLengths | ParametricLengths | ServeGenReasoning | FixedLengths | BucketLengths:
    """The sampler called ``name``: an empirical dataset (``EmpiricalLengths``), one of Cauchy's
    parametric presets (``parametric_preset``), ``servegen_deepseek_r1`` (``ServeGenReasoning``,
    whose ``sample`` also returns reasoning tokens), ``fixed`` (``FixedLengths``: options
    ``prompt_tokens``, ``output_tokens``) or ``multitier_table`` (multitier-llumnix.txt Table 1).
    ``options`` go to the sampler's constructor (caps, ``clip``, ...)."""
    if name == "fixed":
        return FixedLengths(**options)
    if name == "multitier_table":
        return multitier_table(**options)
    if name in EMPIRICAL_DATASETS:
        return EmpiricalLengths(name, **options)
    if name in PARAMETRIC_PRESETS:
        return parametric_preset(name, **options)
    if name == SERVEGEN_REASONING_NAME:
        return ServeGenReasoning(**options)
    raise ValueError(f"unknown length sampler {name!r}; known: {list(LENGTH_SAMPLER_NAMES)}")
