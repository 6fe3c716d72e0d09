"""A model cascade (``simulator.routers.cascade.CascadeRouter``, Cascadia §3.3) run by the compiled
engine (``core/src/cascade.cpp``): routing of arrivals and forwarded requests, the judge's event,
acceptance with its quality and re-dispatch to the next stage, with no Python between the
engine's events.

``CompiledCluster`` runs it when its router and completion hook are exactly a ``CascadeRouter``'s
bound ``route`` and ``on_complete`` (``**router.cluster_options()``); a subclass, or any other
hook, runs in Python between the engine's events. ``CascadeSync`` keeps the engine's copy equal
to the router: before the engine runs again it pushes what changed since (thresholds, entry
stage, judge latency, a new judge-signal mapping). The requests' ``quality_by_model`` and the
judge signals are read when the engine first runs, again whenever ``set_judge_signals`` gives
another mapping, and for each request added with ``add_arrival``; changing either in place
after that is not seen (give ``set_judge_signals`` a new mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as SequenceOf
from typing import Any

from servegym_core import _core

from simulator.request import Request
from simulator.routers.cascade import CascadeRouter

_UNSET = object()


def compiled_cascade(router: Any, completion_hook: Any) -> CascadeRouter | None:
    """The ``CascadeRouter`` whose bound ``route`` and ``on_complete`` ``router`` and
    ``completion_hook`` are, or None (anything else: a subclass, another hook)."""
    owner = getattr(router, "__self__", None)
    if type(owner) is not CascadeRouter or getattr(router, "__func__", None) is not CascadeRouter.route:
        return None
    if (getattr(completion_hook, "__self__", None) is not owner
            or getattr(completion_hook, "__func__", None) is not CascadeRouter.on_complete):
        return None
    return owner


class CascadeSync:
    """The engine's cascade, kept equal to ``router`` (module docstring)."""

    def __init__(self, router: CascadeRouter, engine: _core.Engine, model_names: SequenceOf[str]) -> None:
        self.router = router
        self._engine = engine
        engine.set_cascade([model_names.index(model) for model in router.models], float(router.judge_latency_s))
        self._latency_s = router.judge_latency_s
        self._thresholds: tuple[float, ...] | None = None
        self._entry_stage: int | None = None
        self._signals: Any = _UNSET

    def push(self, rows: SequenceOf[Request]) -> None:
        """Give the engine what changed on the router since the last push; ``rows``: the request
        of each engine row (the first push reads every row's scores and signals)."""
        router, engine = self.router, self._engine
        if router.thresholds != self._thresholds:
            engine.set_cascade_thresholds(list(router.thresholds))
            self._thresholds = router.thresholds
        if router.entry_stage != self._entry_stage:
            engine.set_cascade_entry_stage(router.entry_stage)
            self._entry_stage = router.entry_stage
        if router.judge_latency_s != self._latency_s:
            raise ValueError(f"judge_latency_s changed from {self._latency_s} to {router.judge_latency_s} after the "
                             "workload was submitted; the compiled engine fixes it at submit")
        if router.judge_signals is not self._signals:
            self._push_rows(0, rows)
            self._signals = router.judge_signals

    def add_row(self, row: int, request: Request) -> None:
        """A request added after the first push (``add_arrival``): its scores and signals."""
        if self._signals is not _UNSET:
            self._push_rows(row, [request])

    def _push_rows(self, first: int, requests: SequenceOf[Request]) -> None:
        models = self.router.models
        rows = list(range(first, first + len(requests)))
        self._engine.set_cascade_scores(rows, *_values([r.quality_by_model for r in requests], models))
        signals = self.router.judge_signals
        if signals is None:
            self._engine.clear_cascade_signals()
        else:
            self._engine.set_cascade_signals(rows, *_values([signals.get(r.request_id) for r in requests], models))


def _values(tables: list[Mapping[str, float] | None], models: tuple[str, ...]) -> tuple[list[float], list[int]]:
    """Rows x stages of values (0.0 where absent) and presence flags."""
    values: list[float] = []
    present: list[int] = []
    for table in tables:
        for model in models:
            if table is not None and model in table:
                values.append(float(table[model]))
                present.append(1)
            else:
                values.append(0.0)
                present.append(0)
    return values, present
