"""Delivered-token curves: validation, token arrival times and inter-token gaps.

A curve is a sequence of breakpoints ``(time_s, cumulative_tokens)`` (``RequestOutcome.token_curve``).
Between consecutive breakpoints tokens arrive at a constant rate, so token ``k`` arrives at the
first time the piecewise-linear curve reaches ``k``; a breakpoint not reached by a rising
segment (the first one, or one after a flat stretch) is a jump. Plain Python on purpose: curves
are short and metrics walk one per request, where NumPy's per-call overhead would dominate.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left
from collections.abc import Sequence

TokenCurve = Sequence[tuple[float, int]]


def validate_token_curve(curve: TokenCurve) -> None:
    """Raise ``ValueError`` unless ``curve`` is non-empty, finite, integer-counted and non-decreasing."""
    if len(curve) == 0:
        raise ValueError("token curve is empty: the request delivered no tokens, or curves were not recorded")
    previous_time_s, previous_tokens = -math.inf, 0
    for point in curve:
        if len(point) != 2:
            raise ValueError(f"token curve point must be (time_s, tokens), got {point!r}")
        time_s, tokens = point
        if not math.isfinite(time_s):
            raise ValueError(f"token curve time must be finite, got {time_s!r}")
        try:
            tokens = operator.index(tokens)
        except TypeError:
            raise ValueError(f"token curve count must be an integer, got {tokens!r}") from None
        if tokens < 1:
            raise ValueError(f"token curve count must be at least 1, got {tokens}")
        if time_s < previous_time_s or tokens < previous_tokens:
            raise ValueError(
                f"token curve must not go back: ({previous_time_s}, {previous_tokens}) then ({time_s}, {tokens})"
            )
        previous_time_s, previous_tokens = time_s, tokens


def token_time_s(curve: TokenCurve, token_index: int) -> float:
    """Arrival time of the 1-based ``token_index``-th token of a validated curve."""
    total_tokens = curve[-1][1]
    if not 1 <= token_index <= total_tokens:
        raise ValueError(f"token index {token_index} outside 1..{total_tokens}")
    upper = bisect_left(curve, token_index, key=operator.itemgetter(1))
    if upper == 0:
        return float(curve[0][0])
    lower_time_s, lower_tokens = curve[upper - 1]
    upper_time_s, upper_tokens = curve[upper]
    return lower_time_s + (token_index - lower_tokens) * (upper_time_s - lower_time_s) / (upper_tokens - lower_tokens)


def max_gap_s(curve: TokenCurve, after_token: int, last_token: int) -> float:
    """Largest gap ``T(k) - T(k-1)`` over tokens ``k = after_token+1 .. last_token`` (NaN if there is none).

    Inside one rising segment the gaps are equal, so only the first two tokens of each segment
    and the ends of the range can hold the maximum: the work is per breakpoint, not per token.
    """
    first_k = max(after_token + 1, 2)
    if last_token < first_k:
        return float("nan")
    candidates = {first_k, last_token}
    for _, tokens in curve:
        candidates.update((tokens + 1, tokens + 2))
    return max(
        token_time_s(curve, k) - token_time_s(curve, k - 1) for k in candidates if first_k <= k <= last_token
    )
