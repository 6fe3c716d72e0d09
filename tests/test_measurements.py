"""Real serving measurements: loader validation, per-request recomputation, README coverage."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

from hardware.measurements import (
    COLUMNS,
    MEASUREMENTS_DIR,
    REPO_ROOT,
    SERVING_POINTS_CSV,
    load_serving_points,
    serving_points,
)

README = MEASUREMENTS_DIR / "README.md"
LLMSS_DIR = MEASUREMENTS_DIR / "llmservingsim_vllm"


def _by_id() -> dict:
    return {point.point_id: point for point in serving_points()}


def test_shipped_points_load_and_cover_several_gpus_models_and_engines():
    points = serving_points()
    assert len(points) == 65
    assert len({p.point_id for p in points}) == len(points)
    assert {p.gpu for p in points} >= {"H100-80GB SXM", "A100-80GB SXM", "GeForce RTX 4090 24GB",
                                       "RTX PRO 6000 Blackwell 96GB", "H200"}
    assert len({p.model for p in points}) >= 5
    assert {p.engine for p in points} >= {"vllm", "nim", "sglang"}


def test_every_source_has_a_readme_section():
    headings = set(re.findall(r"^## `([a-z0-9_]+)`", README.read_text(encoding="utf-8"), flags=re.MULTILINE))
    assert {p.source for p in serving_points()} == headings


def test_per_request_files_are_licensed_copies_or_the_derived_lambda_table():
    for point in serving_points():
        if point.per_request_file is None:
            continue
        if point.source == "llmservingsim_vllm":
            assert (LLMSS_DIR / "LICENSE").is_file()
            assert point.per_request_file.startswith("hardware/data/measurements/llmservingsim_vllm/")
        else:
            # Unlicensed source: figures only, re-recorded as a table of our own (README, `lambda_vllm`).
            assert (point.source, point.per_request_file) == ("lambda_vllm", "hardware/data/measurements/lambda_vllm/requests.csv")


# --- LLMServingSim: the CSV row equals the metrics recomputed from the shipped requests.jsonl ---

def _requests(point) -> list[dict]:
    path = REPO_ROOT / point.per_request_file
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_first_request_of_the_rtx4090_run_by_hand():
    first = _requests(_by_id()["llmss-rtx4090-llama3.1-8b-tp1"])[0]
    # bench-0: queued 27536.660701067, first token 27537.350135653, last 27554.231018618, 531 tokens.
    assert (first["first_token_ts"] - first["queued_ts"]) * 1e3 == pytest.approx(689.434586, abs=1e-6)
    assert (first["last_token_ts"] - first["queued_ts"]) * 1e3 == pytest.approx(17570.317551, abs=1e-6)
    assert (first["last_token_ts"] - first["first_token_ts"]) / 530 * 1e3 == pytest.approx(31.850723, abs=1e-6)


@pytest.mark.parametrize("point_id", [
    "llmss-rtx4090-llama3.1-8b-tp1",
    "llmss-rtxpro6000-llama3.1-8b-tp1",
    "llmss-rtxpro6000-qwen3-32b-tp2",
    "llmss-rtxpro6000-qwen3-30b-a3b-dp2-ep2",
])
def test_llmservingsim_row_equals_metrics_recomputed_from_requests(point_id):
    point = _by_id()[point_id]
    reqs = _requests(point)
    queued = np.array([r["queued_ts"] for r in reqs])
    first = np.array([r["first_token_ts"] for r in reqs])
    last = np.array([r["last_token_ts"] for r in reqs])
    n_in = np.array([r["input_toks"] for r in reqs])
    n_out = np.array([r["output_toks"] for r in reqs])
    ttft_ms, e2e_ms = (first - queued) * 1e3, (last - queued) * 1e3
    span_s = last.max() - queued.min()
    expected = {
        "num_requests": len(reqs),
        "prompt_tokens_mean": n_in.mean(),
        "output_tokens_mean": n_out.mean(),
        "ttft_mean_ms": ttft_ms.mean(),
        "ttft_p50_ms": np.percentile(ttft_ms, 50),
        "ttft_p99_ms": np.percentile(ttft_ms, 99),
        "tpot_mean_ms": ((last - first) / (n_out - 1) * 1e3).mean(),
        "itl_mean_ms": (last - first).sum() / (n_out - 1).sum() * 1e3,
        "e2e_mean_ms": e2e_ms.mean(),
        "e2e_p50_ms": np.percentile(e2e_ms, 50),
        "request_throughput_rps": len(reqs) / span_s,
        "output_throughput_tps": n_out.sum() / span_s,
        "total_throughput_tps": (n_in.sum() + n_out.sum()) / span_s,
    }
    for name, value in expected.items():
        assert getattr(point, name) == pytest.approx(value, abs=5e-4), name


def test_llmservingsim_means_match_its_own_validation_summaries():
    # bench/examples/<hw>/<model>/validation/summary.txt, "vLLM" column (1 decimal).
    summaries = {
        "llmss-rtx4090-llama3.1-8b-tp1": (65456.6, 32.4, 86578.3),
        "llmss-rtxpro6000-llama3.1-8b-tp1": (7097.2, 32.5, 28200.7),
        "llmss-rtxpro6000-qwen3-32b-tp2": (36905.2, 80.3, 90408.1),
        "llmss-rtxpro6000-qwen3-30b-a3b-dp2-ep2": (1086.0, 47.3, 32344.6),
    }
    for point_id, (ttft, tpot, e2e) in summaries.items():
        point = _by_id()[point_id]
        assert (round(point.ttft_mean_ms, 1), round(point.tpot_mean_ms, 1), round(point.e2e_mean_ms, 1)) == (ttft, tpot, e2e)


def test_workload_schedules_match_the_runs_request_by_request():
    for point_id, workload in [("llmss-rtxpro6000-llama3.1-8b-tp1", "sharegpt-llama-3.1-8b-300-sps10"),
                               ("llmss-rtxpro6000-qwen3-32b-tp2", "sharegpt-qwen3-32b-300-sps10")]:
        reqs = _requests(_by_id()[point_id])
        with open(LLMSS_DIR / "workloads" / f"{workload}.csv", newline="", encoding="utf-8") as handle:
            schedule = list(csv.DictReader(handle))
        assert [(r["input_toks"], r["output_toks"]) for r in reqs] == [
            (int(s["input_toks"]), int(s["output_toks"])) for s in schedule]
        arrivals_ns = [int(s["arrival_time_ns"]) for s in schedule]
        assert arrivals_ns == sorted(arrivals_ns)
        # Poisson at 10 req/s: 300 arrivals span about 30 s.
        assert 25e9 < arrivals_ns[-1] - arrivals_ns[0] < 35e9


# --- BLIS: rows derived from inference-perf summaries by the documented formulas ---

def test_blis_tpot_and_output_throughput_follow_the_documented_formulas():
    point = _by_id()["blis-llama2-7b-tp1-general-s0"]
    # stage_0: e2e mean 2.057600319 s, TTFT mean 0.027109092 s, 248 tokens per request, 7.97811 req/s.
    assert point.tpot_mean_ms == pytest.approx((2057.600319 - 27.109092) / 247, abs=1e-4)
    assert point.output_throughput_tps == pytest.approx(7.978114393 * 248, abs=1e-3)
    assert point.output_tokens_fixed is True and point.itl_mean_ms is None
    for p in serving_points():
        if p.source == "blis_vllm":
            assert p.tpot_mean_ms == pytest.approx((p.e2e_mean_ms - p.ttft_mean_ms) / (p.output_tokens_mean - 1), abs=1e-3)


def test_cascadia_rows_are_table_1_with_consistent_gpu_counts():
    rows = {(p.dp, p.tp, p.pp): p.request_throughput_rps for p in serving_points() if p.source == "cascadia_table1"}
    assert rows == {(1, 4, 1): 0.21, (1, 2, 2): 0.26, (1, 1, 4): 0.27, (2, 1, 2): 0.33, (2, 2, 1): 0.40,
                    (2, 4, 1): 0.41, (2, 2, 2): 0.55}


def test_nim_concurrency_one_row_is_consistent_with_its_own_throughput():
    point = _by_id()["nim-1.8.0-llama3.3-70b-fp8-tp2-h100-5000in-500out-c1"]
    # One request at a time: 500 tokens in TTFT + 499 gaps.
    seconds = (point.ttft_mean_ms + 499 * point.itl_mean_ms) / 1e3
    assert 500 / seconds == pytest.approx(point.output_throughput_tps, rel=1e-3)


# --- loader validation ---

def _good_row() -> dict[str, str]:
    with open(SERVING_POINTS_CSV, newline="", encoding="utf-8") as handle:
        return dict(next(csv.DictReader(handle)))


def _write(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    path = tmp_path / "points.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_loader_accepts_a_good_row(tmp_path):
    (point,) = load_serving_points(_write(tmp_path, [_good_row()]))
    assert point.tp == 1 and point.chunked_prefill is True and point.ttft_p99_ms == pytest.approx(45.97)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"tp": "two"}, "line 2: tp 'two': must be a positive integer"),
        ({"tp": "0"}, "line 2: tp '0': must be a positive integer"),
        ({"ttft_mean_ms": "-3"}, "line 2: ttft_mean_ms '-3': must be a positive finite number"),
        ({"ttft_mean_ms": "nan"}, "line 2: ttft_mean_ms 'nan': must be a positive finite number"),
        ({"e2e_mean_ms": "fast"}, "line 2: e2e_mean_ms 'fast': is not a number"),
        ({"chunked_prefill": "yes"}, "line 2: chunked_prefill 'yes': must be true, false or empty"),
        ({"gpu": ""}, "line 2: gpu '': must not be empty"),
        ({"engine": "tgi"}, "line 2: engine 'tgi': not one of"),
        ({"dtype": "fp32"}, "line 2: dtype 'fp32': not one of"),
        ({"arrival": "bursty"}, "line 2: arrival 'bursty': not one of"),
        ({"arrival": "all-at-once"}, "line 2: request_rate_rps 5.0: needs arrival"),
        ({"arrival": "closed-loop", "request_rate_rps": ""}, "line 2: max_concurrency None: a closed-loop point"),
        ({"gpu_catalog": "H999"}, "line 2: gpu_catalog 'H999': not a GPU catalog key"),
        ({"model_catalog": "Llama-9"}, "line 2: model_catalog 'Llama-9': not a model catalog key"),
        ({"num_gpus": "2"}, "line 2: num_gpus 2: must equal tp*pp*dp = 1"),
        ({"ttft_p50_ms": "50"}, "line 2: ttft_p99_ms 45.97: is below ttft_p50_ms=50.0"),
        ({"per_request_file": "nowhere/requests.jsonl"}, "line 2: per_request_file 'nowhere/requests.jsonl': no such file"),
        ({"point_id": "Bad Id"}, "line 2: point_id 'Bad Id': must be a lowercase slug"),
    ],
)
def test_loader_names_file_line_field_and_value(tmp_path, changes, message):
    path = _write(tmp_path, [{**_good_row(), **changes}])
    with pytest.raises(ValueError, match=re.escape(f"{path} {message}")):
        load_serving_points(path)


def test_loader_rejects_a_point_without_metrics(tmp_path):
    metrics = ("ttft_mean_ms", "tpot_mean_ms", "itl_mean_ms", "e2e_mean_ms", "request_throughput_rps",
               "output_throughput_tps", "total_throughput_tps")
    row = {**_good_row(), **{name: "" for name in metrics}, "ttft_p50_ms": "", "ttft_p99_ms": "", "e2e_p50_ms": ""}
    with pytest.raises(ValueError, match="line 2: ttft_mean_ms None: a point needs at least one metric"):
        load_serving_points(_write(tmp_path, [row]))


def test_loader_rejects_duplicates_wrong_columns_and_empty_files(tmp_path):
    with pytest.raises(ValueError, match="line 3: point_id 'blis-llama2-7b-tp1-codegen-s0': duplicate"):
        load_serving_points(_write(tmp_path, [_good_row(), _good_row()]))
    with pytest.raises(ValueError, match="no serving points"):
        load_serving_points(_write(tmp_path, []))
    bad = tmp_path / "bad.csv"
    bad.write_text("point_id,source\nx,y\n", encoding="utf-8")
    with pytest.raises(ValueError, match="columns .* differ from expected"):
        load_serving_points(bad)


# --- LambdaLabs vLLM 0.6.0: rows recomputed from the derived per-request table ---

LAMBDA_REQUESTS = MEASUREMENTS_DIR / "lambda_vllm" / "requests.csv"


def _lambda_requests() -> dict[str, list[dict[str, str]]]:
    by_point: dict[str, list[dict[str, str]]] = {}
    with open(LAMBDA_REQUESTS, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            by_point.setdefault(row["point_id"], []).append(row)
    return by_point


def test_lambda_table_holds_exactly_the_lambda_points_in_request_order():
    by_point = _lambda_requests()
    lambda_ids = {p.point_id for p in serving_points() if p.source == "lambda_vllm"}
    assert set(by_point) == lambda_ids and len(lambda_ids) == 12
    for point_id, rows in by_point.items():
        assert [int(r["request_index"]) for r in rows] == list(range(_by_id()[point_id].num_requests))
        # An empty completion has no first token: its TTFT is not a measurement and is left empty.
        assert all((r["ttft_ms"] == "") == (r["output_tokens"] == "0") for r in rows)
        assert all(r["e2e_ms"] == "" for r in rows)


@pytest.mark.parametrize("point_id", sorted(
    p.point_id for p in serving_points() if p.source == "lambda_vllm"))
def test_lambda_row_equals_metrics_recomputed_from_requests(point_id):
    point, rows = _by_id()[point_id], _lambda_requests()[point_id]
    n_in = np.array([int(r["input_tokens"]) for r in rows])
    n_out = np.array([int(r["output_tokens"]) for r in rows])
    ttft_ms = np.array([float(r["ttft_ms"]) for r in rows if r["ttft_ms"]])
    assert point.num_requests == len(rows)
    assert point.prompt_tokens_mean == pytest.approx(n_in.mean(), abs=5e-5)
    assert point.output_tokens_mean == pytest.approx(n_out.mean(), abs=5e-5)
    # Rows print milliseconds to 3 decimals, half-way values may round either way.
    assert point.ttft_mean_ms == pytest.approx(ttft_ms.mean(), abs=1e-3)
    assert point.ttft_p50_ms == pytest.approx(np.percentile(ttft_ms, 50), abs=1e-3)
    assert point.ttft_p99_ms == pytest.approx(np.percentile(ttft_ms, 99), abs=1e-3)
    # Throughputs are the same request and token counts over one duration.
    duration_s = point.num_requests / point.request_throughput_rps
    assert point.output_throughput_tps == pytest.approx(n_out.sum() / duration_s, rel=1e-4)
    assert point.total_throughput_tps == pytest.approx((n_in.sum() + n_out.sum()) / duration_s, rel=1e-4)


def test_lambda_transcription_matches_the_source_files_own_totals():
    # (total_input_tokens, total_output_tokens, mean_ttft_ms) printed in each source JSON; benchmark_serving's
    # TTFT mean counts an empty completion as 0 ms, so it is the sum over non-empty requests / all requests.
    source = {
        "lambda-vllm060-h100-tp1-llama3-8b-len2048-n320": (65578, 65331, 1628.5096086156955),
        "lambda-vllm060-h100-tp1-llama3.1-8b-fp8-len2048-n320": (65578, 43953, 1026.6736259344725),
        "lambda-vllm060-h100-tp4-llama3-70b-len2048-n320": (65578, 56543, 2764.064876952034),
        "lambda-vllm060-h100-tp2-mixtral-8x7b-len2048-n320": (73671, 70054, 8536.445475828623),
        "lambda-vllm060-a100-tp4-llama3-70b-len2048-n10": (1369, 2153, 252.17491388320923),
    }
    by_point = _lambda_requests()
    for point_id, (total_in, total_out, mean_ttft_ms) in source.items():
        rows = by_point[point_id]
        assert sum(int(r["input_tokens"]) for r in rows) == total_in
        assert sum(int(r["output_tokens"]) for r in rows) == total_out
        assert sum(float(r["ttft_ms"] or 0) for r in rows) / len(rows) == pytest.approx(mean_ttft_ms, abs=5e-4)


def test_lambda_runs_with_one_tokenizer_send_the_same_prompts_in_the_same_order():
    by_point = _lambda_requests()
    llama3 = [p.point_id for p in serving_points() if p.source == "lambda_vllm" and "llama3" in p.point_id]
    lengths = [[int(r["input_tokens"]) for r in by_point[pid]] for pid in llama3]
    longest = max(lengths, key=len)
    assert all(lens == longest[: len(lens)] for lens in lengths)
    assert longest[:10] == [13, 25, 27, 10, 329, 29, 399, 328, 4, 205]


def test_deepseek_points_are_671b_on_eight_gpus():
    points = [p for p in serving_points() if p.source.startswith("deepseek_r1")]
    assert len(points) == 10
    assert {(p.model_catalog, p.num_gpus, p.tp) for p in points} == {("DeepSeek-R1-671B", 8, 8)}
    assert {p.dtype for p in points} == {"int4-awq", "fp8"}
    # At concurrency 1 the decode rate is one token per TPOT: 1000 / 16.1 ms = 62.1 tokens/s.
    c1 = _by_id()["tt-dsr1-0528-awq-h100x8-tp8-128in-128out-c1"]
    assert 1000 / c1.tpot_mean_ms == pytest.approx(c1.output_throughput_tps, abs=0.05)
