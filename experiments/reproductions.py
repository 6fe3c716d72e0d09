"""Run every paper reproduction and write one page of headline claims, paper vs ours.

Each script in ``SCRIPTS`` is an ``experiments`` module with ``main(argv)`` (writing
``results.json`` under ``--out``) and ``headlines(results) -> list[Headline]``. This runner calls
each ``main`` with ``--out <out>/<script>`` (and ``--quick`` when asked), turns its results into
``Headline`` rows, checks that every row that does not reproduce names its cause
(``Headline.check``) and writes the page: ``docs/reproductions.md`` at full size, or
``<out>/reproductions.md`` with ``--quick``, whose first line says the numbers are a smoke run.

    python -m experiments.reproductions [--quick] [--out results/reproductions] [--only NAME,...] [--reuse]

``--reuse`` rebuilds the page from the ``results.json`` files a previous run left under ``--out``
(after a change to a script's ``headlines()``, or when the scripts were run one by one).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
import time
from pathlib import Path
from types import ModuleType

from experiments.headlines import MAGNITUDE_FACTOR, Headline

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = (
    "pascal_reproduction",
    "multitier_reproduction",
    "cauchy_reproduction",
    "cauchy_autoscaling",
    "cascadia_reproduction",
    "cascadia_fluctuating",
    "cascadeserve_reproduction",
)
PAGE = REPO_ROOT / "docs" / "reproductions.md"
SMOKE_WARNING = ("**Smoke run (`--quick`): these numbers come from tiny episodes and are not comparable to the "
                 "papers.**")


def load_script(name: str) -> ModuleType:
    """The reproduction module ``experiments.<name>``; it must define ``main`` and ``headlines``."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown reproduction script {name!r}; known: {list(SCRIPTS)}")
    module = importlib.import_module(f"experiments.{name}")
    for function in ("main", "headlines"):
        if not callable(getattr(module, function, None)):
            raise ValueError(f"experiments.{name} has no {function}() function; every reproduction script needs "
                             f"main(argv) and headlines(results) -> list[Headline]")
    return module


def run_script(name: str, out: Path, quick: bool, reuse: bool = False) -> tuple[list[Headline], float | None]:
    """Run one script (or, with ``reuse``, read the ``results.json`` an earlier run left under
    ``out``), and return its checked rows and wall seconds (None when reused)."""
    module = load_script(name)
    folder = out / name
    wall_s = None
    if not reuse:
        argv = ["--out", str(folder)] + (["--quick"] if quick else [])
        started = time.perf_counter()
        status = module.main(argv)
        wall_s = time.perf_counter() - started
        if status not in (0, None):
            raise RuntimeError(f"experiments.{name} main({argv}) returned {status}")
    path = folder / "results.json"
    if not path.is_file():
        raise ValueError(f"no {path} to reuse: run experiments.{name} with --out {folder} first")
    results = json.loads(path.read_text())
    rows = module.headlines(results)
    if not rows:
        raise ValueError(f"experiments.{name}.headlines() returned no rows")
    for row in rows:
        if not isinstance(row, Headline):
            raise ValueError(f"experiments.{name}.headlines() returned {type(row).__name__}, not Headline")
        row.check()
    return rows, wall_s


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def page_lines(rows: list[Headline], walls_s: dict[str, float | None], quick: bool, today: datetime.date) -> list[str]:
    """The page: warning (quick only), summary, one table row per headline, run times."""
    reproduced = sum(row.reproduced for row in rows)
    direction = sum(row.direction_ok for row in rows)
    lines = [SMOKE_WARNING, ""] if quick else []
    lines += [
        "# Paper reproductions: headline claims, paper vs ours", "",
        f"{reproduced} of {len(rows)} rows reproduce in direction with magnitude within {MAGNITUDE_FACTOR:g}x "
        f"({direction} of {len(rows)} in direction). Generated {today.isoformat()} by "
        f"`python -m experiments.reproductions{' --quick' if quick else ''}"
        f"{' --reuse' if any(wall is None for wall in walls_s.values()) else ''}`"
        f"{' (from the results.json of earlier full runs)' if any(wall is None for wall in walls_s.values()) else ''}.",
        "",
        "Ratio = our effect / the paper's, both measured from the no-effect value (0 for a change in percent, 1 "
        "for a speed-up). Direction ✓ when the ratio is positive; magnitude ✓ when it lies within "
        f"[1/{MAGNITUDE_FACTOR:g}, {MAGNITUDE_FACTOR:g}]. The paper setup row comes first; variants are labelled.", "",
        "| paper | where | metric | paper | ours | ratio | direction | magnitude | setup | cause (when not reproduced) "
        "| command |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ours = f"{row.ours:.3g}{row.unit}" if row.unit in ("%", "×") else f"{row.ours:.3g} {row.unit}"
        lines.append(
            f"| {_cell(row.paper)} | {_cell(row.where)} | {_cell(row.metric)} | {_cell(row.paper_text)} | {ours} | "
            f"{row.ratio:.2f} | {_mark(row.direction_ok)} | {_mark(row.magnitude_ok)} | {_cell(row.setup)} | "
            f"{'' if row.reproduced else _cell(row.cause)} | `{row.command}` |")
    walls = ", ".join(f"{name} {'(results.json of an earlier run)' if wall is None else f'{wall:.0f} s'}"
                      for name, wall in walls_s.items())
    lines += ["", f"Wall time per script: {walls}.", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every script's --quick size; the page goes to --out")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "reproductions")
    parser.add_argument("--only", type=str, default=None, help="comma-separated script names (default: all seven)")
    parser.add_argument("--reuse", action="store_true",
                        help="build the page from the results.json files an earlier run left under --out, running nothing")
    args = parser.parse_args(argv)
    names = list(SCRIPTS) if args.only is None else [n.strip() for n in args.only.split(",")]
    if not names or any(not n for n in names):
        raise ValueError(f"--only takes comma-separated script names, got {args.only!r}")
    for name in names:
        load_script(name)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[Headline] = []
    walls_s: dict[str, float | None] = {}
    for name in names:
        print(f"[reproductions] {name} ...", flush=True)
        script_rows, walls_s[name] = run_script(name, args.out, args.quick, args.reuse)
        rows += script_rows
        wall = "reused" if walls_s[name] is None else f"{walls_s[name]:.0f} s"
        print(f"[reproductions] {name}: {len(script_rows)} rows, {sum(r.reproduced for r in script_rows)} reproduce, "
              f"{wall}", flush=True)
    page = args.out / "reproductions.md" if args.quick else PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("\n".join(page_lines(rows, walls_s, args.quick, datetime.date.today())))
    print(f"[reproductions] wrote {page}: {sum(r.reproduced for r in rows)} of {len(rows)} rows reproduce")
    return 0


if __name__ == "__main__":
    sys.exit(main())
