"""A compiled engine's outcomes as ``RequestOutcome``s (``simulator.compiled``), built column-wise
from the engine's outcome table, in chunks so that the columns' Python copies stay small."""

from __future__ import annotations

import gc
from collections.abc import Sequence as SequenceOf
from itertools import repeat
from operator import attrgetter

from servegym_core import _core

from simulator.context import CONTEXT_REJECT_REASON
from simulator.outcome import RequestOutcome
from simulator.request import Request

REJECT_REASONS = (None, CONTEXT_REJECT_REASON, "exceeds_kv_capacity")
"""``rejected_reason`` by the engine's reject code."""
OUTCOME_CHUNK = 4096
"""Outcomes built from one copy of the engine's columns at a time."""


def engine_outcomes(engine: _core.Engine, requests: SequenceOf[Request], curves: bool, first: int) -> list[RequestOutcome]:
    """The engine's outcomes from the ``first``-th on as ``RequestOutcome``s, in the order
    recorded; the request's own fields (id, tier, arrival, prompt, SLO) come from the ``Request``
    as ``Sequence`` copies them. Built column-wise (``map`` over the columns: no Python step per
    field)."""
    outcomes: list[RequestOutcome] = []
    collecting = gc.isenabled()
    gc.disable()  # many new objects, no cycles among them: the collector would only slow the build down
    try:
        while first < engine.num_outcomes:  # in chunks: the columns' Python copies stay small
            outcomes += build_outcomes(engine.outcome_table(first, OUTCOME_CHUNK), requests, curves)
            first += OUTCOME_CHUNK
    finally:
        if collecting:
            gc.enable()
    return outcomes


def build_outcomes(table: _core.OutcomeTable, requests: SequenceOf[Request], curves: bool) -> list[RequestOutcome]:
    ended = list(map(requests.__getitem__, table.rows))
    request_field = {name: map(attrgetter(name), ended)
                     for name in ("request_id", "tier", "arrival_s", "prompt_tokens", "slo")}
    rows = table.requests
    token_curves = map(tuple, rows.token_curve) if curves else repeat(())
    return list(map(
        RequestOutcome, request_field["request_id"], request_field["tier"], rows.instance_id,
        request_field["arrival_s"], request_field["prompt_tokens"], rows.output_tokens, rows.reasoning_tokens,
        rows.first_scheduled_s, rows.first_token_s, rows.first_answer_token_s, rows.reasoning_end_s,
        table.finish_s, rows.max_tbt_s, rows.preempted_s, rows.num_preemptions, rows.num_migrations,
        token_curves, request_field["slo"], map(REJECT_REASONS.__getitem__, table.reasons), table.quality,
    ))
