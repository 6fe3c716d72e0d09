"""Stage 2 of the two-stage mutation run (tests/MUTATION.md, "Fifth run"): re-test the mutants a
narrow `mutmut run` left alive against a wider test selection, one mutant at a time.

    python tests/mutation_retest.py --module simulator.admission tests/test_a.py tests/test_b.py

reads the survivors (exit code 0) of ``mutants/**/*.meta`` whose name starts with ``--module``,
runs ``pytest -x`` on the given tests in ``mutants/`` with ``MUTANT_UNDER_TEST`` set (as mutmut
does), and prints one line per mutant: ``killed`` (a test failed), ``timeout`` (ran past
``--timeout-s``) or ``survived``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

MUTANTS_DIR = Path("mutants")
PYTEST_ARGS = ["-x", "-q", "-p", "no:cacheprovider", "--hypothesis-profile=mutation", "-n", "0"]


def survivors(prefix: str) -> list[str]:
    """Names of the mutants with exit code 0 (survived) whose name starts with ``prefix``."""
    names = []
    for meta in sorted(MUTANTS_DIR.glob("**/*.py.meta")):
        exit_codes = json.loads(meta.read_text())["exit_code_by_key"]
        names += [name for name, code in exit_codes.items() if code == 0 and name.startswith(prefix)]
    return names


def retest(name: str, tests: list[str], timeout_s: float) -> str:
    """``killed``, ``timeout`` or ``survived`` for mutant ``name`` under ``tests``."""
    env = dict(os.environ, MUTANT_UNDER_TEST=name)
    command = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *tests]
    try:
        result = subprocess.run(command, cwd=MUTANTS_DIR, env=env, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout"
    if result.returncode == 0:
        return "survived"
    if result.returncode == 1:
        return "killed"
    raise RuntimeError(f"mutation_retest: error: pytest exit {result.returncode} for {name}: {result.stdout[-500:]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", required=True, help="prefix of the mutant names, e.g. simulator.admission")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("tests", nargs="+")
    args = parser.parse_args()
    for name in survivors(args.module):
        print(f"{retest(name, args.tests, args.timeout_s)} {name}", flush=True)


if __name__ == "__main__":
    main()
