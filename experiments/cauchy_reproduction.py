"""Reproduce Cauchy's results (cauchy.txt §4.2-§4.5) on its testbed: 8 H800 + 8 A800 + 8 H20,
Llama-3.1-8B, DailyMail / ShareGPT / LongWriter at 54 / 50 / 6 req/s (§4.1).

Plans come from the profiled goodput table (``baselines/data/cauchy_goodput.json``):

1. Fig. 7 / Fig. 6: tokens/USD and E2E / TTFT / TBT of Cauchy (every combo, CO-LP),
   Cauchy* (aggregated combos only) and Mélange (bucket ILP, single-GPU instances), each
   planned for the target QPS and serving the Azure 2023 conversation trace rescaled to it
   (the dataset's lengths) through servegym/Routing-v0 (Cauchy: goodput-weighted RR across
   combos, opportunistic instance scheduler) or Mélange's own router.
2. Fig. 8: CO-LP vs MCE-LP vs MC-LP plans serving Poisson arrivals at the target QPS.
3. Fig. 9: basic vs token-weighted vs goodput-weighted RR across the CO-LP plan's combos,
   Poisson at the target QPS: mean E2E latency.
4. Table 3: 1P1D / 1P2D / 1P3D <H800 -> H20> on ShareGPT, basic RR vs opportunistic: max
   goodput (the table's search), CE at that rate, mean E2E / TTFT / TBT at basic RR's max
   goodput.

Load: in this simulator a GPU serves about ten times the goodput the paper measured (Table 3:
1P1D <H800 -> H20> 2.14 req/s there, 22.6 req/s here), so at the §4.1 QPS every plan needs only
1-3 of the 24 GPUs and integer rounding decides the comparison. By default the QPS is scaled
by ``LOAD_SCALE`` = 4 (216 / 200 / 24 req/s, the most the inventory can carry for DailyMail is
about 490), so plans use a share of the cluster like the paper's (Fig. 4: 8 GPUs for 6.4 req/s of
LongWriter); ``--load-scale 1`` runs the paper's QPS.

Fig. 10 (autoscaling vs static) is ``experiments.cauchy_autoscaling``.
Tokens/USD counts prompt + output tokens of completed requests over the dollars spent from
the first arrival until the last request ends. Outputs under ``--out`` (default
``results/cauchy``): ``report.md`` (the paper's numbers beside ours and their ratio),
``results.json``, PNG figures and ``tensorboard/<system>/`` runs.

    python -m experiments.cauchy_reproduction [--quick] [--out DIR] [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.utils import seeding  # noqa: E402
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

import baselines  # noqa: E402
from agents.rollout import evaluate  # noqa: E402
from baselines.cauchy.combos import Combo  # noqa: E402
from baselines.cauchy.deployment import combo_scenario  # noqa: E402
from baselines.cauchy.goodput import combo_goodput_rps, combo_poisson_run, load_goodput_table  # noqa: E402
from baselines.cauchy.ilp import ComboPlan, plan_combos  # noqa: E402
from baselines.cauchy.melange import MelangePlan, bucket_shares, deploy_melange, solve_melange  # noqa: E402
from baselines.cauchy.search import GoodputSearch  # noqa: E402
from baselines.cauchy.selection import build_candidates  # noqa: E402
from baselines.cauchy.workloads import INVENTORY, WORKLOADS, CauchyWorkload  # noqa: E402
from envs.presets import make_scenario  # noqa: E402
from simulator.metrics import flat_metrics, meets_slo, summarize  # noqa: E402
from simulator.outcome import RequestOutcome  # noqa: E402

ROUTING = "servegym/Routing-v0"
LOAD_SCALE = 4.0
REPO_ROOT = Path(__file__).resolve().parent.parent
LABELS = {"cnn_dailymail": "DailyMail", "sharegpt_cauchy": "ShareGPT", "longwriter": "LongWriter"}
COMBO_ROUTERS = ("basic_rr", "token_weighted_rr", "cauchy_gwrr")
OBJECTIVES = {"CO-LP": "co", "MCE-LP": "mce", "MC-LP": "mc"}
TABLE3_COMBOS = {f"1P{d}D": Combo("H800-SXM", 1, "H20-NVL", d) for d in (1, 2, 3)}
METRICS = ("total_tokens_per_usd", "slo_tokens_per_usd", "e2e_mean_s", "ttft_mean_s", "tpot_mean_s", "slo_attainment")

# cauchy.txt's numbers: (value, where). Ranges are two entries (lowest, highest over workloads).
PAPER: dict[str, tuple[float, str]] = {
    "fig7_cauchy_ce_gain_vs_melange_min": (0.164, "CE +16.4% (lowest workload), Fig. 7 / §4.2"),
    "fig7_cauchy_ce_gain_vs_melange_max": (0.383, "CE +38.3% (highest workload), Fig. 7 / §4.2"),
    "fig7_cauchy_star_ce_gain_vs_melange_min": (0.078, "Cauchy* CE +7.8%, §4.2"),
    "fig7_cauchy_star_ce_gain_vs_melange_max": (0.171, "Cauchy* CE +17.1%, §4.2"),
    "fig6_e2e_cut_vs_melange_min": (0.212, "21.2% lower mean E2E (lowest), Fig. 6 / §4.2"),
    "fig6_e2e_cut_vs_melange_max": (0.591, "59.1% lower mean E2E (highest), Fig. 6 / §4.2"),
    "fig6_ttft_cut_vs_melange_min": (0.285, "28.5% lower TTFT (lowest), §4.2"),
    "fig6_ttft_cut_vs_melange_max": (0.951, "95.1% lower TTFT (highest), §4.2"),
    "fig6_tbt_cut_vs_melange_min": (0.189, "18.9% lower TBT (lowest), §4.2"),
    "fig6_tbt_cut_vs_melange_max": (0.615, "61.5% lower TBT (highest), §4.2"),
    "fig8_co_ce_gain_vs_mce_dailymail": (0.469, "CO-LP +46.9% over MCE-LP on DailyMail, §4.3"),
    "fig8_co_ce_gain_vs_mc_dailymail": (0.289, "CO-LP +28.9% over MC-LP on DailyMail, §4.3"),
    "fig9_gwrr_e2e_cut_vs_basic_longwriter": (0.254, "25.4% lower mean latency than Basic RR on LongWriter, §4.4"),
    "fig9_gwrr_e2e_cut_vs_token_min": (0.03, "3-6% lower latency than Token-Weighted RR (DailyMail, LongWriter), §4.4"),
    "fig9_gwrr_e2e_cut_vs_token_max": (0.06, "3-6% lower latency than Token-Weighted RR (DailyMail, LongWriter), §4.4"),
    "table3_goodput_gain_1P1D": (0.084, "max goodput 2.14 -> 2.32 req/s, Table 3"),
    "table3_goodput_gain_1P2D": (0.083, "2.90 -> 3.14 req/s, Table 3"),
    "table3_goodput_gain_1P3D": (0.088, "2.96 -> 3.22 req/s, Table 3"),
    "table3_ce_gain_1P1D": (0.087, "max CE 1505 -> 1636 K tokens/USD, Table 3"),
    "table3_ce_gain_1P2D": (0.069, "1525 -> 1630 K tokens/USD, Table 3"),
    "table3_ce_gain_1P3D": (0.079, "1231 -> 1329 K tokens/USD, Table 3"),
    "table3_e2e_cut_1P1D": (0.085, "mean E2E 22.03 -> 20.16 s (8.5% lower), Table 3"),
    "table3_e2e_cut_1P2D": (0.077, "17.75 -> 16.38 s (7.7% lower), Table 3"),
    "table3_e2e_cut_1P3D": (0.006, "14.56 -> 14.47 s (0.6% lower), Table 3"),
}


@dataclass(frozen=True)
class Settings:
    """``load_scale`` multiplies the §4.1 QPS; episodes hold ``arrival_s`` seconds of arrivals."""

    load_scale: float
    arrival_s: float
    seeds: tuple[int, ...]
    table3_search: GoodputSearch

    def workload(self, workload: CauchyWorkload) -> CauchyWorkload:
        """The workload at ``load_scale`` times its §4.1 QPS."""
        return dataclasses.replace(workload, target_rps=workload.target_rps * self.load_scale)

    def episode_requests(self, workload: CauchyWorkload) -> int:
        return max(50, round(workload.target_rps * self.arrival_s))


# ----------------------------------------------------------------------------- planning
def plans_for(workload: CauchyWorkload) -> dict[str, Any]:
    """Cauchy (CO / MCE / MC over every combo), Cauchy* (aggregated combos) and Mélange plans
    for the workload's target QPS on the §4.1 inventory."""
    table = load_goodput_table()
    candidates = build_candidates(table.combos_of(workload.lengths), workload, table.combo_goodputs(workload.lengths))
    demand = workload.target_rps
    plans: dict[str, Any] = {name: plan_combos(candidates, demand, INVENTORY, objective) for name, objective in OBJECTIVES.items()}
    plans["Cauchy*"] = plan_combos([c for c in candidates if c.combo.aggregated], demand, INVENTORY, "co")
    rates = {b: share * demand for b, share in bucket_shares(workload).items()}
    plans["Mélange"] = solve_melange(rates, table.melange_goodputs(workload.lengths), INVENTORY)
    return plans


def planned_ce(plan: ComboPlan | MelangePlan, workload: CauchyWorkload) -> float:
    """Tokens/USD if the plan serves exactly its demand: QPS x tokens per request x 3600 / $ per hour."""
    return workload.target_rps * workload.tokens_per_request * 3600.0 / plan.cost_per_hour_usd


# ----------------------------------------------------------------------------- running
def _metrics(metrics: dict[str, float], outcomes: list[RequestOutcome]) -> dict[str, float]:
    done = [o for o in outcomes if o.completed]
    tokens = sum(o.prompt_tokens + o.output_tokens for o in done)
    met = sum(o.prompt_tokens + o.output_tokens for o in done if meets_slo(o))
    values = {key: float(metrics[key]) for key in METRICS if key in metrics}
    values["slo_tokens_per_usd"] = metrics["total_tokens_per_usd"] * met / tokens if tokens else float("nan")
    values["lost"] = float(metrics["arrived"] - metrics["completed"] - metrics["rejected"])
    values["invalid_actions"] = float(metrics.get("invalid_actions", 0.0))
    return values


def combo_episode(workload: CauchyWorkload, plan: ComboPlan, router: str, seed: int, settings: Settings,
                  **overrides: Any) -> dict[str, float]:
    """One Routing-v0 episode of the plan's combos under ``router``."""
    scenario = combo_scenario(
        workload.scenario, plan.combos(), rate_rps=workload.target_rps,
        episode_requests=settings.episode_requests(workload), **overrides,
    )
    held: dict[str, Any] = {}

    def factory(env):
        held["env"] = env
        return baselines.make(router, env)

    (metrics,) = evaluate(factory, ROUTING, [seed], scenario=scenario)
    return _metrics(metrics, list(held["env"].unwrapped.cluster.outcomes))


def melange_episode(workload: CauchyWorkload, plan: MelangePlan, seed: int, settings: Settings, **overrides: Any) -> dict[str, float]:
    """The Mélange deployment serving the same requests a Routing-v0 episode with ``seed`` sees."""
    scenario = make_scenario(
        workload.scenario, rate_rps=workload.target_rps, episode_requests=settings.episode_requests(workload), **overrides
    )
    requests = scenario.requests(seeding.np_random(seed)[0])
    cluster = deploy_melange(plan, INVENTORY, provisioning_s=scenario.provisioning_s)
    outcomes = cluster.run(requests)
    summary = summarize(outcomes, duration_s=cluster.events.now_s, cost_usd=cluster.cost_usd())
    flat = {k: float(v) for k, v in flat_metrics(summary).items() if isinstance(v, (int, float))}
    return _metrics(flat, outcomes)


def mean_over_seeds(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}


def run_fig7(workload: CauchyWorkload, plans: dict[str, Any], settings: Settings) -> dict[str, dict[str, float]]:
    azure = {"arrival": "azure_conv"}
    cells = {}
    for system, plan_name in (("Cauchy", "CO-LP"), ("Cauchy*", "Cauchy*")):
        cells[system] = mean_over_seeds([
            combo_episode(workload, plans[plan_name], "cauchy_gwrr", seed, settings, **azure) for seed in settings.seeds
        ])
    cells["Mélange"] = mean_over_seeds([melange_episode(workload, plans["Mélange"], seed, settings, **azure) for seed in settings.seeds])
    for system, plan_name in (("Cauchy", "CO-LP"), ("Cauchy*", "Cauchy*"), ("Mélange", "Mélange")):
        cells[system]["planned_tokens_per_usd"] = planned_ce(plans[plan_name], workload)
    return cells


def run_fig8(workload: CauchyWorkload, plans: dict[str, Any], settings: Settings) -> dict[str, dict[str, float]]:
    return {
        name: mean_over_seeds([combo_episode(workload, plans[name], "cauchy_gwrr", seed, settings) for seed in settings.seeds])
        | {"planned_tokens_per_usd": planned_ce(plans[name], workload)}
        for name in OBJECTIVES
    }


def run_fig9(workload: CauchyWorkload, plans: dict[str, Any], settings: Settings, fig8: dict) -> dict[str, dict[str, float]]:
    cells = {"cauchy_gwrr": fig8["CO-LP"]}  # the same episodes as Fig. 8's CO-LP column
    for router in COMBO_ROUTERS[:2]:
        cells[router] = mean_over_seeds([combo_episode(workload, plans["CO-LP"], router, seed, settings) for seed in settings.seeds])
    return {router: cells[router] for router in COMBO_ROUTERS}


def run_table3(settings: Settings) -> dict[str, dict[str, dict[str, float]]]:
    """Per 1PxD combo and instance scheduler: max goodput, CE there, latencies at basic RR's goodput."""
    workload, search = WORKLOADS["sharegpt_cauchy"], settings.table3_search
    cells: dict[str, dict[str, dict[str, float]]] = {}
    for shape, combo in TABLE3_COMBOS.items():
        goodputs = {s: combo_goodput_rps(combo, workload, search, s) for s in ("basic_rr", "opportunistic")}
        common_rps = goodputs["basic_rr"]
        cells[shape] = {}
        for scheduler, goodput in goodputs.items():
            at_goodput = combo_poisson_run(combo, workload, goodput, search, scheduler)
            at_common = combo_poisson_run(combo, workload, common_rps, search, scheduler)
            cells[shape][scheduler] = {
                "max_goodput_rps": goodput, "max_ce_tokens_per_usd": at_goodput.total_tokens_per_usd,
                "e2e_mean_s": at_common.e2e.mean_s, "ttft_mean_s": at_common.ttft.mean_s,
                "tbt_mean_s": at_common.tpot.mean_s, "rate_rps": common_rps,
            }
    return cells


# ----------------------------------------------------------------------------- headline
def gain(ours: float, baseline: float) -> float:
    return ours / baseline - 1.0


def cut(ours: float, baseline: float) -> float:
    return 1.0 - ours / baseline


def headline(results: dict[str, Any]) -> dict[str, float]:
    """Our values of the ``PAPER`` entries."""
    fig7, fig8, fig9, table3 = (results[k] for k in ("fig7", "fig8", "fig9", "table3"))
    values: dict[str, float] = {}
    per_workload = {
        "fig7_cauchy_ce_gain_vs_melange": [gain(c["Cauchy"]["total_tokens_per_usd"], c["Mélange"]["total_tokens_per_usd"]) for c in fig7.values()],
        "fig7_cauchy_star_ce_gain_vs_melange": [gain(c["Cauchy*"]["total_tokens_per_usd"], c["Mélange"]["total_tokens_per_usd"]) for c in fig7.values()],
        "fig6_e2e_cut_vs_melange": [cut(c["Cauchy"]["e2e_mean_s"], c["Mélange"]["e2e_mean_s"]) for c in fig7.values()],
        "fig6_ttft_cut_vs_melange": [cut(c["Cauchy"]["ttft_mean_s"], c["Mélange"]["ttft_mean_s"]) for c in fig7.values()],
        "fig6_tbt_cut_vs_melange": [cut(c["Cauchy"]["tpot_mean_s"], c["Mélange"]["tpot_mean_s"]) for c in fig7.values()],
        "fig9_gwrr_e2e_cut_vs_token": [
            cut(fig9[w]["cauchy_gwrr"]["e2e_mean_s"], fig9[w]["token_weighted_rr"]["e2e_mean_s"])
            for w in ("cnn_dailymail", "longwriter") if w in fig9
        ],
    }
    for key, series in per_workload.items():
        values[f"{key}_min"], values[f"{key}_max"] = (min(series), max(series)) if series else (float("nan"),) * 2
    if "cnn_dailymail" in fig8:
        co = fig8["cnn_dailymail"]
        values["fig8_co_ce_gain_vs_mce_dailymail"] = gain(co["CO-LP"]["total_tokens_per_usd"], co["MCE-LP"]["total_tokens_per_usd"])
        values["fig8_co_ce_gain_vs_mc_dailymail"] = gain(co["CO-LP"]["total_tokens_per_usd"], co["MC-LP"]["total_tokens_per_usd"])
    if "longwriter" in fig9:
        lw = fig9["longwriter"]
        values["fig9_gwrr_e2e_cut_vs_basic_longwriter"] = cut(lw["cauchy_gwrr"]["e2e_mean_s"], lw["basic_rr"]["e2e_mean_s"])
    for shape, cell in table3.items():
        basic, opportunistic = cell["basic_rr"], cell["opportunistic"]
        values[f"table3_goodput_gain_{shape}"] = gain(opportunistic["max_goodput_rps"], basic["max_goodput_rps"])
        values[f"table3_ce_gain_{shape}"] = gain(opportunistic["max_ce_tokens_per_usd"], basic["max_ce_tokens_per_usd"])
        values[f"table3_e2e_cut_{shape}"] = cut(opportunistic["e2e_mean_s"], basic["e2e_mean_s"])
    return values


# ----------------------------------------------------------------------------- outputs
def _pct(value: float) -> str:
    return f"{100 * value:+.1f}%"


def write_report(path: Path, results: dict[str, Any], ours: dict[str, float], setup: str) -> None:
    lines = ["# Cauchy reproduction (cauchy.txt §4)", "", setup, "", "## Headline numbers", "",
             "Ours: gains (CE, goodput) and cuts (latency) relative to the baseline, so positive = Cauchy's component better.", "",
             "| metric | paper | ours | ours / paper |", "|---|---|---|---|"]
    for key, (paper_value, paper_text) in PAPER.items():
        value = ours.get(key, float("nan"))
        lines.append(f"| {key} | {paper_text} | {_pct(value)} | {value / paper_value:.2f} |")
    lines += ["", "## Plans (target QPS, 8 H800 + 8 A800 + 8 H20)", "",
              "| workload | plan | deployment | $/hour | planned goodput (req/s) | planned tokens/USD | ILP solve (ms; paper 20-50, §3.3.2) | fallback |",
              "|---|---|---|---|---|---|---|---|"]
    for workload, plans in results["plans"].items():
        for name, plan in plans.items():
            lines.append(f"| {LABELS[workload]} | {name} | {plan['deployment']} | {plan['cost_per_hour_usd']:.2f} | "
                         f"{plan['goodput_rps']} | {plan['planned_tokens_per_usd']:.3g} | {1000 * plan['solve_time_s']:.0f} | {plan['fallback']} |")
    sections = (
        ("fig7", "Fig. 7 / Fig. 6: Cauchy vs Cauchy* vs Mélange (Azure conv trace at the target QPS)"),
        ("fig8", "Fig. 8: CO-LP vs MCE-LP vs MC-LP (Poisson at the target QPS, goodput-weighted RR)"),
        ("fig9", "Fig. 9: combo schedulers on the CO-LP plan (Poisson at the target QPS)"),
    )
    for key, title in sections:
        lines += ["", f"## {title}", "",
                  "| workload | system | tokens/USD | SLO-met tokens/USD | SLO attainment | E2E mean (s) | TTFT mean (s) | TBT mean (ms) | lost | invalid actions |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for workload, cells in results[key].items():
            for system, c in cells.items():
                lines.append(f"| {LABELS[workload]} | {system} | {c['total_tokens_per_usd']:.3g} | {c['slo_tokens_per_usd']:.3g} | "
                             f"{c['slo_attainment']:.3f} | {c['e2e_mean_s']:.2f} | {c['ttft_mean_s']:.3f} | "
                             f"{1000 * c['tpot_mean_s']:.1f} | {c['lost']:.0f} | {c['invalid_actions']:.0f} |")
    lines += ["", "## Table 3: <1 x H800 -> x H20> on ShareGPT, basic RR vs opportunistic", "",
              "| combo | scheduler | max goodput (req/s) | max CE (K tokens/USD) | at (req/s) | E2E mean (s) | TTFT mean (ms) | TBT mean (ms) |",
              "|---|---|---|---|---|---|---|---|"]
    for shape, cell in results["table3"].items():
        for scheduler, c in cell.items():
            lines.append(f"| {shape} | {scheduler} | {c['max_goodput_rps']:.2f} | {c['max_ce_tokens_per_usd'] / 1e3:.0f} | "
                         f"{c['rate_rps']:.2f} | {c['e2e_mean_s']:.2f} | {1000 * c['ttft_mean_s']:.1f} | {1000 * c['tbt_mean_s']:.2f} |")
    lines += ["", "Figures: fig7_cost_efficiency.png, fig6_latency.png, fig8_lp.png, fig9_combo_scheduler.png, "
              "table3_instance_scheduler.png; TensorBoard runs in tensorboard/.", ""]
    path.write_text("\n".join(lines))


def _bars(path: Path, cells: dict[str, dict[str, dict[str, float]]], key: str, ylabel: str, scale: float = 1.0) -> None:
    workloads = list(cells)
    systems = list(cells[workloads[0]])
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, system in enumerate(systems):
        ax.bar(np.arange(len(workloads)) + i * width, [scale * cells[w][system][key] for w in workloads], width, label=system)
    ax.set_xticks(np.arange(len(workloads)) + width * (len(systems) - 1) / 2, [LABELS.get(w, w) for w in workloads])
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_figures(out: Path, results: dict[str, Any]) -> None:
    _bars(out / "fig7_cost_efficiency.png", results["fig7"], "total_tokens_per_usd", "tokens / USD (millions)", 1e-6)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (key, label) in zip(axes, (("e2e_mean_s", "mean E2E (s)"), ("ttft_mean_s", "mean TTFT (s)"), ("tpot_mean_s", "mean TBT (s)"))):
        workloads = list(results["fig7"])
        systems = list(results["fig7"][workloads[0]])
        for i, system in enumerate(systems):
            ax.bar(np.arange(len(workloads)) + i * 0.25, [results["fig7"][w][system][key] for w in workloads], 0.25, label=system)
        ax.set_xticks(np.arange(len(workloads)) + 0.25, [LABELS[w] for w in workloads])
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig6_latency.png", dpi=120)
    plt.close(fig)
    _bars(out / "fig8_lp.png", results["fig8"], "total_tokens_per_usd", "tokens / USD (millions)", 1e-6)
    _bars(out / "fig9_combo_scheduler.png", results["fig9"], "e2e_mean_s", "mean E2E latency (s)")
    _bars(out / "table3_instance_scheduler.png", results["table3"], "max_goodput_rps", "max goodput (req/s)")


def write_tensorboard(root: Path, results: dict[str, Any]) -> None:
    """One run per system; scalars tagged ``<experiment>/<workload>/<metric>`` (step 0)."""
    if root.exists():
        shutil.rmtree(root)
    runs: dict[str, list[tuple[str, float]]] = {}
    for experiment in ("fig7", "fig8", "fig9", "table3"):
        for group, cells in results[experiment].items():
            for system, cell in cells.items():
                for metric, value in cell.items():
                    runs.setdefault(system, []).append((f"{experiment}/{group}/{metric}", value))
    for system, scalars in runs.items():
        writer = SummaryWriter(log_dir=str(root / system.replace("*", "_star").replace("é", "e")))
        for tag, value in scalars:
            writer.add_scalar(tag, value, 0)
        writer.close()


def _plan_row(plan: ComboPlan | MelangePlan, workload: CauchyWorkload) -> dict[str, Any]:
    if isinstance(plan, MelangePlan):
        deployment = ", ".join(f"{n} x {g}" for g, n in plan.counts.items() if n)
        goodput, fallback = "n/a", False
    else:
        deployment, goodput, fallback = plan.describe(), f"{plan.goodput_rps:.1f}", plan.fallback
    return {"deployment": deployment, "cost_per_hour_usd": plan.cost_per_hour_usd, "goodput_rps": goodput,
            "planned_tokens_per_usd": planned_ce(plan, workload), "solve_time_s": plan.solve_time_s, "fallback": fallback}


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 s of arrivals, one seed, coarse Table 3 search (< 90 s)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "cauchy")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--arrival-s", type=float, default=80.0, help="seconds of arrivals per episode")
    parser.add_argument("--load-scale", type=float, default=LOAD_SCALE, help="multiplier of the §4.1 QPS")
    args = parser.parse_args(argv)
    if any(s < 0 for s in args.seeds) or not args.arrival_s > 0 or not args.load_scale > 0:
        raise ValueError(
            f"seeds must be non-negative, --arrival-s and --load-scale positive; got {args.seeds}, {args.arrival_s}, {args.load_scale}"
        )
    table_search = GoodputSearch(**{k: v for k, v in load_goodput_table().settings.items() if k in GoodputSearch().as_dict()})
    if args.quick:
        settings = Settings(args.load_scale, 5.0, (0,), GoodputSearch(duration_s=15.0, min_requests=100, rel_tol=0.1))
    else:
        settings = Settings(args.load_scale, args.arrival_s, tuple(args.seeds), table_search)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {"plans": {}, "fig7": {}, "fig8": {}, "fig9": {}}
    for name in WORKLOADS:
        workload = settings.workload(WORKLOADS[name])
        plans = plans_for(workload)
        results["plans"][name] = {plan_name: _plan_row(plan, workload) for plan_name, plan in plans.items()}
        results["fig7"][name] = run_fig7(workload, plans, settings)
        results["fig8"][name] = run_fig8(workload, plans, settings)
        results["fig9"][name] = run_fig9(workload, plans, settings, results["fig8"][name])
        print(f"{LABELS[name]:<10} done ({time.perf_counter() - started:.0f} s)", flush=True)
    results["table3"] = run_table3(settings)
    ours = headline(results)
    setup = (f"Llama-3.1-8B, 8 H800-SXM + 8 A800-PCIe + 8 H20-NVL; {settings.arrival_s:g} s of arrivals per episode "
             f"at {settings.load_scale:g} x the §4.1 QPS (DailyMail 54, ShareGPT 50, LongWriter 6 req/s; see the "
             f"module docstring on the load scale); seeds {list(settings.seeds)}; goodput "
             f"= max Poisson rate with >= {table_search.attainment:.0%} SLO attainment (TTFT <= 10 / 5 / 1 s, TPOT <= 50 / "
             f"30 / 30 ms). Wall time {time.perf_counter() - started:.0f} s.")
    results["headline"] = ours
    write_report(args.out / "report.md", results, ours, setup)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    plot_figures(args.out, results)
    write_tensorboard(args.out / "tensorboard", results)
    print(f"wrote {args.out / 'report.md'} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
