"""Readable fixed-width tables and JSON-ready dicts of metric summaries.

Flat names: a ``LatencyStats`` field ``ttft`` becomes ``ttft_mean_s``, ``ttft_p50_s``, ...,
``ttft_p99_s``; in tables a count dict such as ``rejected_by_reason`` becomes one row per
entry, ``rejected_by_reason[kv_oom]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields

from simulator.metrics.breakdown import PhaseSummary
from simulator.metrics.stats import LatencyStats
from simulator.metrics.summary import MetricsSummary

Summary = MetricsSummary | PhaseSummary
Cell = int | float | dict[str, int]


def flat_metrics(summary: Summary) -> dict[str, Cell]:
    """The summary's values under flat names, in field order (count dicts kept whole)."""
    if not isinstance(summary, MetricsSummary | PhaseSummary):
        raise ValueError(f"expected a MetricsSummary or PhaseSummary, got {type(summary).__name__}")
    flat: dict[str, Cell] = {}
    for field in fields(summary):
        value = getattr(summary, field.name)
        if isinstance(value, LatencyStats):
            flat |= {f"{field.name}_{stat.name}": getattr(value, stat.name) for stat in fields(value)}
        else:
            flat[field.name] = value
    return flat


def to_json_dict(summary: Summary | Mapping[object, Summary]) -> dict:
    """Flat JSON-ready dict of a summary (NaN -> None), or ``{str(key): ...}`` for a dict of summaries."""
    if isinstance(summary, Mapping):
        return {str(key): to_json_dict(value) for key, value in summary.items()}
    return {
        name: None if isinstance(value, float) and math.isnan(value) else value
        for name, value in flat_metrics(summary).items()
    }


def format_table(summary: Summary | Mapping[object, Summary], extra: Mapping[str, int | float] | None = None) -> str:
    """Fixed-width text table: one row per metric, one column per summary (``value`` for a single
    one); ``extra`` rows (a single summary's run-level counts) follow the summary's."""
    columns = dict(summary) if isinstance(summary, Mapping) else {"value": summary}
    if extra and len(columns) != 1:
        raise ValueError("extra rows go with a single summary")
    rows: dict[str, dict[str, str]] = {}
    for column, column_summary in columns.items():
        flat = {**flat_metrics(column_summary), **(extra or {})}
        for name, value in flat.items():
            cells = {f"{name}[{key}]": n for key, n in value.items()} if isinstance(value, dict) else {name: value}
            for row, cell in cells.items():
                rows.setdefault(row, {})[str(column)] = _format_cell(cell)
    headers = ["metric", *map(str, columns)]
    body = [[row, *(cells.get(header, "") for header in headers[1:])] for row, cells in rows.items()]
    widths = [max(len(line[i]) for line in [headers, *body]) for i in range(len(headers))]
    lines = [_format_line(headers, widths), "-+-".join("-" * width for width in widths)]
    lines += [_format_line(line, widths) for line in body]
    return "\n".join(lines)


def _format_line(cells: list[str], widths: list[int]) -> str:
    first, *rest = cells
    return " | ".join([first.ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(rest, widths[1:]))])


def _format_cell(value: int | float) -> str:
    """Integers as they are, NaN as ``-``, floats from 1000 up without decimals, others to 4 significant digits."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.4g}"
