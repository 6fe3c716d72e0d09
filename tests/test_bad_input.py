"""Bad and extreme input, one row each: every probe gives one clear error naming the field and
the value (the command lines print it as one line and exit with status 2), or correct numbers."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the environments)
from agents.evaluate import main as evaluate_main
from agents.train import main as train_main
from agents.train import make_env
from experiments.main import main as experiments_main
from simulator.__main__ import main as simulator_main
from simulator.context import CONTEXT_REJECT_REASON
from simulator.request import SLO, Request
from simulator.workloads import generate_requests, length_sampler, load_trace_csv
from simulator.workloads.arrivals import PoissonArrivals

ROUTING = "servegym/Routing-v0"
LLAMA2 = ["--gpu", "A100-80GB", "--model", "Llama-2-7B"]


def _routing(**kwargs: Any) -> Callable[[], Any]:
    return lambda: gym.make(ROUTING, scenario="default", **kwargs)


def _trace(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


LIBRARY = [
    ("slo-nan", lambda _: SLO(ttft_s=math.nan), "SLO ttft_s must be a finite number > 0 or None (no target), got nan"),
    ("slo-negative", lambda _: SLO(tbt_s=-1.0), "SLO tbt_s must be a finite number > 0 or None (no target), got -1.0"),
    ("slo-zero", lambda _: SLO(e2e_s=0), "SLO e2e_s must be a finite number > 0 or None (no target), got 0"),
    ("slo-inf", lambda _: SLO(ttfat_s=math.inf), "SLO ttfat_s must be a finite number > 0 or None (no target), got inf"),
    ("slo-string", lambda _: SLO(ttft_s="1"), "SLO ttft_s must be a finite number > 0 or None (no target), got '1'"),
    ("arrival-1e300", lambda _: Request(7, 1e300, 10, 10), "request 7: arrival_s must be a number in [0, 1e+09] s, got 1e+300"),
    ("arrival-negative", lambda _: Request(7, -1.0, 10, 10), "request 7: arrival_s must be a number in [0, 1e+09] s, got -1.0"),
    ("arrival-rate-1e-300", lambda _: generate_requests(PoissonArrivals(1e-300), length_sampler("sharegpt"), 3,
                                                        np.random.default_rng(0)),
     "after the 1e+09 s a simulation accepts (simulator.request.MAX_ARRIVAL_S): is the arrival rate that low?"),
    ("env-rate-string", lambda _: _routing(rate_rps="10")(), "rate_rps must be a finite number > 0, got '10'"),
    ("env-cv-string", lambda _: _routing(cv="x")(), "cv must be a finite number > 0, got 'x'"),
    ("env-control-interval-inf", lambda _: _routing(control_interval_s=math.inf)(),
     "control_interval_s must be a finite number > 0, got inf"),
    ("env-episode-requests-bool", lambda _: _routing(episode_requests=True)(), "episode_requests must be an integer >= 1, got True"),
    ("env-episode-requests-float", lambda _: _routing(episode_requests=2.5)(), "episode_requests must be an integer >= 1, got 2.5"),
    ("env-lengths-int", lambda _: _routing(lengths=3)(), "unknown lengths 3; known: ['arxiv_summarization'"),
    ("env-lengths-fixed-no-options", lambda _: _routing(lengths="fixed")().reset(seed=0),
     "length sampler 'fixed' cannot take options {}: missing a required argument: 'prompt_tokens'"),
    ("env-slo-nan", lambda _: _routing(slo_by_tier=({"ttft_s": math.nan},))(),
     "SLO ttft_s must be a finite number > 0 or None (no target), got nan"),
    ("env-slo-unknown-key", lambda _: _routing(slo_by_tier=({"ttft": 1.0},))(),
     "slo_by_tier[0] has unknown target(s) ['ttft']; known: ['ttft_s', 'tbt_s', 'ttfat_s', 'e2e_s']"),
    ("env-slo-not-an-slo", lambda _: _routing(slo_by_tier=(1.0,))(), "slo_by_tier[0] must be an SLO, got 1.0"),
    ("env-tier-weight-negative", lambda _: _routing(tier_weights=(-1.0,))(), "tier_weights[0] must be a finite number >= 0, got -1.0"),
    ("env-tier-weights-all-zero", lambda _: _routing(tier_weights=(0.0,))(), "tier_weights must have a positive entry, got (0.0,)"),
    ("env-provisioning-nan", lambda _: _routing(provisioning_s=math.nan)(), "provisioning_s must be a finite number >= 0, got nan"),
    ("env-token-curves-string", lambda _: _routing(record_token_curves="yes")(), "record_token_curves must be True or False, got 'yes'"),
    ("env-rate-1e-300", lambda _: _routing(rate_rps=1e-300)().reset(seed=0), "is the arrival rate that low?"),
    ("env-scenario-int", lambda _: make_env(ROUTING, 3, {}, flat=False), "scenario must be a scenario name, one of ["),
    ("env-reward-kwarg-unknown", lambda _: _routing(reward="cost", reward_kwargs={"potential": 1.0})(),
     "reward 'cost' takes no argument(s) ['potential']; it takes: ['reference_tokens_per_usd', 'waiting_potential']"),
    ("gym-make-scenario-int", lambda _: gym.make(ROUTING, scenario=3), "scenario must be a scenario name or a Scenario, got 3"),
    ("trace-header-only", lambda tmp: load_trace_csv(_trace(tmp, "arrival_s,prompt_tokens,output_tokens\n")),
     "the trace has a header but no request rows"),
    ("trace-arrival-1e300", lambda tmp: load_trace_csv(_trace(tmp, "arrival_s,prompt_tokens,output_tokens\n1e300,5,5\n")),
     "line 2: arrival_s 1e+300 is after 1e+09 s (simulator.request.MAX_ARRIVAL_S)"),
]


@pytest.mark.parametrize(("probe", "message"), [(probe, message) for _, probe, message in LIBRARY],
                         ids=[name for name, _, _ in LIBRARY])
def test_library_probe_raises_a_value_error_naming_field_and_value(probe, message, tmp_path):
    with pytest.raises(ValueError) as error:
        probe(tmp_path)
    assert message in str(error.value)


def _write_inputs(tmp_path: Path) -> None:
    """The files ``_cli_cases`` names: a header-only trace and a regular file."""
    (tmp_path / "header_only.csv").write_text("arrival_s,prompt_tokens,output_tokens\n")
    (tmp_path / "a_file").write_text("")


def _cli_cases(tmp_path: Path) -> dict[str, tuple[Callable[[list[str]], int], list[str], str]]:
    """Per probe: the command's ``main``, its arguments and the message its one line carries."""
    header_only = tmp_path / "header_only.csv"
    unwritable = str(tmp_path / "a_file" / "out")  # a folder inside a regular file cannot be created
    missing_zip = str(tmp_path / "runs" / "nope" / "final_model.zip")
    train = ["--env", ROUTING, "--algo", "maskable_ppo", "--run-dir", str(tmp_path / "runs"), "--device", "cpu"]
    evaluate = ["--env", ROUTING, "--seeds", "0", "--out", str(tmp_path / "eval")]
    return {
        "simulator-ttft-slo-nan": (simulator_main, [*LLAMA2, "--rate", "4", "--ttft-slo", "nan"],
                                   "--ttft-slo nan: must be a finite number > 0"),
        "simulator-ttft-slo-negative": (simulator_main, [*LLAMA2, "--rate", "4", "--ttft-slo", "-1"],
                                        "--ttft-slo -1.0: must be a finite number > 0"),
        "simulator-lengths-fixed": (simulator_main, [*LLAMA2, "--rate", "4", "--lengths", "fixed"],
                                    "--lengths fixed takes its lengths from --prompt-tokens and --output-tokens"),
        "simulator-lengths-and-fixed-lengths": (
            simulator_main, [*LLAMA2, "--rate", "4", "--lengths", "sharegpt", "--prompt-tokens", "5", "--output-tokens", "5"],
            "--lengths sharegpt and --prompt-tokens / --output-tokens both set the lengths; give one"),
        "simulator-trace-with-cv": (simulator_main, [*LLAMA2, "--trace", "t.csv", "--cv", "2"],
                                    "--trace t.csv sets arrival times and lengths; --cv cannot be combined with it"),
        "simulator-trace-with-fixed-lengths": (
            simulator_main, [*LLAMA2, "--trace", "t.csv", "--prompt-tokens", "5", "--output-tokens", "5"],
            "--trace t.csv sets arrival times and lengths; --prompt-tokens cannot be combined with it"),
        "simulator-prompt-over-context": (
            simulator_main, [*LLAMA2, "--rate", "4", "--prompt-tokens", "8192", "--output-tokens", "16"],
            "--prompt-tokens 8192 exceeds the 4,096-token context of Llama-2-7B"),
        "simulator-header-only-trace": (simulator_main, [*LLAMA2, "--trace", str(header_only)],
                                        f"{header_only}: the trace has a header but no request rows"),
        "simulator-rate-1e-300": (simulator_main, [*LLAMA2, "--rate", "1e-300"], "is the arrival rate that low?"),
        "train-env-kwarg-string": (train_main, [*train, "--set", 'env_kwargs.rate_rps="10"'],
                                   "rate_rps must be a finite number > 0, got '10'"),
        "train-control-interval-inf": (train_main, [*train, "--set", "env_kwargs.control_interval_s=.inf"],
                                       "control_interval_s must be a finite number > 0, got inf"),
        "train-slo-nan": (train_main, [*train, "--set", "env_kwargs.slo_by_tier=[{ttft_s: .nan}]"],
                          "SLO ttft_s must be a finite number > 0 or None (no target), got nan"),
        "train-unknown-scenario": (train_main, [*train, "--scenario", "nope"], "unknown scenario 'nope'; known: ["),
        "train-resume-missing": (train_main, ["--resume", str(tmp_path / "no_run")],
                                 f"no training config at {tmp_path / 'no_run' / 'config.yml'}"),
        "evaluate-missing-model": (evaluate_main, [*evaluate, "--policies", missing_zip], f"no saved model at {missing_zip}"),
        "evaluate-unwritable-out": (evaluate_main, ["--env", ROUTING, "--policies", "round_robin", "--out", unwritable],
                                    f"--out {unwritable}: not a writable folder: Not a directory"),
        "evaluate-env-kwarg-string": (evaluate_main, [*evaluate, "--policies", "round_robin", "--set", 'rate_rps="10"'],
                                      "rate_rps must be a finite number > 0, got '10'"),
        "evaluate-bad-seed": (evaluate_main, [*evaluate, "--policies", "round_robin", "--seeds", "0,x"],
                              "seed 'x' is not an integer"),
        "main-unwritable-out": (experiments_main, ["--quick", "--out", unwritable],
                                f"--out {unwritable}: not a writable folder: Not a directory"),
        "main-bad-training-seed": (experiments_main, ["--quick", "--train-seeds", "x", "--out", str(tmp_path / "main")],
                                   "training seed 'x' is not an integer >= 0"),
    }


CLI_PROBES = sorted(_cli_cases(Path("/unused")))


@pytest.mark.parametrize("name", CLI_PROBES)
def test_command_line_probe_prints_one_error_line_and_exits_2(name, tmp_path, capsys):
    _write_inputs(tmp_path)
    main, argv, message = _cli_cases(tmp_path)[name]
    assert main(argv) == 2
    captured = capsys.readouterr()
    prog = {simulator_main: "python -m simulator", train_main: "agents.train", evaluate_main: "agents.evaluate",
            experiments_main: "experiments.main"}[main]
    assert captured.err.startswith(f"{prog}: error: ") and captured.err.count("\n") == 1, captured.err
    assert message in captured.err
    assert "Traceback" not in captured.err and "evaluated" not in captured.out  # failed before any episode


def test_simulator_counts_context_rejections_and_truncations_in_its_metrics(tmp_path):
    trace = _trace(tmp_path, "arrival_s,prompt_tokens,output_tokens\n0.0,5000,10\n0.5,100,10\n1.0,4000,500\n")
    out = tmp_path / "metrics.json"
    assert simulator_main([*LLAMA2, "--trace", str(trace), "--ttft-slo", "10", "--json", str(out)]) == 0
    metrics = json.loads(out.read_text())
    assert (metrics["arrived"], metrics["completed"], metrics["rejected"]) == (3, 2, 1)
    assert metrics["rejected_by_reason"] == {CONTEXT_REJECT_REASON: 1} and metrics["context_truncated"] == 1
    assert metrics["output_tokens"] == 10 + 96 and metrics["slo_met"] == 2 and metrics["slo_attainment"] == 2 / 3
