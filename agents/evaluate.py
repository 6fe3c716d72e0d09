"""Compare policies (baseline names and saved SB3 models) on the same env and seeds.

    python -m agents.evaluate --env servegym/Routing-v0 --scenario default \\
        --policies least_outstanding,round_robin,runs/<run>/best_model.zip --seeds 0,1,2,3,4 \\
        [--set episode_requests=200 ...] [--device cpu] [--out results/eval/NAME]

Every policy runs one deterministic episode per seed (``agents.rollout.run_episode``). Written
to ``--out`` (default ``results/eval/{env}__{scenario}``): ``table.md`` and ``table.csv`` (per
metric, mean and 95% confidence half-width over seeds, Student t with n-1 degrees of freedom),
``episodes.csv`` (every episode's metrics), ``ttft_cdf.png`` (per-request TTFT CDF),
``tier_slo.png`` (SLO attainment per priority tier), ``cost_vs_slo.png``, and ``tb/<policy>/``
TensorBoard runs (``serving/<metric>`` at step = seed) with a custom-scalars layout that puts
every policy on one chart per metric. The table is printed.
"""

from __future__ import annotations

import argparse
import csv
import math
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from torch.utils.tensorboard import SummaryWriter

import envs
from agents.callbacks import AgentPolicy
from agents.config import (
    DEVICES,
    TrainConfig,
    as_int,
    config_path_for,
    get_algorithm,
    parse_value,
    resolve_device,
    sanitize,
    vecnormalize_path,
)
from agents.dashboard import (
    EPISODE_METRICS,
    evaluation_layout,
    metric_names,
    plot_cost_vs_slo,
    plot_tier_bars,
    plot_ttft_cdf,
    serving_scalars,
    tier_metrics,
)
from agents.rollout import run_episode
from agents.train import make_env
from baselines import make as make_policy

CONFIDENCE = 0.95


@dataclass(frozen=True)
class PolicyResult:
    """One policy's episodes (one per seed, in seed order) and the TTFT of every completed request."""

    label: str
    episodes: list[dict[str, float]]
    ttft_s: np.ndarray


def is_model_path(spec: str) -> bool:
    """A policy spec names a saved model when it ends in ``.zip``; otherwise it is a baseline name."""
    return spec.endswith(".zip")


def load_agent(model_path: Path, env: gym.Env, device: str = "cpu") -> tuple[AgentPolicy, TrainConfig]:
    """A saved model (with its run's VecNormalize statistics, if it used them) as a policy for
    ``env``, and its run's configuration; ``env`` must have the model's spaces."""
    model_path = Path(model_path)
    if not model_path.is_file():
        raise ValueError(f"no saved model at {model_path}")
    config = TrainConfig.load(config_path_for(model_path))
    model = get_algorithm(config.algo).cls.load(model_path, device=device)
    for name in ("observation_space", "action_space"):
        if getattr(model, name) != getattr(env, name):
            raise ValueError(f"{model_path} was trained with {name} {getattr(model, name)}, "
                             f"the evaluation env has {getattr(env, name)}")
    vec_normalize = None
    if config.normalize is not None:
        stats_path = vecnormalize_path(model_path)
        if not stats_path.is_file():
            raise ValueError(f"{model_path} was trained with VecNormalize but {stats_path} is missing")
        vec_normalize = VecNormalize.load(str(stats_path), DummyVecEnv([lambda: env]))
        vec_normalize.training = False
        vec_normalize.norm_reward = False
    return AgentPolicy(model, vec_normalize), config


def evaluate_policies(
    env_id: str,
    scenario: str,
    policies: Sequence[str],
    seeds: Sequence[int],
    env_kwargs: dict[str, Any] | None = None,
    device: str = "cpu",
) -> list[PolicyResult]:
    """Run every policy (baseline name or ``.zip`` model path) for one episode per seed on
    ``gym.make(env_id, scenario=scenario, **env_kwargs)``."""
    if not policies:
        raise ValueError("no policy to evaluate")
    seeds = [as_int("seed", seed) for seed in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds}")
    env_kwargs = env_kwargs or {}
    envs_by_flatness: dict[bool, gym.Env] = {}

    def env_for(flat: bool) -> gym.Env:
        if flat not in envs_by_flatness:
            envs_by_flatness[flat] = make_env(env_id, scenario, env_kwargs, flat)
        return envs_by_flatness[flat]

    results: list[PolicyResult] = []
    labels: set[str] = set()
    for spec in policies:
        if is_model_path(spec):
            config = TrainConfig.load(config_path_for(Path(spec)))
            if config.env_id != env_id:
                raise ValueError(f"{spec} was trained on {config.env_id}, not {env_id}")
            env = env_for(config.flat_observation)
            policy, _ = load_agent(Path(spec), env, device)
            label = f"{config.algo}_s{config.seed}_{Path(spec).stem}"
        else:
            env = env_for(False)
            policy, label = make_policy(spec, env), spec
        label = _unique(label, labels)
        episodes, ttft_s = [], []
        for seed in seeds:
            episodes.append(run_episode(env, policy, seed))
            ttft_s.extend(o.first_token_s - o.arrival_s for o in env.unwrapped.cluster.outcomes if o.completed)
        results.append(PolicyResult(label, episodes, np.array(ttft_s, dtype=float)))
    for env in envs_by_flatness.values():
        env.close()
    return results


def student_t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer ``df`` degrees of freedom, in closed form
    (Abramowitz & Stegun 26.7.3 for odd df, 26.7.4 for even df), theta = atan(t / sqrt(df))."""
    df = as_int("df", df, minimum=1)
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = math.cos(theta), 0.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= cos2 * (2 * k) / (2 * k + 1)
        return 2.0 / math.pi * (theta + math.sin(theta) * total)
    term, total = 1.0, 0.0
    for k in range(1, df // 2 + 1):
        total += term
        term *= cos2 * (2 * k - 1) / (2 * k)
    return math.sin(theta) * total


def t_critical(df: int, confidence: float = CONFIDENCE) -> float:
    """The t with P(|T| <= t) = ``confidence`` (df=1: 12.706 at 95%), by bisection."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    low, high = 0.0, 1.0
    while student_t_two_sided(high, df) < confidence:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if student_t_two_sided(middle, df) < confidence:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, int]:
    """(mean, confidence half-width t_{n-1} * s / sqrt(n), n) over the non-NaN ``values``;
    the half-width is NaN for fewer than two values, everything NaN for none."""
    samples = np.asarray(values, dtype=float)
    samples = samples[~np.isnan(samples)]
    n = int(samples.size)
    if n == 0:
        return math.nan, math.nan, 0
    if n == 1:
        return float(samples[0]), math.nan, 1
    return float(samples.mean()), t_critical(n - 1, confidence) * float(samples.std(ddof=1)) / math.sqrt(n), n


def table_metrics(results: Sequence[PolicyResult]) -> list[str]:
    """Serving metrics, per-tier attainments, then return and invalid actions: those some
    episode has a value for (a metric NaN everywhere, such as QoE without reasoning, does not apply)."""
    union: dict[str, float] = {}
    for result in results:
        for episode in result.episodes:
            union.update({k: 0.0 for k, v in episode.items() if not math.isnan(v)})
    return [*metric_names(union), *(k for k in EPISODE_METRICS if k in union)]


def comparison_rows(results: Sequence[PolicyResult]) -> list[dict[str, Any]]:
    """Long-format rows ``policy, metric, mean, ci95, n`` for every policy and table metric."""
    rows = []
    for metric in table_metrics(results):
        for result in results:
            mean, half_width, n = mean_ci([episode.get(metric, math.nan) for episode in result.episodes])
            rows.append({"policy": result.label, "metric": metric, "mean": mean, "ci95": half_width, "n": n})
    return rows


def markdown_table(rows: Sequence[dict[str, Any]], seeds: Sequence[int]) -> str:
    """Metrics as rows, policies as columns, cells ``mean ± half-width``."""
    policies = list(dict.fromkeys(row["policy"] for row in rows))
    cells: dict[str, dict[str, str]] = {}
    for row in rows:
        cells.setdefault(row["metric"], {})[row["policy"]] = _cell(row["mean"], row["ci95"])
    lines = [
        f"Seeds {', '.join(map(str, seeds))} (n = {len(seeds)}); ± is the 95% confidence half-width "
        f"(Student t, n - 1 degrees of freedom).",
        "",
        "| metric | " + " | ".join(policies) + " |",
        "|---|" + "---:|" * len(policies),
    ]
    lines += [f"| {metric} | " + " | ".join(by_policy.get(p, "") for p in policies) + " |"
              for metric, by_policy in cells.items()]
    return "\n".join(lines) + "\n"


def write_report(results: Sequence[PolicyResult], seeds: Sequence[int], out_dir: Path,
                 ttft_slo_s: float | None = None) -> str:
    """Write tables, episodes, plots and TensorBoard runs into ``out_dir``; return the markdown table."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = comparison_rows(results)
    table = markdown_table(rows, seeds)
    (out_dir / "table.md").write_text(table)
    _write_csv(out_dir / "table.csv", rows, ["policy", "metric", "mean", "ci95", "n"])
    episode_rows = [{"policy": r.label, "seed": seed, **episode} for r in results for seed, episode in zip(seeds, r.episodes)]
    _write_csv(out_dir / "episodes.csv", episode_rows, list(dict.fromkeys(k for row in episode_rows for k in row)))
    plot_ttft_cdf({r.label: r.ttft_s for r in results}, out_dir / "ttft_cdf.png", ttft_slo_s)
    tiers = tier_metrics(table_metrics(results))
    plot_tier_bars(
        {r.label: {tier: mean_ci([e.get(m, math.nan) for e in r.episodes])[:2] for tier, m in tiers.items()}
         for r in results},
        out_dir / "tier_slo.png",
    )
    plot_cost_vs_slo({r.label: [(e["cost_usd"], e["slo_attainment"]) for e in r.episodes] for r in results},
                     out_dir / "cost_vs_slo.png")
    for result in results:
        _write_tensorboard(out_dir / "tb" / sanitize(result.label), result, seeds)
    return table


def _write_tensorboard(run_dir: Path, result: PolicyResult, seeds: Sequence[int]) -> None:
    """One TensorBoard run per policy (replacing an older one): each episode at step = its seed."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    writer = SummaryWriter(str(run_dir))
    writer.add_custom_scalars(evaluation_layout())
    for seed, episode in zip(seeds, result.episodes):
        for tag, value in serving_scalars(episode).items():
            writer.add_scalar(tag, value, global_step=seed)
        for name in EPISODE_METRICS:
            writer.add_scalar(f"episode/{name}", episode[name], global_step=seed)
    writer.close()


def _write_csv(path: Path, rows: Sequence[dict[str, Any]], fields: list[str]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)


def _cell(mean: float, half_width: float) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.4g}" if math.isnan(half_width) else f"{mean:.4g} ± {half_width:.2g}"


def _unique(label: str, taken: set[str]) -> str:
    candidate, suffix = label, 1
    while candidate in taken:
        suffix += 1
        candidate = f"{label}_{suffix}"
    taken.add(candidate)
    return candidate


def _ttft_slo_s(env_id: str, scenario: str, env_kwargs: dict[str, Any]) -> float | None:
    """The TTFT target when every tier shares one (drawn on the CDF), else None."""
    env = make_env(env_id, scenario, env_kwargs, flat=False)
    workload = env.unwrapped.scenario.workload
    targets = {workload.slo(tier).ttft_s for tier in range(workload.num_tiers)}
    env.close()
    return targets.pop() if len(targets) == 1 else None


def _seeds(text: str) -> list[int]:
    seeds = []
    for item in text.split(","):
        try:
            seeds.append(int(item))
        except ValueError:
            raise ValueError(f"seed {item!r} is not an integer") from None
    return seeds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help=f"one of {sorted(envs.ENV_IDS)}")
    parser.add_argument("--scenario", default="default", help=f"one of {envs.scenario_names()}")
    parser.add_argument("--policies", required=True, help="comma-separated baseline names and .zip model paths")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated episode seeds (default 0,1,2,3,4)")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="env / scenario overrides, e.g. episode_requests=200 reward=latency")
    parser.add_argument("--device", choices=DEVICES, default="auto", help="where saved models run (default auto)")
    parser.add_argument("--out", type=Path, help="output folder (default results/eval/{env}__{scenario})")
    args = parser.parse_args(argv)
    env_kwargs = {}
    for assignment in args.overrides:
        key, sep, text = assignment.partition("=")
        if not sep or not key:
            raise ValueError(f"override {assignment!r} is not key=value")
        env_kwargs[key] = parse_value(text)
    seeds = _seeds(args.seeds)
    policies = [p for p in args.policies.split(",") if p]
    results = evaluate_policies(args.env, args.scenario, policies, seeds, env_kwargs, resolve_device(args.device))
    out_dir = args.out or Path("results") / "eval" / f"{sanitize(args.env)}__{args.scenario}"
    table = write_report(results, seeds, out_dir, _ttft_slo_s(args.env, args.scenario, env_kwargs))
    print(table)
    print(f"written to {out_dir}: table.md, table.csv, episodes.csv, ttft_cdf.png, tier_slo.png, cost_vs_slo.png, tb/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
