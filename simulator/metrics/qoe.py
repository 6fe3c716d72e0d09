"""Quality of Experience (QoE) of one streamed response, as PASCAL uses it after Andes.

PASCAL §II-C, Fig. 3 (after Andes [31]): the *expected* curve (black dotted line) shows the
first token at the TTFT target and then one token per TPOT target; the *digested* curve (yellow
line) is what the user reads: delivered tokens pass through a token pacer, so the user never
reads faster than one token per TPOT target, reads buffered tokens during a pause, and starves
once the buffer is empty. QoE = area under the digested curve / area under the expected curve,
normalised to [0, 1]: delivery faster than expected cannot score above 1.

Choices the paper leaves open, fixed here:

- both curves are piecewise linear and integrated exactly, from their own start (each is 0
  before) to the later of the two completion times; a finished curve stays at its final count;
- the first token is read the moment it arrives (a step to 1, as the expected curve starts);
- reasoning requests: only answer tokens count (PASCAL §III-B, Fig. 5: the answering
  phase's QoE is set by the TTFAT and TPOT targets). ``anchor`` sets where the expected curve
  starts, ``expected_ttfat_s`` after:

  - ``"arrival"``: request arrival (Andes' TTFT target, counted from submission);
  - ``"reasoning_end"``: the last reasoning token, or arrival when there is none (PASCAL
    §III-B defines TTFAT from the end of the reasoning phase);
  - ``"first_answer_token"``: the actual first answer token (PASCAL §V-A computes QoE "solely
    from TPOT starting at the first answering token"; use it with ``expected_ttfat_s=0``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from itertools import pairwise

from simulator.metrics.token_curve import TokenCurve, token_time_s, validate_token_curve
from simulator.outcome import RequestOutcome

QOE_ANCHORS = ("arrival", "reasoning_end", "first_answer_token")
PASCAL_QOE_VIOLATION_BELOW = 0.95  # PASCAL §III-A / §V-A: an SLO violation is QoE < 0.95


@dataclass(frozen=True, slots=True)
class QoETargets:
    """Expected-curve targets shared by every request, and the violation threshold.

    PASCAL's setting (PASCAL §III-A, after [54]): TTFAT 0.25 s, TPOT 0.1 s, violation below 0.95.
    """

    expected_ttfat_s: float
    expected_tpot_s: float
    anchor: str = "arrival"
    violation_below: float = PASCAL_QOE_VIOLATION_BELOW

    def __post_init__(self) -> None:
        _check_targets(self.expected_ttfat_s, self.expected_tpot_s, self.anchor)
        if not 0.0 < self.violation_below <= 1.0:
            raise ValueError(f"violation_below must be in (0, 1], got {self.violation_below!r}")


def qoe(
    outcome_or_curve: RequestOutcome | TokenCurve,
    *,
    expected_ttfat_s: float,
    expected_tpot_s: float,
    arrival_s: float | None = None,
    answer_start_token: int | None = None,
    anchor: str = "arrival",
) -> float:
    """QoE in [0, 1] of a completed request's answer tokens (PASCAL Fig. 3).

    Pass a ``RequestOutcome`` (arrival and reasoning tokens come from it), or a bare token curve
    with ``arrival_s`` and ``answer_start_token`` (tokens before the first answer token, default 0).
    """
    if isinstance(outcome_or_curve, RequestOutcome):
        if arrival_s is not None or answer_start_token is not None:
            raise ValueError("arrival_s and answer_start_token come from the outcome; pass them only with a bare curve")
        outcome = outcome_or_curve
        if not outcome.completed:
            raise ValueError(f"request {outcome.request_id} was rejected ({outcome.rejected_reason!r}): no QoE")
        curve, arrival_s, answer_start_token = outcome.token_curve, outcome.arrival_s, outcome.reasoning_tokens
    else:
        curve = outcome_or_curve
        if arrival_s is None:
            raise ValueError("arrival_s is required with a bare token curve")
        answer_start_token = 0 if answer_start_token is None else answer_start_token
    _check_targets(expected_ttfat_s, expected_tpot_s, anchor)
    if not math.isfinite(arrival_s):
        raise ValueError(f"arrival_s must be finite, got {arrival_s!r}")
    try:
        answer_start_token = operator.index(answer_start_token)
    except TypeError:
        raise ValueError(f"answer_start_token must be an integer, got {answer_start_token!r}") from None
    if answer_start_token < 0:
        raise ValueError(f"answer_start_token must be >= 0, got {answer_start_token}")
    validate_token_curve(curve)
    if answer_start_token >= curve[-1][1]:
        raise ValueError(f"no answer tokens: answer_start_token {answer_start_token} >= {curve[-1][1]} delivered")
    return qoe_of_valid_curve(curve, arrival_s, answer_start_token, expected_ttfat_s, expected_tpot_s, anchor)


def qoe_of_valid_curve(
    curve: TokenCurve,
    arrival_s: float,
    answer_start_token: int,
    expected_ttfat_s: float,
    expected_tpot_s: float,
    anchor: str,
) -> float:
    """``qoe`` without argument checks, for callers that validated them (one call per request)."""
    delivered = _answer_curve(curve, answer_start_token)
    answer_tokens = delivered[-1][1]
    if anchor == "arrival":
        anchor_s = arrival_s
    elif anchor == "reasoning_end":
        anchor_s = token_time_s(curve, answer_start_token) if answer_start_token > 0 else arrival_s
    else:
        anchor_s = delivered[0][0]
    expected_start_s = anchor_s + expected_ttfat_s
    expected = [(expected_start_s, 1.0), (expected_start_s + (answer_tokens - 1) * expected_tpot_s, answer_tokens)]
    digested = _digested_curve(delivered, 1.0 / expected_tpot_s)
    until_s = max(expected[-1][0], digested[-1][0])
    expected_area = _area_until(expected, until_s)
    if expected_area == 0.0:  # a single answer token, read no later than expected
        return 1.0
    return min(1.0, _area_until(digested, until_s) / expected_area)


def _check_targets(expected_ttfat_s: float, expected_tpot_s: float, anchor: str) -> None:
    if not (math.isfinite(expected_ttfat_s) and expected_ttfat_s >= 0.0):
        raise ValueError(f"expected_ttfat_s must be finite and >= 0, got {expected_ttfat_s!r}")
    if not (math.isfinite(expected_tpot_s) and expected_tpot_s > 0.0):
        raise ValueError(f"expected_tpot_s must be finite and > 0, got {expected_tpot_s!r}")
    if anchor not in QOE_ANCHORS:
        raise ValueError(f"unknown QoE anchor {anchor!r}; known: {', '.join(QOE_ANCHORS)}")


def _answer_curve(curve: TokenCurve, answer_start_token: int) -> list[tuple[float, float]]:
    """Answer tokens delivered over time: a step to 1 when the first answer token arrives, then count - start."""
    first_answer_s = token_time_s(curve, answer_start_token + 1)
    points = [(first_answer_s, 1.0)]
    points.extend((time_s, float(k - answer_start_token)) for time_s, k in curve if k > answer_start_token)
    return points


def _digested_curve(delivered: list[tuple[float, float]], read_rate_tokens_per_s: float) -> list[tuple[float, float]]:
    """Tokens read by the user: delivery through a pacer releasing at most ``read_rate_tokens_per_s``.

    A reader with a backlog reads at the pace; one that has caught up follows delivery while
    delivery is no faster than the pace (PASCAL Fig. 3, phases i-iv).
    """
    previous_s, previous_delivered = delivered[0]
    read = previous_delivered
    digested = [(previous_s, read)]
    for time_s, delivered_tokens in delivered[1:]:
        span_s = time_s - previous_s
        if span_s > 0.0:
            slope = (delivered_tokens - previous_delivered) / span_s
            backlog = previous_delivered - read
            if backlog <= 0.0 and slope <= read_rate_tokens_per_s:
                read = delivered_tokens
            elif slope < read_rate_tokens_per_s and backlog <= (read_rate_tokens_per_s - slope) * span_s:
                caught_up_s = previous_s + backlog / (read_rate_tokens_per_s - slope)
                digested.append((caught_up_s, previous_delivered + slope * (caught_up_s - previous_s)))
                read = delivered_tokens
            else:
                read += read_rate_tokens_per_s * span_s
            digested.append((time_s, read))
        previous_s, previous_delivered = time_s, delivered_tokens
    if read < previous_delivered:
        digested.append((previous_s + (previous_delivered - read) / read_rate_tokens_per_s, previous_delivered))
    return digested


def _area_until(points: list[tuple[float, float]], until_s: float) -> float:
    """Area under a piecewise-linear curve from its first point to ``until_s``, flat after its last point."""
    area = sum((t1 - t0) * (y0 + y1) / 2.0 for (t0, y0), (t1, y1) in pairwise(points))
    last_s, last_tokens = points[-1]
    return area + last_tokens * (until_s - last_s)
