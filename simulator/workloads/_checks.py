"""Argument checks shared by the workload modules: bad values raise ``ValueError`` naming them."""

from __future__ import annotations

import math
from numbers import Integral, Real


def positive_float(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number > 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def nonnegative_float(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number >= 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def count(name: str, value: object, *, minimum: int = 0) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum`` (bools refused), else raise."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
