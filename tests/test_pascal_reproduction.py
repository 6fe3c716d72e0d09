"""The PASCAL reproduction: Fig. 10's sample-size rule and binning, the headline arithmetic,
and a quick end-to-end run that writes the report, figures and TensorBoard runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments import pascal_reproduction as repro
from simulator.outcome import RequestOutcome
from simulator.request import SLO
from markdown_tables import unpadded


def outcome(request_id: int, reasoning_tokens: int, ttft_s: float, reasoning_end_s: float | None = None) -> RequestOutcome:
    end_s = ttft_s - 0.05 if reasoning_end_s is None else reasoning_end_s
    return RequestOutcome(
        request_id=request_id, tier=0, instance_id=0, arrival_s=0.0, prompt_tokens=10, output_tokens=reasoning_tokens + 5,
        reasoning_tokens=reasoning_tokens, first_scheduled_s=0.0, first_token_s=0.1, first_answer_token_s=ttft_s,
        reasoning_end_s=end_s, finish_s=ttft_s + 0.4, max_tbt_s=0.1, preempted_s=0.0, num_preemptions=0,
        num_migrations=0, token_curve=(), slo=SLO(),
    )


def test_tail_rule_follows_the_sample_size_of_each_bin():
    values = np.arange(1.0, 201.0)  # 1 .. 200
    assert repro.tail_latency_s(values[:4]) is None  # fewer than 5: omitted
    assert repro.tail_latency_s(values[:9]) == 9.0  # fewer than 10: max
    assert repro.tail_latency_s(values[:19]) == pytest.approx(np.percentile(values[:19], 90))  # 17.2
    assert repro.tail_latency_s(values[:19]) == pytest.approx(17.2)
    assert repro.tail_latency_s(values[:99]) == pytest.approx(94.1)  # P95 of 1..99
    assert repro.tail_latency_s(values) == pytest.approx(198.01)  # P99 of 1..200


def test_bins_are_256_reasoning_tokens_wide_and_small_bins_are_dropped():
    outcomes = [outcome(i, 255, ttft_s=float(i + 1)) for i in range(5)]  # bin [0, 255]: 1 .. 5 s
    outcomes += [outcome(10 + i, 256, ttft_s=float(i + 6)) for i in range(6)]  # bin [256, 511]: 6 .. 11 s
    outcomes += [outcome(100 + i, 600, ttft_s=50.0) for i in range(4)]  # 4 samples in [512, 767]: omitted
    assert repro.tail_ttft_by_bin(outcomes) == {0: 5.0, 256: 11.0}  # fewer than 10 samples: the max


def test_headline_compares_pascal_with_each_baseline_bin_by_bin():
    cell = {"throughput_tokens_per_s": 1000.0, "blocking_p99_s": 0.1, "violation_rate": 0.01}
    cells = {
        "PASCAL": {"high": {**cell, "tail_ttft_s_by_bin": {0: 20.0, 256: 55.0, 512: 40.0}}},
        "FCFS": {"high": {**cell, "throughput_tokens_per_s": 1020.0, "tail_ttft_s_by_bin": {0: 80.0, 256: 50.0}}},
        "RR": {"high": {**cell, "throughput_tokens_per_s": 990.0, "tail_ttft_s_by_bin": {0: 25.0, 512: 50.0}}},
        "PASCAL(NoMigration)": {"high": {**cell, "blocking_p99_s": 12.0}},
        "PASCAL(NonAdaptive)": {"high": {**cell, "violation_rate": 0.2}},
    }
    ours = repro.headline(cells, "high")
    assert ours["max_ttft_cut_vs_fcfs"] == pytest.approx(0.75)  # 20 vs 80
    assert ours["worst_ttft_rise_vs_fcfs"] == pytest.approx(0.10)  # 55 vs 50
    assert ours["max_ttft_cut_vs_rr"] == pytest.approx(0.20)  # 20 vs 25 and 40 vs 50
    assert ours["worst_ttft_rise_vs_rr"] == pytest.approx(-0.20)  # never worse than RR
    assert ours["throughput_change_vs_fcfs"] == pytest.approx(1000.0 / 1020.0 - 1.0)
    assert ours["throughput_change_vs_rr"] == pytest.approx(1000.0 / 990.0 - 1.0)
    assert ours["blocking_p99_no_migration_s"] == 12.0 and ours["violation_non_adaptive"] == 0.2


def test_blocking_p99_is_the_wait_from_reasoning_end_to_first_answer_token():
    outcomes = [outcome(i, 100, ttft_s=10.0 + i, reasoning_end_s=10.0) for i in range(101)]  # waits 0 .. 100 s
    assert repro.blocking_p99_s(outcomes) == pytest.approx(99.0)
    assert math.isnan(repro.blocking_p99_s([outcome(0, 0, ttft_s=1.0)]))


def test_quick_run_writes_report_figures_and_tensorboard(tmp_path):
    assert repro.main(["--quick", "--out", str(tmp_path)]) == 0
    report = unpadded((tmp_path / "report.md").read_text())
    for key in repro.PAPER:
        assert f"| {key} |" in report
    for rate in ("low", "medium", "high"):
        assert f"## {rate} rate" in report
    for name in ("fig10_tail_ttft", "fig11_slo_violations", "fig12_throughput", "fig13_blocking_p99", "fig15_non_adaptive"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = sorted(p.name for p in (tmp_path / "tensorboard").iterdir())
    assert runs == sorted(n.replace("(", "_").replace(")", "") for n in repro.SYSTEMS)
    assert all(any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tensorboard" / r).iterdir()) for r in runs)
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in report.splitlines() if line.startswith("| PASCAL |")]
    assert len(rows) == 3
    for row in rows:  # ... | migrations | invalid actions | requests | lost |
        migrations, invalid, requests, lost = (int(v) for v in row[-4:])
        assert invalid == 0 and migrations > 0 and requests + lost == 200


def test_headlines_are_signed_changes_against_the_papers_range_midpoints():
    ours = {"max_ttft_cut_vs_fcfs": 0.949, "max_ttft_cut_vs_rr": 0.10, "blocking_p99_pascal_s": 0.5,
            "blocking_p99_no_migration_s": 20.0, "violation_pascal": 0.01, "violation_non_adaptive": 0.02}
    variant = {"memory_utilization": repro.KV_CONSTRAINED_MEMORY_UTILIZATION, "kv_tokens_per_instance": 78248,
               "max_ttft_cut_vs_fcfs": 0.60, "max_ttft_cut_vs_rr": 0.05, "cells": {"FCFS": {"blocking_p99_s": 15.09}}}
    results = {"headline_high": ours, "kv_tokens_per_instance": 102553, "variant_kv_constrained": variant,
               "cells": {"FCFS": {"high": {"blocking_p99_s": 0.121}}}}
    rows = repro.headlines(results)
    assert [r.paper_value for r in rows] == pytest.approx([-66.5, -31.0, -100.0, 100 * (0.0069 / 0.0745 - 1), -66.5, -31.0])
    assert [r.ours for r in rows] == pytest.approx([-94.9, -10.0, -97.5, -50.0, -60.0, -5.0])
    assert [r.reproduced for r in rows] == [True, False, True, True, True, False]  # 10 / 31 = 0.32 < half
    assert all(r.setup.startswith("paper setup") for r in rows[:4]) and all(r.cause for r in rows)
    assert all(r.setup.startswith("variant: KV-constrained, 78,248 KV tokens") for r in rows[4:])
    for text in ("102,553 KV tokens", "is 0.12 s", "P99 wait is 15.1 s", "60.0% vs FCFS, 5.0% vs RR"):
        assert text in rows[0].cause and text in rows[1].cause


def test_kv_constrained_pool_is_the_pool_of_96e9_bytes():
    """The variant counts the H100's 96 GB as 10^9 bytes: 0.9 x 96 x (2^30 - 10^9) bytes fewer for KV
    than the GiB pool, i.e. 24,304.6 tokens of 262,144 bytes (64 layers x 8 KV heads x 128 x 2 x 2 B)."""
    from hardware.models import get_model, kv_bytes_per_token_per_gpu

    assert kv_bytes_per_token_per_gpu(get_model("DeepSeek-R1-Distill-Qwen-32B"), 1, 1) == 64 * 8 * 128 * 2 * 2
    gap_tokens = 0.9 * 96 * (2**30 - 1e9) / (64 * 8 * 128 * 2 * 2)
    assert gap_tokens == pytest.approx(24304.556)
    gap = repro.kv_tokens_per_instance() - repro.kv_tokens_per_instance(repro.KV_CONSTRAINED_MEMORY_UTILIZATION)
    assert abs(gap - gap_tokens) <= 1


def test_percent_change_is_undefined_without_a_reference_level():
    """Fig. 13(c) / 15(b) compare against a baseline's blocking or violations; a baseline with none
    (a short episode) gives nan, so the row needs a cause, instead of a division by zero."""
    assert repro.percent_change(0.5, 2.0) == -75.0
    assert math.isnan(repro.percent_change(1.0, 0.0))
