"""What Python sees of a compiled engine between its events (``simulator.compiled``): the
observation arrays as read-only numpy views of the engine's own tables, and the handle of a
request waiting for a decision.
"""

from __future__ import annotations

import numpy as np
from servegym_core import _core

from simulator.request import Request


class CoreArrays:
    """``simulator.instance_arrays.InstanceArrays``' read side over a compiled engine's tables:
    ``table`` (a row per instance, the same columns), ``tier_table``, ``tiers``, ``rows`` and
    ``layout_version``. The views are the engine's memory (no copy); they are fetched again only
    when a table grows (a new tier)."""

    __slots__ = ("_engine", "_table", "_tier_table", "_tiers")

    def __init__(self, engine: _core.Engine) -> None:
        self._engine = engine
        self._table = engine.arrays_table
        self._tiers = engine.arrays_tiers
        self._tier_table = engine.arrays_tier_table

    @property
    def table(self) -> np.ndarray:
        return self._table

    @property
    def tier_table(self) -> np.ndarray:
        tiers = self._engine.arrays_tiers
        if tiers != self._tiers:
            self._tiers, self._tier_table = tiers, self._engine.arrays_tier_table
        return self._tier_table

    @property
    def tiers(self) -> int:
        return self._engine.arrays_tiers

    @property
    def rows(self) -> int:
        return len(self._table)

    @property
    def layout_version(self) -> int:
        return self._engine.arrays_layout_version


class CompiledSequence:
    """A request inside a compiled engine, as a decision names it: its ``request`` and its row
    in the engine's request table."""

    __slots__ = ("row", "request")

    def __init__(self, row: int, request: Request) -> None:
        self.row = row
        self.request = request

    @property
    def request_id(self) -> int:
        return self.request.request_id

    @property
    def tier(self) -> int:
        return self.request.tier

    def __repr__(self) -> str:
        return f"CompiledSequence(row={self.row}, request_id={self.request_id})"
