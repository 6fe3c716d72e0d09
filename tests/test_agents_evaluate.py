"""agents.evaluate: baselines and saved models on the same seeds, deterministic and stochastic
(seeded, repeatable) evaluation, rliable aggregates over training seeds, the report, plots and
TensorBoard runs."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from agents.config import build_config
from agents.evaluate import (
    PolicyResult,
    evaluate_policies,
    improvements,
    load_agent,
    main,
    policy_runs,
    score_array,
    table_metrics,
    write_report,
)
from agents.rollout import evaluate as rollout_evaluate
from agents.rollout import run_episode
from agents.statistics import iqm_by_metric, probability_of_improvement
from agents.train import make_env, train
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


def _train_tiny(root: Path, seed: int) -> Path:
    """A tiny MaskablePPO with an MLP policy (flattened observations) and VecNormalize."""
    config = build_config(
        ROUTING, "default", "maskable_ppo", seed, n_timesteps=64, n_envs=1, device="cpu",
        overrides=["policy=MlpPolicy", "n_steps=64", "batch_size=32", "n_epochs=1", "normalize=true",
                   "policy_kwargs.net_arch=[16]", "env_kwargs.episode_requests=30"],
    )
    return train(config, root).run_dir / "final_model.zip"


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory) -> Path:
    return _train_tiny(tmp_path_factory.mktemp("runs"), 0)


@pytest.fixture(scope="module")
def second_seed_model(tmp_path_factory) -> Path:
    return _train_tiny(tmp_path_factory.mktemp("runs"), 1)


def test_baselines_and_saved_model_run_on_the_same_seeds(saved_model):
    results = evaluate_policies(ROUTING, "default", [*BASELINES, str(saved_model)], SEEDS, SMALL)
    assert [r.label for r in results] == [*BASELINES, "maskable_ppo_s0_final_model"]
    assert [(r.policy, r.train_seed, r.mode) for r in results] == [
        (BASELINES[0], None, None), (BASELINES[1], None, None), ("maskable_ppo_final_model", 0, "deterministic")]
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


def test_stochastic_evaluation_samples_repeatably_and_leaves_torchs_generator_alone(saved_model):
    both = evaluate_policies(ROUTING, "default", [BASELINES[0], str(saved_model)], SEEDS, SMALL,
                             modes=("deterministic", "stochastic"))
    assert [(r.label, r.policy, r.mode) for r in both] == [
        (BASELINES[0], BASELINES[0], None),  # a heuristic runs once, whatever the modes
        ("maskable_ppo_s0_final_model[det]", "maskable_ppo_final_model[det]", "deterministic"),
        ("maskable_ppo_s0_final_model[stoch]", "maskable_ppo_final_model[stoch]", "stochastic")]
    deterministic, stochastic = both[1], both[2]
    assert stochastic.episodes != deterministic.episodes  # a 64-step policy is near uniform: samples differ from argmax
    again = evaluate_policies(ROUTING, "default", [str(saved_model)], SEEDS, SMALL, modes=("stochastic",))
    assert again[0].episodes == stochastic.episodes and again[0].label == "maskable_ppo_s0_final_model"
    # seeded per episode: one episode alone is that seed's episode in the sequence, and the
    # caller's torch generator is left as it was (loading a model draws from it; sampling does not)
    env = make_env(ROUTING, "default", SMALL, flat=True)
    policy, _ = load_agent(saved_model, env)
    torch.manual_seed(7)
    before = torch.get_rng_state()
    assert run_episode(env, policy, SEEDS[2], deterministic=False) == stochastic.episodes[2]
    assert torch.equal(torch.get_rng_state(), before)
    with pytest.raises(ValueError, match="evaluation modes must be distinct.*got \\['sampled'\\]"):
        evaluate_policies(ROUTING, "default", BASELINES, SEEDS, SMALL, modes=("sampled",))


def test_training_seeds_of_one_model_are_runs_of_one_policy(saved_model, second_seed_model):
    results = evaluate_policies(ROUTING, "default", [*BASELINES, str(saved_model), str(second_seed_model)], SEEDS, SMALL)
    runs = policy_runs(results)
    assert list(runs) == [*BASELINES, "maskable_ppo_final_model"]
    agent = runs["maskable_ppo_final_model"]
    assert [r.train_seed for r in agent] == [0, 1]
    scores = score_array(agent, ["slo_attainment"])[..., 0]
    assert scores.shape == (2, len(SEEDS)) and scores[1, 2] == agent[1].episodes[2]["slo_attainment"]
    pairs = improvements(results, "ttft_p99_s")
    assert set(pairs) == {("maskable_ppo_final_model", b) for b in BASELINES}
    heuristic = score_array(runs[BASELINES[0]], ["ttft_p99_s"])[..., 0]
    assert pairs[("maskable_ppo_final_model", BASELINES[0])] == probability_of_improvement(
        score_array(agent, ["ttft_p99_s"])[..., 0], heuristic, higher_is_better=False)
    with pytest.raises(ValueError, match="need distinct training seeds"):
        policy_runs(evaluate_policies(ROUTING, "default", [str(saved_model), str(saved_model)], SEEDS[:1], SMALL))


def test_report_table_plots_and_tensorboard(saved_model, second_seed_model, tmp_path):
    results = evaluate_policies(ROUTING, "default", [*BASELINES, str(saved_model), str(second_seed_model)], SEEDS, SMALL)
    table = write_report(results, SEEDS, tmp_path, ttft_slo_s=1.0)
    assert table == (tmp_path / "table.md").read_text()
    assert table.startswith("**Evaluation mode: deterministic (each trained policy takes its most likely action).**")
    assert "`maskable_ppo_final_model`: training seeds 0, 1" in table
    assert "| slo_attainment |" in _unpadded(table) and "qoe_violation_rate" not in table
    assert "| maskable_ppo_s1_final_model | 1 |" in _unpadded(table) and "| maskable_ppo_final_model | " in _unpadded(table)

    metrics = table_metrics(results)
    runs = policy_runs(results)
    with open(tmp_path / "table.csv") as handle:
        rows = {(row["policy"], row["metric"]): row for row in csv.DictReader(handle)}
    for policy, members in runs.items():
        intervals = dict(zip(metrics, iqm_by_metric(score_array(members, metrics))))
        for metric in ("slo_attainment", "ttft_p50_s", "cost_usd", "return"):
            row = rows[(policy, metric)]
            assert float(row["iqm"]) == intervals[metric].value and float(row["ci_low"]) == intervals[metric].low
            assert (int(row["runs"]), int(row["tasks"])) == (len(members), len(SEEDS))
            assert f"{intervals[metric]}" in table
    with open(tmp_path / "improvement.csv") as handle:
        improvement = list(csv.DictReader(handle))
    assert [(r["agent"], r["heuristic"]) for r in improvement] == [("maskable_ppo_final_model", b) for b in BASELINES]
    assert float(improvement[0]["probability"]) == improvements(results, "slo_attainment")[
        ("maskable_ppo_final_model", BASELINES[0])].value
    with open(tmp_path / "episodes.csv") as handle:
        episodes = list(csv.DictReader(handle))
    assert len(episodes) == len(results) * len(SEEDS) and {e["train_seed"] for e in episodes} == {"", "0", "1"}

    for name in ("comparison.png", "ttft_cdf.png", "tier_slo.png", "cost_vs_slo.png", "performance_profile.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, name

    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == sorted([*BASELINES, "maskable_ppo_final_model", "comparison"])
    for policy in runs:
        events = EventAccumulator(str(tmp_path / "tb" / policy))
        events.Reload()
        (point,) = events.Scalars("iqm/slo_attainment")  # one point per policy, not one per seed
        assert point.step == 0 and point.value == pytest.approx(float(rows[(policy, "slo_attainment")]["iqm"]))
        assert not any(tag.startswith("serving/") for tag in events.Tags()["scalars"])
        assert "_hparams_/session_start_info" in events.PluginTagToContent("hparams")  # the policy's HPARAMS row
    comparison = EventAccumulator(str(tmp_path / "tb" / "comparison"))
    comparison.Reload()
    images = comparison.Tags()["images"]
    assert images[0] == "comparison/1_slo_attainment"  # the headline first: TensorBoard's landing cards
    assert set(images) >= {"comparison/2_ttft_p99_s", "comparison/5_cost_usd"}


def test_command_line_prints_the_mode_and_the_table(saved_model, tmp_path, capsys):
    out = tmp_path / "eval"
    main(["--env", ROUTING, "--policies", f"{BASELINES[0]},{saved_model}", "--seeds", "3,4", "--deterministic",
          "--stochastic", "--set", "episode_requests=30", "--device", "cpu", "--out", str(out)])
    printed = capsys.readouterr().out
    assert printed.startswith("**Evaluation modes: both**")
    assert f"| metric | {BASELINES[0]} | maskable_ppo_final_model[det] | maskable_ppo_final_model[stoch] |" in _unpadded(printed)
    assert "| maskable_ppo_final_model[stoch] | " in _unpadded(printed)  # its probability of improvement row
    assert main(["--env", ROUTING, "--policies", BASELINES[0], "--seeds", "3", "--metric", "slo",
                 "--set", "episode_requests=30", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("agents.evaluate: error: unknown --metric 'slo'")


def test_the_table_is_printed_before_the_files_are_written(tmp_path, capsys):
    out = tmp_path / "eval"
    (out / "table.md").mkdir(parents=True)  # writing the report fails on its first file
    assert main(["--env", ROUTING, "--policies", BASELINES[0], "--seeds", "3", "--set", "episode_requests=30",
                 "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert f"| metric | {BASELINES[0]} |" in _unpadded(captured.out) and "written to" not in captured.out
    assert captured.err.startswith("agents.evaluate: error: [Errno 21] Is a directory")


def test_bad_evaluation_requests_are_rejected(saved_model, capsys):
    with pytest.raises(ValueError, match="unknown policy 'no_such_policy'; known:"):
        evaluate_policies(ROUTING, "default", ["no_such_policy"], SEEDS, SMALL)
    with pytest.raises(ValueError, match="seeds must be distinct"):
        evaluate_policies(ROUTING, "default", BASELINES, [1, 1], SMALL)
    with pytest.raises(ValueError, match="seed must be >= 0, got -2"):
        evaluate_policies(ROUTING, "default", BASELINES, [-2], SMALL)
    assert main(["--env", ROUTING, "--policies", BASELINES[0], "--seeds", "0,x"]) == 2
    assert capsys.readouterr().err == "agents.evaluate: error: seed 'x' is not an integer\n"
    with pytest.raises(ValueError, match="no saved model at"):
        evaluate_policies(ROUTING, "default", [str(saved_model.with_name("missing.zip"))], SEEDS, SMALL)
    with pytest.raises(ValueError, match="was trained with observation_space"):
        evaluate_policies(ROUTING, "default", [str(saved_model)], SEEDS, {**SMALL, "max_instances": 10})


def test_default_seeds_are_held_out_from_training_seeds(tmp_path):
    from agents.evaluate import main
    from agents.train import EVAL_SEED_BASE

    out = tmp_path / "eval"
    assert main(["--env", "servegym/Routing-v0", "--policies", "round_robin", "--set", "episode_requests=10",
                 "--out", str(out)]) == 0
    with (out / "episodes.csv").open() as handle:
        seeds = [int(row["seed"]) for row in csv.DictReader(handle)]
    assert seeds == [EVAL_SEED_BASE + k for k in range(5)] == [10000, 10001, 10002, 10003, 10004]


def test_agent_policy_hands_the_model_a_writable_copy_of_the_read_only_mask():
    """The env's mask is read-only (computed once per step); torch warns about tensors made from
    read-only arrays, so the trained model gets a copy with the same values."""
    from agents.callbacks import AgentPolicy

    seen = {}

    class _Model:
        def predict(self, observation, state=None, episode_start=None, deterministic=True, action_masks=None):
            seen["masks"] = action_masks
            return np.array([0]), state

    mask = np.array([True, False, True])
    mask.flags.writeable = False
    AgentPolicy(_Model()).predict({}, action_masks=mask)
    assert seen["masks"].flags.writeable and seen["masks"] is not mask and seen["masks"].tolist() == [True, False, True]


def _unpadded(text: str) -> str:
    """A markdown table without to_markdown's column padding: runs of spaces as one."""
    return re.sub(r" {2,}", " ", text)


def test_per_instance_cache_metrics_are_left_out_of_the_markdown_table_and_kept_in_the_csv(tmp_path):
    """A report over an 8-instance caching scenario would list 16 per-instance rows; the table
    names how many it leaves out and ``table.csv`` holds them."""
    episodes = [{"slo_attainment": 0.5 + 0.1 * seed, "prefix_cache_hit_rate": 0.25, "prefix_hit_rate_i0": 0.5,
                 "prefix_hit_rate_i1": 0.0, "prefix_cached_blocks_i0": 7.0, "cost_usd": 1.0, "return": -1.0, "invalid_actions": 0.0}
                for seed in range(3)]
    result = PolicyResult("round_robin", "round_robin", episodes, np.array([0.1, 0.2]))
    report = write_report([result], [0, 1, 2], tmp_path)
    rows = {line.split("|")[1].strip() for line in report.splitlines() if line.startswith("| ")}
    assert {"slo_attainment", "prefix_cache_hit_rate", "return"} <= rows
    assert not any(name.startswith(("prefix_hit_rate_i", "prefix_cached_blocks_i")) for name in rows)
    assert "Per-instance prefix-cache metrics (3, e.g. `prefix_hit_rate_i0`) are left out" in report
    with open(tmp_path / "table.csv") as f:
        by_metric = {row["metric"]: float(row["iqm"]) for row in csv.DictReader(f)}
    assert by_metric["prefix_hit_rate_i0"] == 0.5 and by_metric["prefix_cached_blocks_i0"] == 7.0
    assert by_metric["slo_attainment"] == pytest.approx(0.6)
