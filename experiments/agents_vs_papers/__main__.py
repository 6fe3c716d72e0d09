"""Agents vs papers: train each paper scenario's recipe and report the agent against the
paper's best heuristic on its headline metric, with seeds and 95% confidence intervals.

    python -m experiments.agents_vs_papers [--scenario NAME ...] [--quick] [--timesteps N]
        [--seed 0] [--out results/agents_vs_papers] [--runs runs/agents_vs_papers]

``--timesteps`` replaces the recipe's budget (e.g. a 10-minute run of a 1-hour recipe; the
report says how many steps were trained). ``--quick`` runs each recipe's tiny ``quick`` section.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agents.config import as_int
from experiments.agents_vs_papers.recipe import load_recipe, recipe_names
from experiments.agents_vs_papers.report import write_report
from experiments.agents_vs_papers.runner import action_space_of, choose_heuristics, eval_seeds, evaluate_all, train_agent


def run_scenario(name: str, quick: bool, timesteps: int | None, seed: int, out_root: Path, runs_root: Path) -> str:
    """Train, evaluate and report one recipe; returns the report's markdown."""
    recipe = load_recipe(name, quick=quick)
    started = time.perf_counter()
    choice = choose_heuristics(recipe)
    heuristics = [h for h in (choice.compared, *choice.references) if h]
    print(f"== {name}: {recipe.algo} on {recipe.env_id}, reward {recipe.reward!r}; heuristics {heuristics or 'none'}")
    print(f"   {choice.note}", flush=True)
    trained = train_agent(recipe, runs_root / name, seed, timesteps)
    print(f"   trained {trained.trained_steps:,} steps in {trained.wall_s:.0f} s ({trained.steps_per_s:.0f} steps/s)")
    seeds = eval_seeds(recipe)
    results = evaluate_all(recipe, trained.run_dir / "final_model.zip", heuristics, seeds)
    report = write_report(out_root / name, recipe, choice, results, seeds, trained, quick, action_space_of(recipe))
    print(f"   report: {out_root / name / 'report.md'} ({time.perf_counter() - started:.0f} s)")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", nargs="+", choices=recipe_names(), help="recipes to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="each recipe's tiny quick section (tests)")
    parser.add_argument("--timesteps", type=int, help="training steps instead of the recipe's budget")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument("--out", type=Path, default=Path("results") / "agents_vs_papers")
    parser.add_argument("--runs", type=Path, default=Path("runs") / "agents_vs_papers", help="training run directories")
    args = parser.parse_args(argv)
    timesteps = None if args.timesteps is None else as_int("--timesteps", args.timesteps, minimum=1)
    for name in args.scenario or recipe_names():
        print(run_scenario(name, args.quick, timesteps, as_int("--seed", args.seed), args.out, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
