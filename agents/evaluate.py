"""Compare policies (baseline names and saved SB3 models) on the same env and seeds.

    python -m agents.evaluate --env servegym/Routing-v0 --scenario default \\
        --policies least_outstanding,round_robin,runs/<run>/final_model.zip --seeds 10000,10001,10002 \\
        [--deterministic] [--stochastic] [--metric slo_attainment] \\
        [--set episode_requests=200 ...] [--device cpu] [--out results/eval/NAME]

Every policy runs one episode per seed (``agents.rollout.play_episode``). Saved models act
deterministically (their most likely action) by default; ``--stochastic`` samples their
actions (seeded by the episode seed: repeatable bit for bit); both flags together evaluate each
model twice, labelled ``[det]`` and ``[stoch]``. Heuristics are unaffected by the mode. Models
of one algorithm and file name (``{algo}_{stem}``) with different training seeds are one policy
with one run per training seed. Statistics follow Agarwal et al. (NeurIPS 2021) with
``rliable`` (``agents.statistics``): per policy and metric the IQM over training seeds x
evaluation seeds with a 95% stratified-bootstrap interval, and each agent's probability of
improvement over each heuristic on ``--metric``. Written to ``--out`` (default
``results/eval/{env}__{scenario}``): ``table.md`` (printed first), ``table.csv``,
``improvement.csv``, ``episodes.csv`` (every episode), ``comparison.png`` (every policy's IQM
and interval on the key metrics), ``performance_profile.png``, ``ttft_cdf.png``, ``tier_slo.png``
(with priority tiers), ``cost_vs_slo.png`` and TensorBoard runs under ``tb/``.
``--out`` is checked to be writable before any episode runs. Bad input prints one line
``agents.evaluate: error: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import math
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from gymnasium.envs.registration import load_env_creator
from stable_baselines3.common.vec_env import DummyVecEnv
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

import envs
from agents.callbacks import AgentPolicy
from agents.config import (
    DEFAULT_DEVICE,
    DEVICES,
    EVAL_MODES,
    TrainConfig,
    as_int,
    config_path_for,
    parse_value,
    resolve_device,
    sanitize,
    vecnormalize_path,
)
from agents.dashboard import (
    EPISODE_METRICS,
    KEY_METRICS,
    higher_is_better,
    instance_cache_metrics,
    metric_names,
    plot_cost_vs_slo,
    plot_ttft_cdf,
    tier_metrics,
)
from agents.interval_plot import interval_figure
from agents.model_files import TRUST_FLAG, load_model, load_vecnormalize
from agents.rollout import play_episode
from agents.statistics import (
    BOOTSTRAP_REPS,
    CONFIDENCE,
    Interval,
    iqm_by_metric,
    plot_performance_profile,
    probability_of_improvement,
)
from agents.train import EVAL_SEED_BASE, make_env
from baselines import make as make_policy
from simulator.cli import check_writable_dir, command

MODE_TAGS = {"deterministic": "det", "stochastic": "stoch"}
MODE_TEXT = {
    "deterministic": "deterministic (each trained policy takes its most likely action)",
    "stochastic": "stochastic (each trained policy samples its action; sampling seeded by the episode seed)",
}
HEADLINE_METRIC = "slo_attainment"
# Base font size of the comparison images on TensorBoard, whose cards show them at ~500 px wide.
TENSORBOARD_FONT_SIZE = 17


@dataclass(frozen=True)
class PolicyResult:
    """One policy's episodes (one per evaluation seed, in seed order) and the TTFT of every
    completed request. ``policy`` names what aggregates over training seeds (a baseline's name,
    or ``{algo}_{model file stem}`` with ``[det]`` / ``[stoch]`` when both modes run);
    ``train_seed``, ``mode`` and ``train_reward`` (the reward it was trained with) are None for heuristics; ``reward`` is the
    evaluation env's, whose sum over an episode is the ``return`` metric."""

    label: str
    policy: str
    episodes: list[dict[str, float]]
    ttft_s: np.ndarray
    train_seed: int | None = None
    mode: str | None = None
    train_reward: str | None = None
    reward: str | None = None

    @property
    def is_agent(self) -> bool:
        return self.train_seed is not None


def is_model_path(spec: str) -> bool:
    """A policy spec names a saved model when it ends in ``.zip``; otherwise it is a baseline name."""
    return spec.endswith(".zip")


def check_modes(modes: Sequence[str]) -> tuple[str, ...]:
    """``modes`` as a tuple of distinct known modes, at least one."""
    modes = tuple(modes)
    unknown = [mode for mode in modes if mode not in EVAL_MODES]
    if unknown or not modes or len(set(modes)) != len(modes):
        raise ValueError(f"evaluation modes must be distinct, at least one, of {list(EVAL_MODES)}; got {list(modes)}")
    return modes


def load_agent(model_path: Path, env: gym.Env, device: str = "cpu",
               trust_pickle: bool = False) -> tuple[AgentPolicy, TrainConfig]:
    """A saved model (with its run's VecNormalize statistics, if it used them) as a policy for
    ``env``, and its run's configuration; ``env`` must have the model's spaces. Nothing in the
    files is unpickled unless ``trust_pickle`` (``agents.model_files``)."""
    model_path = Path(model_path)
    if not model_path.is_file():
        raise ValueError(f"no saved model at {model_path}")
    config = TrainConfig.load(config_path_for(model_path))
    model = load_model(model_path, config, env, device, trust_pickle)
    for name in ("observation_space", "action_space"):
        if getattr(model, name) != getattr(env, name):
            raise ValueError(f"{model_path} was trained with {name} {getattr(model, name)}, "
                             f"the evaluation env has {getattr(env, name)}")
    vec_normalize = None
    if config.normalize is not None:
        stats_path = vecnormalize_path(model_path)
        if not stats_path.is_file() and not stats_path.with_suffix(".pkl").is_file():
            raise ValueError(f"{model_path} was trained with VecNormalize but {stats_path} is missing")
        vec_normalize = load_vecnormalize(stats_path, DummyVecEnv([lambda: env]), trust_pickle)
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
    modes: Sequence[str] = ("deterministic",),
    trust_pickle: bool = False,
) -> list[PolicyResult]:
    """Run every policy (baseline name or ``.zip`` model path) for one episode per seed on
    ``gym.make(env_id, scenario=scenario, **env_kwargs)``; a model once per mode of ``modes``
    (``trust_pickle``: as ``load_agent``)."""
    if not policies:
        raise ValueError("no policy to evaluate")
    modes = check_modes(modes)
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
        if not is_model_path(spec):
            env = env_for(False)
            policy = make_policy(spec, env)
            results.append(_run(env, policy, seeds, _unique(spec, labels), spec, None, None))
            continue
        config = TrainConfig.load(config_path_for(Path(spec)))
        if config.env_id != env_id:
            raise ValueError(f"{spec} was trained on {config.env_id}, not {env_id}")
        env = env_for(config.flat_observation)
        policy, _ = load_agent(Path(spec), env, device, trust_pickle)
        for mode in modes:
            suffix = f"[{MODE_TAGS[mode]}]" if len(modes) > 1 else ""
            label = _unique(f"{config.algo}_s{config.seed}_{Path(spec).stem}{suffix}", labels)
            group = f"{config.algo}_{Path(spec).stem}{suffix}"
            results.append(_run(env, policy, seeds, label, group, config.seed, mode,
                                config.env_kwargs.get("reward", default_reward(env_id))))
    for env in envs_by_flatness.values():
        env.close()
    return results


def default_reward(env_id: str) -> str:
    """The reward ``env_id`` uses when ``reward=`` is not given (its class's default)."""
    creator = load_env_creator(gym.spec(env_id).entry_point)
    for klass in creator.__mro__:
        parameter = inspect.signature(klass.__init__).parameters.get("reward")
        if parameter is not None:
            return parameter.default
    raise ValueError(f"{env_id} takes no reward argument")


def _run(env: gym.Env, policy: Any, seeds: Sequence[int], label: str, group: str, train_seed: int | None,
         mode: str | None, train_reward: str | None = None) -> PolicyResult:
    episodes, ttft_s = [], []
    for seed in seeds:
        episode = play_episode(env, policy, seed, deterministic=mode != "stochastic")
        episodes.append(episode.metrics)
        ttft_s.extend(o.first_token_s - o.arrival_s for o in episode.outcomes if o.completed)
    return PolicyResult(label, group, episodes, np.array(ttft_s, dtype=float), train_seed, mode, train_reward,
                        env.unwrapped.reward_name)


def policy_runs(results: Sequence[PolicyResult]) -> dict[str, list[PolicyResult]]:
    """The results of each policy (its runs: one per training seed, one for a heuristic), in
    first-seen order; two runs of one policy with the same training seed, or a policy mixing
    heuristic and trained runs, raise."""
    runs: dict[str, list[PolicyResult]] = {}
    for result in results:
        runs.setdefault(result.policy, []).append(result)
    for policy, members in runs.items():
        seeds = [member.train_seed for member in members]
        if len(members) > 1 and (None in seeds or len(set(seeds)) != len(seeds)):
            raise ValueError(f"policy {policy!r} has runs {[m.label for m in members]} with training seeds {seeds}: "
                             "runs of one policy need distinct training seeds")
    return runs


def score_array(members: Sequence[PolicyResult], metrics: Sequence[str]) -> np.ndarray:
    """``runs x evaluation seeds x metrics`` scores of one policy (NaN where a metric is missing)."""
    return np.array([[[episode.get(metric, math.nan) for metric in metrics] for episode in member.episodes]
                     for member in members], dtype=float)


def table_metrics(results: Sequence[PolicyResult]) -> list[str]:
    """Serving metrics, per-tier attainments, then return and invalid actions: those some
    episode has a value for (a metric NaN everywhere, such as QoE without reasoning, does not apply)."""
    union: dict[str, float] = {}
    for result in results:
        for episode in result.episodes:
            union.update({k: 0.0 for k, v in episode.items() if not math.isnan(v)})
    return [*metric_names(union), *(k for k in EPISODE_METRICS if k in union)]


def aggregate(results: Sequence[PolicyResult]) -> dict[str, dict[str, Interval]]:
    """``{policy: {metric: IQM interval}}`` for every table metric (``agents.statistics.iqm_by_metric``)."""
    metrics = table_metrics(results)
    return {policy: dict(zip(metrics, iqm_by_metric(score_array(members, metrics))))
            for policy, members in policy_runs(results).items()}


def improvements(results: Sequence[PolicyResult], metric: str) -> dict[tuple[str, str], Interval]:
    """``{(agent policy, heuristic): P(agent better on metric)}`` for every pair."""
    runs = policy_runs(results)
    agents = [policy for policy, members in runs.items() if members[0].is_agent]
    heuristics = [policy for policy, members in runs.items() if not members[0].is_agent]
    better_high = higher_is_better(metric)
    return {(agent, heuristic): probability_of_improvement(score_array(runs[agent], [metric])[..., 0],
                                                           score_array(runs[heuristic], [metric])[..., 0], better_high)
            for agent in agents for heuristic in heuristics}


def mode_line(results: Sequence[PolicyResult]) -> str:
    """The table header's sentence naming the evaluation mode(s) of the trained policies."""
    modes = list(dict.fromkeys(r.mode for r in results if r.mode is not None))
    if not modes:
        return "Evaluation mode: heuristics only (deterministic rules; `random` draws from the episode seed)."
    if len(modes) == 1:
        return f"**Evaluation mode: {MODE_TEXT[modes[0]]}.** Heuristics are unaffected by the mode."
    return ("**Evaluation modes: both**: `[det]` " + MODE_TEXT["deterministic"] + "; `[stoch]` " + MODE_TEXT["stochastic"]
            + ". Heuristics are unaffected by the mode.")


def reward_line(results: Sequence[PolicyResult]) -> str:
    """The sentence naming the reward whose episode sum the ``return`` row shows, and each agent
    trained with another reward."""
    rewards = list(dict.fromkeys(r.reward for r in results if r.reward is not None))
    if not rewards:
        return ""
    line = f"`return`: the episode's sum of the evaluation env's reward `{'`, `'.join(rewards)}`, for every policy"
    others = {r.policy: r.train_reward for r in results if r.is_agent and r.train_reward not in rewards}
    if others:
        line += " (" + "; ".join(f"`{p}` was trained with reward `{w}`" for p, w in others.items()) + ")"
    return line + "."


def identical_policies(results: Sequence[PolicyResult]) -> list[list[str]]:
    """Groups of two or more policies whose episodes are identical in every metric on every
    evaluation seed (and every training seed): their table columns are the same."""
    groups: dict[str, list[str]] = {}
    for policy, members in policy_runs(results).items():
        key = repr([[sorted(episode.items()) for episode in member.episodes] for member in members])
        groups.setdefault(key, []).append(policy)
    return [group for group in groups.values() if len(group) > 1]


def identical_line(results: Sequence[PolicyResult]) -> str:
    """The sentence saying which columns are identical and why (empty when none are)."""
    groups = identical_policies(results)
    if not groups:
        return ""
    named = "; ".join(" and ".join(f"`{p}`" for p in group) for group in groups)
    return (f"Identical columns: {named} played every evaluation episode to the same outcome (every metric equal on "
            "every seed): on these workloads their rules chose the same instances.")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[str]) -> list[str]:
    """A markdown table (``pandas.DataFrame.to_markdown``), cells as text."""
    frame = pd.DataFrame([[str(cell) for cell in row] for row in rows], columns=list(header))
    return frame.to_markdown(index=False, disable_numparse=True, colalign=tuple(align)).splitlines()


def markdown_table(results: Sequence[PolicyResult], seeds: Sequence[int], table: dict[str, dict[str, Interval]],
                   pairs: dict[tuple[str, str], Interval], metric: str = HEADLINE_METRIC) -> str:
    """The report: mode, reward, seeds, IQM [95% CI] per metric (rows) and policy (columns)
    (``table``: ``aggregate``; the per-instance prefix-cache metrics only in the CSV files), which
    columns are identical, each trained run's mean ``metric`` over the evaluation seeds, and each
    agent's probability of improvement over each heuristic on ``metric`` (``pairs``: ``improvements``)."""
    runs = policy_runs(results)
    policies = list(runs)
    trained = {p: [m.train_seed for m in members] for p, members in runs.items() if members[0].is_agent}
    lines = [
        mode_line(results),
        "",
        f"Held-out evaluation seeds {', '.join(map(str, seeds))} (n = {len(seeds)})"
        + "".join(f"; `{p}`: training seeds {', '.join(map(str, s))}" for p, s in trained.items()) + ".",
        f"Cells: IQM over training seeds x evaluation seeds [95% stratified-bootstrap interval over both, "
        f"rliable, {BOOTSTRAP_REPS:,} resamples] (Agarwal et al., NeurIPS 2021).",
    ]
    metrics = table_metrics(results)
    per_instance = instance_cache_metrics(metrics)
    if per_instance:
        lines.append(f"Per-instance prefix-cache metrics ({len(per_instance)}, e.g. `{per_instance[0]}`) are left out "
                     "of this table: they are in `table.csv`, `episodes.csv` and TensorBoard.")
    lines += [text for text in (reward_line(results), identical_line(results)) if text]
    lines.append("")
    lines += _table(["metric", *policies], [[name, *(table[p][name] for p in policies)] for name in metrics
                                            if name not in per_instance],
                    ["left", *["right"] * len(policies)])
    agent_runs = [r for r in results if r.is_agent]
    if agent_runs and metric in metrics:
        lines += ["", "Per training run, mean over the evaluation seeds:", ""]
        lines += _table(["run", "training seed", metric, "return"],
                        [[r.label, r.train_seed, f"{_mean(r, metric):.4g}", f"{_mean(r, 'return'):.4g}"] for r in agent_runs],
                        ["left", "right", "right", "right"])
        heuristics = [p for p in policies if not runs[p][0].is_agent]
        if heuristics:
            lines += ["", f"Probability of improvement P(agent better than heuristic) on {metric} "
                          f"({'higher' if higher_is_better(metric) else 'lower'} is better) [95% interval]; "
                          "above 0.5 favours the agent:", ""]
            lines += _table(["agent", *(f"vs {h}" for h in heuristics)],
                            [[a, *(pairs[(a, h)] for h in heuristics)] for a in trained],
                            ["left", *["right"] * len(heuristics)])
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Report:
    """The statistics of an evaluation: IQM intervals (``aggregate``), probabilities of
    improvement on ``metric`` (``improvements``) and the markdown ``table``."""

    intervals: dict[str, dict[str, Interval]]
    pairs: dict[tuple[str, str], Interval]
    table: str
    metric: str


def build_report(results: Sequence[PolicyResult], seeds: Sequence[int], metric: str = HEADLINE_METRIC) -> Report:
    """Compute the report's statistics and markdown table (nothing is written)."""
    intervals = aggregate(results)
    pairs = improvements(results, metric) if metric in table_metrics(results) else {}
    return Report(intervals, pairs, markdown_table(results, seeds, intervals, pairs, metric), metric)


def check_writable(out_dir: Path) -> None:
    """``--out`` can be written (``simulator.cli.check_writable_dir``): checked before any episode runs."""
    check_writable_dir("--out", out_dir)


def write_report(results: Sequence[PolicyResult], seeds: Sequence[int], out_dir: Path,
                 ttft_slo_s: float | None = None, metric: str = HEADLINE_METRIC, report: Report | None = None) -> str:
    """Write tables, episodes, plots and TensorBoard runs into ``out_dir`` (``report``: the
    statistics already computed by ``build_report``, else computed here); return the markdown report."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build_report(results, seeds, metric) if report is None else report
    intervals, pairs, table = report.intervals, report.pairs, report.table
    (out_dir / "table.md").write_text(table)
    _write_csv(out_dir / "table.csv", [{"policy": p, "metric": m, "iqm": i.value, "ci_low": i.low, "ci_high": i.high,
                                        "runs": i.runs, "tasks": i.tasks}
                                       for m in table_metrics(results) for p, by_metric in intervals.items()
                                       for i in [by_metric[m]]],
               ["policy", "metric", "iqm", "ci_low", "ci_high", "runs", "tasks"])
    if metric in table_metrics(results):
        _write_csv(out_dir / "improvement.csv",
                   [{"agent": a, "heuristic": h, "metric": metric, "probability": i.value, "ci_low": i.low,
                     "ci_high": i.high, "runs": i.runs, "tasks": i.tasks} for (a, h), i in pairs.items()],
                   ["agent", "heuristic", "metric", "probability", "ci_low", "ci_high", "runs", "tasks"])
        plot_performance_profile({p: score_array(m, [metric])[..., 0] for p, m in policy_runs(results).items()},
                                 out_dir / "performance_profile.png", metric, higher_is_better(metric))
    episode_rows = [{"policy": r.policy, "run": r.label, "train_seed": "" if r.train_seed is None else r.train_seed,
                     "mode": r.mode or "", "seed": seed, **episode}
                    for r in results for seed, episode in zip(seeds, r.episodes)]
    _write_csv(out_dir / "episodes.csv", episode_rows, list(dict.fromkeys(k for row in episode_rows for k in row)))
    runs = policy_runs(results)
    agents = [p for p, members in runs.items() if members[0].is_agent]
    plot_ttft_cdf({p: np.concatenate([m.ttft_s for m in members]) for p, members in runs.items()},
                  out_dir / "ttft_cdf.png", ttft_slo_s, agents)
    tiers = tier_metrics(table_metrics(results))
    if tiers:
        comparison_figure(results, intervals, [tiers[t] for t in sorted(tiers)],
                          "SLO attainment per priority tier").savefig(out_dir / "tier_slo.png", dpi=110)
    if metric in table_metrics(results):
        comparison_figure(results, intervals, comparison_metrics(table_metrics(results), metric),
                          "Every policy on the key metrics").savefig(out_dir / "comparison.png", dpi=110)
    plot_cost_vs_slo({p: [(e["cost_usd"], e["slo_attainment"]) for m in members for e in m.episodes]
                      for p, members in runs.items()}, out_dir / "cost_vs_slo.png", agents)
    _write_tensorboard(out_dir / "tb", results, intervals, table, metric)
    return table


def comparison_metrics(metrics: Sequence[str], headline: str) -> list[str]:
    """The headline metric, then those of ``KEY_METRICS`` the table has: the comparison chart's panels."""
    return [headline, *(m for m in KEY_METRICS if m in metrics and m != headline)]


def comparison_figure(results: Sequence[PolicyResult], intervals: dict[str, dict[str, Interval]],
                      metrics: Sequence[str], title: str = "") -> Figure:
    """``agents.interval_plot.interval_figure`` of ``metrics``, the trained agents highlighted;
    with a ``title``, a note on what the bars are under it."""
    agents = [p for p, members in policy_runs(results).items() if members[0].is_agent]
    note = f"IQM over training x held-out seeds, {CONFIDENCE:.0%} bootstrap interval; best on top" if title else ""
    return interval_figure(intervals, metrics, {m: higher_is_better(m) for m in metrics}, agents=agents, title=title,
                           note=note)


def _write_tensorboard(tb_dir: Path, results: Sequence[PolicyResult], intervals: dict[str, dict[str, Interval]],
                       table: str, metric: str) -> None:
    """``tb/comparison/``: images ``comparison/<k>_<metric>``, every policy's IQM and interval on
    the headline metric (k = 1) and each other key metric the table has (TensorBoard's landing
    page: the first group of cards), and the report as text; ``tb/<policy>/``: each metric's IQM as ``iqm/<metric>`` and the policy's
    HPARAMS row (kind, mode, training seeds) with those metrics as columns."""
    if tb_dir.exists():
        shutil.rmtree(tb_dir)
    metrics = list(next(iter(intervals.values())))
    runs = policy_runs(results)
    ordered = [metric, *(m for m in metrics if m != metric)] if metric in metrics else metrics
    for policy, by_metric in intervals.items():
        writer = SummaryWriter(str(tb_dir / sanitize(policy)))
        values = {f"iqm/{name}": by_metric[name].value for name in ordered if not math.isnan(by_metric[name].value)}
        for tag, value in values.items():
            writer.add_scalar(tag, value, global_step=0)
        members = runs[policy]
        row = {"policy_name": policy, "kind": "agent" if members[0].is_agent else "heuristic", "mode": members[0].mode or "",
               "training_seeds": ",".join(str(m.train_seed) for m in members if m.train_seed is not None)}
        for summary in hparams(row, values):
            writer.file_writer.add_summary(summary)
        writer.close()
    writer = SummaryWriter(str(tb_dir / "comparison"))
    writer.add_text("comparison", table, global_step=0)
    if metric in metrics:
        for index, name in enumerate(comparison_metrics(metrics, metric), start=1):
            with plt.rc_context({"font.size": TENSORBOARD_FONT_SIZE}):
                figure = comparison_figure(results, intervals, [name])
            writer.add_image(f"comparison/{index}_{name}", _png_array(figure), global_step=0, dataformats="HWC")
    writer.close()


def _png_array(figure: Figure) -> np.ndarray:
    """``figure`` rendered as an RGB array (what ``SummaryWriter.add_image`` takes)."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def _mean(result: PolicyResult, metric: str) -> float:
    values = np.array([episode.get(metric, math.nan) for episode in result.episodes], dtype=float)
    return float(np.nanmean(values)) if np.any(~np.isnan(values)) else math.nan


def _write_csv(path: Path, rows: Sequence[dict[str, Any]], fields: list[str]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)


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


def add_mode_flags(parser: argparse.ArgumentParser) -> None:
    """``--deterministic`` / ``--stochastic`` (both allowed; neither: deterministic)."""
    parser.add_argument("--deterministic", action="store_true", help="trained policies take their most likely action (default)")
    parser.add_argument("--stochastic", action="store_true",
                        help="trained policies sample their actions (seeded by the episode seed); with --deterministic: both")


def modes_from(args: argparse.Namespace, default: tuple[str, ...] = ("deterministic",)) -> tuple[str, ...]:
    """The modes ``add_mode_flags``'s flags ask for; ``default`` when neither flag is given."""
    modes = tuple(mode for mode in EVAL_MODES if getattr(args, mode))
    return modes or default


@command("agents.evaluate")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; bad input (a ``ValueError`` or ``OSError``) prints one line and returns 2."""
    parser = argparse.ArgumentParser(prog="agents.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help=f"one of {sorted(envs.ENV_IDS)}")
    parser.add_argument("--scenario", default="default", help=f"one of {envs.scenario_names()}")
    parser.add_argument("--policies", required=True, help="comma-separated baseline names and .zip model paths")
    held_out = ",".join(str(EVAL_SEED_BASE + k) for k in range(5))
    parser.add_argument("--seeds", default=held_out,
                        help=f"comma-separated episode seeds (default {held_out}: held out from training seeds)")
    add_mode_flags(parser)
    parser.add_argument("--metric", default=HEADLINE_METRIC,
                        help=f"metric of the probability of improvement and the performance profile (default {HEADLINE_METRIC})")
    parser.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="env / scenario overrides, e.g. episode_requests=200 reward=latency")
    parser.add_argument("--device", choices=DEVICES, default=DEFAULT_DEVICE,
                        help=f"where saved models run (default {DEFAULT_DEVICE}; auto: CUDA when present)")
    parser.add_argument("--out", type=Path, help="output folder (default results/eval/{env}__{scenario})")
    parser.add_argument(TRUST_FLAG, action="store_true",
                        help="load model files that pickle Python objects (older VecNormalize .pkl statistics, "
                             "unknown pickled settings): this runs code from the files; only for files you trust")
    return _evaluate(parser.parse_args(argv))


def _evaluate(args: argparse.Namespace) -> int:
    env_kwargs = {}
    for assignment in args.overrides:
        key, sep, text = assignment.partition("=")
        if not sep or not key:
            raise ValueError(f"override {assignment!r} is not key=value")
        env_kwargs[key] = parse_value(text)
    seeds = _seeds(args.seeds)
    policies = [p for p in args.policies.split(",") if p]
    out_dir = args.out or Path("results") / "eval" / f"{sanitize(args.env)}__{args.scenario}"
    check_writable(out_dir)
    results = evaluate_policies(args.env, args.scenario, policies, seeds, env_kwargs, resolve_device(args.device),
                                modes_from(args), args.trust_pickle)
    if args.metric not in table_metrics(results):
        raise ValueError(f"unknown --metric {args.metric!r}; the episodes report {table_metrics(results)}")
    report = build_report(results, seeds, args.metric)
    print(report.table, flush=True)
    write_report(results, seeds, out_dir, _ttft_slo_s(args.env, args.scenario, env_kwargs), args.metric, report)
    print(f"written to {out_dir}: table.md, table.csv, improvement.csv, episodes.csv, comparison.png, "
          "performance_profile.png, ttft_cdf.png, tier_slo.png, cost_vs_slo.png, tb/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
