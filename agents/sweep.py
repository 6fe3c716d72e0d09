"""Sweep scenarios x algorithms x rewards x hyper-parameters x training seeds on Ray Tune.

    python -m agents.sweep CONFIG.yml [--run-dir runs/sweeps/<name>] [--max-concurrent N]
        [--address auto|HOST:PORT] [--scenarios NAME,...] [--verbose 0|1|2]

``CONFIG.yml`` is described in ``agents.sweep_config`` (examples in ``agents/sweeps/``); it is
checked in full before Ray starts. Every trial (``agents.trial``) trains one agent as
``agents.train`` does, then evaluates it and the scenario's heuristics on the held-out seeds.
Without ``--address`` a local Ray runs ``--max-concurrent`` trials at a time (default: this
machine's cores), one CPU each (``cpus_per_trial``) with one torch thread; ``--address``
joins a running cluster (``ray start``), whose nodes all see the run directory (a shared
filesystem). ``--scenarios`` keeps only those scenarios' cells (one section of a board run again,
into its own ``--run-dir``). A trial's process is kept for the next trial (Tune's ``reuse_actors``), so torch
and the envs are imported once per concurrent slot, not once per trial. The run directory
holds ``sweep.json`` (the checked configuration), ``tune/`` (Tune's experiment state),
``runs/<trial>/<run>/`` (each trial's ``agents.train`` run, with TensorBoard logs and
``evaluation.json``), ``heuristics/`` and the sweep's table: ``table.md``, ``table.csv`` and
``table.png`` (``agents.leaderboard``, every configuration).
Started again on the same run directory, a sweep resumes (Tune's restore): finished trials are
kept, unfinished ones run again from the start. ``tune/`` holds Tune's pickled experiment state,
which a resumed sweep unpickles: resume only sweep directories you wrote. ``--address`` joins a
cluster without authentication: only clusters you run.

Interrupted (Ctrl-C), a sweep stops its trials, writes its table from the finished ones marked
*partial* with the trials it misses, says how to finish them (run the same command again) and
exits with status 130. Bad input (any entry of the configuration, a flag) prints one line
``agents.sweep: error: ...`` and exits with status 2 before Ray starts; a cluster address that
does not answer fails within ``simulator.fanout.CONNECT_TIMEOUT_S``, naming it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search import Repeater
from ray.tune.search.optuna import OptunaSearch

from agents.leaderboard import load_records, write_board
from agents.sweep_config import Cell, SweepConfig, load_sweep_config, select_scenarios
from agents.trial import run_trial
from simulator.cli import command
from simulator.fanout import check_address, ray_session

DEFAULT_ROOT = Path("runs") / "sweeps"
CONFIG_FILE = "sweep.json"
TUNE_DIR = "tune"
TABLE_FILE = "table.md"

_RANGES = {"uniform": tune.uniform, "loguniform": tune.loguniform, "randint": tune.randint}


@dataclasses.dataclass(frozen=True)
class SweepOutcome:
    """What a sweep left: its directory, the trials finished, those that failed (with their
    errors), how many it has in all and the ones still missing (``missing_trials``)."""

    root: Path
    finished: int
    errors: list[str]
    expected: int = 0
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing and self.finished >= self.expected


class _NoRestoreHint(logging.Filter):
    """Drops Tune's "Resume experiment with: Tuner.restore(...)": a sweep resumes by running the
    same command again (``finish_hint``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "has been interrupted" not in record.getMessage()


def finish_hint(argv: Sequence[str]) -> str:
    """How to finish a partial sweep: the same command again."""
    return "python -m agents.sweep " + " ".join(argv)


def trial_key(cell: int, seed: int, assignment: dict[str, Any]) -> str:
    """A trial's name in messages: ``cell<index> seed <seed> [key=value, ...]``."""
    searched = ", ".join(f"{key}={value!r}" for key, value in sorted(assignment.items()))
    return f"cell{cell} seed {seed}" + (f" [{searched}]" if searched else "")


def expected_trials(config: SweepConfig) -> list[str] | int:
    """Every trial of ``config`` by ``trial_key`` (grid and random searches), or their number
    (an Optuna search draws its assignments as it goes)."""
    if config.search == "optuna":
        return len(config.cells) * config.samples * len(config.train_seeds)
    return [trial_key(cell.index, seed, assignment) for cell in config.cells for assignment in config.assignments()
            for seed in config.train_seeds]


def missing_trials(config: SweepConfig, records: Sequence[dict[str, Any]]) -> tuple[int, tuple[str, ...]]:
    """How many trials ``config`` has, and those of them no record (``evaluation.json``) holds."""
    done = [trial_key(r["cell"], r["seed"], r["hyperparams"]) for r in records]
    expected = expected_trials(config)
    if isinstance(expected, int):
        return expected, tuple(f"{expected - len(done)} Optuna trial(s)",) if len(done) < expected else ()
    return len(expected), tuple(key for key in expected if key not in set(done))


def run_sweep(config: SweepConfig, root: Path, *, max_concurrent: int | None = None, address: str | None = None,
              verbose: int = 1) -> SweepOutcome:
    """Run (or resume) ``config``'s trials into ``root`` and write its table; see the module docstring.
    ``max_concurrent`` defaults to this machine's cores locally and to what the cluster holds with ``address``."""
    root = Path(root).resolve()
    _claim(root, config)
    if max_concurrent is None and address is None:
        max_concurrent = os.cpu_count() or 1
    if max_concurrent is not None and max_concurrent < 1:
        raise ValueError(f"--max-concurrent must be a positive integer, got {max_concurrent!r}")
    errors: list[str] = []
    cpus = (max_concurrent or 1) * config.cpus_per_trial
    hint = _NoRestoreHint()
    logging.getLogger("ray.tune.tune").addFilter(hint)
    try:
        with ray_session(cpus, address):
            for name, cells in experiments(config):
                grid = _tuner(config, name, cells, root, max_concurrent, verbose).fit()
                errors += [f"{result.path}: {result.error}" for result in grid if result.error is not None]
    finally:
        logging.getLogger("ray.tune.tune").removeFilter(hint)
    return write_sweep_table(config, root, errors)


def write_sweep_table(config: SweepConfig, root: Path, errors: Sequence[str] = ()) -> SweepOutcome:
    """Write the sweep's table from the trials finished under ``root``, marked partial (with the
    trials it misses) when any is missing; return the outcome."""
    records = load_records([root])
    expected, missing = missing_trials(config, records)
    partial = None
    if missing:
        partial = (f"{len(records)} of {expected} trials finished; missing: {', '.join(missing)}. "
                   "Run the same command again to finish them (finished trials are kept).")
    write_board(records, root / TABLE_FILE, best_only=False, title=f"Sweep {config.name}", sources=[str(root)],
                partial=partial)
    return SweepOutcome(root, len(records), list(errors), expected, missing)


def experiments(config: SweepConfig) -> list[tuple[str, list[Cell]]]:
    """The Tune experiments of a sweep: one over every cell, or one per cell when the search
    adapts or stops trials early (``SweepConfig.per_cell``)."""
    if config.per_cell:
        return [(f"cell{cell.index}", [cell]) for cell in config.cells]
    return [("all", list(config.cells))]


def _tuner(config: SweepConfig, name: str, cells: list[Cell], root: Path, max_concurrent: int | None,
           verbose: int) -> tune.Tuner:
    """A new Tune experiment ``root/tune/name``, or the one there restored (finished trials kept)."""
    trainable = tune.with_resources(tune.with_parameters(run_trial, sweep=config, root=str(root)),
                                    {"cpu": config.cpus_per_trial})
    path = root / TUNE_DIR / name
    if tune.Tuner.can_restore(path):
        return tune.Tuner.restore(str(path), trainable=trainable)
    scheduler = None
    if config.scheduler == "asha":
        scheduler = ASHAScheduler(time_attr="training_iteration", max_t=config.asha["reports"],
                                  grace_period=config.asha["grace_period"], reduction_factor=config.asha["reduction_factor"])
    if config.search == "optuna":
        space: dict[str, Any] = {"cell": cells[0].index, "hyperparams": {
            key: tune.choice(values) if kind == "choice" else _RANGES[kind](*values)
            for key, entry in config.space.items() for kind, values in entry.items()}}
        searcher = Repeater(OptunaSearch(seed=config.search_seed), repeat=len(config.train_seeds))
        samples = config.samples * len(config.train_seeds)
    else:
        space = {"cell": tune.grid_search([cell.index for cell in cells]),
                 "hyperparams": tune.grid_search(config.assignments()),
                 "seed": tune.grid_search(list(config.train_seeds))}
        searcher, samples = None, 1
    return tune.Tuner(
        trainable, param_space=space,
        tune_config=tune.TuneConfig(metric="score", mode="max", search_alg=searcher, scheduler=scheduler,
                                    num_samples=samples, max_concurrent_trials=max_concurrent, reuse_actors=True,
                                    trial_name_creator=trial_name, trial_dirname_creator=trial_name),
        run_config=tune.RunConfig(name=name, storage_path=str(root / TUNE_DIR), verbose=verbose,
                                  failure_config=tune.FailureConfig(max_failures=0)),
    )


def trial_name(trial: Any) -> str:
    """``cell<index>_<trial id>``: short, and stable across a restore."""
    return f"cell{trial.config['cell']}_{trial.trial_id}"


def _claim(root: Path, config: SweepConfig) -> None:
    """Record ``config`` in ``root/sweep.json``; a directory holding another sweep's raises."""
    recorded = json.loads(json.dumps(dataclasses.asdict(config)))
    path = root / CONFIG_FILE
    if path.is_file():
        if json.loads(path.read_text()) != recorded:
            raise ValueError(f"{root} holds a sweep with another configuration ({path}); "
                             "resume it with its own configuration or pass another --run-dir")
        return
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recorded, indent=1) + "\n")


@command("agents.sweep")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command: 0 when every trial finished, 1 when some failed, 130 when interrupted
    (the table then says it is partial), 2 on bad input."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="agents.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="sweep configuration (YAML; see agents/sweeps/)")
    parser.add_argument("--run-dir", type=Path, help=f"sweep directory (default {DEFAULT_ROOT}/<name>)")
    parser.add_argument("--max-concurrent", type=int,
                        help="trials at a time (default: this machine's cores; on a cluster: as its CPUs allow)")
    parser.add_argument("--address", metavar="auto|HOST:PORT", help="join a running Ray cluster instead of a local Ray")
    parser.add_argument("--scenarios", type=lambda text: text.split(","), metavar="NAME,...",
                        help="run only these scenarios' cells of the config (default: all)")
    parser.add_argument("--verbose", type=int, choices=(0, 1, 2), default=1, help="Tune's progress display")
    args = parser.parse_args(argv)
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise ValueError(f"--max-concurrent {args.max_concurrent}: must be a positive integer")
    if args.address is not None:
        check_address(args.address)
    config = load_sweep_config(args.config)
    if args.scenarios is not None:
        config = select_scenarios(config, args.scenarios)
    root = Path(args.run_dir or DEFAULT_ROOT / config.name).resolve()
    try:
        outcome = run_sweep(config, root, max_concurrent=args.max_concurrent, address=args.address,
                            verbose=args.verbose)
    except KeyboardInterrupt:  # a second Ctrl-C stops Tune at once, or one came before Tune took over
        if not (root / CONFIG_FILE).is_file():
            print("agents.sweep: interrupted before any trial started", file=sys.stderr)
            return 128 + signal.SIGINT
        outcome = write_sweep_table(config, root)
    return report(outcome, argv)


def report(outcome: SweepOutcome, argv: Sequence[str]) -> int:
    """Print the table and what is left; the command's exit status (see ``main``)."""
    print((outcome.root / TABLE_FILE).read_text())
    print(f"{outcome.finished} of {outcome.expected} trials finished; table {outcome.root / TABLE_FILE}; "
          f"tensorboard --logdir {outcome.root / 'runs'}")
    for error in outcome.errors:
        print(f"failed: {error}", file=sys.stderr)
    if outcome.errors:
        return 1
    if not outcome.complete:
        print(f"agents.sweep: interrupted: {len(outcome.missing)} trial(s) missing ({', '.join(outcome.missing)}); "
              f"the table is partial; finish with: {finish_hint(argv)}", file=sys.stderr)
        return 128 + signal.SIGINT
    return 0


if __name__ == "__main__":
    sys.exit(main())
