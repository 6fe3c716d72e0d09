"""Length samplers and arrival processes by name, for scenario configs."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from simulator.workloads.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    PiecewiseRateArrivals,
    PoissonArrivals,
    ServeGenRateArrivals,
)
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
    ``prompt_tokens``, ``output_tokens``) or ``multitier_table`` (Llumnix-K Table 1).
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


_signature = functools.cache(inspect.signature)
"""A constructor's signature, read once (every episode of an env builds its sampler again)."""


def _build(name: str, constructor: Callable[..., Any], options: dict[str, Any], *args: Any) -> Any:
    """``constructor(*args, **options)``, with options its signature does not take refused by name."""
    try:
        _signature(constructor).bind(*args, **options)
    except TypeError as error:
        raise ValueError(f"length sampler {name!r} cannot take options {options}: {error}") from None
    return constructor(*args, **options)


ArrivalFactory = Callable[..., ArrivalProcess]


def _poisson(rate_rps: float, cv: float) -> ArrivalProcess:
    return PoissonArrivals(rate_rps)


def _gamma(rate_rps: float, cv: float) -> ArrivalProcess:
    return GammaArrivals(rate_rps, cv)


def _servegen(rate_rps: float, cv: float) -> ArrivalProcess:
    return ServeGenRateArrivals(mean_rate_rps=rate_rps)


def _piecewise(rate_rps: float, cv: float, *, boundaries_s: Any, rates_rps: Any, cycle_s: float | None = None) -> ArrivalProcess:
    """``PiecewiseRateArrivals`` at the given rates (a spiky trace, a load profile); the
    workload's ``rate_rps`` is its nominal mean and does not rescale them."""
    return PiecewiseRateArrivals(boundaries_s, rates_rps, cv=cv, cycle_s=cycle_s)


ARRIVAL_PROCESSES: dict[str, ArrivalFactory] = {
    "poisson": _poisson, "gamma": _gamma, "servegen": _servegen, "piecewise": _piecewise,
}


def register_arrival_process(name: str, factory: ArrivalFactory) -> None:
    """Make ``arrival_process(name, rate_rps, cv, **options)`` call ``factory(rate_rps, cv,
    **options)``; the factory's keyword arguments are the names a scenario's
    ``arrival_options`` may use. A name already taken raises."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an arrival process name must be a non-empty string, got {name!r}")
    if name in ARRIVAL_PROCESSES:
        raise ValueError(f"arrival process {name!r} is already registered")
    ARRIVAL_PROCESSES[name] = factory


def check_arrival_options(name: str, options: dict[str, Any]) -> None:
    """Raise unless ``name`` is registered and takes exactly ``options`` (missing or unknown
    ones named), without building the process."""
    if name not in ARRIVAL_PROCESSES:
        raise ValueError(f"unknown arrival process {name!r}; known: {sorted(ARRIVAL_PROCESSES)}")
    try:
        inspect.signature(ARRIVAL_PROCESSES[name]).bind(1.0, 1.0, **options)
    except TypeError as error:
        raise ValueError(f"arrival process {name!r} cannot take options {options}: {error}") from None


def arrival_process(name: str, rate_rps: float, cv: float = 1.0, **options: Any) -> ArrivalProcess:
    """The arrival process called ``name`` at mean ``rate_rps`` (and ``cv`` where it applies):
    ``poisson``, ``gamma`` (renewal, gaps of CV ``cv``), ``servegen`` (the ServeGen day scaled
    to ``rate_rps``), ``piecewise`` (options ``boundaries_s``, ``rates_rps``, ``cycle_s``) or
    one added by ``register_arrival_process``."""
    check_arrival_options(name, options)
    return ARRIVAL_PROCESSES[name](rate_rps, cv, **options)
