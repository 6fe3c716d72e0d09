"""The ``python -m simulator`` command line: a small run, its JSON file, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hardware.engines import get_engine
from hardware.gpus import get_gpu
from simulator.__main__ import main

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--rate", "4", "--requests", "20", "--seed", "1"]


def table_rows(stdout: str) -> dict[str, str]:
    """``metric -> value`` cells of the printed table."""
    rows = {}
    for line in stdout.splitlines():
        name, bar, value = line.partition(" | ")
        if bar:
            rows[name.strip()] = value.strip()
    return rows


def strict_json(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_cli_runs_prints_the_table_and_writes_the_same_numbers_to_json(tmp_path):
    out = tmp_path / "metrics.json"
    argv = ["--instances", "A100-80GB:1,H100-80GB:1", "--model", "Llama-2-7B", "--rate", "8", "--requests", "200",
            "--prompt-tokens", "128", "--output-tokens", "32", "--seed", "3", "--json", str(out)]
    result = subprocess.run([sys.executable, "-m", "simulator", *argv], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    assert rows["metric"] == "value"
    assert "simulated 200 requests" in result.stdout
    metrics = strict_json(out.read_text())
    assert (metrics["arrived"], metrics["completed"], metrics["rejected"]) == (200, 200, 0)
    assert (metrics["output_tokens"], metrics["total_tokens"]) == (200 * 32, 200 * (128 + 32))
    price_per_s = get_gpu("A100-80GB").price_per_second_usd + get_gpu("H100-80GB").price_per_second_usd
    assert metrics["cost_usd"] == pytest.approx(metrics["duration_s"] * price_per_s, rel=1e-12)
    assert metrics["ttft_p50_s"] <= metrics["ttft_p99_s"] and metrics["ttft_mean_s"] > 0
    for name, value in metrics.items():
        if isinstance(value, dict):
            continue
        if value is None:
            expected = "-"
        elif isinstance(value, int):
            expected = str(value)
        else:
            expected = f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
        assert rows[name] == expected, name


def test_requests_and_instances_are_checked_before_running(capsys):
    assert main([*SMALL, "--requests", "0"]) == 2
    assert "--requests 0: must be an integer >= 1" in capsys.readouterr().err
    assert main([*SMALL, "--instances", "0"]) == 2
    assert "--instances 0: must be > 0" in capsys.readouterr().err
    assert main(["--model", "Llama-2-7B", "--rate", "4", "--instances", "4"]) == 2
    assert "--instances 4: a count needs --gpu" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpu", "H900", "--model", "Llama-2-7B", "--rate", "4"], "unknown GPU 'H900'; known: H100-80GB"),
        (["--gpu", "A100-80GB", "--model", "Llama-9", "--rate", "4"], "unknown model 'Llama-9'; known: Llama-2-7B"),
        (["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--rate", "0"], "--rate 0.0: must be a finite number > 0"),
        (["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--rate", "-2"], "--rate -2.0: must be a finite number > 0"),
        (["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--rate", "nan"], "--rate nan: must be a finite number > 0"),
        (["--gpu", "A10", "--model", "Llama-2-70B", "--rate", "1"], "needs 1.38e+11 bytes of weights per GPU but A10 has"),
        (["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--rate", "1", "--tp", "0"], "--tp 0: must be an integer >= 1"),
        (["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--rate", "1", "--lengths", "nope"], "unknown length sampler 'nope'"),
        (["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--trace", "/no/such/trace.csv"], "/no/such/trace.csv"),
    ],
    ids=["gpu", "model", "rate-zero", "rate-negative", "rate-nan", "too-small", "tp", "lengths", "missing-trace"],
)
def test_bad_values_exit_2_with_one_line_naming_them(argv, message, capsys):
    assert main([*argv, "--requests", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m simulator: error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("engine", ["vidur-2024", "vllm-v1"])
def test_cpu_overhead_flag_replaces_the_engines_cpu_time(engine, tmp_path, capsys):
    fixed = [*SMALL, "--engine", engine, "--prompt-tokens", "100", "--output-tokens", "10", "--requests", "1"]
    engine_cpu_s = get_engine(engine).cpu_s(1)
    e2e_s = {}
    for label, extra in (("default", []), ("explicit", ["--cpu-overhead-ms", repr(engine_cpu_s * 1e3)]),
                         ("none", ["--cpu-overhead-ms", "0"])):
        out = tmp_path / f"{label}.json"
        assert main([*fixed, *extra, "--json", str(out)]) == 0
        e2e_s[label] = strict_json(out.read_text())["e2e_mean_s"]
    capsys.readouterr()
    # One request alone: 10 iterations of one sequence (a prefill and 9 decodes), each shorter
    # by the engine's CPU time of a one-sequence iteration without it.
    assert e2e_s["explicit"] == pytest.approx(e2e_s["default"], rel=1e-9)
    assert e2e_s["default"] - e2e_s["none"] == pytest.approx(10 * engine_cpu_s, rel=1e-6)
    for bad in ("-1", "nan", "inf"):
        assert main([*SMALL, "--cpu-overhead-ms", bad]) == 2
        assert f"--cpu-overhead-ms {float(bad)}: must be a finite number >= 0" in capsys.readouterr().err


def test_unknown_scheduler_and_half_fixed_lengths_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*SMALL, "--scheduler", "lifo"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'lifo'" in capsys.readouterr().err
    assert main([*SMALL, "--prompt-tokens", "10"]) == 2
    assert "--prompt-tokens and --output-tokens go together" in capsys.readouterr().err


@pytest.mark.parametrize(
    "rows, message",
    [
        ("arrival_s,prompt_tokens\n0.0,10\n", "line 1: missing column(s) ['output_tokens']"),
        ("arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n0.5,-3,5\n", "line 3: prompt_tokens -3 is negative"),
        ("arrival_s,prompt_tokens,output_tokens\n1.0,10,5\n0.5,10,5\n", "line 3: arrival_s 0.5 is before the previous"),
    ],
    ids=["missing-column", "negative-tokens", "unsorted"],
)
def test_malformed_trace_exits_2_naming_file_line_and_value(rows, message, tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text(rows)
    assert main(["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--trace", str(trace)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m simulator: error: {trace}, ") and message in err


def test_a_trace_runs_whole_unless_requests_limits_it(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens,reasoning_tokens,tier\n"
                     + "".join(f"{i * 0.5},100,{10 + i},0,0\n" for i in range(1200)))
    out = tmp_path / "metrics.json"
    assert main(["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--trace", str(trace), "--json", str(out)]) == 0
    metrics = strict_json(out.read_text())
    assert metrics["arrived"] == 1200 and metrics["output_tokens"] == sum(10 + i for i in range(1200))
    assert main(["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--trace", str(trace), "--requests", "7",
                 "--json", str(out)]) == 0
    assert strict_json(out.read_text())["output_tokens"] == sum(10 + i for i in range(7))


def test_prefix_caching_on_a_mooncake_trace_reports_the_caches_hits(tmp_path, capsys):
    out = tmp_path / "metrics.json"
    argv = ["--gpu", "A100-80GB", "--model", "Llama-3.1-8B", "--instances", "2", "--trace", "mooncake_conversation",
            "--requests", "60", "--prefix-caching", "--host-cache-gb", "16", "--router", "least_loaded",
            "--json", str(out)]
    assert main(argv) == 0
    rows = table_rows(capsys.readouterr().out)
    metrics = strict_json(out.read_text())
    assert metrics["completed"] == 60 and 0 < metrics["prefix_cache_hit_rate"] < 1
    assert metrics["prefix_cache_query_tokens"] == metrics["prefix_cache_hit_tokens"] + metrics[
        "prefix_cache_host_hit_tokens"] + metrics["prefix_cache_miss_tokens"]
    assert rows["prefix_cache_hit_rate"] == f"{metrics['prefix_cache_hit_rate']:.4g}"
    without_host = [a for a in argv if a not in ("--host-cache-gb", "16")]
    assert main(without_host) == 0  # without the host tier the hits can only be the GPU's
    assert strict_json(out.read_text())["prefix_cache_host_hit_tokens"] == 0


def test_a_host_tier_without_prefix_caching_is_refused(capsys):
    assert main([*SMALL, "--host-cache-gb", "8", "--no-prefix-caching"]) == 2
    assert capsys.readouterr().err.strip() == ("python -m simulator: error: --host-cache-gb 8 needs prefix caching "
                                               "(it keeps evicted prefixes), not --no-prefix-caching")


@pytest.mark.parametrize("router", ["round_robin", "least_loaded", "session_affinity", "llumnix"])
def test_both_backends_write_the_same_metrics_for_every_router(router, tmp_path):
    """``--backend compiled`` (the default) and ``--backend python`` serve the same run: the JSON
    files are equal byte for byte, and every request completes on the router's instances."""
    written = {}
    for backend in ("compiled", "python"):
        out = tmp_path / f"{backend}.json"
        argv = ["--instances", "A100-80GB:3", "--model", "Llama-3.1-8B", "--rate", "30", "--requests", "300",
                "--router", router, "--seed", "5", "--backend", backend, "--json", str(out)]
        assert main(argv) == 0
        written[backend] = out.read_bytes()
    assert written["compiled"] == written["python"]
    metrics = strict_json(written["python"].decode())
    assert (metrics["arrived"], metrics["completed"]) == (300, 300)


def test_an_unknown_backend_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", "Llama-3.1-8B", "--rate", "1", "--backend", "rust"])
    assert exit_info.value.code == 2
    assert "--backend: invalid choice: 'rust'" in capsys.readouterr().err
