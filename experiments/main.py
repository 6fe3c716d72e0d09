"""The README's main job: serve the ``default`` scenario and show what servegym measures.

Runs one episode of the default scenario with the simulator's round-robin router, prints its
metrics table and the registered environments. ``--quick`` runs a shorter episode.

    python -m experiments.main [--quick] [--scenario default] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import envs
from envs.presets import make_scenario
from simulator.metrics import format_table, summarize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="default", help=f"one of {envs.scenario_names()}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="200 requests instead of the scenario's episode")
    args = parser.parse_args(argv)
    scenario = make_scenario(args.scenario, **({"episode_requests": 200} if args.quick else {}))
    print(f"scenario {scenario.name}: {scenario.description}")
    print(f"  ({scenario.reference})")
    cluster = scenario.build_cluster()
    requests = scenario.requests(np.random.default_rng(args.seed))
    started = time.perf_counter()
    outcomes = cluster.run(requests)
    wall_s = time.perf_counter() - started
    summary = summarize(outcomes, duration_s=cluster.events.now_s, cost_usd=cluster.cost_usd(), qoe_targets=scenario.qoe)
    print(f"\nround-robin routing, {len(requests)} requests, {cluster.events.now_s:.1f} simulated s "
          f"in {wall_s:.2f} wall s\n")
    print(format_table(summary))
    print("\nregistered environments: " + ", ".join(envs.ENV_IDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
