"""Cache-aware routers against least-loaded on the ``mooncake`` scenario (Mooncake conversation
windows of 2,000 requests on 4 A100-80GB + 4 L40S with prefix caching): TTFT P99, throughput,
SLO attainment and prefix-cache hit rate per router, on held-out seeds, at the scenario's rate
and at the trace's own mean rate (3.4 req/s, where the cluster saturates and throughput
separates the routers). Each router's mean over the seeds, its margin over least-loaded, and
every seed's value.

    python -m experiments.prefix_routing [--seeds 10000,10001,10002] [--rates 2.5,3.4]
        [--out docs/figures/prefix_routing]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

import baselines
import envs  # noqa: F401  (registers the IDs)
from agents.rollout import run_episode
from envs.scenarios.mooncake import MOONCAKE_CONVERSATION_RATE_RPS, MOONCAKE_RATE_RPS

LEAST_LOADED = "least_outstanding"
ROUTERS = (LEAST_LOADED, "round_robin", "sglang_cache_aware", "dynamo_kv", "llmd_scorers", "production_stack_prefix")
METRICS = ("ttft_p99_s", "throughput_rps", "slo_attainment", "prefix_cache_hit_rate", "ttft_p50_s", "tpot_p50_s")


def evaluate(rate_rps: float, seeds: list[int], routers: tuple[str, ...] = ROUTERS) -> dict[str, dict[str, list[float]]]:
    """Per router, per metric: the value on each seed."""
    env = gym.make("servegym/Routing-v0", scenario="mooncake", rate_rps=rate_rps)
    results: dict[str, dict[str, list[float]]] = {}
    for name in routers:
        policy = baselines.make(name, env)
        episodes = [run_episode(env, policy, seed=seed) for seed in seeds]
        results[name] = {metric: [episode[metric] for episode in episodes] for metric in METRICS}
        print(f"  {name:<24} " + "  ".join(f"{m} {np.mean(results[name][m]):.3f}" for m in METRICS[:4]), flush=True)
    env.close()
    return results


def table(rate_rps: float, results: dict[str, dict[str, list[float]]]) -> str:
    """Markdown: mean over seeds, margin over least-loaded, per-seed values."""
    base = results[LEAST_LOADED]
    lines = [f"At {rate_rps:g} req/s (mean over seeds; margin over `{LEAST_LOADED}`; per seed):", "",
             "| router | TTFT P99 (s) | throughput (req/s) | SLO attainment | hit rate | TTFT P50 (s) | TPOT P50 (s) |",
             "|---|---|---|---|---|---|---|"]
    for name, values in results.items():
        cells = []
        for metric in METRICS:
            mean = float(np.mean(values[metric]))
            margin = ""
            if name != LEAST_LOADED and metric in METRICS[:3]:
                margin = f" ({(mean / float(np.mean(base[metric])) - 1) * 100:+.0f} %)"
            seeds = ", ".join(f"{v:.3g}" for v in values[metric])
            cells.append(f"{mean:.3g}{margin} [{seeds}]")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.prefix_routing", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="10000,10001,10002")
    parser.add_argument("--rates", default=f"{MOONCAKE_RATE_RPS},{MOONCAKE_CONVERSATION_RATE_RPS}")
    parser.add_argument("--out", default="docs/figures/prefix_routing", help="path without suffix (.md, .json)")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    rates = [float(r) for r in args.rates.split(",")]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    everything, sections = {}, []
    for rate in rates:
        print(f"rate {rate:g} req/s, seeds {seeds}")
        results = evaluate(rate, seeds)
        everything[str(rate)] = results
        sections.append(table(rate, results))
    out.with_suffix(".json").write_text(json.dumps({"seeds": seeds, "results": everything}, indent=1) + "\n")
    out.with_suffix(".md").write_text("\n\n".join(sections) + "\n")
    print("\n\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
