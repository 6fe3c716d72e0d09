"""agents.evaluate: Student-t confidence intervals, baselines and saved models on the same
seeds, the comparison table, plots and TensorBoard runs."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.config import build_config
from agents.evaluate import (
    evaluate_policies,
    main,
    mean_ci,
    student_t_two_sided,
    t_critical,
    write_report,
)
from agents.rollout import evaluate as rollout_evaluate
from agents.train import train
from baselines import Policy, policy_names, register

ROUTING = "servegym/Routing-v0"
SMALL = {"episode_requests": 30}
SEEDS = [0, 1, 2]


class _FirstValid(Policy):
    """Test policy: the first valid instance."""

    name = "test_eval_first_valid"
    env_ids = (ROUTING,)

    def act(self, observation):
        return int(np.flatnonzero(observation["action_mask"])[0])


class _Cycle(Policy):
    """Test policy: valid instances in turn."""

    name = "test_eval_cycle"
    env_ids = (ROUTING,)

    def reset(self) -> None:
        self.turn = 0

    def act(self, observation):
        valid = np.flatnonzero(observation["action_mask"])
        self.turn += 1
        return int(valid[self.turn % valid.size])


for _cls in (_FirstValid, _Cycle):
    if _cls.name not in policy_names():
        register(_cls)
BASELINES = [_FirstValid.name, _Cycle.name]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory) -> Path:
    """A tiny MaskablePPO with an MLP policy (flattened observations) and VecNormalize."""
    config = build_config(
        ROUTING, "default", "maskable_ppo", 0, n_timesteps=64, n_envs=1, device="cpu",
        overrides=["policy=MlpPolicy", "n_steps=64", "batch_size=32", "n_epochs=1", "normalize=true",
                   "policy_kwargs.net_arch=[16]", "env_kwargs.episode_requests=30"],
    )
    return train(config, tmp_path_factory.mktemp("runs")).run_dir / "final_model.zip"


def test_student_t_matches_closed_forms_and_tables():
    assert student_t_two_sided(1.0, 1) == pytest.approx(0.5)  # Cauchy: 2 atan(1) / pi
    assert student_t_two_sided(1.0, 2) == pytest.approx(1 / math.sqrt(3))  # df=2: t / sqrt(2 + t^2)
    assert student_t_two_sided(2.0, 3) == pytest.approx(0.860674, abs=1e-6)
    for df, table in [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423), (100_000, 1.9600)]:
        assert t_critical(df) == pytest.approx(table, abs=1e-4)
    assert t_critical(5, 0.90) == pytest.approx(2.0150, abs=1e-4)


def test_mean_ci_uses_sample_deviation_and_ignores_nan():
    mean, half, n = mean_ci([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3) and half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert mean_ci([math.nan, 5.0])[0] == 5.0 and math.isnan(mean_ci([math.nan, 5.0])[1])
    assert all(math.isnan(v) for v in mean_ci([math.nan])[:2]) and mean_ci([])[2] == 0


def test_baselines_and_saved_model_run_on_the_same_seeds(saved_model):
    results = evaluate_policies(ROUTING, "default", [*BASELINES, str(saved_model)], SEEDS, SMALL)
    assert [r.label for r in results] == [*BASELINES, "maskable_ppo_s0_final_model"]
    for result in results[:2]:
        expected = rollout_evaluate(result.label, ROUTING, SEEDS, **SMALL)
        for episode, reference in zip(result.episodes, expected):
            for key in ("slo_attainment", "ttft_p99_s", "cost_usd", "return"):
                assert episode[key] == reference[key]
            assert episode["slo_attainment_tier0"] == episode["slo_attainment"]
    for result in results:
        assert result.ttft_s.size == sum(int(e["completed"]) for e in result.episodes)
        assert np.all(result.ttft_s > 0)
    again = evaluate_policies(ROUTING, "default", [str(saved_model)], SEEDS, SMALL)
    assert again[0].episodes == results[2].episodes


def test_report_table_plots_and_tensorboard(saved_model, tmp_path):
    results = evaluate_policies(ROUTING, "default", [*BASELINES, str(saved_model)], SEEDS, SMALL)
    table = write_report(results, SEEDS, tmp_path, ttft_slo_s=1.0)
    assert table == (tmp_path / "table.md").read_text()
    assert "| slo_attainment |" in table and "qoe_violation_rate" not in table and "±" in table

    with open(tmp_path / "table.csv") as handle:
        rows = {(row["policy"], row["metric"]): row for row in csv.DictReader(handle)}
    for result in results:
        for metric in ("slo_attainment", "ttft_p50_s", "cost_usd", "return"):
            mean, half, n = mean_ci([e[metric] for e in result.episodes])
            row = rows[(result.label, metric)]
            assert float(row["mean"]) == pytest.approx(mean) and int(row["n"]) == n == len(SEEDS)
            assert float(row["ci95"]) == pytest.approx(half, nan_ok=True)
    with open(tmp_path / "episodes.csv") as handle:
        assert len(list(csv.DictReader(handle))) == len(results) * len(SEEDS)

    for name in ("ttft_cdf.png", "tier_slo.png", "cost_vs_slo.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, name

    for result in results:
        events = EventAccumulator(str(tmp_path / "tb" / result.label))
        events.Reload()
        logged = events.Scalars("serving/slo_attainment")
        assert [e.step for e in logged] == SEEDS
        assert [e.value for e in logged] == pytest.approx([e["slo_attainment"] for e in result.episodes], abs=1e-6)
        assert [e.value for e in events.Scalars("episode/return")] == pytest.approx([e["return"] for e in result.episodes])
        assert "custom_scalars__config__" in events.Tags()["tensors"]


def test_command_line_prints_and_writes_the_table(saved_model, tmp_path, capsys):
    out = tmp_path / "eval"
    main(["--env", ROUTING, "--policies", f"{BASELINES[0]},{saved_model}", "--seeds", "3,4",
          "--set", "episode_requests=30", "--device", "cpu", "--out", str(out)])
    printed = capsys.readouterr().out
    assert f"| metric | {BASELINES[0]} | maskable_ppo_s0_final_model |" in printed
    assert sorted(p.name for p in (out / "tb").iterdir()) == sorted([BASELINES[0], "maskable_ppo_s0_final_model"])


def test_bad_evaluation_requests_are_rejected(saved_model):
    with pytest.raises(ValueError, match="unknown policy 'no_such_policy'; known:"):
        evaluate_policies(ROUTING, "default", ["no_such_policy"], SEEDS, SMALL)
    with pytest.raises(ValueError, match="seeds must be distinct"):
        evaluate_policies(ROUTING, "default", BASELINES, [1, 1], SMALL)
    with pytest.raises(ValueError, match="seed must be >= 0, got -2"):
        evaluate_policies(ROUTING, "default", BASELINES, [-2], SMALL)
    with pytest.raises(ValueError, match="seed 'x' is not an integer"):
        main(["--env", ROUTING, "--policies", BASELINES[0], "--seeds", "0,x"])
    with pytest.raises(ValueError, match="no saved model at"):
        evaluate_policies(ROUTING, "default", [str(saved_model.with_name("missing.zip"))], SEEDS, SMALL)
    with pytest.raises(ValueError, match="was trained with observation_space"):
        evaluate_policies(ROUTING, "default", [str(saved_model)], SEEDS, {**SMALL, "max_instances": 10})
