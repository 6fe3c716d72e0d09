"""The boards of a committed leaderboard page that a partial update leaves as they are.

``python -m agents.leaderboard SWEEP --out docs/leaderboard.md --update`` rebuilds the boards its
sweeps hold and keeps every other board of the page at ``--out``: its markdown section word for
word, its CSV rows, and its bars in the figure (drawn again from the CSV's IQM and interval). The
page then says which boards were kept and from which sweeps they came."""

from __future__ import annotations

import csv
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

SECTION_HEADING = re.compile(r"^## (?P<board>.+): (?P<metric>\S+) \((?:higher|lower) is better\)$")
SOURCES_LINE = re.compile(r"^(?:From|Kept from the previous page .*, from) the sweep\(s\) (.+)\.$")


@dataclass(frozen=True)
class KeptBoards:
    """Boards kept from an earlier page: ``sections`` (board -> its markdown, heading first, ending
    in a blank line),
    ``rows`` (their CSV rows, ranked as written) and ``sources`` (every sweep the page names: its
    own and those of the boards it had kept, so a page updated twice still names them all)."""

    sections: dict[str, str]
    rows: list[dict[str, str]]
    sources: list[str]


def read_kept(page: Path, replaced: Collection[str]) -> KeptBoards:
    """The boards of ``page`` (and its ``.csv``) that ``replaced`` does not name; a page or CSV
    that is missing, or a board whose CSV rows are missing, is refused naming the file."""
    csv_path = page.with_suffix(".csv")
    for path in (page, csv_path):
        if not path.is_file():
            raise ValueError(f"--update: {path} does not exist; write the whole board first (without --update)")
    sections: dict[str, list[str]] = {}
    sources: list[str] = []
    current: list[str] | None = None
    for line in page.read_text().splitlines():
        if (match := SOURCES_LINE.match(line)) and not sections:
            sources += [name for name in re.findall(r"`([^`]+)`", match.group(1)) if name not in sources]
        heading = SECTION_HEADING.match(line)
        if heading:
            current = None if heading["board"] in replaced else sections.setdefault(heading["board"], [])
        elif line.startswith("## "):
            raise ValueError(f"--update: {page}: section heading {line!r} is not a board's (## BOARD: METRIC (... is better))")
        if current is not None:
            current.append(line)
    with open(csv_path, newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["board"] in sections]
    missing = sorted(set(sections) - {row["board"] for row in rows})
    if missing:
        raise ValueError(f"--update: {csv_path} has no rows for board {missing[0]!r} of {page}")
    return KeptBoards({board: "\n".join(lines).rstrip() + "\n\n" for board, lines in sections.items()}, rows, sources)
