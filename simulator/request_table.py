"""A generated workload as columns: ``RequestTable``, the ``Request`` objects made only when read."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from simulator.request import SLO, Request

TABLE_COLUMNS = ("request_id", "arrival_s", "prompt_tokens", "output_tokens", "reasoning_tokens", "tier")
"""The columns of a ``RequestTable``, in ``Request``'s field order."""


class RequestTable(Sequence[Request]):
    """Requests as numpy columns (``TABLE_COLUMNS``) with one ``SLO`` per tier; each ``Request``
    object is made the first time it is read, then kept (the same object at every later read, and
    what a caller changes in it stays). The compiled engine takes the columns whole
    (``simulator.compiled.CompiledCluster.submit``) while no object was made yet: a native vector
    env's episode, whose engine runs without Python, never makes one (about 0.35 ms per 1,000
    requests). The requests have no model, cascade fields, block hashes or session.

    Compares equal to any sequence of equal requests; a pickle holds the columns."""

    __slots__ = (*TABLE_COLUMNS, "slo_by_tier", "_objects", "_made")

    def __init__(self, request_id: np.ndarray, arrival_s: np.ndarray, prompt_tokens: np.ndarray,
                 output_tokens: np.ndarray, reasoning_tokens: np.ndarray, tier: np.ndarray,
                 slo_by_tier: Mapping[int, SLO]) -> None:
        columns = (request_id, arrival_s, prompt_tokens, output_tokens, reasoning_tokens, tier)
        sizes = {np.shape(column) for column in columns}
        if len(sizes) != 1 or len(next(iter(sizes))) != 1:
            raise ValueError(f"RequestTable columns must be 1-D of one length, got shapes {[np.shape(c) for c in columns]}")
        for name, column in zip(TABLE_COLUMNS, columns):
            kind = "f" if name == "arrival_s" else "i"
            if np.asarray(column).dtype.kind != kind:
                raise ValueError(f"RequestTable column {name} must be {'float' if kind == 'f' else 'integer'}, "
                                 f"got {np.asarray(column).dtype}")
            setattr(self, name, np.asarray(column))
        missing = sorted(set(np.unique(self.tier).tolist()) - set(slo_by_tier))
        if missing:
            raise ValueError(f"RequestTable: no SLO for tier(s) {missing}")
        self.slo_by_tier = dict(slo_by_tier)
        self._objects: list[Request | None] = [None] * len(self.request_id)
        self._made = 0

    @property
    def untouched(self) -> bool:
        """Whether no ``Request`` object was made yet (so none was changed: the columns are the requests)."""
        return self._made == 0

    @property
    def slo(self) -> list[SLO]:
        """Each request's SLO (its tier's), in order."""
        return list(map(self.slo_by_tier.__getitem__, self.tier.tolist()))

    def __len__(self) -> int:
        return len(self._objects)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        request = self._objects[index]
        if request is None:
            row = range(len(self))[index]
            tier = int(self.tier[row])
            request = self._objects[row] = Request(
                int(self.request_id[row]), float(self.arrival_s[row]), int(self.prompt_tokens[row]),
                int(self.output_tokens[row]), int(self.reasoning_tokens[row]), tier, self.slo_by_tier[tier])
            self._made += 1
        return request

    def __iter__(self) -> Iterator[Request]:
        if self._made < len(self):
            made = map(Request, self.request_id.tolist(), self.arrival_s.tolist(), self.prompt_tokens.tolist(),
                       self.output_tokens.tolist(), self.reasoning_tokens.tolist(), self.tier.tolist(), self.slo)
            self._objects = [old if old is not None else new for old, new in zip(self._objects, made)]
            self._made = len(self)
        return iter(self._objects)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        if not self.untouched:  # made objects may have been changed: they are the requests now
            return list, (list(self),)
        return RequestTable, (*(getattr(self, name) for name in TABLE_COLUMNS), self.slo_by_tier)

    def __repr__(self) -> str:
        return f"RequestTable({len(self)} requests, {self._made} made)"


def arrival_times_s(requests: Sequence[Request]) -> list[float]:
    """Every request's ``arrival_s``, in order (a ``RequestTable``'s from its column, making no object)."""
    if isinstance(requests, RequestTable) and requests.untouched:
        return requests.arrival_s.tolist()
    return [request.arrival_s for request in requests]
