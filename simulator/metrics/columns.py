"""Outcome fields as NumPy columns, built once so every aggregate is a vectorised pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import chain
from operator import attrgetter

import numpy as np

from simulator.outcome import RequestOutcome

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

    def take(self, indices: np.ndarray) -> OutcomeColumns:
        """The rows at ``indices``, as new columns."""
        return OutcomeColumns(**{field.name: getattr(self, field.name)[indices] for field in fields(self)})


def _field_matrix(outcomes: Sequence[RequestOutcome], names: tuple[str, ...], dtype: type) -> np.ndarray:
    """``outcomes x names`` array of plain numeric fields, read in one pass."""
    values = chain.from_iterable(map(attrgetter(*names), outcomes))
    return np.fromiter(values, dtype, count=len(outcomes) * len(names)).reshape(len(outcomes), len(names))


def _slo_targets(outcomes: Sequence[RequestOutcome]) -> np.ndarray:
    """``outcomes x 4`` SLO targets, NaN where unset; requests usually share a few ``SLO`` objects."""
    row_of_slo: dict[int, int] = {}
    slos = []
    rows = np.empty(len(outcomes), dtype=np.int64)
    for index, outcome in enumerate(outcomes):
        row = row_of_slo.get(id(outcome.slo))
        if row is None:
            row = row_of_slo[id(outcome.slo)] = len(slos)
            slos.append(outcome.slo)
        rows[index] = row
    targets = np.array([attrgetter(*_SLO_FIELDS)(slo) for slo in slos], dtype=float).reshape(len(slos), 4)
    return targets[rows]
