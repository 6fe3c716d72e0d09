"""agents.sweep on Ray Tune: a two-trial local sweep writes its table; an interrupted sweep
resumes without re-running its finished trials; a trial runs on the second node of a cluster;
a bad configuration fails before any trial, naming the bad entry. Trials are tiny (64 steps)."""

import copy
import dataclasses
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
import yaml
from ray.cluster_utils import Cluster

import baselines
from agents import sweep, trial
from agents.evaluate import load_agent
from agents.sweep_config import check_sweep_config, load_sweep_config, select_scenarios
from agents.trial import EVALUATION_FILE, episode_rows
from agents.train import make_env

CONFIG = {
    "name": "tiny",
    "scenarios": [{"scenario": "default", "env_id": "servegym/Routing-v0", "env_kwargs": {"episode_requests": 30},
                   "heuristics": ["least_outstanding"]}],
    "algorithms": ["maskable_ppo"],
    "rewards": ["slo_balance"],
    "timesteps": 64,
    "train_seeds": [0, 1],
    "eval_seeds": [10000],
    "hyperparams": {"n_steps": 32, "batch_size": 32, "n_epochs": 1},
}


def _write(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "sweep.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _evaluations(root: Path) -> list[Path]:
    return sorted(root.glob(f"runs/*/*/{EVALUATION_FILE}"))


def test_two_trial_local_sweep_writes_its_table(tmp_path):
    config = load_sweep_config(_write(tmp_path, CONFIG))
    outcome = sweep.run_sweep(config, tmp_path / "out", max_concurrent=2, verbose=0)
    assert outcome.finished == 2 and outcome.errors == []
    records = [json.loads(path.read_text()) for path in _evaluations(outcome.root)]
    assert sorted(r["seed"] for r in records) == [0, 1]
    for record in records:  # agents.train's run directory: configuration, TensorBoard events, models
        run_dir = Path(record["run_dir"])
        assert (run_dir / "config.yml").is_file() and (run_dir / "final_model.zip").is_file()
        assert list(run_dir.glob("events.out.tfevents.*")) and record["timesteps"] == 64
    env = make_env("servegym/Routing-v0", "default", {"episode_requests": 30, "reward": "slo_balance"}, flat=False)
    direct = episode_rows(env, baselines.make("least_outstanding", env), "slo_attainment", [10000])
    assert json.dumps(records[0]["heuristics"]["least_outstanding"]) == json.dumps(direct)  # as run by hand (NaN too)
    run_dir = Path(records[0]["run_dir"])  # the agent's rows: its most likely actions, as the leaderboard says
    flat = yaml.safe_load((run_dir / "config.yml").read_text())["policy"].startswith("Mlp")
    agent_env = make_env("servegym/Routing-v0", "default", {"episode_requests": 30, "reward": "slo_balance"}, flat=flat)
    agent, _ = load_agent(run_dir / "final_model.zip", agent_env)
    rows = {mode: episode_rows(agent_env, agent, "slo_attainment", [10000], deterministic=mode) for mode in (True, False)}
    assert json.dumps(records[0]["agent"]) == json.dumps(rows[True]) != json.dumps(rows[False])
    table = (outcome.root / "table.md").read_text()
    assert "## default (servegym/Routing-v0): slo_attainment (higher is better)" in table
    assert "| maskable_ppo (slo_balance) | agent |" in table and "training seeds 0, 1; 64 steps" in table
    assert "| least_outstanding | heuristic |" in table
    assert (outcome.root / "table.png").is_file() and (outcome.root / "table.csv").read_text().count("\n") == 3


def test_interrupted_sweep_resumes_without_rerunning_finished_trials(tmp_path):
    # Ctrl-C lands once the second trial has started training; its 8,192 steps outlast Ray's
    # shutdown (seconds), so the interrupt finds it unfinished on any machine
    path = _write(tmp_path, {**CONFIG, "timesteps": 8192, "hyperparams": {**CONFIG["hyperparams"], "n_steps": 256}})
    root = tmp_path / "out"
    command = [sys.executable, "-m", "agents.sweep", str(path), "--run-dir", str(root), "--max-concurrent", "1",
               "--verbose", "0"]
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w") as err:
        process = subprocess.Popen(command, cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL,
                                   stderr=err)
    deadline = time.monotonic() + 240
    while len(list(root.glob("runs/*/*/config.yml"))) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)  # Ctrl-C twice: Tune stops at once, without a last save
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    first = _evaluations(root)
    assert len(first) == 1, "the sweep should have been interrupted during its second trial"
    # Interrupted: a non-zero status, the missing trial named, the table from one trial marked partial.
    message = stderr.read_text()
    assert process.returncode == 128 + signal.SIGINT, message
    assert "agents.sweep: interrupted: 1 trial(s) missing (cell0 seed " in message
    assert f"finish with: python -m agents.sweep {path} --run-dir {root}" in message and "Tuner.restore" not in message
    table = (root / "table.md").read_text()
    assert table.startswith("# Sweep tiny (partial)") and "**Partial: 1 of 2 trials finished; missing: cell0 seed " in table
    finished_at = first[0].stat().st_mtime_ns
    outcome = sweep.run_sweep(load_sweep_config(path), root, max_concurrent=1, verbose=0)
    assert outcome.finished == 2 and outcome.errors == []
    after = _evaluations(root)
    assert len(after) == 2 and first[0] in after and first[0].stat().st_mtime_ns == finished_at
    for evaluation in after:  # the finished trial's run was not made again; the interrupted one was replaced
        assert len(list(evaluation.parent.parent.iterdir())) == 1
    assert "training seeds 0, 1; 8,192 steps" in (root / "table.md").read_text()
    assert "Partial" not in (root / "table.md").read_text() and outcome.complete


def test_a_trial_runs_on_the_second_node_of_a_cluster(tmp_path):
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        head, second = cluster.head_node.node_id, cluster.add_node(num_cpus=1).node_id
        cluster.wait_for_nodes()
        config = load_sweep_config(_write(tmp_path, {**CONFIG, "train_seeds": [0]}))
        outcome = sweep.run_sweep(config, tmp_path / "out", address=cluster.address, verbose=0)
        assert not ray.is_initialized()  # the sweep disconnected from the cluster
    finally:
        cluster.shutdown()
    assert outcome.finished == 1 and outcome.errors == []
    (record,) = [json.loads(path.read_text()) for path in _evaluations(outcome.root)]
    assert record["node_id"] == second != head


BAD = [
    (lambda c: c["scenarios"][0].update(scenario="nowhere"), r"scenarios\[0\]\.scenario: unknown scenario 'nowhere'"),
    (lambda c: c["scenarios"][0].update(env_id="servegym/Chess-v0"), r"scenarios\[0\]\.env_id: unknown env 'servegym/Chess-v0'"),
    (lambda c: c.update(algorithms=["maskable_ppo", "sac"]), r"algorithms: unknown algorithm 'sac'"),
    (lambda c: c.update(rewards=["speed"]), r"rewards: unknown reward 'speed'"),
    (lambda c: c["hyperparams"].update(learning_rate={"grid": []}), r"hyperparams\.learning_rate: empty grid \[\]"),
    (lambda c: c.update(train_seeds=[0, -3]), r"train_seeds seed must be >= 0, got -3"),
    (lambda c: c.update(eval_seeds=[-1]), r"eval_seeds seed must be >= 0, got -1"),
    (lambda c: c["hyperparams"].update(gamma={"uniform": [0.9, 0.99]}), r"hyperparams\.gamma: uniform needs search random"),
    (lambda c: c["hyperparams"].update(n_step=8), r"cell default/Routing-v0/maskable_ppo/slo_balance: unknown hyper-parameter 'n_step'"),
    (lambda c: c["scenarios"][0].update(heuristics=["cascadia"]), r"scenarios\[0\]\.heuristics: 'cascadia' does not apply"),
    (lambda c: c["scenarios"][0].update(metric="speed"), r"scenarios\[0\]\.metric: unknown metric 'speed'"),
    (lambda c: (c.update(algorithms=["dqn"], hyperparams={}), c["scenarios"][0].update(env_id="servegym/Tier-v0", heuristics=["llumnix"])),
     r"cell default/Tier-v0/dqn/slo_balance: algorithm 'dqn' cannot act in MultiDiscrete"),
]


def _one_error_line(capsys, message: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("agents.sweep: error: ") and err.count("\n") == 1 and re.search(message, err), err


@pytest.mark.parametrize("mutate, message", BAD)
def test_a_bad_config_fails_before_any_trial_naming_the_entry(tmp_path, mutate, message, capsys):
    config = copy.deepcopy(CONFIG)
    mutate(config)
    assert sweep.main([str(_write(tmp_path, config)), "--run-dir", str(tmp_path / "out")]) == 2
    _one_error_line(capsys, message)
    assert not (tmp_path / "out").exists() and not ray.is_initialized()


def test_search_spaces_expand_reproducibly():
    config = copy.deepcopy(CONFIG)
    config.update(search="random", samples=3, search_seed=7,
                  hyperparams={**CONFIG["hyperparams"], "gamma": {"uniform": [0.9, 0.99]},
                               "learning_rate": {"grid": [1e-4, 3e-4]}})
    first = check_sweep_config(config).assignments()
    assert first == check_sweep_config(copy.deepcopy(config)).assignments()
    assert [a["learning_rate"] for a in first] == [1e-4] * 3 + [3e-4] * 3
    assert all(0.9 <= a["gamma"] < 0.99 for a in first) and len({a["gamma"] for a in first}) == 6
    config.update(search="optuna")
    with pytest.raises(ValueError, match=r"hyperparams\.learning_rate: search optuna takes no grid; use choice"):
        check_sweep_config(config)


def test_scenarios_selects_one_section_renumbered_and_names_an_absent_one(tmp_path, capsys):
    config = copy.deepcopy(CONFIG)
    config["scenarios"].insert(0, {"scenario": "pascal", "env_id": "servegym/Routing-v0",
                                   "env_kwargs": {"episode_requests": 30}, "heuristics": ["least_kv"]})
    checked = check_sweep_config(config)
    assert [(cell.index, cell.scenario) for cell in checked.cells] == [(0, "pascal"), (1, "default")]
    selected = select_scenarios(checked, ["default"])
    assert [(cell.index, cell.scenario) for cell in selected.cells] == [(0, "default")]
    assert selected.cells[0] == dataclasses.replace(checked.cells[1], index=0)
    assert selected.train_seeds == checked.train_seeds and selected.eval_seeds == checked.eval_seeds
    assert sweep.main([str(_write(tmp_path, config)), "--scenarios", "default,cascadia",
                       "--run-dir", str(tmp_path / "out")]) == 2
    _one_error_line(capsys, r"--scenarios: \['cascadia'\] not in sweep 'tiny'; it holds \['pascal', 'default'\]")
    assert not (tmp_path / "out").exists() and not ray.is_initialized()


def test_stored_heuristic_episodes_are_read_back_only_by_the_code_that_made_them(tmp_path, monkeypatch):
    cell = check_sweep_config(copy.deepcopy(CONFIG)).cells[0]
    seeds = [10000]
    monkeypatch.setattr(trial, "code_fingerprint", lambda: "code-a")
    made = trial.heuristic_rows(tmp_path, cell, "least_outstanding", seeds)
    env = make_env(cell.env_id, cell.scenario, cell.plain_env, flat=False)
    assert made == episode_rows(env, baselines.make("least_outstanding", env), cell.metric, seeds)
    (stored,) = (tmp_path / trial.HEURISTICS_DIR).glob("least_outstanding__*.json")
    record = json.loads(stored.read_text())
    assert record["key"]["code"] == "code-a"
    record["rows"][0][cell.metric] = -1.0
    stored.write_text(json.dumps(record))
    assert trial.heuristic_rows(tmp_path, cell, "least_outstanding", seeds)[0][cell.metric] == -1.0
    monkeypatch.setattr(trial, "code_fingerprint", lambda: "code-b")
    assert trial.heuristic_rows(tmp_path, cell, "least_outstanding", seeds) == made
    assert len(list((tmp_path / trial.HEURISTICS_DIR).glob("least_outstanding__*.json"))) == 2



def test_a_partial_sweep_names_its_missing_trials_marks_its_table_and_exits_130(tmp_path, capsys):
    config = check_sweep_config({**copy.deepcopy(CONFIG), "hyperparams": {**CONFIG["hyperparams"],
                                                                          "learning_rate": {"grid": [1e-4, 3e-4]}}})
    root = tmp_path / "out"
    record = {"trial_id": "t0", "cell": 0, "board": "default (servegym/Routing-v0)", "scenario": "default",
              "env_id": "servegym/Routing-v0", "env_kwargs": {}, "algo": "maskable_ppo", "reward": "slo_balance",
              "metric": "slo_attainment", "constraint": None, "seed": 1, "hyperparams": {"learning_rate": 3e-4},
              "searched": ["learning_rate"], "timesteps": 64, "agent": [{"seed": 10000.0, "slo_attainment": 0.5}],
              "heuristics": {"least_outstanding": [{"seed": 10000.0, "slo_attainment": 0.4}]}}
    (root / "runs" / "t0" / "run").mkdir(parents=True)
    (root / "runs" / "t0" / "run" / EVALUATION_FILE).write_text(json.dumps(record))
    outcome = sweep.write_sweep_table(config, root)
    # 2 learning rates x 2 seeds = 4 trials; the one finished is seed 1 at 3e-4.
    assert outcome.expected == 4 and outcome.finished == 1 and not outcome.complete
    assert outcome.missing == ("cell0 seed 0 [learning_rate=0.0001]", "cell0 seed 1 [learning_rate=0.0001]",
                               "cell0 seed 0 [learning_rate=0.0003]")
    table = (root / "table.md").read_text()
    assert table.startswith("# Sweep tiny (partial)\n\n**Partial: 1 of 4 trials finished; missing: cell0 seed 0 "
                            "[learning_rate=0.0001], cell0 seed 1 [learning_rate=0.0001], cell0 seed 0 "
                            "[learning_rate=0.0003]. Run the same command again to finish them")
    assert all(line.endswith(",True") for line in (root / "table.csv").read_text().splitlines()[1:])
    assert sweep.report(outcome, ["sweep.yml", "--run-dir", str(root)]) == 128 + signal.SIGINT
    err = capsys.readouterr().err
    assert "agents.sweep: interrupted: 3 trial(s) missing" in err
    assert f"finish with: python -m agents.sweep sweep.yml --run-dir {root}" in err
