"""The sim-to-real validation: how measured points become simulator runs, how runs are measured,
which points a fit may use, and how the report summarizes errors."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest

from experiments.validation.cases import HASH_BLOCK_TOKENS, V06_ENGINE, V1_ENGINE, case_for
from experiments.validation.report import Row, summarize
from experiments.validation.simulate import build_cluster, closed_loop, simulate
from experiments.validation.split import HELD_OUT, OTHER_ENGINE, TRAIN, role
from hardware.engines import get_engine
from hardware.latency import latency_model
from hardware.measurements import MEASUREMENTS_DIR, serving_points
from simulator.request import Request

POINTS = {p.point_id: p for p in serving_points()}


def test_engine_of_each_point_follows_the_measured_engine_version():
    engines = {pid: case.engine for pid, p in POINTS.items() if (case := case_for(p)) is not None}
    assert engines["blis-llama2-7b-tp1-general-s0"] == V1_ENGINE  # vLLM 0.15.1
    assert engines["llmss-rtx4090-llama3.1-8b-tp1"] == V1_ENGINE  # vLLM 0.19.0
    assert engines["lambda-vllm060-h100-tp1-llama3-8b-len2048-n10"] == V06_ENGINE  # vLLM 0.6.0
    sglang = case_for(POINTS["sa-dsr1-0528-fp8-sglang057-h200x8-tp8-1024in-1024out-c8"])
    assert (sglang.engine, sglang.own_engine, role(sglang)) == (V1_ENGINE, False, OTHER_ENGINE)


def test_lambda_points_replay_their_own_requests_at_once():
    point = POINTS["lambda-vllm060-h100-tp1-llama3-8b-len2048-n10"]
    with open(MEASUREMENTS_DIR / "lambda_vllm" / "requests.csv", newline="", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["point_id"] == point.point_id]
    requests = case_for(point).open_requests()
    assert [(r.prompt_tokens, r.output_tokens) for r in requests] == [
        (int(r["input_tokens"]), max(int(r["output_tokens"]), 1)) for r in rows]
    assert {r.arrival_s for r in requests} == {0.0}
    config = case_for(point).config
    assert (config.scheduler, config.max_batched_tokens, config.engine) == ("fcfs", 2048, V06_ENGINE)


def test_llmservingsim_points_replay_arrivals_from_the_engines_queueing_clock():
    point = POINTS["llmss-rtxpro6000-llama3.1-8b-tp1"]
    requests = case_for(point).open_requests()
    assert len(requests) == point.num_requests == 300
    arrivals = [r.arrival_s for r in requests]
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals)
    assert 300 / arrivals[-1] == pytest.approx(point.request_rate_rps, rel=0.15)
    assert case_for(point).over_http is False


def test_blis_stages_fill_their_duration_and_repeat_prompts_with_shared_group_prefixes():
    point = POINTS["blis-llama2-7b-tp1-general-s0"]  # 8 req/s for 600 s, 100-token prefix + 447-token question
    case = case_for(point)
    requests = case.open_requests()
    assert len(requests) == 4800 and requests[-1].arrival_s == pytest.approx(600.0, rel=1e-12)
    assert {r.prompt_tokens for r in requests} == {round(point.prompt_tokens_mean)}
    hashes = [r.block_hashes.hashes for r in requests[:100]]
    assert requests[100].block_hashes == requests[0].block_hashes  # prompts cycle every 100
    shared = int(100 * 575 / 548) // HASH_BLOCK_TOKENS  # prefix scaled by the re-tokenized length
    assert shared == 6
    assert hashes[0][:shared] == hashes[9][:shared] and hashes[0][shared] != hashes[9][shared]  # one group
    assert hashes[0][0] != hashes[10][0]  # the next group
    assert case.config.prefix_caching is True
    assert case.config.host_cache_gb == pytest.approx(8 * 2**30 / 1e9)


def test_a_lone_request_is_measured_by_the_latency_model():
    point = POINTS["lambda-vllm060-h100-tp1-llama3-8b-len2048-n10"]
    case = replace(case_for(point), open_requests=lambda: [Request(0, 0.0, 100, 5)])
    engine = replace(get_engine(V06_ENGINE), frontend_s=0.0)
    measured = simulate(case, engine)
    latency = latency_model("H100-80GB", "Llama-3-8B", engine=engine)
    prefill_s = latency.prefill_time_s(100)
    decodes_s = sum(latency.decode_time_s(1, 100 + i) for i in range(1, 5))
    assert measured.ttft_mean_ms == pytest.approx(prefill_s * 1e3, rel=1e-9)
    assert measured.tpot_mean_ms == pytest.approx(decodes_s / 4 * 1e3, rel=1e-9)
    assert measured.e2e_mean_ms == pytest.approx((prefill_s + decodes_s) * 1e3, rel=1e-9)


def test_closed_loop_clients_keep_their_concurrency():
    point = POINTS["sa-dsr1-0528-fp8-sglang057-h200x8-tp8-1024in-1024out-c8"]
    case = replace(case_for(point), closed_requests=((64, 8),) * 20, concurrency=3)
    cluster = build_cluster(case, None)
    outcomes = closed_loop(cluster, case)
    assert len(outcomes) == 20
    events = sorted([(o.arrival_s, 1) for o in outcomes] + [(o.finish_s, -1) for o in outcomes])
    in_flight = np.cumsum([step for _, step in events])
    assert in_flight.max() == 3


def test_the_fit_uses_two_models_and_holds_out_at_least_a_third():
    cases = [c for c in (case_for(p) for p in serving_points()) if c is not None]
    roles = [role(c) for c in cases]
    train = [c for c, r in zip(cases, roles) if r == TRAIN]
    assert {c.point.model_catalog for c in train} == {"Llama-2-7B", "CodeLlama-34B"}
    own = [r for c, r in zip(cases, roles) if c.own_engine and c.engine == V1_ENGINE]
    assert own.count(HELD_OUT) >= len(own) / 3


def test_summaries_are_absolute_relative_errors_per_engine_and_role():
    case = case_for(POINTS["blis-llama2-7b-tp1-general-s0"])
    rows = [Row(case, TRAIN, "e2e_mean_ms", 100.0, simulated, old) for simulated, old in ((110.0, 50.0), (95.0, 150.0),
                                                                                           (80.0, 100.0))]
    (summary,) = summarize(rows)
    assert (summary.points, summary.worst) == (3, pytest.approx(0.2))
    assert summary.mean_abs == pytest.approx((0.1 + 0.05 + 0.2) / 3)
    assert summary.median_abs == pytest.approx(0.1) and summary.old_median_abs == pytest.approx(0.5)
