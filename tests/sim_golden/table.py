"""Outcome tables on disk and their exact comparison.

A case's file ``data/<case>.json`` holds its counters and one row per request, in the order the
cluster recorded the outcomes, with every ``RequestOutcome`` field in ``FIELDS`` order. Floats are
JSON numbers written by ``repr`` (they read back bit for bit); NaN and the infinities are the
strings ``"nan"``, ``"inf"``, ``"-inf"``; an ``SLO`` is its four targets (``null``: none); a token
curve is a list of ``[time_s, tokens]``. Two values are equal when their JSON texts are, which
for floats is equality of the bit pattern (``-0.0`` differs from ``0.0``, NaN equals NaN).
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from simulator.outcome import RequestOutcome
from simulator.request import SLO
from tests.sim_golden.run import Run

DATA_DIR = Path(__file__).parent / "data"
FIELDS = tuple(f.name for f in fields(RequestOutcome))
SLO_FIELDS = tuple(f.name for f in fields(SLO))
MAX_REPORTED = 10
"""Mismatches a comparison lists before it only counts the rest."""


def encode(value: Any) -> Any:
    """``value`` as plain JSON data (module docstring)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, SLO):
        return [encode(getattr(value, name)) for name in SLO_FIELDS]
    if isinstance(value, (tuple, list)):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cannot encode {value!r} of type {type(value).__name__}")


def text(value: Any) -> str:
    """The JSON text of encoded ``value``, what comparisons compare."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def table(case: str, feature: str, run: Run) -> dict[str, Any]:
    """The file content of ``run`` of ``case``."""
    return {
        "case": case,
        "feature": feature,
        "fields": list(FIELDS),
        "counters": encode(run.counters),
        "outcomes": [[encode(getattr(outcome, name)) for name in FIELDS] for outcome in run.outcomes],
    }


def write(path: Path, content: dict[str, Any]) -> None:
    """Write a table with one outcome row per line (readable diffs)."""
    head = {key: value for key, value in content.items() if key != "outcomes"}
    lines = [text(head)[:-1] + ',"outcomes":[']
    rows = [text(row) for row in content["outcomes"]]
    lines += [row + ("," if i < len(rows) - 1 else "") for i, row in enumerate(rows)]
    lines.append("]}")
    path.write_text("\n".join(lines) + "\n")


def read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def mismatches(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Every difference between two tables of one case, each naming the request id (or the
    counter), the field and both values; empty when they are equal."""
    case = expected["case"]
    if got["fields"] != expected["fields"]:
        return [f"{case}: outcome fields changed: recorded {expected['fields']}, now {got['fields']}"]
    found: list[str] = []
    for name in sorted(set(expected["counters"]) | set(got["counters"])):
        before, now = expected["counters"].get(name, "<absent>"), got["counters"].get(name, "<absent>")
        if text(before) != text(now):
            found.append(f"{case}: counter {name}: recorded {text(before)}, now {text(now)}")
    id_index = FIELDS.index("request_id")
    recorded = {row[id_index]: row for row in expected["outcomes"]}
    current = {row[id_index]: row for row in got["outcomes"]}
    for request_id in sorted(set(recorded) ^ set(current)):
        where = "recorded only" if request_id in recorded else "new, not recorded"
        found.append(f"{case}: request {request_id}: {where}")
    for request_id in sorted(set(recorded) & set(current)):
        for name, before, now in zip(FIELDS, recorded[request_id], current[request_id]):
            if text(before) != text(now):
                found.append(f"{case}: request {request_id}: {name}: {_difference(before, now)}")
    order = [row[id_index] for row in expected["outcomes"]], [row[id_index] for row in got["outcomes"]]
    if not found and order[0] != order[1]:
        position = next(i for i, (a, b) in enumerate(zip(*order)) if a != b)
        found.append(f"{case}: outcomes recorded in another order: position {position} holds request "
                     f"{order[1][position]}, recorded {order[0][position]}")
    return found


def _difference(before: Any, now: Any) -> str:
    """Both values; for a token curve, its first point that differs and both lengths."""
    if not (isinstance(before, list) and isinstance(now, list) and before and isinstance(before[0], list)):
        return f"recorded {text(before)}, now {text(now)}"
    index = next((i for i, (a, b) in enumerate(zip(before, now)) if text(a) != text(b)), min(len(before), len(now)))
    points = [text(curve[index]) if index < len(curve) else "none" for curve in (before, now)]
    return (f"first differs at point {index}: recorded {points[0]}, now {points[1]} "
            f"({len(before)} points recorded, {len(now)} now)")


def summary(found: list[str]) -> str:
    """The first ``MAX_REPORTED`` mismatches, then how many more there are."""
    shown = found[:MAX_REPORTED]
    more = len(found) - len(shown)
    return "\n".join(shown + ([f"... and {more} more mismatches"] if more else []))
