"""Outcome fields as NumPy columns, built once so every aggregate is a vectorised pass."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from simulator.outcome import RequestOutcome
from simulator.request import SLO

_FLOAT_FIELDS = (
    "arrival_s", "first_scheduled_s", "first_token_s", "first_answer_token_s", "finish_s",
    "max_tbt_s", "preempted_s", "quality",
)
_INT_FIELDS = (
    "request_id", "tier", "instance_id", "prompt_tokens", "output_tokens", "reasoning_tokens",
    "num_preemptions", "num_migrations",
)
_SLO_FIELDS = ("ttft_s", "tbt_s", "ttfat_s", "e2e_s")


@dataclass(frozen=True, slots=True)
class OutcomeColumns:
    """One array per outcome field (same order as the outcomes); SLO targets are NaN where unset."""

    arrival_s: np.ndarray
    first_scheduled_s: np.ndarray
    first_token_s: np.ndarray
    first_answer_token_s: np.ndarray
    finish_s: np.ndarray
    max_tbt_s: np.ndarray
    preempted_s: np.ndarray
    quality: np.ndarray
    slo_ttft_s: np.ndarray
    slo_tbt_s: np.ndarray
    slo_ttfat_s: np.ndarray
    slo_e2e_s: np.ndarray
    request_id: np.ndarray
    tier: np.ndarray
    instance_id: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    reasoning_tokens: np.ndarray
    num_preemptions: np.ndarray
    num_migrations: np.ndarray
    completed: np.ndarray
    rejected_reason: np.ndarray

    @classmethod
    def from_outcomes(cls, outcomes: Sequence[RequestOutcome]) -> OutcomeColumns:
        """Read every outcome once; ``ValueError`` if an element is not a ``RequestOutcome``."""
        for index, outcome in enumerate(outcomes):
            if not isinstance(outcome, RequestOutcome):
                raise ValueError(f"outcomes[{index}] is {type(outcome).__name__}, not RequestOutcome")
        count = len(outcomes)
        floats = _field_matrix(outcomes, _FLOAT_FIELDS, float)
        ints = _field_matrix(outcomes, _INT_FIELDS, np.int64)
        reasons = np.empty(count, dtype=object)
        reasons[:] = [outcome.rejected_reason for outcome in outcomes]
        columns = {name: floats[:, i] for i, name in enumerate(_FLOAT_FIELDS)}
        columns |= {name: ints[:, i] for i, name in enumerate(_INT_FIELDS)}
        columns |= {f"slo_{name}": column for name, column in zip(_SLO_FIELDS, _slo_targets(outcomes).T)}
        completed = np.array([reason is None for reason in reasons], dtype=bool)
        return cls(**columns, completed=completed, rejected_reason=reasons)

    def __len__(self) -> int:
        return int(self.request_id.size)

    def take(self, indices: np.ndarray) -> OutcomeColumns:
        """The rows at ``indices``, as new columns."""
        return OutcomeColumns(**{field.name: getattr(self, field.name)[indices] for field in fields(self)})


def _field_matrix(outcomes: Sequence[RequestOutcome], names: tuple[str, ...], dtype: type) -> np.ndarray:
    """``outcomes x names`` array of plain numeric fields, read in one pass."""
    values = chain.from_iterable(map(attrgetter(*names), outcomes))
    return np.fromiter(values, dtype, count=len(outcomes) * len(names)).reshape(len(outcomes), len(names))


def _slo_targets(outcomes: Sequence[RequestOutcome]) -> np.ndarray:
    """``outcomes x 4`` SLO targets, NaN where unset."""
    return slo_targets(list(map(attrgetter("slo"), outcomes)))


def slo_targets(slos: Sequence[SLO]) -> np.ndarray:
    """``len(slos) x 4`` targets (``ttft_s``, ``tbt_s``, ``ttfat_s``, ``e2e_s``), NaN where unset;
    requests usually share a few ``SLO`` objects, each read once."""
    ids = list(map(id, slos))
    unique = dict(zip(ids, slos))  # by identity, in order of first appearance
    row_of_id = {key: row for row, key in enumerate(unique)}
    rows = np.fromiter(map(row_of_id.__getitem__, ids), np.int64, len(ids))
    targets = np.array([attrgetter(*_SLO_FIELDS)(slo) for slo in unique.values()], dtype=float).reshape(len(unique), 4)
    return targets[rows]


class LazyOutcomes(Sequence[RequestOutcome]):
    """An ended run's request outcomes: their ``OutcomeColumns`` now, the ``RequestOutcome``
    objects only when first read (``build`` makes them, in the columns' order). Summaries read
    the columns (``outcome_columns``); a training loop that logs only the summaries never builds
    the objects (about 1 ms per 1,000 requests). Compares equal to a sequence of the same
    outcomes; a deep copy shares it (nothing writes an ended run's outcomes again); a pickle
    holds the built objects."""

    __slots__ = ("columns", "_build", "_outcomes")

    def __init__(self, columns: OutcomeColumns, build: Callable[[], list[RequestOutcome]]) -> None:
        self.columns = columns
        self._build: Callable[[], list[RequestOutcome]] | None = build
        self._outcomes: list[RequestOutcome] | None = None

    def _objects(self) -> list[RequestOutcome]:
        if self._outcomes is None:
            assert self._build is not None
            outcomes = self._build()
            if len(outcomes) != len(self.columns):
                raise RuntimeError(f"{len(outcomes)} outcomes built for {len(self.columns)} rows of columns")
            self._outcomes, self._build = outcomes, None
        return self._outcomes

    def __len__(self) -> int:
        return len(self.columns)

    def __getitem__(self, index: Any) -> Any:
        return self._objects()[index]

    def __iter__(self) -> Iterator[RequestOutcome]:
        return iter(self._objects())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: dict[int, Any]) -> LazyOutcomes:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return _built_outcomes, (self.columns, self._objects())

    def __repr__(self) -> str:
        return f"LazyOutcomes({len(self)} outcomes, {'built' if self._outcomes is not None else 'not built'})"

    def take(self, rows: np.ndarray) -> LazyOutcomes:
        """The outcomes at ``rows`` (indices), as ``LazyOutcomes`` of their own."""
        return LazyOutcomes(self.columns.take(rows), lambda: [self[row] for row in rows.tolist()])


def _built_outcomes(columns: OutcomeColumns, outcomes: list[RequestOutcome]) -> LazyOutcomes:
    """``LazyOutcomes`` whose objects are already built (unpickling)."""
    lazy = LazyOutcomes(columns, lambda: outcomes)
    lazy._objects()
    return lazy


def outcome_columns(outcomes: Sequence[RequestOutcome]) -> OutcomeColumns:
    """The columns of ``outcomes``: those ``LazyOutcomes`` carry, else read from the objects
    (``OutcomeColumns.from_outcomes``)."""
    if isinstance(outcomes, LazyOutcomes):
        return outcomes.columns
    return OutcomeColumns.from_outcomes(outcomes)
