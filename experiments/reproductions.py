"""Run every paper reproduction and write one page of headline claims, paper vs ours.

Each script in ``SCRIPTS`` is an ``experiments`` module with ``main(argv)`` (writing
``results.json`` under ``--out``) and ``headlines(results) -> list[Headline]``. This runner calls
each ``main`` with ``--out <out>/<script>`` (and ``--quick`` when asked), turns its results into
``Headline`` rows, checks that every row that does not reproduce names its cause
(``Headline.check``) and writes the page: ``docs/reproductions.md`` at full size, or
``<out>/reproductions.md`` with ``--quick``, whose first line says the numbers are a smoke run.

    python -m experiments.reproductions [--quick] [--out results/reproductions] [--only NAME,...] [--reuse]
        [--workers N] [--address auto|HOST:PORT]

``--workers`` / ``--address`` (``simulator.fanout``) go to the scripts that fan out their
episodes (those with ``FANS_OUT = True``, whose ``experiments.harness.ExperimentParser`` takes the
flags); the others run as before. The runner starts one Ray for all of them (``shared_ray``).

``--reuse`` rebuilds the page from the ``results.json`` files a previous run left under ``--out``
(after a change to a script's ``headlines()``, or when the scripts were run one by one). A
full-size run with ``--only`` replaces just those scripts' rows in the committed page (rows are
matched by their command) and keeps the others, whose scripts the summary line names as kept.
"""

from __future__ import annotations

import datetime
import importlib
import json
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

from experiments.harness import REPO_ROOT, ExperimentParser
from experiments.headlines import MAGNITUDE_FACTOR, Headline
from simulator import fanout
from simulator.cli import check_writable_dir, command

SCRIPTS = (
    "pascal_reproduction",
    "multitier_reproduction",
    "cauchy_autoscaling",  # first: it holds the paper setup of Fig. 6 / 7, cauchy_reproduction their static variant
    "cauchy_reproduction",
    "cascadia_reproduction",
    "cascadia_fluctuating",
    "cascadeserve_reproduction",
)
PAGE = REPO_ROOT / "docs" / "reproductions.md"
SMOKE_WARNING = ("**Smoke run (`--quick`): these numbers come from tiny episodes and are not comparable to the "
                 "papers.**")


def script_name(name: str) -> str:
    """A script's name from what ``--only`` takes: the name, or its scenario alone (``pascal`` for
    ``pascal_reproduction``); anything else raises listing both."""
    if name in SCRIPTS:
        return name
    if f"{name}_reproduction" in SCRIPTS:
        return f"{name}_reproduction"
    short = [s.removesuffix("_reproduction") for s in SCRIPTS]
    raise ValueError(f"--only {name}: not a reproduction; known: {', '.join(short)} "
                     f"(or the script names {', '.join(s for s in SCRIPTS if s not in short)})")


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


def fans_out(module: ModuleType) -> bool:
    """Whether the script takes the runner's ``--workers`` / ``--address`` flags (its ``FANS_OUT``)."""
    return getattr(module, "FANS_OUT", False) is True


def run_script(name: str, out: Path, quick: bool, reuse: bool = False, workers: int | None = None,
               address: str | None = None) -> tuple[list[Headline], float | None]:
    """Run one script (or, with ``reuse``, read the ``results.json`` an earlier run left under
    ``out``), and return its checked rows and wall seconds (None when reused). ``workers`` and
    ``address`` reach the scripts that fan out (``fans_out``); None keeps a script's default."""
    module = load_script(name)
    folder = out / name
    wall_s = None
    if not reuse:
        argv = ["--out", str(folder)] + (["--quick"] if quick else [])
        if fans_out(module):
            argv += [] if workers is None else [fanout.WORKERS_FLAG, str(workers)]
            argv += [] if address is None else [fanout.ADDRESS_FLAG, address]
        started = time.perf_counter()
        status = module.main(argv)
        wall_s = time.perf_counter() - started
        if status not in (0, None):
            raise ValueError(f"experiments.{name} stopped with status {status} (its error is printed above); the page "
                             "is not written: the scripts that finished can write their rows with --reuse --only")
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


def shared_ray(names: list[str], reuse: bool, workers: int, address: str | None) -> AbstractContextManager[Any]:
    """One Ray for every script that fans out (``simulator.fanout.ray_session``, which each
    script's fan-outs then use as it is): started once instead of once per fan-out (about 5 s
    each), its workers keeping the modules they imported. Nothing when the jobs run here
    (``--workers 1``, no ``--address``) or nothing runs (``--reuse``)."""
    if reuse or (workers == 1 and address is None) or not any(fans_out(load_script(name)) for name in names):
        return nullcontext()
    return fanout.ray_session(workers, address)


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row_line(row: Headline) -> str:
    """One headline as a row of the page's table."""
    ours = f"{row.ours:.3g}{row.unit}" if row.unit in ("%", "×") else f"{row.ours:.3g} {row.unit}"
    return (f"| {_cell(row.paper)} | {_cell(row.where)} | {_cell(row.metric)} | {_cell(row.paper_text)} | {ours} | "
            f"{row.ratio:.2f} | {_mark(row.direction_ok)} | {_mark(row.magnitude_ok)} | {_cell(row.setup)} | "
            f"{'' if row.reproduced else _cell(row.cause)} | `{row.command}` |")


def script_of_line(line: str) -> str | None:
    """The script whose command a page row ends with (``python -m experiments.NAME``), else None."""
    for name in SCRIPTS:
        if line.rstrip().endswith(f"`python -m experiments.{name}` |"):
            return name
    return None


def kept_lines(page: Path, replaced: set[str]) -> dict[str, list[str]]:
    """Rows of the committed page, by script, for the scripts not in ``replaced``."""
    kept: dict[str, list[str]] = {}
    for line in page.read_text().splitlines() if page.is_file() else []:
        name = script_of_line(line) if line.startswith("| ") else None
        if name is not None and name not in replaced:
            kept.setdefault(name, []).append(line)
    return kept


WALL_PREFIX = "Wall time per script: "


def kept_walls(page: Path, replaced: set[str]) -> dict[str, str]:
    """The committed page's wall-time entries (``"<script> 133 s"``), by script, for the scripts
    not in ``replaced``."""
    for line in page.read_text().splitlines() if page.is_file() else []:
        if line.startswith(WALL_PREFIX):
            entries = line[len(WALL_PREFIX):].rstrip(".").split(", ")
            return {entry.split(" ", 1)[0]: entry for entry in entries
                    if entry.split(" ", 1)[0] in SCRIPTS and entry.split(" ", 1)[0] not in replaced}
    return {}


def page_lines(rows: list[Headline], walls_s: dict[str, float | None], quick: bool, today: datetime.date,
               kept: dict[str, list[str]] | None = None, kept_wall_texts: dict[str, str] | None = None) -> list[str]:
    """The page: warning (quick only), summary, one table row per headline (with ``kept`` rows of
    an earlier page for the scripts not run, in ``SCRIPTS`` order), run times (the kept scripts'
    from ``kept_wall_texts``)."""
    kept, kept_wall_texts = kept or {}, kept_wall_texts or {}
    new_lines = {name: [row_line(r) for r in rows if script_of_line(row_line(r)) == name] for name in SCRIPTS}
    loose = [row_line(r) for r in rows if script_of_line(row_line(r)) is None]
    table = [line for name in SCRIPTS for line in (kept.get(name) or new_lines[name])] + loose
    marks = [line.split(" | ")[6:8] for line in table]
    reproduced = sum(m == ["✓", "✓"] for m in marks)
    direction = sum(m[0] == "✓" for m in marks)
    kept_note = (f" for {', '.join(walls_s)}; the rows of {', '.join(kept)} are kept from the earlier full-size page"
                 if kept else "")
    lines = [SMOKE_WARNING, ""] if quick else []
    lines += [
        "# Paper reproductions: headline claims, paper vs ours", "",
        f"{reproduced} of {len(table)} rows reproduce in direction with magnitude within {MAGNITUDE_FACTOR:g}x "
        f"({direction} of {len(table)} in direction). Generated {today.isoformat()} by "
        f"`python -m experiments.reproductions{' --quick' if quick else ''}"
        f"{' --only ' + ','.join(walls_s) if kept else ''}"
        f"{' --reuse' if any(wall is None for wall in walls_s.values()) else ''}`"
        f"{' (from the results.json of earlier full runs)' if any(wall is None for wall in walls_s.values()) else ''}"
        f"{kept_note}.",
        "",
        "Ratio = our effect / the paper's, both measured from the no-effect value (0 for a change in percent, 1 "
        "for a speed-up). Direction ✓ when the ratio is positive; magnitude ✓ when it lies within "
        f"[1/{MAGNITUDE_FACTOR:g}, {MAGNITUDE_FACTOR:g}]. The paper setup row comes first; variants are labelled.", "",
        "| paper | where | metric | paper | ours | ratio | direction | magnitude | setup | cause (when not reproduced) "
        "| command |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += table
    texts = {name: f"{name} {'(results.json of an earlier run)' if wall is None else f'{wall:.0f} s'}"
             for name, wall in walls_s.items()}
    order = [name for name in SCRIPTS if name in texts or name in kept_wall_texts] + [n for n in texts if n not in SCRIPTS]
    walls = ", ".join(texts.get(name) or kept_wall_texts[name] for name in order)
    lines += ["", f"{WALL_PREFIX}{walls}.", ""]
    return lines


@command("experiments.reproductions")
def main(argv: list[str] | None = None) -> int:
    parser = ExperimentParser(__doc__, "reproductions", "every script's --quick size; the page goes to --out",
                              fans_out=True)
    parser.add_argument("--only", type=str, default=None,
                        help="comma-separated reproductions: pascal, multitier, cauchy, ... or the script names "
                             "(default: all seven)")
    parser.add_argument("--reuse", action="store_true",
                        help="build the page from the results.json files an earlier run left under --out, running nothing")
    args = parser.parse_args(argv)
    names = list(SCRIPTS) if args.only is None else [n.strip() for n in args.only.split(",")]
    if not names or any(not n for n in names):
        raise ValueError(f"--only {args.only!r}: takes comma-separated reproduction names")
    names = [script_name(name) for name in names]
    for name in names:
        load_script(name)
    check_writable_dir("--out", args.out)
    size = "quick size (--quick: tiny episodes, not comparable to the papers)" if args.quick else "full size"
    rows: list[Headline] = []
    walls_s: dict[str, float | None] = {}
    with shared_ray(names, args.reuse, args.workers, args.address):
        for name in names:
            print(f"[reproductions] {name} ...", flush=True)
            script_rows, walls_s[name] = run_script(name, args.out, args.quick, args.reuse, args.workers, args.address)
            rows += script_rows
            wall = "reused" if walls_s[name] is None else f"{walls_s[name]:.0f} s"
            print(f"[reproductions] {name} at {size}: {len(script_rows)} rows, "
                  f"{sum(r.reproduced for r in script_rows)} reproduce, {wall}", flush=True)
    page = args.out / "reproductions.md" if args.quick else PAGE
    page.parent.mkdir(parents=True, exist_ok=True)
    keeps = args.only is not None and not args.quick
    kept = kept_lines(page, set(names)) if keeps else {}
    lines = page_lines(rows, walls_s, args.quick, datetime.date.today(), kept, kept_walls(page, set(names)) if keeps else {})
    page.write_text("\n".join(lines))
    print(f"[reproductions] wrote {page}: {lines[2 if not args.quick else 4].split(' (')[0]} at {size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
