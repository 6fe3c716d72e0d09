"""experiments.main: the README's main job (baselines vs a short MaskablePPO on ``default``) in
its quick mode, and the settings of the full job."""

from __future__ import annotations

import csv
import math

import pytest

from agents.config import TrainConfig
from agents.evaluate import mean_ci
from agents.rollout import evaluate as rollout_evaluate
from agents.train import EVAL_SEED_BASE
from experiments.main import (
    BASELINES,
    ENV_ID,
    FULL_TIMESTEPS,
    QUICK_BASELINES,
    applicable_baselines,
    main,
    settings_for,
)


def test_full_job_settings():
    settings = settings_for(quick=False)
    assert settings.baselines == BASELINES
    assert "least_outstanding" in settings.baselines and "llumnix" in settings.baselines
    assert settings.timesteps == FULL_TIMESTEPS == 100_000 and settings.n_envs == 2
    assert settings.eval_seeds == tuple(range(EVAL_SEED_BASE, EVAL_SEED_BASE + 5))
    assert settings.env_kwargs == {}
    assert settings_for(quick=False, timesteps=1000, num_seeds=3).eval_seeds == (10_000, 10_001, 10_002)


@pytest.mark.parametrize("kwargs", [{"timesteps": -5}, {"timesteps": 0}, {"timesteps": 2.5}, {"num_seeds": 0}])
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(ValueError, match="must be"):
        settings_for(quick=True, **kwargs)


def test_every_default_baseline_applies_and_unknown_names_fail():
    usable, skipped = applicable_baselines(BASELINES, {"episode_requests": 20})
    assert usable == list(BASELINES) and skipped == []
    with pytest.raises(ValueError, match="unknown baseline.*no_such_policy.*known"):
        applicable_baselines(("round_robin", "no_such_policy"), {})


def test_quick_job_evaluates_baselines_and_agent_on_the_same_seeds(tmp_path, capsys):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert f"tensorboard --logdir {tmp_path}" in printed
    assert printed.count("evaluated ") == len(QUICK_BASELINES) + 1

    (run_dir,) = (tmp_path / "train").iterdir()
    config = TrainConfig.load(run_dir / "config.yml")
    assert (config.env_id, config.scenario, config.algo, config.n_timesteps) == (ENV_ID, "default", "maskable_ppo", 256)
    assert (run_dir / "final_model.zip").is_file()

    with open(tmp_path / "eval" / "table.csv") as handle:
        rows = {(row["policy"], row["metric"]): row for row in csv.DictReader(handle)}
    seeds = list(settings_for(quick=True).eval_seeds)
    agent = "maskable_ppo_s0_final_model"
    assert {policy for policy, _ in rows} == {*QUICK_BASELINES, agent}
    assert int(rows[(agent, "slo_attainment")]["n"]) == len(seeds)
    # the baselines' numbers are those of an independent rollout on the same seeds and env
    for name in QUICK_BASELINES:
        episodes = rollout_evaluate(name, ENV_ID, seeds, scenario="default", **config.env_kwargs)
        for metric in ("slo_attainment", "ttft_p99_s", "return"):
            mean, half_width, _ = mean_ci([e[metric] for e in episodes])
            assert float(rows[(name, metric)]["mean"]) == pytest.approx(mean)
            assert float(rows[(name, metric)]["ci95"]) == pytest.approx(half_width, nan_ok=True)
    assert "| slo_attainment |" in printed and not math.isnan(float(rows[(agent, "return")]["mean"]))
