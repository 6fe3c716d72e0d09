"""Length samplers by name, for scenario configs."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

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
    ``options`` go to the sampler's constructor (caps, ``clip``, ...); missing or unknown ones
    raise ``ValueError`` naming them."""
    if name == "fixed":
        return _build(name, FixedLengths, options)
    if name == "multitier_table":
        return _build(name, multitier_table, options)
    if name in EMPIRICAL_DATASETS:
        return _build(name, EmpiricalLengths, options, name)
    if name in PARAMETRIC_PRESETS:
        return _build(name, parametric_preset, options, name)
    if name == SERVEGEN_REASONING_NAME:
        return _build(name, ServeGenReasoning, options)
    raise ValueError(f"unknown length sampler {name!r}; known: {list(LENGTH_SAMPLER_NAMES)}")


def _build(name: str, constructor: Callable[..., Any], options: dict[str, Any], *args: Any) -> Any:
    """``constructor(*args, **options)``, with options its signature does not take refused by name."""
    try:
        inspect.signature(constructor).bind(*args, **options)
    except TypeError as error:
        raise ValueError(f"length sampler {name!r} cannot take options {options}: {error}") from None
    return constructor(*args, **options)
