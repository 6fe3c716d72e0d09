"""Agents vs papers: train each paper scenario's recipe on several training seeds and report the
agent against the paper's best heuristic on its headline metric: per-seed numbers, IQM with
stratified-bootstrap intervals and the probability of improvement (rliable).

    python -m experiments.agents_vs_papers [--scenario NAME ...] [--quick] [--timesteps N]
        [--train-seeds 0,1,2] [--deterministic | --stochastic]
        [--out results/agents_vs_papers] [--runs runs/agents_vs_papers] [--reuse-runs]

``--timesteps`` replaces the recipe's budget (e.g. a 10-minute run of a 1-hour recipe; the
report says how many steps were trained). ``--quick`` runs each recipe's tiny ``quick`` section.
Each training seed trains the recipe's full budget, one after the other. ``--reuse-runs``
evaluates a seed's finished run instead when ``--runs`` already holds one with exactly the
configuration it would train (a recipe's seeds trained by separate commands, or a command that
stopped after training some of them); the report names each seed's run directory.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agents.config import as_int
from agents.model_files import TRUST_FLAG
from experiments.agents_vs_papers.recipe import load_recipe, recipe_names
from experiments.main import train_seeds_from
from experiments.agents_vs_papers.report import write_report
from experiments.agents_vs_papers.runner import (
    action_space_of,
    choose_heuristics,
    eval_seeds,
    evaluate_all,
    finished_run,
    train_agent,
)
from simulator.cli import check_writable_dir, command


def run_scenario(name: str, quick: bool, timesteps: int | None, train_seeds: list[int], out_root: Path, runs_root: Path,
                 deterministic: bool = True, reuse_runs: bool = False, trust_pickle: bool = False) -> str:
    """Train (once per training seed; with ``reuse_runs`` only seeds without a finished run of the
    same configuration), evaluate and report one recipe; returns the report's markdown.
    ``trust_pickle``: reused runs' files may be older pickles (``agents.model_files``)."""
    recipe = load_recipe(name, quick=quick)
    started = time.perf_counter()
    choice = choose_heuristics(recipe)
    heuristics = [h for h in (choice.compared, *choice.references) if h]
    print(f"== {name}: {recipe.algo} on {recipe.env_id}, reward {recipe.reward!r}; heuristics {heuristics or 'none'}")
    print(f"   {choice.note}", flush=True)
    trained = []
    for seed in train_seeds:
        run = finished_run(recipe, runs_root / name, seed, timesteps) if reuse_runs else None
        if run is not None:
            print(f"   seed {seed}: reusing {run.run_dir} ({run.trained_steps:,} steps, {run.wall_s:.0f} s of training logged)")
        else:
            run = train_agent(recipe, runs_root / name, seed, timesteps)
            print(f"   seed {seed}: trained {run.trained_steps:,} steps in {run.wall_s:.0f} s ({run.steps_per_s:.0f} steps/s)")
        trained.append(run)
    seeds = eval_seeds(recipe)
    results = evaluate_all(recipe, [run.run_dir / "final_model.zip" for run in trained], heuristics, seeds, deterministic,
                           trust_pickle)
    report = write_report(out_root / name, recipe, choice, results, seeds, trained, quick, action_space_of(recipe),
                          deterministic)
    print(f"   report: {out_root / name / 'report.md'} ({time.perf_counter() - started:.0f} s)")
    return report


@command("experiments.agents_vs_papers")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments.agents_vs_papers", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", nargs="+", choices=recipe_names(), help="recipes to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="each recipe's tiny quick section (tests)")
    parser.add_argument("--timesteps", type=int, help="training steps instead of the recipe's budget")
    parser.add_argument("--train-seeds", default="0,1,2", help="comma-separated training seeds (default 0,1,2)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--deterministic", action="store_true", help="the agent takes its most likely action (default)")
    mode.add_argument("--stochastic", action="store_true", help="the agent samples its action (seeded by the episode seed)")
    parser.add_argument("--out", type=Path, default=Path("results") / "agents_vs_papers")
    parser.add_argument("--runs", type=Path, default=Path("runs") / "agents_vs_papers", help="training run directories")
    parser.add_argument("--reuse-runs", action="store_true",
                        help="evaluate a training seed's finished run of the same configuration under --runs instead of training it again")
    parser.add_argument(TRUST_FLAG, action="store_true",
                        help="with --reuse-runs: load runs whose files pickle Python objects (older VecNormalize .pkl "
                             "statistics): this runs code from the files; only for runs you trust")
    args = parser.parse_args(argv)
    timesteps = None if args.timesteps is None else as_int("--timesteps", args.timesteps, minimum=1)
    train_seeds = train_seeds_from(args.train_seeds)
    check_writable_dir("--out", args.out)
    check_writable_dir("--runs", args.runs)
    for name in args.scenario or recipe_names():
        print(run_scenario(name, args.quick, timesteps, train_seeds, args.out, args.runs,
                           deterministic=not args.stochastic, reuse_runs=args.reuse_runs,
                           trust_pickle=args.trust_pickle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
