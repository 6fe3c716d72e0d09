"""The Cauchy reproduction: the headline arithmetic against hand-made cells, the planned CE
formula, and a quick end-to-end run that writes the report, figures and TensorBoard runs."""

from __future__ import annotations

import json

import pytest

from baselines.cauchy.ilp import ComboPlan
from baselines.cauchy.workloads import get_workload
from experiments import cauchy_reproduction as repro


def cell(ce: float, e2e: float, ttft: float = 1.0, tbt: float = 0.02) -> dict[str, float]:
    return {"total_tokens_per_usd": ce, "e2e_mean_s": e2e, "ttft_mean_s": ttft, "tpot_mean_s": tbt}


def test_headline_compares_each_component_with_its_baseline():
    fig7 = {
        "cnn_dailymail": {"Cauchy": cell(1.2e6, 2.0, 0.5, 0.01), "Cauchy*": cell(1.1e6, 3.0), "Mélange": cell(1.0e6, 4.0, 1.0, 0.02)},
        "longwriter": {"Cauchy": cell(1.5e6, 3.0, 0.1, 0.015), "Cauchy*": cell(1.05e6, 3.0), "Mélange": cell(1.0e6, 4.0, 1.0, 0.02)},
    }
    fig8 = {"cnn_dailymail": {"CO-LP": cell(1.5e6, 1.0), "MCE-LP": cell(1.0e6, 1.0), "MC-LP": cell(1.2e6, 1.0)}}
    fig9 = {
        "cnn_dailymail": {"basic_rr": cell(1, 10.0), "token_weighted_rr": cell(1, 5.0), "cauchy_gwrr": cell(1, 4.0)},
        "longwriter": {"basic_rr": cell(1, 20.0), "token_weighted_rr": cell(1, 16.0), "cauchy_gwrr": cell(1, 15.0)},
    }
    basic = {"max_goodput_rps": 10.0, "max_ce_tokens_per_usd": 2e6, "e2e_mean_s": 4.0}
    table3 = {"1P1D": {"basic_rr": basic, "opportunistic": {"max_goodput_rps": 11.0, "max_ce_tokens_per_usd": 2.2e6, "e2e_mean_s": 3.0}}}
    ours = repro.headline({"fig7": fig7, "fig8": fig8, "fig9": fig9, "table3": table3})
    assert ours["fig7_cauchy_ce_gain_vs_melange_min"] == pytest.approx(0.2)
    assert ours["fig7_cauchy_ce_gain_vs_melange_max"] == pytest.approx(0.5)
    assert ours["fig7_cauchy_star_ce_gain_vs_melange_min"] == pytest.approx(0.05)
    assert ours["fig6_e2e_cut_vs_melange_min"] == pytest.approx(0.25) and ours["fig6_e2e_cut_vs_melange_max"] == pytest.approx(0.5)
    assert ours["fig6_ttft_cut_vs_melange_max"] == pytest.approx(0.9) and ours["fig6_tbt_cut_vs_melange_min"] == pytest.approx(0.25)
    assert ours["fig8_co_ce_gain_vs_mce_dailymail"] == pytest.approx(0.5)
    assert ours["fig8_co_ce_gain_vs_mc_dailymail"] == pytest.approx(0.25)
    assert ours["fig9_gwrr_e2e_cut_vs_basic_longwriter"] == pytest.approx(0.25)
    assert ours["fig9_gwrr_e2e_cut_vs_token_min"] == pytest.approx(1 / 16) and ours["fig9_gwrr_e2e_cut_vs_token_max"] == pytest.approx(0.2)
    assert ours["table3_goodput_gain_1P1D"] == pytest.approx(0.1)
    assert ours["table3_ce_gain_1P1D"] == pytest.approx(0.1) and ours["table3_e2e_cut_1P1D"] == pytest.approx(0.25)


def test_planned_ce_is_demand_tokens_over_hourly_cost():
    workload = get_workload("sharegpt_cauchy")  # 50 req/s x (290 + 207) tokens
    plan = ComboPlan((), "co", 50.0, 0.0)
    assert plan.cost_per_hour_usd == 0.0
    cheap = type("Plan", (), {"cost_per_hour_usd": 10.0})()
    assert repro.planned_ce(cheap, workload) == pytest.approx(50 * 497 * 3600 / 10.0)


def test_quick_run_writes_report_figures_and_tensorboard(tmp_path):
    assert repro.main(["--quick", "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    for key in repro.PAPER:
        assert f"| {key} |" in report
    for name in ("fig7_cost_efficiency", "fig6_latency", "fig8_lp", "fig9_combo_scheduler", "table3_instance_scheduler"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = sorted(p.name for p in (tmp_path / "tensorboard").iterdir())
    assert "Cauchy" in runs and "Cauchy_star" in runs and "Melange" in runs and "cauchy_gwrr" in runs
    results = json.loads((tmp_path / "results.json").read_text())
    for experiment in ("fig7", "fig8", "fig9"):
        for cells in results[experiment].values():
            assert all(c["lost"] == 0 and c["invalid_actions"] == 0 for c in cells.values())
    for workload, plans in results["plans"].items():
        # every plan's planned goodput covers the target QPS (Mélange reports none)
        target = get_workload(workload).target_rps
        assert all(float(p["goodput_rps"]) >= target for p in plans.values() if p["goodput_rps"] != "n/a")
