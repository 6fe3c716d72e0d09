"""agents.train survives interruption: a real SIGINT / SIGTERM saves a checkpoint and exits
cleanly, ``--resume`` continues from it (or from the newest intact checkpoint when a newer one
is truncated) and the monitor CSVs stay consistent with the model."""

from __future__ import annotations

import csv
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.config import build_config, latest_checkpoint, vecnormalize_path
from agents.train import rewind_monitor, resume, train

REPO = Path(__file__).resolve().parents[1]
ROUTING = "servegym/Routing-v0"
EPISODE_REQUESTS = 20
TINY = ["n_steps=32", "batch_size=32", "n_epochs=1", "policy_kwargs.net_arch=[16]",
        f"env_kwargs.episode_requests={EPISODE_REQUESTS}"]
STARTUP_LIMIT_S = 300.0


def monitor_rows(path: Path) -> list[dict[str, str]]:
    with open(path) as handle:
        handle.readline()  # the JSON header line
        return list(csv.DictReader(handle))


def start_training(run_root: Path, n_envs: int) -> subprocess.Popen:
    """``python -m agents.train`` with a budget it will not reach, in its own process group."""
    command = [sys.executable, "-m", "agents.train", "--env", ROUTING, "--algo", "maskable_ppo",
               "--timesteps", "10000000", "--n-envs", str(n_envs), "--device", "cpu", "--set", *TINY,
               "--checkpoint-freq", "0", "--run-dir", str(run_root), "--no-progress-bar", "--verbose", "0"]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_for_episodes(process: subprocess.Popen, run_root: Path, n_envs: int) -> Path:
    """The run directory, once every env has finished two episodes (40 steps: past the first
    32-step rollout, so training has updated the model at least once)."""
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        monitors = sorted(run_root.glob("*/monitor/*.monitor.csv"))
        if len(monitors) == n_envs and all(len(monitor_rows(path)) >= 2 for path in monitors):
            return monitors[0].parent.parent
        time.sleep(0.1)
    process.kill()
    raise AssertionError(f"no episode finished within {STARTUP_LIMIT_S} s")


@pytest.mark.parametrize(
    ("signum", "n_envs", "whole_group"),
    [(signal.SIGINT, 2, True), (signal.SIGTERM, 1, False)],
    ids=["ctrl-c-to-the-group-with-subprocess-envs", "sigterm-to-the-trainer"],
)
def test_a_signal_saves_a_checkpoint_and_resume_continues_from_it(tmp_path, signum, n_envs, whole_group):
    process = start_training(tmp_path, n_envs)
    run_dir = wait_for_episodes(process, tmp_path, n_envs)
    if whole_group:  # Ctrl-C in a terminal reaches every process of the group, env workers included
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    out, err = process.communicate(timeout=STARTUP_LIMIT_S)
    assert process.returncode == 128 + signum, err
    assert "Traceback" not in err and "EOFError" not in err, err
    match = re.search(rf"interrupted by {signum.name}: saved checkpoints/model_(\d+)_steps\.zip", out)
    assert match, out
    steps = int(match[1])
    # The checkpoint counts the steps of the last update (whole 32-step rollouts per env), not the
    # steps gathered after it, which were never trained on.
    assert steps > 0 and steps % (32 * n_envs) == 0, steps
    checkpoint = run_dir / "checkpoints" / f"model_{steps}_steps.zip"
    assert checkpoint.is_file() and vecnormalize_path(checkpoint).is_file()  # Routing-v0 normalises rewards
    assert not (run_dir / "final_model.zip").exists()  # an interrupted run is not final
    assert latest_checkpoint(run_dir, with_stats=True) == (checkpoint, steps)
    for rank in range(n_envs):  # every episode the monitor holds was trained on
        rows = monitor_rows(run_dir / "monitor" / f"{rank}.monitor.csv")
        assert rows and sum(int(row["l"]) for row in rows) <= steps // n_envs
    before = [monitor_rows(run_dir / "monitor" / f"{rank}.monitor.csv") for rank in range(n_envs)]

    result = resume(run_dir, timesteps=32 * n_envs)
    assert (result.num_timesteps, result.trained_steps) == (steps + 32 * n_envs, 32 * n_envs)
    assert (run_dir / "final_model.zip").is_file()
    for rank in range(n_envs):
        rows = monitor_rows(run_dir / "monitor" / f"{rank}.monitor.csv")
        assert rows[:len(before[rank])] == before[rank] and len(rows) > len(before[rank])
        times = [float(row["t"]) for row in rows]
        assert times == sorted(times)  # t continues from the run's start, it does not restart at 0


def test_resume_skips_a_truncated_latest_checkpoint_and_rewinds_the_monitor(tmp_path, caplog):
    config = build_config(ROUTING, "default", "maskable_ppo", 0, n_timesteps=128, n_envs=1, device="cpu",
                          overrides=TINY, checkpoint_freq=64)
    run_dir = train(config, tmp_path).run_dir
    latest = run_dir / "checkpoints" / "model_128_steps.zip"
    latest.write_bytes(latest.read_bytes()[: latest.stat().st_size // 2])  # a save cut short
    monitor = run_dir / "monitor" / "0.monitor.csv"
    assert sum(int(row["l"]) for row in monitor_rows(monitor)) == 120  # six 20-request episodes

    with caplog.at_level(logging.WARNING, logger="agents.config"):
        result = resume(run_dir, timesteps=64)
    assert "skipping checkpoint" in caplog.text and "model_128_steps.zip" in caplog.text
    assert (result.num_timesteps, result.trained_steps) == (128, 64)  # from the 64-step checkpoint
    lengths = [int(row["l"]) for row in monitor_rows(monitor)]
    assert lengths == [EPISODE_REQUESTS] * 6  # 3 kept (60 of the first 64 steps), 3 after resuming
    with open(run_dir / "progress.csv") as handle:  # the log's rows past the checkpoint are replaced too
        logged = [(int(r["time/iterations"]), int(r["time/total_timesteps"])) for r in csv.DictReader(handle)
                  if r["time/iterations"]]
    assert logged == [(1, 32), (2, 64), (3, 96), (4, 128)]

    vecnormalize_path(run_dir / "checkpoints" / "model_128_steps.zip").unlink()
    (run_dir / "checkpoints" / "model_vecnormalize_64_steps.npz").write_bytes(b"\x80")
    with pytest.raises(ValueError, match="no intact checkpoint under .*model_64_steps.zip \\(its VecNormalize "
                                         "statistics model_vecnormalize_64_steps.npz are unreadable"):
        latest_checkpoint(run_dir, with_stats=True)


def test_rewind_keeps_the_episodes_within_the_checkpoint_and_drops_a_half_written_row(tmp_path):
    path = tmp_path / "0.monitor.csv"
    header = '#{"t_start": 1700000000.5, "env_id": "servegym/Routing-v0"}\nr,l,t\n'
    path.write_text(header + "-1.0,20,1.5\n0.0,20,2.5\n-2.0,20,3.5\n-3.0,2")
    assert rewind_monitor(path, 45) == 1700000000.5
    assert path.read_text() == header + "-1.0,20,1.5\n0.0,20,2.5\n"
    assert rewind_monitor(path, 1000) == 1700000000.5 and path.read_text() == header + "-1.0,20,1.5\n0.0,20,2.5\n"
    assert rewind_monitor(tmp_path / "missing.monitor.csv", 10) is None
    path.write_text('#{"t_start": 17')  # cut short before its header ended: a fresh file replaces it
    assert rewind_monitor(path, 10) is None and not path.exists()
