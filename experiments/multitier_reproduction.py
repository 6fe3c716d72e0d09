"""Reproduce the K-tier Llumnix paper's comparison (Llumnix-K §5) on ``multitier``.

Systems (§5.3): **Llumnix+Llumlet**: K-tier freeness dispatch with the default headroom
(Migration-v0's ``router="llumnix"``, i.e. ``envs.tier.freest_instance``), ΔF migration every
50 ms (the ``llumnix_migration`` policy) and the ``priority`` local scheduler; **INFaaS+vLLM**:
INFaaS cost routing (the ``infaas`` policy on Routing-v0) and vLLM's ``fcfs`` local scheduler,
no migration. The K sweep adds **RR+vLLM** (Fig. 7's round-robin baseline) and the ablations
(K = 4) split the global from the local effect: Llumnix dispatch without migration (Tier-v0
with the paper's budgets), INFaaS with the Llumlet queue. Every episode runs through
``agents.rollout.play_episodes``, so the same policy code drives the envs, the tests and this.

Setups: every table, sweep and ablation runs the paper setup, the authors' stated run (a
128-block KV pool of 16 tokens and a batch cap of 64 on each replica, ``setup_overrides``); two
labelled variants run Table 2's bold cell (uniform, K = 4, the lower load): ``a100_memory`` (the
pool the A100's memory holds) and ``fork_llumlet`` (the fork's Llumlet limits for Llumnix+Llumlet
only, which shows where the paper's gap comes from). ``headlines()`` turns ``results.json`` into
the rows of ``docs/reproductions.md``.

Outputs under ``--out`` (default ``results/multitier``):

- ``report.md``: Tables 2–4 (speed-ups of Llumnix+Llumlet over INFaaS+vLLM in prefill P99 /
  mean, E2E P99 / mean and cost-per-latency, K ∈ {3, 4, 5} x uniform / gaussian / enterprise
  x two loads) with the paper's number, ours and ours / paper; the K = 1…10 sweeps (Fig. 6–7
  at the paper's 10 req/s, and at the 1,250 req/s burst); per-tier TTFT for Fig. 5; ablations;
- ``fig5_ttft_cdf_by_tier.png``, ``fig6_e2e_percentiles_vs_k.png``,
  ``fig7_prefill_e2e_vs_k.png``, ``k_sweep_burst.png``, ``speedups_vs_paper.png``;
- ``results.json`` and ``tensorboard/<system>/`` (one run per system, the same scalar tags).

Definitions. Prefill latency is TTFT (arrival to the first token, Vidur's
``prefill_e2e_time``). Percentiles and means pool the completed requests of all seeds. A
speed-up is INFaaS+vLLM's value over Llumnix+Llumlet's. The paper does not define
"cost-per-latency"; we read it as the cost-latency product (the episode's GPU dollars times the
mean E2E latency) and report its reduction, 1 − (cost · E2E)_Llumnix / (cost · E2E)_INFaaS (with
the same four GPUs this is close to 1 − 1 / E2E-mean speed-up; the paper's columns follow that
within 9 points). Load: the paper sends 10K and 15K requests at 1,250 req/s (§4.4); one 10K-request
episode takes about 50 s here (queues of thousands make every observation long), so the
default loads keep the 10 : 15 ratio at 2,000 and 3,000 requests (``--requests``).

    python -m experiments.multitier_reproduction [--quick] [--out DIR] [--seeds 0 1 2]
        [--requests 2000 3000] [--sweep-requests 1000] [--workers 2] [--address auto|HOST:PORT]

Episodes fan out over Ray tasks (``simulator.fanout``; ``--workers 1`` runs them here, without Ray).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from agents.rollout import play_episodes
from envs.presets import make_scenario
from envs.scenario import InstanceGroup
from envs.scenarios.multitier import (
    MAIN_SWEEP_RATE_RPS,
    PAPER_BATCH_CAP,
    PAPER_KV_BLOCKS,
    SCHEDULER_BENCHMARK_RATE_RPS,
    exponential_tier_weights,
)
from experiments.harness import ExperimentParser, Run, Scalar, markdown_table, save_figure
from experiments.headlines import Headline
from simulator.cli import command
from simulator.fanout import fan_out

FANS_OUT = True  # the episodes: takes --workers / --address (simulator.fanout)
LLUMNIX, INFAAS, RR = "Llumnix+Llumlet", "INFaaS+vLLM", "RR+vLLM"
TABLE_TIERS = (3, 4, 5)
SWEEP_TIERS = tuple(range(1, 11))
FIG5_TIERS = (1, 3, 5)
DISTRIBUTIONS = ("uniform", "gaussian", "enterprise")
METRICS = ("prefill_p99_s", "prefill_mean_s", "e2e_p99_s", "e2e_mean_s", "cost_latency")
METRIC_TITLES = ("Prefill P99", "Prefill Mean", "E2E P99", "E2E Mean", "Cost/Lat.")


@dataclass(frozen=True)
class System:
    """A compared system: the env and policy of its global scheduler, its local scheduler."""

    env_id: str
    policy: str
    scheduler: str
    env_options: tuple[tuple[str, Any], ...] = ()


SYSTEMS: dict[str, System] = {
    LLUMNIX: System("servegym/Migration-v0", "llumnix_migration", "priority", (("router", "llumnix"),)),
    INFAAS: System("servegym/Routing-v0", "infaas", "fcfs"),
    RR: System("servegym/Routing-v0", "round_robin", "fcfs"),
    "Llumnix(no migration)+Llumlet": System("servegym/Tier-v0", "llumnix", "priority", (("continuous", True),)),
    "INFaaS+Llumlet": System("servegym/Routing-v0", "infaas", "priority"),
}
TABLE_SYSTEMS = (LLUMNIX, INFAAS)
SWEEP_SYSTEMS = (LLUMNIX, INFAAS, RR)
ABLATION_SYSTEMS = (LLUMNIX, "Llumnix(no migration)+Llumlet", "INFaaS+Llumlet", INFAAS, RR)

# Tables 2–4: (distribution, scale) -> K -> (prefill P99, prefill mean, E2E P99, E2E mean speed-ups, cost/lat. cut)
PAPER_TABLES: dict[tuple[str, str], dict[int, tuple[float, float, float, float, float]]] = {
    ("uniform", "10K"): {3: (4.79, 8.23, 2.87, 2.80, 0.65), 4: (4.87, 8.23, 3.13, 2.88, 0.68), 5: (4.16, 8.11, 3.04, 2.92, 0.67)},
    ("uniform", "15K"): {3: (2.98, 5.00, 1.87, 1.97, 0.46), 4: (3.16, 5.16, 2.12, 2.08, 0.53), 5: (2.72, 5.07, 2.04, 2.12, 0.51)},
    ("gaussian", "10K"): {3: (3.24, 7.47, 2.26, 2.45, 0.56), 4: (4.25, 8.33, 3.07, 2.79, 0.67), 5: (3.49, 7.51, 2.43, 2.74, 0.59)},
    ("gaussian", "15K"): {3: (2.00, 4.68, 1.49, 1.71, 0.33), 4: (2.70, 5.24, 2.02, 1.96, 0.51), 5: (2.25, 4.88, 1.97, 1.67, 0.41)},
    ("enterprise", "10K"): {3: (3.10, 8.06, 2.18, 2.27, 0.54), 4: (4.41, 8.28, 3.02, 2.79, 0.67), 5: (4.12, 8.14, 2.96, 2.89, 0.66)},
    ("enterprise", "15K"): {3: (1.77, 4.51, 1.31, 1.44, 0.24), 4: (2.76, 5.04, 1.94, 1.95, 0.48), 5: (2.61, 5.06, 1.97, 2.08, 0.49)},
}
# Setups: the paper's stated configuration first, then labelled variants (headline cell only).
PAPER, A100_MEMORY, FORK_LLUMLET = "paper", "a100_memory", "fork_llumlet"
FORK_LLUMLET_BATCH_CAP = 1024  # no cap in the fork's Llumlet; 1,024 exceeds any replica's share of an episode
SETUP_TEXT = {
    PAPER: f"paper setup ({PAPER_KV_BLOCKS}-block KV pool, batch cap {PAPER_BATCH_CAP}, both systems)",
    A100_MEMORY: f"variant: KV pool from A100-80GB memory, batch cap {PAPER_BATCH_CAP}, both systems",
    FORK_LLUMLET: (f"variant: the fork's Llumlet limits (decodes hold no KV, no batch cap) for Llumnix+Llumlet only, "
                   f"INFaaS+vLLM at the {PAPER_KV_BLOCKS}-block pool"),
}


def setup_overrides(setup: str, system: str) -> dict[str, Any]:
    """InstanceConfig fields of ``system``'s replicas under ``setup``.

    ``paper``: the authors' run (``vidur/metrics/latency_config.py``): a 128-block pool of
    16-token blocks and a batch cap of 64; the INFaaS+vLLM command is not public, so vLLM gets
    the same pool. ``a100_memory``: the pool the A100's memory holds. ``fork_llumlet``: the fork's
    Llumlet frees every request's blocks at each batch end and charges a decoding request 0
    blocks (``_blocks_for_request_next_step``), and ``_get_next_batch`` checks no batch cap, so
    its 128 blocks only cap the prompt tokens of one iteration (2,048); we give Llumnix+Llumlet
    the memory-sized pool, 2,048 prompt tokens per iteration and no effective cap, and leave
    INFaaS+vLLM at the paper pool.
    """
    if setup == PAPER:
        return {"kv_blocks": PAPER_KV_BLOCKS, "max_batch_size": PAPER_BATCH_CAP}
    if setup == A100_MEMORY:
        return {"kv_blocks": None, "max_batch_size": PAPER_BATCH_CAP}
    if setup == FORK_LLUMLET:
        if system == LLUMNIX:
            return {"kv_blocks": None, "max_batch_size": FORK_LLUMLET_BATCH_CAP,
                    "max_batched_tokens": PAPER_KV_BLOCKS * 16}
        return {"kv_blocks": PAPER_KV_BLOCKS, "max_batch_size": PAPER_BATCH_CAP}
    raise ValueError(f"unknown multitier setup {setup!r}; known: {list(SETUP_TEXT)}")


VARIANT_SETUPS = (A100_MEMORY, FORK_LLUMLET)


PAPER_TIER_SPLIT_K3_S = (0.3, 3.0)  # §5.1, uniform, K = 3: tier 0 median TTFT ~0.3 s, tier 2 over 3 s
PAPER_BEST_K = 4  # §5.3


# ----------------------------------------------------------------------------- running
@dataclass(frozen=True)
class Episode:
    system: str
    num_tiers: int
    priorities: str
    episode_requests: int
    rate_rps: float
    seed: int
    setup: str = PAPER


def run_episode(episode: Episode) -> dict[str, Any]:
    """One episode through ``agents.rollout.play_episodes``; per-request arrays from its outcomes."""
    system = SYSTEMS[episode.system]
    base = make_scenario("multitier")
    overrides = setup_overrides(episode.setup, episode.system)
    instances = tuple(
        InstanceGroup(dataclasses.replace(group.config, scheduler=system.scheduler, **overrides), group.count)
        for group in base.instances
    )
    (played,) = play_episodes(
        system.policy, system.env_id, [episode.seed], scenario="multitier", instances=instances,
        num_tiers=episode.num_tiers, tier_weights=exponential_tier_weights(episode.num_tiers),
        priorities=episode.priorities, episode_requests=episode.episode_requests, rate_rps=episode.rate_rps,
        **dict(system.env_options),
    )
    metrics = played.metrics
    done = [o for o in played.outcomes if o.completed]
    return {
        "tier": np.array([o.tier for o in done]),
        "instance": np.array([o.instance_id for o in done]),
        "ttft_s": np.array([o.ttft_s for o in done]),
        "e2e_s": np.array([o.e2e_s for o in done]),
        "cost_usd": metrics["cost_usd"],
        "migrations": metrics["migrations"],
        "invalid_actions": metrics["invalid_actions"],
        "lost": episode.episode_requests - len(done),
    }


def run_all(episodes: list[Episode], workers: int, address: str | None = None) -> dict[Episode, dict[str, Any]]:
    """Every episode's run, ``workers`` at a time (``simulator.fanout``)."""
    return dict(zip(episodes, fan_out(run_episode, [(episode,) for episode in episodes], workers, address)))


# ----------------------------------------------------------------------------- metrics
def summarize_cell(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One (system, setting) cell: completed requests pooled over seeds."""
    ttft = np.concatenate([r["ttft_s"] for r in runs])
    e2e = np.concatenate([r["e2e_s"] for r in runs])
    tiers = np.concatenate([r["tier"] for r in runs])
    cost_usd = float(np.mean([r["cost_usd"] for r in runs]))
    shares = [np.bincount(r["instance"]).max() / len(r["instance"]) for r in runs]
    cell = {f"prefill_p{q}_s": float(np.percentile(ttft, q)) for q in (50, 90, 99)}
    cell.update({f"e2e_p{q}_s": float(np.percentile(e2e, q)) for q in (50, 90, 99)})
    cell.update({
        "prefill_mean_s": float(ttft.mean()), "e2e_mean_s": float(e2e.mean()), "cost_usd": cost_usd,
        "cost_latency": cost_usd * float(e2e.mean()),
        "tier_ttft_p50_s": {int(t): float(np.median(ttft[tiers == t])) for t in np.unique(tiers)},
        "tier_ttft_p99_s": {int(t): float(np.percentile(ttft[tiers == t], 99)) for t in np.unique(tiers)},
        "largest_instance_share": float(np.mean(shares)),
        "migrations": int(sum(r["migrations"] for r in runs)),
        "invalid_actions": int(sum(r["invalid_actions"] for r in runs)),
        "lost": int(sum(r["lost"] for r in runs)),
    })
    return cell


def speedups(llumnix: dict[str, Any], infaas: dict[str, Any]) -> tuple[float, float, float, float, float]:
    """Table 2's columns: INFaaS over Llumnix for the four latencies, and the cost-latency cut."""
    latency = tuple(infaas[key] / llumnix[key] for key in METRICS[:4])
    return (*latency, 1.0 - llumnix["cost_latency"] / infaas["cost_latency"])


def best_tiers(table: dict[int, tuple[float, ...]]) -> int:
    """The K with the largest cost-latency cut (the paper's bold K)."""
    return max(table, key=lambda k: table[k][4])


# ----------------------------------------------------------------------------- outputs
def _speedup_text(value: float, is_cut: bool) -> str:
    return f"{100 * value:.0f}%" if is_cut else f"{value:.2f}×"


def table_lines(ours: dict[tuple[str, str], dict[int, tuple]], scales: dict[str, int], distribution: str) -> list[str]:
    rows = []
    for scale, requests in scales.items():
        for k in TABLE_TIERS:
            paper, mine = PAPER_TABLES[(distribution, scale)][k], ours[(distribution, scale)][k]
            rows.append((f"{scale} ({requests} req)", k, *(f"{_speedup_text(p, i == 4)} / {_speedup_text(m, i == 4)} ({m / p:.2f})"
                                                           for i, (p, m) in enumerate(zip(paper, mine)))))
    return markdown_table(("Scale", "K", *(f"{t} paper / ours (ratio)" for t in METRIC_TITLES)), rows)


def write_report(path: Path, results: dict[str, Any], scales: dict[str, int], setup: str) -> None:
    ours, cells = results["tables"], results["cells"]
    low = next(iter(scales))
    wins = sum(v[3] > 1.0 for t in ours.values() for v in t.values())
    total = sum(len(t) for t in ours.values())
    k3 = results["fig5"][LLUMNIX][3]["tier_ttft_p50_s"]
    lines = ["# K-tier Llumnix reproduction (Llumnix-K §5)", "", setup, "", "## Headline", "",
             "| claim | paper | ours | ours / paper |", "|---|---|---|---|"]
    for distribution in DISTRIBUTIONS:
        paper, mine = PAPER_TABLES[(distribution, "10K")][4], ours[(distribution, low)][4]
        lines.append(f"| E2E mean speed-up, {distribution}, K = 4, {low} | {paper[3]:.2f}× | {mine[3]:.2f}× | {mine[3] / paper[3]:.2f} |")
        lines.append(f"| cost-latency cut, {distribution}, K = 4, {low} | {100 * paper[4]:.0f}% | {100 * mine[4]:.0f}% | "
                     f"{mine[4] / paper[4]:.2f} |")
    lines.append(f"| tier 0 / tier 2 median TTFT, uniform, K = 3 | {PAPER_TIER_SPLIT_K3_S[0]} s / >{PAPER_TIER_SPLIT_K3_S[1]} s | "
                 f"{k3[0]:.2f} s / {k3[2]:.2f} s | {k3[0] / PAPER_TIER_SPLIT_K3_S[0]:.2f} / {k3[2] / PAPER_TIER_SPLIT_K3_S[1]:.2f} |")
    for distribution in DISTRIBUTIONS:
        for scale in scales:
            lines.append(f"| best K (largest cost-latency cut), {distribution}, {scale} | {PAPER_BEST_K} | "
                         f"{best_tiers(ours[(distribution, scale)])} | |")
    lines += ["", f"Llumnix+Llumlet has the lower mean E2E latency in {wins} of {total} table cells.", ""]
    lines += findings_lines(results, scales)
    for distribution in DISTRIBUTIONS:
        title = {"uniform": "Table 2", "gaussian": "Table 3", "enterprise": "Table 4"}[distribution]
        lines += [f"## {title}: speed-up over INFaaS+vLLM, {distribution}", ""]
        lines += table_lines(ours, scales, distribution)
        lines += ["", "Largest instance's share of the requests (dispatch balance; 0.25 is even) and migrations:", ""]
        pairs = [(scale, k, cells[LLUMNIX][f"{distribution}/{scale}/K{k}"], cells[INFAAS][f"{distribution}/{scale}/K{k}"])
                 for scale in scales for k in TABLE_TIERS]
        lines += markdown_table(("Scale", "K", "Llumnix share", "INFaaS share", "Llumnix migrations", "lost (L / I)"),
                                [(scale, k, f"{lc['largest_instance_share']:.2f}", f"{ic['largest_instance_share']:.2f}",
                                  lc["migrations"], f"{lc['lost']} / {ic['lost']}") for scale, k, lc, ic in pairs])
        lines.append("")
    lines += sweep_lines(results, "sweep_qps10", f"## K sweep at {SCHEDULER_BENCHMARK_RATE_RPS:g} req/s (Fig. 6–7)")
    lines += sweep_lines(results, "sweep_burst", f"## K sweep at {MAIN_SWEEP_RATE_RPS:g} req/s, uniform, {low}")
    lines += ["## Per-tier median TTFT (s), uniform, " + low + " (Fig. 5)", ""]
    tiers = range(max(FIG5_TIERS))
    lines += markdown_table(("system", "K", *(f"tier {t}" for t in tiers)),
                            [(name, k, *(f"{cell['tier_ttft_p50_s'][t]:.2f}" if t in cell["tier_ttft_p50_s"] else "" for t in tiers))
                             for name, by_k in results["fig5"].items() for k, cell in by_k.items()])
    lines += ["", f"## Ablations: uniform, K = 4, {low}", ""]
    lines += markdown_table(
        ("system", "prefill mean (s)", "prefill P99 (s)", "E2E mean (s)", "E2E P99 (s)", "tier 0 median TTFT (s)",
         "largest share", "migrations"),
        [(name, f"{cell['prefill_mean_s']:.2f}", f"{cell['prefill_p99_s']:.2f}", f"{cell['e2e_mean_s']:.2f}",
          f"{cell['e2e_p99_s']:.2f}", f"{cell['tier_ttft_p50_s'][0]:.2f}", f"{cell['largest_instance_share']:.2f}",
          cell["migrations"]) for name, cell in results["ablations"].items()])
    lines += ["", f"## Setups: uniform, K = 4, {low}", ""]
    by_setup = [(PAPER, {"speedups": ours[("uniform", low)][4], "cells": {
        LLUMNIX: cells[LLUMNIX][f"uniform/{low}/K4"], INFAAS: cells[INFAAS][f"uniform/{low}/K4"]}})] + list(
        results["variants"].items())
    lines += markdown_table(
        ("setup", "E2E mean speed-up", "E2E P99 speed-up", "prefill mean speed-up", "Llumnix E2E mean (s)", "INFaaS E2E mean (s)"),
        [(SETUP_TEXT[setup], f"{row['speedups'][3]:.2f}×", f"{row['speedups'][2]:.2f}×", f"{row['speedups'][1]:.2f}×",
          f"{row['cells'][LLUMNIX]['e2e_mean_s']:.2f}", f"{row['cells'][INFAAS]['e2e_mean_s']:.2f}") for setup, row in by_setup])
    lines += ["", "Figures: fig5_ttft_cdf_by_tier.png, fig6_e2e_percentiles_vs_k.png, fig7_prefill_e2e_vs_k.png, "
              "k_sweep_burst.png, speedups_vs_paper.png; TensorBoard runs in tensorboard/.", ""]
    path.write_text("\n".join(lines))


def paper_instances() -> tuple[InstanceGroup, ...]:
    """The ``multitier`` replicas with the paper setup's pool and batch cap."""
    return tuple(InstanceGroup(dataclasses.replace(group.config, **setup_overrides(PAPER, LLUMNIX)), group.count)
                 for group in make_scenario("multitier").instances)


def kv_bound_share() -> tuple[int, int, float]:
    """The paper setup's KV blocks M per instance, its batch cap, and the share of M a full batch
    of Table 1's longest requests (512 tokens) holds: whether KV can bind at all."""
    instance = next(iter(make_scenario("multitier", instances=paper_instances()).build_cluster().instances.values()))
    blocks, cap = instance.kv.total_blocks, instance.settings.max_batch_size
    return blocks, cap, cap * -(-512 // instance.kv.block_size) / blocks


def findings_lines(results: dict[str, Any], scales: dict[str, int]) -> list[str]:
    """What the numbers say, each sentence computed from them."""
    cells, ablations, burst = results["cells"], results["ablations"], results["sweep_burst"]
    low = next(iter(scales))
    table_labels = [label for label in cells[LLUMNIX] if "/K" in label and label.split("/")[0] in DISTRIBUTIONS]
    share_l = np.mean([cells[LLUMNIX][label]["largest_instance_share"] for label in table_labels])
    share_i = np.mean([cells[INFAAS][label]["largest_instance_share"] for label in table_labels])
    blocks, cap, full_batch_share = kv_bound_share()
    k5 = results["fig5"][LLUMNIX][5]["tier_ttft_p50_s"]
    best_burst = min(burst[LLUMNIX], key=lambda k: burst[LLUMNIX][k]["e2e_mean_s"])
    best_table = [best_tiers(t) for t in results["tables"].values()]
    paper_best = [best_tiers(t) for t in PAPER_TABLES.values()]
    qps10 = results["sweep_qps10"]
    parity = max(abs(qps10[LLUMNIX][k]["e2e_p99_s"] - qps10[INFAAS][k]["e2e_p99_s"]) for k in qps10[LLUMNIX])
    no_migration = ablations["Llumnix(no migration)+Llumlet"]
    lines = ["## Reading the numbers", "",
             f"- Dispatch balance: the busiest instance served {100 * share_l:.0f}% of the requests under Llumnix+Llumlet "
             f"and {100 * share_i:.0f}% under INFaaS+vLLM (table cells, mean; 25% is even); without migration, Llumnix "
             f"dispatch sends {100 * no_migration['largest_instance_share']:.0f}% to one instance (ablation, K = 4). "
             f"Eq. 2 counts queued requests other than the head of line as 0 and B counts running requests (+1 when "
             f"some wait), so F does not see queue length; here M = {blocks} blocks and the batch cap is {cap}, so "
             f"a full batch of 512-token requests holds {100 * full_batch_share:.0f}% of M"
             + (": KV never binds and busy instances differ in F only by their running requests' KV, lowest where "
                "requests were just admitted, so an instance that keeps admitting keeps looking free."
                if full_batch_share < 1.0 else "."),
             f"- Migration moves one request per 50 ms ({cells[LLUMNIX][f'uniform/{low}/K4']['migrations']} in the "
             f"uniform K = 4 cell) against 1,250 arrivals per second; it takes mean E2E from "
             f"{no_migration['e2e_mean_s']:.2f} s (no migration) to {ablations[LLUMNIX]['e2e_mean_s']:.2f} s, against "
             f"{ablations[INFAAS]['e2e_mean_s']:.2f} s for INFaaS+vLLM.",
             f"- Tier 0 median TTFT at K = 4: {ablations[LLUMNIX]['tier_ttft_p50_s'][0]:.2f} s "
             f"(Llumnix+Llumlet), {ablations['INFaaS+Llumlet']['tier_ttft_p50_s'][0]:.2f} s (INFaaS+Llumlet), "
             f"{ablations[INFAAS]['tier_ttft_p50_s'][0]:.2f} s (INFaaS+vLLM, no tiers) at K = 4. At K = 5 the lowest "
             f"tier's median TTFT is {k5[4]:.2f} s against {k5[3]:.2f} s for tier 3: migration takes the last queued "
             f"request, the lowest tier's, to a less loaded instance"
             + (" (a priority inversion)." if k5[4] < k5[3] else "."),
             f"- Best K: {best_burst} by Llumnix+Llumlet's mean E2E in the burst sweep; by the tables' cost-latency cut "
             + ", ".join(f"K = {k}: {best_table.count(k)}" for k in TABLE_TIERS) + " of the "
             f"{len(best_table)} (distribution, load) pairs (paper: "
             + ", ".join(f"K = {k}: {paper_best.count(k)}" for k in TABLE_TIERS) + ").",
             f"- At {SCHEDULER_BENCHMARK_RATE_RPS:g} req/s Llumnix+Llumlet's E2E P99 stays within {parity:.2f} s of "
             f"INFaaS+vLLM's for every K (the paper's baseline parity, Fig. 6).", ""]
    return lines


def sweep_lines(results: dict[str, Any], key: str, title: str) -> list[str]:
    sweep = results[key]
    names = list(sweep)
    rows = [(k, *(" / ".join(f"{sweep[n][k][f'e2e_p{q}_s']:.2f}" for q in (50, 90, 99)) for n in names),
             *(f"{sweep[n][k]['prefill_mean_s']:.2f} / {sweep[n][k]['prefill_p99_s']:.2f}" for n in names))
            for k in sorted(sweep[names[0]])]
    return [title, "", *markdown_table(("K", *(f"{n} E2E P50 / P90 / P99 (s)" for n in names),
                                        *(f"{n} prefill mean / P99 (s)" for n in names)), rows), ""]


def plot_fig5(out: Path, fig5: dict[str, dict[int, Any]]) -> None:
    names = list(fig5)
    fig, axes = plt.subplots(len(names), len(FIG5_TIERS), figsize=(4 * len(FIG5_TIERS), 3.2 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        for col, k in enumerate(FIG5_TIERS):
            ax = axes[row][col]
            ttft, tiers = fig5[name][k]["ttft_s"], fig5[name][k]["tier"]
            for t in range(k):
                values = np.sort(ttft[tiers == t])
                ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=f"tier {t}")
            ax.set(title=f"{name}, K = {k}", xlabel="TTFT (s)", ylabel="CDF")
            ax.legend(fontsize=7)
    save_figure(fig, out / "fig5_ttft_cdf_by_tier.png", dpi=110)


def plot_sweep(path: Path, sweep: dict[str, dict[int, dict[str, Any]]], keys: tuple[str, ...], title: str) -> None:
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for name, by_k in sweep.items():
            ks = sorted(by_k)
            ax.plot(ks, [by_k[k][key] for k in ks], marker="o", markersize=3, label=name)
        ax.set(title=key, xlabel="priority tiers K", ylabel="seconds")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=110)


def plot_speedups(out: Path, ours: dict[tuple[str, str], dict[int, tuple]], scales: dict[str, int]) -> None:
    labels, paper, mine = [], [], []
    for distribution in DISTRIBUTIONS:
        for scale in scales:
            for k in TABLE_TIERS:
                labels.append(f"{distribution[:4]} {scale} K{k}")
                paper.append(PAPER_TABLES[(distribution, scale)][k][3])
                mine.append(ours[(distribution, scale)][k][3])
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(12, 4))
    ax.bar(x - 0.2, paper, 0.4, label="paper")
    ax.bar(x + 0.2, mine, 0.4, label="ours")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x, labels, rotation=60, fontsize=7)
    ax.set_ylabel("E2E mean speed-up over INFaaS+vLLM")
    ax.legend()
    save_figure(fig, out / "speedups_vs_paper.png", dpi=110)


def tensorboard_scalars(results: dict[str, Any]) -> dict[str, list[Scalar]]:
    """One run per system; step = K. Tags: ``table/<dist>_<scale>/<metric>``,
    ``sweep_qps10/<metric>``, ``sweep_burst/<metric>``, ``ablation/<metric>`` (K = 4),
    ``fig5/tier<t>_ttft_p50_s``."""
    scalar_keys = ("prefill_p50_s", "prefill_p90_s", "prefill_p99_s", "prefill_mean_s",
                   "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "e2e_mean_s", "cost_latency")
    runs: dict[str, list[Scalar]] = {}
    for name, cells in results["cells"].items():
        scalars = runs[name] = []
        for label, cell in cells.items():
            group, k = label.rsplit("/K", 1)
            prefix = "table/" + group.replace("/", "_") if "/" in group else group
            scalars += [(f"{prefix}/{key}", cell[key], int(k)) for key in scalar_keys]
            if group.startswith("uniform/") and group.endswith(results["low_scale"]) and int(k) in FIG5_TIERS:
                scalars += [(f"fig5/tier{tier}_ttft_p50_s", value, int(k)) for tier, value in cell["tier_ttft_p50_s"].items()]
    return runs


# ----------------------------------------------------------------------------- headlines
COMMAND = "python -m experiments.multitier_reproduction"
HEADLINE_CLAIMS = (("E2E mean speed-up over INFaaS+vLLM", 3), ("prefill (TTFT) mean speed-up over INFaaS+vLLM", 1))


def headlines(results: dict[str, Any]) -> list[Headline]:
    """Table 2's bold row (uniform, K = 4, 10K) for each setup: E2E mean and prefill mean
    speed-ups, read from ``results.json``; each row carries the cause the numbers show."""
    low = results["low_scale"]
    requests = results["scales"][low]
    paper_row = PAPER_TABLES[("uniform", "10K")][4]
    paper_cells = {name: results["cells"][name][f"uniform/{low}/K4"] for name in TABLE_SYSTEMS}
    by_setup = {PAPER: (results["tables"][f"uniform/{low}"]["4"], paper_cells)}
    by_setup.update({setup: (v["speedups"], v["cells"]) for setup, v in results["variants"].items()})
    kv = results["kv_bound"]
    fork_up = by_setup[FORK_LLUMLET][0]
    rows = []
    for setup, (ups, pair) in by_setup.items():
        llumnix, infaas = pair[LLUMNIX], pair[INFAAS]
        times = (f"Llumnix+Llumlet E2E mean {llumnix['e2e_mean_s']:.2f} s, INFaaS+vLLM {infaas['e2e_mean_s']:.2f} s")
        if setup == PAPER:
            cause = (f"With the stated {kv['blocks']}-block pool on both systems every replica is KV-bound (a full batch "
                     f"of {kv['batch_cap']} 512-token requests needs {kv['full_batch_share']:.0f}x the pool); "
                     f"the burst drains at the four replicas' total rate whatever the dispatch ({times}). The paper's "
                     f"gap rests on the fork's Llumlet, whose decodes hold no KV and whose batches have no cap: "
                     f"giving Llumnix+Llumlet those limits yields {fork_up[3]:.2f}× E2E mean and {fork_up[1]:.2f}× "
                     f"prefill mean (fork_llumlet row).")
        elif setup == A100_MEMORY:
            cause = (f"KV never binds in A100 memory, and eq. 2's freeness counts only running requests' KV and the "
                     f"queue head, not queue length: Llumnix dispatch and one migration per 50 ms balance worse than "
                     f"INFaaS's queue-depth cost (busiest replica {100 * llumnix['largest_instance_share']:.0f}% vs "
                     f"{100 * infaas['largest_instance_share']:.0f}% of requests; {times}).")
        else:
            cause = (f"An unequal comparison by construction (only Llumnix+Llumlet escapes the pool): it shows the "
                     f"mechanism, not a fair win ({times}).")
        for claim, index in HEADLINE_CLAIMS:
            rows.append(Headline(
                paper="multi-tier Llumnix", where="Table 2 (uniform, K = 4, 10K)", claim=claim, metric=claim,
                unit="×", paper_value=paper_row[index], paper_text=f"{paper_row[index]:.2f}×", ours=float(ups[index]),
                no_effect=1.0, setup=f"{SETUP_TEXT[setup]}; {requests} requests for the paper's 10K", command=COMMAND,
                cause=cause))
    return rows


# ----------------------------------------------------------------------------- main
def plan(seeds: list[int], requests: tuple[int, int], sweep_requests: int) -> list[Episode]:
    low, high = requests
    episodes = [Episode(name, k, d, n, MAIN_SWEEP_RATE_RPS, s)
                for name in TABLE_SYSTEMS for d in DISTRIBUTIONS for n in (low, high) for k in TABLE_TIERS for s in seeds]
    episodes += [Episode(name, k, "uniform", sweep_requests, SCHEDULER_BENCHMARK_RATE_RPS, s)
                 for name in SWEEP_SYSTEMS for k in SWEEP_TIERS for s in seeds]
    episodes += [Episode(name, k, "uniform", low, MAIN_SWEEP_RATE_RPS, s)
                 for name in TABLE_SYSTEMS for k in SWEEP_TIERS for s in seeds]
    episodes += [Episode(name, 4, "uniform", low, MAIN_SWEEP_RATE_RPS, s) for name in ABLATION_SYSTEMS for s in seeds]
    episodes += [Episode(name, 4, "uniform", low, MAIN_SWEEP_RATE_RPS, s, setup)
                 for setup in VARIANT_SETUPS for name in TABLE_SYSTEMS for s in seeds]
    return list(dict.fromkeys(episodes))


def collect(runs: dict[Episode, dict[str, Any]], seeds: list[int], requests: tuple[int, int], sweep_requests: int,
            scales: dict[str, int]) -> dict[str, Any]:
    def cell(name: str, k: int, distribution: str, n: int, rate: float) -> dict[str, Any]:
        return summarize_cell([runs[Episode(name, k, distribution, n, rate, s)] for s in seeds])

    low = requests[0]

    def variant(setup: str) -> dict[str, Any]:
        pair = {name: summarize_cell([runs[Episode(name, 4, "uniform", low, MAIN_SWEEP_RATE_RPS, s, setup)]
                                      for s in seeds]) for name in TABLE_SYSTEMS}
        return {"cells": pair, "speedups": speedups(pair[LLUMNIX], pair[INFAAS])}

    cells: dict[str, dict[str, Any]] = {name: {} for name in SYSTEMS}
    for name in TABLE_SYSTEMS:
        for distribution in DISTRIBUTIONS:
            for scale, n in scales.items():
                for k in TABLE_TIERS:
                    cells[name][f"{distribution}/{scale}/K{k}"] = cell(name, k, distribution, n, MAIN_SWEEP_RATE_RPS)
    for name in SWEEP_SYSTEMS:
        for k in SWEEP_TIERS:
            cells[name][f"sweep_qps10/K{k}"] = cell(name, k, "uniform", sweep_requests, SCHEDULER_BENCHMARK_RATE_RPS)
    for name in TABLE_SYSTEMS:
        for k in SWEEP_TIERS:
            cells[name][f"sweep_burst/K{k}"] = cell(name, k, "uniform", low, MAIN_SWEEP_RATE_RPS)
    for name in ABLATION_SYSTEMS:
        cells[name]["ablation/K4"] = cell(name, 4, "uniform", low, MAIN_SWEEP_RATE_RPS)
    tables = {(d, scale): {k: speedups(cells[LLUMNIX][f"{d}/{scale}/K{k}"], cells[INFAAS][f"{d}/{scale}/K{k}"])
                           for k in TABLE_TIERS} for d in DISTRIBUTIONS for scale in scales}
    fig5 = {}
    for name in TABLE_SYSTEMS:
        fig5[name] = {}
        for k in FIG5_TIERS:
            pooled = [runs[Episode(name, k, "uniform", low, MAIN_SWEEP_RATE_RPS, s)] for s in seeds]
            fig5[name][k] = {"ttft_s": np.concatenate([r["ttft_s"] for r in pooled]),
                             "tier": np.concatenate([r["tier"] for r in pooled]),
                             "tier_ttft_p50_s": summarize_cell(pooled)["tier_ttft_p50_s"]}
    return {
        "cells": cells, "tables": tables, "fig5": fig5, "low_scale": next(iter(scales)),
        "sweep_qps10": {n: {k: cells[n][f"sweep_qps10/K{k}"] for k in SWEEP_TIERS} for n in SWEEP_SYSTEMS},
        "sweep_burst": {n: {k: cells[n][f"sweep_burst/K{k}"] for k in SWEEP_TIERS} for n in TABLE_SYSTEMS},
        "ablations": {n: cells[n]["ablation/K4"] for n in ABLATION_SYSTEMS},
        "variants": {setup: variant(setup) for setup in VARIANT_SETUPS},
    }


def check_arguments(requests: list[int], sweep_requests: int) -> None:
    if len(requests) != 2 or any(n <= 0 for n in requests) or requests[0] >= requests[1]:
        raise ValueError(f"--requests takes two increasing positive counts (the 10K and 15K loads), got {requests}")
    if sweep_requests <= 0:
        raise ValueError(f"--sweep-requests must be positive, got {sweep_requests}")


@command("experiments.multitier_reproduction")
def main(argv: list[str] | None = None) -> int:
    parser = ExperimentParser(__doc__, "multitier", "one seed, 200 / 300 requests, 100 at 10 req/s (a smoke run)",
                              seeds=[0, 1, 2], fans_out=FANS_OUT)
    parser.add_argument("--requests", type=int, nargs=2, default=[2000, 3000], help="the two loads (paper: 10K, 15K)")
    parser.add_argument("--sweep-requests", type=int, default=1000, help="requests per episode at 10 req/s (paper: 1,000)")
    args = parser.parse_args(argv)
    seeds = [0] if args.quick else args.seeds
    requests = [200, 300] if args.quick else args.requests
    sweep_requests = 100 if args.quick else args.sweep_requests
    check_arguments(requests, sweep_requests)
    scales = {"10K": requests[0], "15K": requests[1]}
    run = Run(args.out)
    episodes = plan(seeds, (requests[0], requests[1]), sweep_requests)
    run.log(f"{len(episodes)} episodes on {args.workers} worker(s)")
    runs = run_all(episodes, args.workers, args.address)
    results = collect(runs, seeds, (requests[0], requests[1]), sweep_requests, scales)
    setup = (f"Scenario `multitier` at the paper setup (4 x Llama-2-7B on A100-80GB, {PAPER_KV_BLOCKS}-block KV pool of "
             f"16 tokens, batch cap {PAPER_BATCH_CAP}, Table 1 lengths, Poisson); variants at the end. Tables and "
             f"the burst sweep: {MAIN_SWEEP_RATE_RPS:g} req/s with {requests[0]} / {requests[1]} requests standing for the "
             f"paper's 10K / 15K; Fig. 6–7 sweep: {SCHEDULER_BENCHMARK_RATE_RPS:g} req/s, {sweep_requests} requests. "
             f"Seeds {seeds} (pooled). Tier weights 2^(K−1−k). {len(episodes)} episodes, wall time "
             f"{run.elapsed_s:.0f} s on {args.workers} worker(s). Prefill = TTFT; cost-latency = GPU "
             f"dollars x mean E2E (see the module docstring).")
    write_report(args.out / "report.md", results, scales, setup)
    plot_fig5(args.out, results["fig5"])
    plot_sweep(args.out / "fig6_e2e_percentiles_vs_k.png", results["sweep_qps10"], ("e2e_p50_s", "e2e_p90_s", "e2e_p99_s"),
               f"E2E latency vs K at {SCHEDULER_BENCHMARK_RATE_RPS:g} req/s (Fig. 6)")
    plot_sweep(args.out / "fig7_prefill_e2e_vs_k.png", results["sweep_qps10"],
               ("e2e_p99_s", "e2e_mean_s", "prefill_p99_s", "prefill_mean_s"), "E2E and prefill vs K (Fig. 7)")
    plot_sweep(args.out / "k_sweep_burst.png", results["sweep_burst"],
               ("e2e_p99_s", "e2e_mean_s", "prefill_p99_s", "prefill_mean_s"), f"K sweep at {MAIN_SWEEP_RATE_RPS:g} req/s")
    plot_speedups(args.out, results["tables"], scales)
    serializable = {
        "setup": setup, "cells": results["cells"],
        "tables": {f"{d}/{s}": {str(k): v for k, v in t.items()} for (d, s), t in results["tables"].items()},
        "paper_tables": {f"{d}/{s}": {str(k): v for k, v in t.items()} for (d, s), t in PAPER_TABLES.items()},
        "variants": results["variants"], "low_scale": results["low_scale"], "scales": scales,
        "kv_bound": dict(zip(("blocks", "batch_cap", "full_batch_share"), kv_bound_share())),
    }
    return run.finish(serializable, tensorboard_scalars(results))


if __name__ == "__main__":
    sys.exit(main())
