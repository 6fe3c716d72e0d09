"""A compiled engine's outcomes as ``RequestOutcome``s (``simulator.compiled``), built column-wise
from the engine's outcome table, in chunks so that the columns' Python copies stay small."""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable, Sequence as SequenceOf
from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np
from servegym_core import _core

from simulator.context import CONTEXT_REJECT_REASON
from simulator.metrics.columns import OutcomeColumns
from simulator.outcome import RequestOutcome
from simulator.request import Request
from simulator.request_table import RequestTable

REJECT_REASONS = (None, CONTEXT_REJECT_REASON, "exceeds_kv_capacity")
"""``rejected_reason`` by the engine's reject code."""
OUTCOME_CHUNK = 4096
"""Outcomes built from one copy of the engine's columns at a time."""
REQUEST_FIELDS = ("request_id", "tier", "arrival_s", "prompt_tokens", "slo")
"""The fields an outcome copies from its request (as ``Sequence.outcome`` does)."""


class RequestColumns:
    """The fields an outcome copies from each submitted request (``REQUEST_FIELDS``), by engine
    row, in place of the ``Request`` objects: about 40 bytes a row instead of 250, for a run that
    reads no request after the submit (``keep_sequences=False``, no Python during the run).
    A value of another type than the column's (an integer arrival time, a numpy integer) is kept
    as given, so the outcomes are the ones the ``Request`` objects would give."""

    COLUMNS = {"request_id": (np.int64, int), "tier": (np.int64, int), "arrival_s": (np.float64, float),
               "prompt_tokens": (np.int64, int)}
    """Each numeric field's array type and the Python type its values come back as."""

    def __init__(self, requests: SequenceOf[Request]) -> None:
        self.columns: dict[str, np.ndarray] = {}
        self.others: dict[str, dict[int, Any]] = {}  # by field: the rows whose value is not of the column's type
        if isinstance(requests, RequestTable) and requests.untouched:  # its columns, no object made
            for name, (dtype, _) in self.COLUMNS.items():
                self.columns[name] = getattr(requests, name).astype(dtype)
                self.others[name] = {}
            self.slo = requests.slo
            return
        for name, (dtype, kind) in self.COLUMNS.items():
            values = list(map(attrgetter(name), requests))
            self.columns[name] = np.fromiter(values, dtype, len(values))
            self.others[name] = {row: value for row, value in enumerate(values) if type(value) is not kind}
        self.slo = list(map(attrgetter("slo"), requests))  # shared SLO objects: a reference a row

    def fields(self, rows: SequenceOf[int]) -> dict[str, Iterable]:
        """``REQUEST_FIELDS`` of ``rows``, each value as the request gave it."""
        index = np.asarray(rows, dtype=np.int64)
        values: dict[str, Iterable] = {}
        for name, column in self.columns.items():
            values[name] = chosen = column[index].tolist()
            others = self.others[name]
            if others:
                for position, row in enumerate(rows):
                    if row in others:
                        chosen[position] = others[row]
        values["slo"] = map(self.slo.__getitem__, rows)
        return values


def request_fields(requests: SequenceOf[Request] | RequestColumns, rows: SequenceOf[int]) -> dict[str, Iterable]:
    """``REQUEST_FIELDS`` of the requests of engine ``rows``, from ``Request`` objects or ``RequestColumns``."""
    if isinstance(requests, RequestColumns):
        return requests.fields(rows)
    ended = list(map(requests.__getitem__, rows))
    return {name: map(attrgetter(name), ended) for name in REQUEST_FIELDS}


def engine_outcomes(engine: _core.Engine, requests: SequenceOf[Request] | RequestColumns, curves: bool, first: int,
                    ) -> list[RequestOutcome]:
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


def engine_outcome_columns(engine: _core.Engine, row_slo_targets: np.ndarray, first: int = 0) -> OutcomeColumns:
    """The engine's outcomes from the ``first``-th on as ``OutcomeColumns``, read from its
    columns without a ``RequestOutcome`` object: the columns ``OutcomeColumns.from_outcomes``
    reads from ``engine_outcomes``' objects, value for value. ``row_slo_targets`` holds each engine
    row's SLO targets (``metrics.columns.slo_targets`` of its request's). For an engine whose every
    row is a submitted request (no cascade forwards one)."""
    raw = engine.outcome_columns(first)
    reasons = raw["reason"]
    rejected_reason = np.empty(reasons.size, dtype=object)
    rejected_reason[:] = [REJECT_REASONS[code] for code in reasons.tolist()]
    slo = row_slo_targets[raw["row"]]
    integers = ("request_id", "tier", "instance_id", "prompt_tokens", "output_tokens", "reasoning_tokens",
                "num_preemptions", "num_migrations")
    times = ("arrival_s", "first_scheduled_s", "first_token_s", "first_answer_token_s", "finish_s", "max_tbt_s",
             "preempted_s", "quality")
    return OutcomeColumns(
        **{name: raw[name] for name in times}, **{name: raw[name].astype(np.int64) for name in integers},
        slo_ttft_s=slo[:, 0], slo_tbt_s=slo[:, 1], slo_ttfat_s=slo[:, 2], slo_e2e_s=slo[:, 3],
        completed=reasons == 0, rejected_reason=rejected_reason,
    )


def build_outcomes(table: _core.OutcomeTable, requests: SequenceOf[Request] | RequestColumns, curves: bool,
                   ) -> list[RequestOutcome]:
    request_field = request_fields(requests, table.rows)
    rows = table.requests
    token_curves = map(tuple, rows.token_curve) if curves else repeat(())
    first_token_s = rows.first_token_s
    first_answer_token_s = list(map(_same_float, first_token_s, rows.first_answer_token_s))
    return list(map(
        RequestOutcome, request_field["request_id"], request_field["tier"], rows.instance_id,
        request_field["arrival_s"], request_field["prompt_tokens"], rows.output_tokens, rows.reasoning_tokens,
        rows.first_scheduled_s, first_token_s, first_answer_token_s, _shared_nan(rows.reasoning_end_s),
        table.finish_s, rows.max_tbt_s, rows.preempted_s, rows.num_preemptions, rows.num_migrations,
        token_curves, request_field["slo"], map(REJECT_REASONS.__getitem__, table.reasons), _shared_nan(table.quality),
    ))


def _shared_nan(values: list[float]) -> list[float]:
    """``values`` with every NaN the one ``math.nan`` object, as a ``Sequence``'s unset times
    are (equal values; an outcome keeps about 24 bytes less per NaN)."""
    return [math.nan if value != value else value for value in values]


def _same_float(first: float, other: float) -> float:
    """``first`` where ``other`` equals it (one object for both fields, as ``Sequence`` sets the
    first answer token's time to the first token's without reasoning); NaN stays ``math.nan``."""
    if other == first:
        return first
    return math.nan if other != other else other
