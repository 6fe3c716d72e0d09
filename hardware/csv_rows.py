"""Rows of a data CSV whose header and field counts are checked, for the catalog and measurement readers."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path


def checked_rows(csv_path: Path, columns: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """Yield ``(where, row)`` for each row of ``csv_path``, ``where`` naming its file and line.

    Raises ``ValueError`` when the header is not exactly ``columns`` or a row has another number of
    fields."""
    with open(csv_path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != columns:
            raise ValueError(f"{csv_path}: columns {reader.fieldnames} differ from expected {list(columns)}")
        for row in reader:
            where = f"{csv_path} line {reader.line_num}"
            if None in row or any(value is None for value in row.values()):
                raise ValueError(f"{where}: expected {len(columns)} fields, got a different count")
            yield where, row
