"""The probe set of issue 42: every command, given bad input as a careless or hostile user would,
prints one line ``<command>: error: <field> <value>: <why>`` (no traceback) and exits with
status 2 before any work starts; nothing hangs. Each probe calls the command's ``main(argv)``."""

from __future__ import annotations

import json
import math
import resource
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import pytest
import yaml

import envs
from agents import leaderboard, sweep
from agents.train import check_n_envs
from agents.train import main as train_main
from experiments import reproductions
from experiments.agents_vs_papers.__main__ import main as agents_vs_papers_main
from experiments.benchmarks import env_speed, latency_speed, simulator_speed
from simulator.__main__ import main as simulator_main
from simulator.memory_bound import INSTANCE_BYTES, check_instances_fit

ROUTING = "servegym/Routing-v0"
LLAMA2 = ["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--rate", "4", "--requests", "5"]
SWEEP = {"name": "probe", "algorithms": ["maskable_ppo"], "timesteps": 64, "train_seeds": [0], "eval_seeds": [10000],
         "scenarios": [{"scenario": "default", "env_id": ROUTING, "env_kwargs": {"episode_requests": 20},
                        "heuristics": ["round_robin"]}],
         "hyperparams": {"n_steps": 32, "batch_size": 32}}
# The soft limit on open files; a probe asks for one env per file allowed, which cannot fit.
OPEN_FILES = resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _sweep_file(tmp_path: Path, name: str, change: Callable[[dict], object] | None = None, text: str | None = None) -> str:
    """``SWEEP`` changed by ``change`` (or ``text``) in its own file ``<name>.yml``."""
    config = json.loads(json.dumps(SWEEP))
    if change is not None:
        change(config)
    path = tmp_path / f"{name}.yml"
    path.write_text(text if text is not None else yaml.safe_dump(config))
    return str(path)


def _sweep_dir(tmp_path: Path) -> Path:
    """A sweep directory holding one finished trial's record."""
    record = {"trial_id": "t1", "cell": 0, "board": "default (servegym/Routing-v0)", "scenario": "default",
              "env_id": ROUTING, "env_kwargs": {}, "algo": "ppo", "reward": None, "metric": "slo_attainment",
              "constraint": None, "seed": 0, "hyperparams": {}, "searched": [], "timesteps": 64,
              "agent": [{"seed": 10000.0, "slo_attainment": 0.5}], "heuristics": {"round_robin": [{"seed": 10000.0, "slo_attainment": 0.4}]}}
    path = tmp_path / "sweep" / "runs" / "t1" / "run" / "evaluation.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return tmp_path / "sweep"


def _cases(tmp_path: Path) -> dict[str, tuple[Callable, str, list[str], str]]:
    """Per probe: the command's ``main``, its name, its arguments and what its one line must say."""
    (tmp_path / "a_file").write_text("")
    unwritable = str(tmp_path / "a_file" / "out")  # a folder inside a regular file cannot be created
    (tmp_path / "broken.yml").write_text("defaults: {n_steps: [1,\n")
    (tmp_path / "big_tokens.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,1234567890123456789012,5\n")
    train = ["--env", ROUTING, "--algo", "maskable_ppo", "--run-dir", str(tmp_path / "runs"), "--no-progress-bar"]
    sweep_out = ["--run-dir", str(tmp_path / "sweep_out")]
    vs_papers = ["--scenario", "pascal", "--quick", "--out", str(tmp_path / "avp"), "--runs", str(tmp_path / "avp_runs")]
    repro = ["--quick", "--out", str(tmp_path / "repro")]
    return {
        "sweep-unknown-scenario": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "unknown", lambda c: c["scenarios"][0].update(
            scenario="nowhere")), *sweep_out], "scenarios[0].scenario: unknown scenario 'nowhere'"),
        "sweep-negative-seed": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "seed", lambda c: c.update(train_seeds=[-1])),
                                                              *sweep_out], "train_seeds seed must be >= 0, got -1"),
        "sweep-nan-rate": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "rate", lambda c: c["scenarios"][0]["env_kwargs"].update(
            rate_rps=math.nan)), *sweep_out], "rate_rps must be a finite number > 0, got nan"),
        "sweep-empty-grid": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "grid", lambda c: c["hyperparams"].update(
            gamma={"grid": []})), *sweep_out], "hyperparams.gamma: empty grid []"),
        "sweep-broken-yaml": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "probe", text="scenarios: [\n"), *sweep_out],
                              "probe.yml: not valid YAML: while parsing"),
        "sweep-wrong-type": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "type", lambda c: c["hyperparams"].update(
            n_steps="abc")), *sweep_out], "n_steps 'abc': maskable_ppo takes int"),
        "sweep-max-concurrent-0": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "valid"), "--max-concurrent", "0", *sweep_out],
                                   "--max-concurrent 0: must be a positive integer"),
        "sweep-dead-address": (sweep.main, "agents.sweep", [_sweep_file(tmp_path, "valid"), "--address", "127.0.0.1:1", *sweep_out],
                               "--address 127.0.0.1:1: no Ray cluster answers there"),
        "sweep-missing-config": (sweep.main, "agents.sweep", [str(tmp_path / "nope.yml")], "no sweep config at"),
        "leaderboard-fresh-clone": (leaderboard.main, "agents.leaderboard", [str(tmp_path / "runs/sweeps/leaderboard")],
                                    "does not exist; run the sweep first: python -m agents.sweep agents/sweeps/leaderboard.yml"),
        "leaderboard-no-trial": (leaderboard.main, "agents.leaderboard", [str(tmp_path)], "no finished trial"),
        "leaderboard-unwritable-out": (leaderboard.main, "agents.leaderboard",
                                       [str(_sweep_dir(tmp_path)), "--out", f"{unwritable}/board.md"], "not a writable folder"),
        "leaderboard-out-not-markdown": (leaderboard.main, "agents.leaderboard",
                                         [str(tmp_path / "sweep"), "--out", str(tmp_path / "board.csv")], "must name a .md file"),
        "reproductions-workers-0": (reproductions.main, "experiments.reproductions", [*repro, "--workers", "0"],
                                    "--workers must be a positive integer, got 0"),
        "reproductions-unknown": (reproductions.main, "experiments.reproductions", [*repro, "--only", "nope"],
                                  "--only nope: not a reproduction; known: pascal, multitier, cauchy_autoscaling, cauchy"),
        "reproductions-empty-only": (reproductions.main, "experiments.reproductions", [*repro, "--only", ","],
                                     "--only ',': takes comma-separated reproduction names"),
        "reproductions-unwritable-out": (reproductions.main, "experiments.reproductions",
                                         ["--quick", "--out", unwritable, "--only", "pascal"], "not a writable folder"),
        "reproductions-reuse-nothing": (reproductions.main, "experiments.reproductions",
                                        [*repro, "--only", "pascal", "--reuse"], "results.json to reuse"),
        "agents-vs-papers-timesteps-0": (agents_vs_papers_main, "experiments.agents_vs_papers",
                                         [*vs_papers, "--timesteps", "0"], "--timesteps must be >= 1, got 0"),
        "agents-vs-papers-bad-seed": (agents_vs_papers_main, "experiments.agents_vs_papers",
                                      [*vs_papers, "--train-seeds", "0,x"], "training seed 'x' is not an integer >= 0"),
        "agents-vs-papers-negative-seed": (agents_vs_papers_main, "experiments.agents_vs_papers",
                                           [*vs_papers, "--train-seeds", "-1"], "training seed '-1' is not an integer >= 0"),
        "agents-vs-papers-repeated-seed": (agents_vs_papers_main, "experiments.agents_vs_papers",
                                           [*vs_papers, "--train-seeds", "1,1"], "--train-seeds must be distinct"),
        "agents-vs-papers-unwritable-out": (agents_vs_papers_main, "experiments.agents_vs_papers",
                                            ["--scenario", "pascal", "--quick", "--out", unwritable], "not a writable folder"),
        "simulator-speed-unknown-case": (simulator_speed.main, "experiments.benchmarks.simulator_speed", ["--cases", "nope"],
                                         "--cases nope: unknown case; known: a, b, c, d, e"),
        "latency-speed-no-rounds": (latency_speed.main, "experiments.benchmarks.latency_speed", ["--rounds", "0"],
                                    "--rounds 0: must be an integer >= 1"),
        "env-speed-unknown-id": (env_speed.main, "experiments.benchmarks.env_speed", ["--ids", "servegym/Nope-v0"],
                                 "--ids servegym/Nope-v0: unknown env ID"),
        "train-wrong-type": (train_main, "agents.train", [*train, "--set", "n_steps=abc"], "n_steps 'abc': maskable_ppo takes int"),
        "train-nan-gamma": (train_main, "agents.train", [*train, "--set", "gamma=.nan"], "gamma nan: maskable_ppo takes a finite number"),
        "train-broken-hyperparams": (train_main, "agents.train", [*train, "--hyperparams", str(tmp_path / "broken.yml")],
                                     "broken.yml: not valid YAML"),
        "train-too-many-envs": (train_main, "agents.train", [*train, "--n-envs", str(OPEN_FILES), "--vec-env", "dummy"],
                                f"n_envs {OPEN_FILES}: needs about"),
        "simulator-instances-1e8": (simulator_main, "python -m simulator", [*LLAMA2, "--instances", "100000000"],
                                    "--instances 100,000,000: the simulator would need about"),
        "simulator-pp-negative": (simulator_main, "python -m simulator", [*LLAMA2, "--pp", "-1"], "--pp -1: must be an integer >= 1"),
        "simulator-host-cache-negative": (simulator_main, "python -m simulator", [*LLAMA2, "--host-cache-gb", "-1"],
                                          "--host-cache-gb -1.0: must be a finite number >= 0"),
        "simulator-seed-negative": (simulator_main, "python -m simulator", [*LLAMA2, "--seed", "-1"],
                                    "--seed -1: must be an integer >= 0"),
        "simulator-unwritable-json": (simulator_main, "python -m simulator", [*LLAMA2, "--json", f"{unwritable}/x.json"],
                                      "cannot be written"),
        "simulator-22-digit-tokens": (simulator_main, "python -m simulator",
                                      ["--gpu", "A100-80GB", "--model", "Llama-2-7B", "--trace", str(tmp_path / "big_tokens.csv")],
                                      "line 2: prompt_tokens 1234567890123456789012 is above 1,000,000,000"),
    }


def _probe_names() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        return sorted(_cases(Path(folder)))


@pytest.mark.parametrize("name", _probe_names())
def test_bad_input_prints_one_error_line_and_exits_2(name, tmp_path, capsys):
    main, prog, argv, message = _cases(tmp_path)[name]
    if name == "train-too-many-envs" and OPEN_FILES == resource.RLIM_INFINITY:
        pytest.skip("no limit on open files here")
    started = time.perf_counter()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err, err
    assert time.perf_counter() - started < 60  # failed before any work (a dead --address is given 10 s)
    assert not (tmp_path / "sweep_out").exists() and not (tmp_path / "runs").exists()  # no sweep or run started


def test_argparse_usage_errors_also_exit_2_naming_the_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        agents_vs_papers_main(["--scenario", "nope"])
    assert exit_info.value.code == 2
    assert "experiments.agents_vs_papers: error: argument --scenario: invalid choice: 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("env_id", list(envs.ENV_IDS))
def test_every_env_refuses_a_strict_that_is_not_a_boolean(env_id):
    with pytest.raises(ValueError, match="strict 'yes': must be True or False"):
        gym.make(env_id, strict="yes")
    with pytest.raises(ValueError, match="strict 1: must be True or False"):
        gym.make(env_id, strict=1)


def test_other_boolean_arguments_refuse_non_booleans():
    with pytest.raises(ValueError, match="continuous 'no': must be True or False"):
        gym.make("servegym/Tier-v0", continuous="no")
    with pytest.raises(ValueError, match="record_token_curves must be True or False, got 'yes'"):
        gym.make(ROUTING, record_token_curves="yes")
    with pytest.raises(ValueError, match="clip 'yes': must be True or False"):
        gym.make(ROUTING, lengths="sharegpt", lengths_options={"max_prompt_tokens": 100, "clip": "yes"}).reset(seed=0)


def test_instances_are_refused_by_their_memory_estimate():
    check_instances_fit("--instances", 1000, available=1000 * INSTANCE_BYTES + 2**30)
    with pytest.raises(ValueError, match=r"--instances 1,000: the simulator would need about 0.5 GiB \(24 KiB per "
                                         r"instance\) and this machine has 0.1 GiB available"):
        check_instances_fit("--instances", 1000, available=2**30 // 10)


def test_n_envs_is_refused_by_the_open_file_limit():
    check_n_envs(700, "dummy", open_files_limit=1024)  # 700 monitor files + 256 kept for the trainer
    with pytest.raises(ValueError, match=r"n_envs 800: needs about 1,056 open files \(1 per env\) and this process "
                                         r"may open 1,024"):
        check_n_envs(800, "dummy", open_files_limit=1024)
    with pytest.raises(ValueError, match=r"n_envs 200: needs about 1,056 open files \(4 per env\)"):
        check_n_envs(200, "subproc", open_files_limit=1024)
