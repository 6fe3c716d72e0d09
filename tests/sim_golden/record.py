"""Record the simulator golden tables: run every case (or those named), check that each
exercises its feature, and write ``data/<case>.json``.

    python -m tests.sim_golden.record                 # every case
    python -m tests.sim_golden.record rr_cache_pp1_swap,queue_gate
    python -m tests.sim_golden.record --list          # the cases and what each covers

Re-record only for an intended behaviour change, explained in the commit (README.md beside
this file). A case whose proof fails is not written, and the command exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from simulator.cli import command
from tests.sim_golden.cases import CASES, CASES_BY_NAME
from tests.sim_golden.run import Run
from tests.sim_golden.table import DATA_DIR, table, write

PROG = "python -m tests.sim_golden.record"


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="?", help="comma-separated case names (default: every case)")
    parser.add_argument("--list", action="store_true", help="print the case names and what each covers, then stop")
    args = parser.parse_args(argv)
    if args.list:
        for case in CASES:
            print(f"{case.name:<40}{case.feature}")
        return 0
    names = [case.name for case in CASES] if args.cases is None else args.cases.split(",")
    unknown = [name for name in names if name not in CASES_BY_NAME]
    if unknown:
        raise ValueError(f"cases {','.join(unknown)}: unknown case ({PROG} --list names the {len(CASES)} cases)")
    runs: dict[str, Run] = {}
    for case in CASES:  # every case runs: proofs compare a case with its twins
        started = time.perf_counter()
        runs[case.name] = case.run()
        if case.name in names:
            print(f"{case.name:<40}{len(runs[case.name].outcomes):>6} outcomes {time.perf_counter() - started:7.2f} s")
    failed = 0
    DATA_DIR.mkdir(exist_ok=True)
    for name in names:
        case = CASES_BY_NAME[name]
        problems = case.proof(runs[name], runs)
        if problems:
            failed += 1
            print(f"{name}: does not exercise {case.feature!r}: {'; '.join(problems)}", file=sys.stderr)
            continue
        write(DATA_DIR / f"{name}.json", table(name, case.feature, runs[name]))
    print(f"wrote {len(names) - failed} of {len(names)} tables to {DATA_DIR}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
