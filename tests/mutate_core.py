"""Mutation testing of the compiled core (``core/src``), which mutmut cannot reach (it mutates Python).

Each mutant is one small change to one line of C++: a comparison flipped at its boundary
(``<`` and ``<=``, ``>`` and ``>=``) or negated (``==`` and ``!=``), an arithmetic operator swapped
(``+`` and ``-``, ``*`` and ``/``, ``+=`` and ``-=``), ``&&`` and ``||`` swapped, ``std::min`` and
``std::max`` swapped, ``true`` and ``false``, or an integer literal 0 or 1 turned into the other.
Comments, preprocessor lines and string literals are left alone. For each mutant the core is
rebuilt (``cmake --build build/core``, one translation unit and the link) and the tests that
compare the compiled engine with the Python reference engine run (``TESTS``: side-by-side
stepping, seeded families, the per-request simulator goldens, the env goldens on the compiled
engine, the latency values' digests, the compiled cascade, the native vector envs of every ID that has one). A mutant is
*killed* when a test fails, *timeout* when the tests run past ``--timeout-factor`` times their
time on the unmutated core, *uncompilable* when the build fails (not counted), and *survived*
otherwise.

It edits ``core/src`` in place and puts every file back (and rebuilds) at the end, also when
interrupted; it refuses to start if ``core/src`` has uncommitted changes. Run it in a worktree of
its own, since a test run elsewhere in the same tree would see the mutated core:

    python tests/mutate_core.py [--sample 60] [--seed 0] [--files 'core/src/kv_*.cpp'] [--out mutants/core.json]

Results go to ``--out`` (JSON: every mutant with its file, line, change and status) and a table per
file is printed. ``--sample N`` tests N mutants drawn at random (seeded) instead of all of them.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
SOURCES = "core/src"
TESTS = (
    "tests/test_vector_env.py",
    "tests/test_tier_vector_env.py",
    "tests/test_migration_vector_env.py",
    "tests/test_scaling_vector_env.py",
    "tests/test_compiled_engine.py",
    "tests/test_golden_trajectories.py::test_replay_matches_the_recording",
    "tests/test_latency_fixture.py",
    "tests/test_instance_arrays.py",
    "tests/test_compiled_cascade.py",
)
TEST_FILTER = "not python]"  # the env goldens on the compiled engine only
OPERATORS: tuple[tuple[str, str], ...] = (
    (" < ", " <= "), (" <= ", " < "), (" > ", " >= "), (" >= ", " > "), (" == ", " != "), (" != ", " == "),
    (" + ", " - "), (" - ", " + "), (" * ", " / "), (" / ", " * "), (" += ", " -= "), (" -= ", " += "),
    (" && ", " || "), (" || ", " && "), ("std::min(", "std::max("), ("std::max(", "std::min("),
)
WORDS: tuple[tuple[str, str], ...] = (("true", "false"), ("false", "true"), ("0", "1"), ("1", "0"))
STATUSES = ("killed", "timeout", "survived", "uncompilable")


@dataclasses.dataclass(frozen=True)
class Mutant:
    path: str
    line: int  # 1-based
    column: int  # 0-based, in the line
    old: str
    new: str

    def apply(self, text: str) -> str:
        lines = text.split("\n")
        source = lines[self.line - 1]
        if source[self.column:self.column + len(self.old)] != self.old:
            raise ValueError(f"{self.path}:{self.line}: {self.old!r} is not at column {self.column}")
        lines[self.line - 1] = source[:self.column] + self.new + source[self.column + len(self.old):]
        return "\n".join(lines)

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.old.strip()!r} -> {self.new.strip()!r}"


def code_part(line: str) -> str:
    """The line's code with string and character literals blanked and any ``//`` comment cut, so
    that positions stay those of the line."""
    out = []
    quote = ""
    index = 0
    while index < len(line):
        char = line[index]
        if quote:
            if char == "\\":
                out.append("  ")
                index += 2
                continue
            out.append(" " if char != quote else char)
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
            out.append(char)
        elif line.startswith("//", index):
            break
        else:
            out.append(char)
        index += 1
    return "".join(out)


def line_mutants(path: str, number: int, line: str) -> list[Mutant]:
    stripped = line.strip()
    if not stripped or stripped.startswith(("#", "//", "/*", "*")):
        return []
    code = code_part(line)
    found = []
    for old, new in OPERATORS:
        for match in re.finditer(re.escape(old), code):
            found.append(Mutant(path, number, match.start(), old, new))
    for old, new in WORDS:
        for match in re.finditer(rf"(?<![\w.]){old}(?![\w.])", code):
            found.append(Mutant(path, number, match.start(), old, new))
    return found


def all_mutants(patterns: list[str]) -> list[Mutant]:
    """Every mutant of the core's sources matching ``patterns`` (paths relative to the repository)."""
    mutants = []
    for file in sorted((REPO / SOURCES).rglob("*")):
        relative = file.relative_to(REPO).as_posix()
        if file.suffix not in (".cpp", ".hpp") or not any(fnmatch.fnmatch(relative, p) for p in patterns):
            continue
        for number, line in enumerate(file.read_text().split("\n"), start=1):
            mutants.extend(line_mutants(relative, number, line))
    return mutants


def build() -> bool:
    return subprocess.run(["cmake", "--build", "build/core"], cwd=REPO, capture_output=True).returncode == 0


def run_tests(timeout_s: float | None) -> tuple[str, float]:
    """``"passed"``, ``"failed"`` or ``"timeout"``, and the seconds it took."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-k", TEST_FILTER,
               *TESTS]
    started = time.perf_counter()
    try:
        result = subprocess.run(command, cwd=REPO, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - started
    return ("passed" if result.returncode == 0 else "failed"), time.perf_counter() - started


def check_clean() -> None:
    changed = subprocess.run(["git", "status", "--porcelain", SOURCES], cwd=REPO, capture_output=True, text=True).stdout
    if changed.strip():
        raise SystemExit(f"mutate_core: error: {SOURCES} has uncommitted changes; commit them or run in a clean worktree")


def summary(results: list[dict]) -> str:
    rows = ["| file | mutants | killed | timeout | survived | uncompilable | detected |", "|---|---:|---:|---:|---:|---:|---:|"]
    files = sorted({r["path"] for r in results})
    for name in [*files, "all"]:
        chosen = [r for r in results if name in ("all", r["path"])]
        counts = {status: sum(r["status"] == status for r in chosen) for status in STATUSES}
        compiled = counts["killed"] + counts["timeout"] + counts["survived"]
        detected = f"{100.0 * (counts['killed'] + counts['timeout']) / compiled:.1f} %" if compiled else "-"
        rows.append(f"| {name} | {len(chosen)} | {counts['killed']} | {counts['timeout']} | {counts['survived']} | "
                    f"{counts['uncompilable']} | {detected} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mutate_core", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default=f"{SOURCES}/*", help="glob(s) of core sources, comma-separated")
    parser.add_argument("--sample", type=int, help="test this many mutants, drawn at random (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout-factor", type=float, default=3.0)
    parser.add_argument("--out", default="mutants/core.json")
    parser.add_argument("--list", action="store_true", help="print the mutants and their count, test nothing")
    args = parser.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        parser.error(f"--sample {args.sample}: must be at least 1")
    if not args.timeout_factor > 1:
        parser.error(f"--timeout-factor {args.timeout_factor}: must be above 1")
    mutants = all_mutants(args.files.split(","))
    if not mutants:
        parser.error(f"--files {args.files}: no core source matches")
    if args.list:
        print("\n".join(m.describe() for m in mutants))
        print(f"{len(mutants)} mutants")
        return 0
    if args.sample is not None and args.sample < len(mutants):
        mutants = sorted(random.Random(args.seed).sample(mutants, args.sample), key=lambda m: (m.path, m.line, m.column))
    check_clean()
    if not build():
        raise SystemExit("mutate_core: error: the unmutated core does not build (make build)")
    status, baseline_s = run_tests(None)
    if status != "passed":
        raise SystemExit("mutate_core: error: the tests fail on the unmutated core")
    timeout_s = args.timeout_factor * baseline_s + 10.0
    print(f"{len(mutants)} mutants; the tests take {baseline_s:.0f} s on the unmutated core (timeout {timeout_s:.0f} s)")
    results = []
    out = REPO / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    originals: dict[str, str] = {}
    try:
        for mutant in tqdm(mutants, unit="mutant"):
            file = REPO / mutant.path
            original = originals.setdefault(mutant.path, file.read_text())
            file.write_text(mutant.apply(original))
            if not build():
                status = "uncompilable"
            else:
                outcome, _ = run_tests(timeout_s)
                status = {"passed": "survived", "failed": "killed", "timeout": "timeout"}[outcome]
            file.write_text(original)
            results.append({**dataclasses.asdict(mutant), "status": status})
            if status == "survived":
                tqdm.write(f"survived: {mutant.describe()}")
            out.write_text(json.dumps(results, indent=1) + "\n")
    finally:
        for path, text in originals.items():
            (REPO / path).write_text(text)
        build()
    print(summary(results))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
