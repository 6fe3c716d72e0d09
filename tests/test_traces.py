"""Trace files (servegym CSV, Azure format) and the pooled ServeGen data shipped in the repo."""

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.request import Request
from simulator.workloads import (
    PoissonArrivals,
    ServeGenReasoning,
    generate_requests,
    load_azure_trace,
    load_trace_csv,
    write_trace_csv,
)
from simulator.workloads.data_files import DATA_DIR, servegen_rate_series, servegen_reasoning_pmf
from simulator.workloads.servegen_pooling import pool_rate_series, pool_reasoning_distributions

RAW_SERVEGEN_DIR = Path("/work/shared/data/traces/servegen")


def write_text(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- servegym CSV


def test_round_trip_write_then_load_is_identical(tmp_path):
    requests = generate_requests(
        PoissonArrivals(3.0), ServeGenReasoning(), 2000, np.random.default_rng(0), priorities="gaussian", num_tiers=4
    )
    path = tmp_path / "trace.csv"
    write_trace_csv(requests, path)
    assert path.read_text().splitlines()[0] == "arrival_s,prompt_tokens,output_tokens,reasoning_tokens,tier"
    assert load_trace_csv(path) == requests


def test_optional_columns_default_and_any_column_order(tmp_path):
    path = write_text(tmp_path, "output_tokens,arrival_s,prompt_tokens\n5,0.0,10\n7,1.5,20\n")
    assert load_trace_csv(path) == [Request(0, 0.0, 10, 5), Request(1, 1.5, 20, 7)]
    path = write_text(tmp_path, "arrival_s,prompt_tokens,output_tokens,tier\n0.25,3,4,2\n", "tiers.csv")
    assert load_trace_csv(path) == [Request(0, 0.25, 3, 4, tier=2)]


@pytest.mark.parametrize(
    "text, line, problem",
    [
        ("arrival_s,prompt_tokens\n0,1\n", 1, r"missing column\(s\) \['output_tokens'\]"),
        ("arrival_s,prompt_tokens,output_tokens,color\n0,1,1,red\n", 1, r"unknown column\(s\) \['color'\]"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,-4,1\n", 3, "prompt_tokens -4 is negative"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1,2.5\n", 2, "output_tokens '2.5' is not an integer"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1,0\n", 2, "output_tokens 0 is zero"),
        ("arrival_s,prompt_tokens,output_tokens,reasoning_tokens\n0,1,5,6\n", 2, "reasoning_tokens 6 exceeds output_tokens 5"),
        ("arrival_s,prompt_tokens,output_tokens\n2.0,1,1\n1.0,1,1\n", 3, "arrival_s 1.0 is before the previous row's 2.0"),
        ("arrival_s,prompt_tokens,output_tokens\nnan,1,1\n", 2, "arrival_s nan is not a finite number"),
        ("arrival_s,prompt_tokens,output_tokens\nsoon,1,1\n", 2, "arrival_s 'soon' is not a number"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1\n", 2, "2 fields, header has 3"),
        ("arrival_s,prompt_tokens,output_tokens,tier\n0,1,1,-1\n", 2, "tier -1 is negative"),
        ("", 1, "empty file"),
        ("arrival_s,prompt_tokens,output_tokens\n0,1e3,1\n", 2, "prompt_tokens '1e3' is not an integer"),
        ("arrival_s,prompt_tokens,output_tokens,reasoning_tokens\n0,1,5,x\n", 2, "reasoning_tokens 'x' is not an integer"),
        ("arrival_s,prompt_tokens,output_tokens,reasoning_tokens\n0,1,5,-1\n", 2, "reasoning_tokens -1 is negative"),
        ("arrival_s,prompt_tokens,output_tokens,tier\n0,1,1,top\n", 2, "tier 'top' is not an integer"),
        ("arrival_s,prompt_tokens,output_tokens\n1e9,1,1\n1000000000.5,1,1\n", 3, r"arrival_s 1000000000.5 is after 1e\+09 s"),
        ("arrival_s,prompt_tokens,output_tokens,tier,tier\n0,1,1,0,0\n", 1, r"duplicated column\(s\) \['tier'\]"),
        ("arrival_s,prompt_tokens,output_tokens\n", 1, None),
    ],
)
def test_malformed_trace_raises_naming_file_line_and_problem(tmp_path, text, line, problem):
    path = write_text(tmp_path, text, "bad_trace.csv")
    expected = rf"bad_trace\.csv: the trace has a header but no request rows$" if problem is None else (
        rf"bad_trace\.csv, line {line}: {problem}")
    with pytest.raises(ValueError, match=expected):
        load_trace_csv(path)


def test_write_refuses_requests_that_would_make_a_malformed_trace(tmp_path):
    path = tmp_path / "out.csv"
    with pytest.raises(ValueError, match="request 1 .*before the previous row's 5.0"):
        write_trace_csv([Request(0, 5.0, 1, 1), Request(1, 4.0, 1, 1)], path)
    with pytest.raises(ValueError, match="reasoning_tokens 3 exceeds output_tokens 2"):
        write_trace_csv([Request(0, 0.0, 1, 2, reasoning_tokens=3)], path)
    assert not path.exists()


# ---------------------------------------------------------------- Azure format

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"


def test_azure_timestamps_become_relative_seconds_and_scale(tmp_path):
    path = write_text(
        tmp_path,
        AZURE_HEADER
        + "2023-11-16 18:17:03.0000000,100,10\r\n"
        + "2023-11-16 18:17:03.5000000,200,20\r\n"
        + "2023-11-16 18:17:05.0000000,300,30\r\n",
        "azure.csv",
    )
    requests = load_azure_trace(path)
    assert requests == [Request(0, 0.0, 100, 10), Request(1, 0.5, 200, 20), Request(2, 2.0, 300, 30)]
    assert [r.arrival_s for r in load_azure_trace(path, time_scale=0.1)] == pytest.approx([0.0, 0.05, 0.2])
    # Observed rate (3 - 1) / 2 s = 1 req/s; a target of 4 req/s divides times by 4.
    assert [r.arrival_s for r in load_azure_trace(path, target_rate_rps=4.0)] == pytest.approx([0.0, 0.125, 0.5])
    assert len(load_azure_trace(path, max_requests=2)) == 2


def test_shipped_azure_traces_match_published_figures():
    conv = load_azure_trace("azure_conv")
    code = load_azure_trace("azure_code")
    # shared/data/README.md: conv 19,366 requests over 58 min, 5.53 req/s; code 8,819 over 57 min.
    assert len(conv) == 19_366 and len(code) == 8_819
    assert conv[0].arrival_s == 0.0 and conv[-1].arrival_s / 60 == pytest.approx(58, abs=1)
    assert len(conv) / conv[-1].arrival_s == pytest.approx(5.53, abs=0.02)
    assert np.mean([r.prompt_tokens for r in conv]) == pytest.approx(1155, abs=1)
    assert np.mean([r.output_tokens for r in code]) == pytest.approx(28, abs=0.5)
    scaled = load_azure_trace("azure_code", target_rate_rps=54.0)
    assert (len(scaled) - 1) / scaled[-1].arrival_s == pytest.approx(54.0)


@pytest.mark.parametrize(
    "rows, line, problem",
    [
        ("2023-11-16 18:17:03.0,100,10\r\nyesterday,1,1\r\n", 3, "TIMESTAMP 'yesterday' is not a date-time"),
        ("2023-11-16 18:17:03.0,100,0\r\n", 2, "GeneratedTokens 0 is zero"),
        ("2023-11-16 18:17:03.0,100,10\r\n2023-11-16 18:17:02.0,100,10\r\n", 3, "TIMESTAMP '2023-11-16 18:17:02.0' is before the previous row's"),
        ("2023-11-16 18:17:03.0,-1,10\r\n", 2, "ContextTokens -1 is negative"),
        ("2023-11-16 18:17:03.0,1x,10\r\n", 2, "ContextTokens '1x' is not an integer"),
        ("2023-11-16 18:17:03.0,1,ten\r\n", 2, "GeneratedTokens 'ten' is not an integer"),
        ("2023-11-16 18:17:03.0,1,2000000000\r\n", 2, "GeneratedTokens 2000000000 is above 1,000,000,000"),
        ("2023-11-16 18:17:03.0,1\r\n", 2, "2 fields, header has 3"),
    ],
)
def test_malformed_azure_trace_raises(tmp_path, rows, line, problem):
    path = write_text(tmp_path, AZURE_HEADER + rows, "bad_azure.csv")
    with pytest.raises(ValueError, match=rf"bad_azure\.csv, line {line}: {problem}"):
        load_azure_trace(path)


def test_bad_azure_arguments_raise(tmp_path):
    with pytest.raises(ValueError, match=r"'azure_chat'.*\['azure_code', 'azure_conv'\]"):
        load_azure_trace("azure_chat")
    with pytest.raises(ValueError, match="not both"):
        load_azure_trace("azure_code", time_scale=2.0, target_rate_rps=5.0)
    with pytest.raises(ValueError, match="max_requests"):
        load_azure_trace("azure_code", max_requests=0)
    with pytest.raises(ValueError, match="target_rate_rps"):
        load_azure_trace("azure_code", target_rate_rps=-1.0)


# ---------------------------------------------------------------- ServeGen pooling


def write_servegen_client(directory: Path, chunk: int, rates_rps: list[float], windows: dict) -> None:
    rows = [f"{600 * i},{rate},1.0,Gamma,1,1" for i, rate in enumerate(rates_rps)]
    (directory / f"chunk-{chunk}-trace.csv").write_text("\n".join(rows) + "\n")
    (directory / f"chunk-{chunk}-dataset.json").write_text(json.dumps(windows))


def test_pooling_weights_client_windows_by_request_count(tmp_path):
    one_value = {"input_tokens": "{10: 1.0}", "output_tokens": "{100: 1.0}", "reason_ratio": "{0.5: 1.0}"}
    other_value = {"input_tokens": "{20: 1.0}", "output_tokens": "{200: 0.5, 100: 0.5}", "reason_ratio": "{0.9: 1.0}"}
    empty = {"input_tokens": "{}", "output_tokens": "{}", "reason_ratio": "{}"}
    # Client 0: 1 req/s in window [0, 1200) only -> 1200 requests. Client 1: 3 req/s in its first
    # window [0, 1200) and none after -> 3600 requests. Windows of 1200 s instead of 6 h.
    write_servegen_client(tmp_path, 0, [1.0, 1.0, 0.0, 0.0], {"0": one_value, "1200": empty})
    write_servegen_client(tmp_path, 1, [3.0, 3.0, 0.0, 0.0], {"0": other_value, "1200": one_value})
    pooled = pool_reasoning_distributions(tmp_path)
    values, probabilities = pooled["input_tokens"]
    assert values.tolist() == [10, 20] and probabilities == pytest.approx([0.25, 0.75])
    values, probabilities = pooled["output_tokens"]
    assert values.tolist() == [100, 200] and probabilities == pytest.approx([0.25 + 0.375, 0.375])
    window_start_s, requests, dispersion_cv = pool_rate_series(tmp_path)
    assert requests.tolist() == [2400, 2400, 0, 0] and dispersion_cv[:2] == pytest.approx([1.0, 1.0])


def test_shipped_servegen_reasoning_data_matches_published_figures():
    values, probabilities = servegen_reasoning_pmf("reason_ratio")
    assert probabilities.sum() == pytest.approx(1.0)
    assert values @ probabilities == pytest.approx(0.70, abs=0.005)  # README: mean 0.70
    assert values[np.searchsorted(np.cumsum(probabilities), 0.5)] == pytest.approx(0.76, abs=0.01)
    outputs, _ = servegen_reasoning_pmf("output_tokens")
    assert outputs.min() >= 1 and np.all(outputs == np.round(outputs))


def test_shipped_data_stays_small_and_credited():
    total_bytes = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    assert total_bytes < 4_500_000  # the whole shipped data budget (Mooncake's two gzipped traces: 1.08 MB)
    for folder in ("lengths", "azure2023", "servegen", "routellm", "mooncake"):
        assert (DATA_DIR / folder / "README.md").is_file()
        assert any(p.name.startswith("LICENSE") for p in (DATA_DIR / folder).iterdir())


@pytest.mark.skipif(not RAW_SERVEGEN_DIR.is_dir(), reason="raw ServeGen release not present")
def test_shipped_servegen_files_are_the_pooled_raw_release():
    pooled = pool_reasoning_distributions(RAW_SERVEGEN_DIR / "reason_deepseek-r1")
    for field, (values, probabilities) in pooled.items():
        kept = probabilities > 0
        shipped_values, shipped_probabilities = servegen_reasoning_pmf(field)
        assert np.array_equal(shipped_values, values[kept])
        assert shipped_probabilities == pytest.approx(probabilities[kept], rel=1e-8, abs=1e-15)
    _, requests, _ = pool_rate_series(RAW_SERVEGEN_DIR / "language_m-large")
    assert servegen_rate_series().rate_rps * 600 == pytest.approx(requests)


def test_azure_max_requests_reads_only_that_many_rows(tmp_path):
    path = write_text(tmp_path, AZURE_HEADER + "2023-11-16 18:17:03.0,100,10\r\n2023-11-16 18:17:04.5,200,20\r\nbroken\r\n",
                      "azure.csv")
    requests = load_azure_trace(path, max_requests=2)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in requests] == [(0.0, 100, 10), (1.5, 200, 20)]
    with pytest.raises(ValueError, match="line 4: 1 fields, header has 3"):
        load_azure_trace(path)


def test_max_requests_reads_only_that_many_rows(tmp_path):
    # Row 4 is broken: a reader that went past the first three rows would raise on it.
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n0.5,20,6\n1.0,30,7\nnot,a,row\n")
    requests = load_trace_csv(path, max_requests=3)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in requests] == [(0.0, 10, 5), (0.5, 20, 6), (1.0, 30, 7)]
    with pytest.raises(ValueError, match="line 5: arrival_s 'not' is not a number"):
        load_trace_csv(path, max_requests=4)
    with pytest.raises(ValueError, match="max_requests must be an integer >= 1, got 0"):
        load_trace_csv(path, max_requests=0)


def test_token_counts_above_a_billion_are_refused_when_read(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,1000000000,5\n0.5,10,1000000001\n")
    with pytest.raises(ValueError, match=r"line 3: output_tokens 1000000001 is above 1,000,000,000"):
        load_trace_csv(path)


def test_azure_argument_errors_name_the_argument_and_value():
    cases = [({"time_scale": 0.0}, r"^time_scale must be a finite number > 0, got 0\.0$"),
             ({"max_requests": 0}, r"^max_requests must be an integer >= 1, got 0$"),
             ({"target_rate_rps": 0.0}, r"^target_rate_rps must be a finite number > 0, got 0\.0$")]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            load_azure_trace("azure_code", **kwargs)
    assert len(load_azure_trace("azure_code", max_requests=1)) == 1


def test_azure_target_rate_needs_two_requests_spanning_time(tmp_path):
    two = write_text(tmp_path, AZURE_HEADER + "2023-11-16 18:17:03.0,1,1\r\n2023-11-16 18:17:04.0,1,1\r\n", "two.csv")
    # Two requests 1 s apart: rate (2 - 1) / 1 s; a target of 2 req/s halves the times.
    assert [r.arrival_s for r in load_azure_trace(two, target_rate_rps=2.0)] == [0.0, 0.5]
    tied_first = write_text(tmp_path, AZURE_HEADER + "2023-11-16 18:17:03.0,1,1\r\n" * 2
                            + "2023-11-16 18:17:04.0,1,1\r\n", "tied_first.csv")
    assert [r.arrival_s for r in load_azure_trace(tied_first, target_rate_rps=4.0)] == [0.0, 0.0, 0.5]  # 2 / 1 s -> 4
    same = write_text(tmp_path, AZURE_HEADER + "2023-11-16 18:17:03.0,1,1\r\n" * 2, "same.csv")
    with pytest.raises(ValueError, match=r"same\.csv: target_rate_rps needs >= 2 requests spanning > 0 s, got 2$"):
        load_azure_trace(same, target_rate_rps=2.0)


def test_azure_reader_edges(tmp_path):
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (AZURE_HEADER + "2023-11-16 18:17:03.0,1000000000,1\r\n").encode())
    assert load_azure_trace(bom) == [Request(0, 0.0, 1_000_000_000, 1)]  # BOM dropped; MAX_TOKENS itself allowed
    empty = write_text(tmp_path, "", "empty.csv")
    with pytest.raises(ValueError, match=r"empty\.csv, line 1: empty file, expected header TIMESTAMP,ContextTokens,GeneratedTokens$"):
        load_azure_trace(empty)
    header_only = write_text(tmp_path, AZURE_HEADER, "header_only.csv")
    with pytest.raises(ValueError, match=r"header_only\.csv: no requests after the header$"):
        load_azure_trace(header_only)
    big = write_text(tmp_path, AZURE_HEADER + "2023-11-16 18:17:03.0,1,1000000001\r\n", "big.csv")
    with pytest.raises(ValueError, match=r"GeneratedTokens 1000000001 is above 1,000,000,000 \(simulator\.workloads\.traces\.MAX_TOKENS\)$"):
        load_azure_trace(big)
    # 10 us apart: exact in int64 nanoseconds (a float64 of ~1.7e18 ns is only good to 256 ns)
    close = write_text(tmp_path, AZURE_HEADER + "2023-11-16 18:17:03.0000000,1,1\r\n2023-11-16 18:17:03.0000100,1,1\r\n", "close.csv")
    assert [r.arrival_s for r in load_azure_trace(close)] == [0.0, 1e-05]


def test_a_row_whose_output_is_all_reasoning_is_read(tmp_path):
    path = write_text(tmp_path, "arrival_s,prompt_tokens,output_tokens,reasoning_tokens\n0.0,1,5,5\n")
    assert load_trace_csv(path) == [Request(0, 0.0, 1, 5, reasoning_tokens=5)]  # Request allows it too
