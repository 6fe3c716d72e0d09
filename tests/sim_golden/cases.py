"""Every simulator golden case, by name (``README.md`` beside this file): the local-scheduler
matrix (``matrix``), the engine's other features (``features``) and the benchmark runs
(``speed``)."""

from __future__ import annotations

from tests.sim_golden.features import FEATURE_CASES
from tests.sim_golden.matrix import MATRIX_CASES
from tests.sim_golden.run import Case
from tests.sim_golden.speed import SPEED_CASES

CASES: list[Case] = [*MATRIX_CASES, *FEATURE_CASES, *SPEED_CASES]
CASES_BY_NAME: dict[str, Case] = {case.name: case for case in CASES}
if len(CASES_BY_NAME) != len(CASES):
    raise RuntimeError("two golden cases share a name")
