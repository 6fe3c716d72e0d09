"""experiments.main: the README's main job (baselines vs a short MaskablePPO on ``default``) in
its quick mode, its training seeds and evaluation modes, and the settings of the full job."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest

from agents.config import TrainConfig
from agents.rollout import evaluate as rollout_evaluate
from agents.statistics import iqm
from agents.train import EVAL_SEED_BASE
from experiments.main import (
    BASELINES,
    ENV_ID,
    FULL_TIMESTEPS,
    QUICK_BASELINES,
    applicable_baselines,
    main,
    settings_for,
    train_seeds_from,
    training_config,
)


def test_full_job_settings():
    settings = settings_for(quick=False)
    assert settings.baselines == BASELINES
    assert "least_outstanding" in settings.baselines and "llumnix" in settings.baselines
    assert settings.timesteps == FULL_TIMESTEPS == 100_000 and settings.n_envs == 2
    assert settings.eval_seeds == tuple(range(EVAL_SEED_BASE, EVAL_SEED_BASE + 5))
    assert settings.env_kwargs == {}
    assert settings_for(quick=False, timesteps=1000, num_seeds=3).eval_seeds == (10_000, 10_001, 10_002)
    config = training_config(settings, 2, ["round_robin"], "stochastic")
    assert (config.seed, config.eval_freq, config.eval_seeds, config.eval_baselines) == (2, 25_000, [10_000, 10_001], ["round_robin"])
    assert (config.eval_metric, config.eval_mode) == ("slo_attainment", "stochastic")


def test_training_seeds_are_distinct_integers():
    assert train_seeds_from("0,1,2") == [0, 1, 2] and train_seeds_from("7") == [7]
    for bad, match in [("0,x", "'x' is not an integer >= 0"), ("-1", "'-1' is not an integer >= 0"),
                       ("1,1", "must be distinct")]:
        with pytest.raises(ValueError, match=match):
            train_seeds_from(bad)


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
    assert printed.count("evaluated ") == len(QUICK_BASELINES) + 2  # the agent in both modes, by default
    assert "deterministic and stochastic" in printed and "training seeds [0]" in printed

    (run_dir,) = (tmp_path / "train").iterdir()
    config = TrainConfig.load(run_dir / "config.yml")
    assert (config.env_id, config.scenario, config.algo, config.n_timesteps) == (ENV_ID, "default", "maskable_ppo", 256)
    assert (run_dir / "final_model.zip").is_file() and (run_dir / "best_model.zip").is_file()
    # periodic evaluation: the learning curve at the start and every quarter, baselines beside it
    history = json.loads((run_dir / "evaluations.json").read_text())
    assert [entry["timesteps"] for entry in history] == [0, 64, 128, 192, 256]
    assert set(history[0]) == {"timesteps", "agent", *QUICK_BASELINES}

    with open(tmp_path / "eval" / "table.csv") as handle:
        rows = {(row["policy"], row["metric"]): row for row in csv.DictReader(handle)}
    seeds = list(settings_for(quick=True).eval_seeds)
    agent = "maskable_ppo_final_model[det]"
    assert {policy for policy, _ in rows} == {*QUICK_BASELINES, agent, "maskable_ppo_final_model[stoch]"}
    assert (int(rows[(agent, "slo_attainment")]["runs"]), int(rows[(agent, "slo_attainment")]["tasks"])) == (1, len(seeds))
    # the baselines' numbers are the IQM of an independent rollout on the same seeds and env
    for name in QUICK_BASELINES:
        episodes = rollout_evaluate(name, ENV_ID, seeds, scenario="default", **config.env_kwargs)
        for metric in ("slo_attainment", "ttft_p99_s", "return"):
            expected = iqm([[e[metric] for e in episodes]])
            assert float(rows[(name, metric)]["iqm"]) == pytest.approx(expected.value)
            assert float(rows[(name, metric)]["ci_low"]) == pytest.approx(expected.low)
    assert "| slo_attainment |" in _unpadded(printed) and not math.isnan(float(rows[(agent, "return")]["iqm"]))
    assert "Probability of improvement" in printed and (tmp_path / "eval" / "performance_profile.png").is_file()


def test_quick_job_on_two_training_seeds_in_both_modes(tmp_path, capsys):
    assert main(["--quick", "--timesteps", "64", "--seeds", "1", "--train-seeds", "3,4", "--deterministic",
                 "--stochastic", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("evaluated ") == len(QUICK_BASELINES) + 4
    seeds = sorted(TrainConfig.load(run / "config.yml").seed for run in (tmp_path / "train").iterdir())
    assert seeds == [3, 4]
    assert "**Evaluation modes: both**" in printed
    assert "`maskable_ppo_final_model[det]`: training seeds 3, 4" in printed
    assert "| maskable_ppo_s4_final_model[stoch] | 4 |" in _unpadded(printed)
    with open(tmp_path / "eval" / "improvement.csv") as handle:
        pairs = [(row["agent"], row["heuristic"], row["runs"]) for row in csv.DictReader(handle)]
    assert pairs == [(f"maskable_ppo_final_model[{mode}]", name, "2") for mode in ("det", "stoch") for name in QUICK_BASELINES]


def _unpadded(text: str) -> str:
    """A markdown table without to_markdown's column padding: runs of spaces as one."""
    return re.sub(r" {2,}", " ", text)
