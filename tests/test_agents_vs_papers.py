"""experiments.agents_vs_papers: recipes load strictly, headline metrics per tier match the
requests they summarize, the verdict follows the probability of improvement's interval over
training seeds x evaluation seeds, and a quick run of one scenario on two training seeds writes
a report whose numbers are the heuristic's own rollouts."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import baselines
from agents.headline import base_metric, better_when_higher, headline_values
from agents.sweep_config import load_sweep_config
from agents.statistics import iqm_by_metric, probability_of_improvement
from agents.rollout import run_episode
from envs.vector import POOLS
from experiments.agents_vs_papers.__main__ import main
from experiments.agents_vs_papers.headline import compare
from experiments.agents_vs_papers.recipe import RECIPES_DIR, load_recipe, recipe_names
from experiments.agents_vs_papers.report import headline_verdict, pick_best, scores, training_diagnostics
from experiments.agents_vs_papers.runner import AGENT_LABEL, choose_heuristics, finished_run, recipe_config, usable_policies

PAPER_SCENARIOS = ["cascadeserve", "cascadia", "cauchy", "mooncake", "multitier", "pascal"]


def test_one_recipe_per_paper_scenario_within_an_hour():
    assert recipe_names() == PAPER_SCENARIOS
    for name in PAPER_SCENARIOS:
        recipe, quick = load_recipe(name), load_recipe(name, quick=True)
        assert recipe.scenario.startswith(name)  # cauchy: cauchy_autoscaling
        assert recipe.algo == ("ppo" if name in ("cascadia", "cascadeserve") else "maskable_ppo")  # Gaussian thresholds
        assert 0 < recipe.budget_minutes <= 60 and recipe.timesteps > quick.timesteps
        assert recipe.heuristics and recipe.headline.metric == recipe.headline.metrics[0]
        assert "reward" in recipe.env_kwargs and recipe.reward == quick.reward
        assert f'env_kwargs.reward="{recipe.reward}"' in recipe.overrides()


def test_an_agent_below_the_quality_target_wins_nothing(tmp_path):
    recipe = load_recipe("cascadia")
    assert recipe.headline.constraint == ("quality_mean", 80.0)
    # three training seeds x three evaluation seeds, 3 s faster than the heuristic everywhere...
    agent = [[{"e2e_p95_s": 24.0 - t, "quality_mean": q} for q in (76.0, 79.0, 77.0)] for t in range(3)]
    heuristic = [[{"e2e_p95_s": 27.0, "quality_mean": 81.0}, {"e2e_p95_s": 26.0, "quality_mean": 81.0},
                  {"e2e_p95_s": 28.0, "quality_mean": 80.5}]]
    faster_below = {AGENT_LABEL: agent, "cascadia": heuristic}
    verdicts = [compare("e2e_p95_s", scores(agent, "e2e_p95_s"), scores(heuristic, "e2e_p95_s"))]
    assert verdicts[0].verdict == "win" and verdicts[0].probability.value == 1.0
    assert headline_verdict(recipe, faster_below, verdicts) == \
        "loss (the agent's mean quality_mean 77.33 misses the target >= 80)"  # ...at quality 77.3
    for run in agent:
        for row in run:
            row["quality_mean"] = 80.5
    assert headline_verdict(recipe, faster_below, verdicts) == "win"
    assert headline_verdict(recipe, {AGENT_LABEL: agent[:2], "cascadia": heuristic}, verdicts) == \
        "win (provisional: 2 training seeds; a claim needs >= 3)"
    text = (RECIPES_DIR / "cascadia.yml").read_text()
    for bad, match in [("{metric: quality_mean, min: .nan}", "min must be a finite number"),
                       ("{metric: quality_mean}", "exactly \\['metric', 'min'\\]"),
                       ("{metric: ttft_p99_s, min: 1.0}", "'ttft_p99_s' must be one of the reported 'also' metrics")]:
        (tmp_path / "bad.yml").write_text(text.replace("{metric: quality_mean, min: 80.0}", bad))
        with pytest.raises(ValueError, match=match):
            load_recipe("bad", directory=tmp_path)


def test_quick_section_overrides_key_by_key():
    full, quick = load_recipe("pascal"), load_recipe("pascal", quick=True)
    assert quick.env_kwargs == {**full.env_kwargs, "episode_requests": 20}
    assert quick.hyperparams["n_steps"] == 64 and full.hyperparams["n_steps"] == 1024
    assert (quick.timesteps, quick.n_envs, quick.eval_seeds) == (128, 1, 2)


def test_bad_recipes_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown recipe 'nope'.*pascal"):
        load_recipe("nope")
    text = (RECIPES_DIR / "pascal.yml").read_text()
    (tmp_path / "typo.yml").write_text(text.replace("budget_minutes:", "budget_minute:"))
    with pytest.raises(ValueError, match="unknown key.*budget_minute"):
        load_recipe("typo", directory=tmp_path)
    (tmp_path / "long.yml").write_text(re.sub(r"budget_minutes: \d+", "budget_minutes: 90", text))
    with pytest.raises(ValueError, match="budget_minutes must be in \\(0, 60\\], got 90"):
        load_recipe("long", directory=tmp_path)
    (tmp_path / "steps.yml").write_text(re.sub(r"^timesteps: \d+", "timesteps: -3", text, flags=re.M))
    with pytest.raises(ValueError, match="timesteps must be >= 1, got -3"):
        load_recipe("steps", directory=tmp_path)
    (tmp_path / "own.yml").write_text(text + "agent_env_kwargs: {rate_rps: 1.0}\n")
    with pytest.raises(ValueError, match=r"agent_env_kwargs may set only \['action', 'observe_episode_quality'\].*not \['rate_rps'\]"):
        load_recipe("own", directory=tmp_path)


def test_cauchy_agent_acts_one_unit_a_step_on_the_heuristics_simulation():
    recipe = load_recipe("cauchy", quick=True)
    assert recipe.agent_env == {**recipe.env_kwargs, "action": "one_unit"} and "action" not in recipe.env_kwargs
    assert 'env_kwargs.action="one_unit"' in recipe.overrides()
    agent_env = gym.make(recipe.env_id, scenario=recipe.scenario, **recipe.agent_env)
    heuristic_env = gym.make(recipe.env_id, scenario=recipe.scenario, **recipe.env_kwargs)
    kinds = len(heuristic_env.unwrapped.units)
    assert agent_env.action_space == spaces.Discrete(1 + 2 * kinds)
    assert heuristic_env.action_space == spaces.MultiDiscrete([3] * kinds)
    assert choose_heuristics(recipe).compared == "cauchy_autoscaler"


def test_tier_headline_metrics_summarize_that_tiers_requests():
    env = gym.make("servegym/Routing-v0", scenario="multitier", episode_requests=300)
    episode = run_episode(env, baselines.make("round_robin", env), 3)
    cluster = env.unwrapped.cluster
    names = ["ttft_p99_s", "tier0.ttft_p99_s", "tier3.e2e_mean_s", "tier9.ttft_p99_s"]
    values = headline_values(names, episode, cluster.outcomes, cluster.events.now_s)
    done = [o for o in cluster.outcomes if o.completed]
    assert values["ttft_p99_s"] == episode["ttft_p99_s"]
    assert values["tier0.ttft_p99_s"] == pytest.approx(np.percentile([o.ttft_s for o in done if o.tier == 0], 99))
    assert values["tier3.e2e_mean_s"] == pytest.approx(np.mean([o.e2e_s for o in done if o.tier == 3]))
    assert math.isnan(values["tier9.ttft_p99_s"])  # K = 4: no tier 9
    with pytest.raises(ValueError, match="unknown headline metric 'ttft_p42_s'"):
        headline_values(["ttft_p42_s"], episode, cluster.outcomes, cluster.events.now_s)
    with pytest.raises(ValueError, match="unknown per-tier metric 'bogus'"):
        headline_values(["tier0.bogus"], episode, cluster.outcomes, cluster.events.now_s)
    assert base_metric("tier2.ttft_p99_s") == "ttft_p99_s" and base_metric("slo_attainment") == "slo_attainment"


def test_verdict_follows_the_probability_of_improvements_interval():
    heuristic = [[1.0, 1.0, 1.0, 1.0]]
    always_better = [[2.0, 3.0, 2.0, 3.0], [2.5, 2.0, 4.0, 2.0], [3.0, 2.0, 2.0, 5.0]]
    assert compare("slo_attainment", always_better, heuristic).verdict == "win"
    assert compare("ttft_p99_s", always_better, heuristic).verdict == "loss"  # latency: higher is worse
    assert compare("output_tokens_per_s", always_better, heuristic).verdict == "win"  # a rate, not a latency
    # better on two evaluation seeds, worse on two: P = 0.5, the interval holds 0.5
    mixed = compare("slo_attainment", [[2.0, 2.0, 0.0, 0.0], [2.0, 2.0, 0.0, 0.0]], heuristic)
    assert mixed.probability.value == 0.5 and mixed.verdict == "tie"
    # one training seed of three beats it, the others lose: P = 1/3 per seed
    split = compare("slo_attainment", [[2.0] * 4, [0.0] * 4, [0.0] * 4], heuristic)
    assert split.probability == probability_of_improvement(np.array([[2.0] * 4, [0.0] * 4, [0.0] * 4]), np.array(heuristic))
    assert split.probability.value == pytest.approx(1 / 3) and split.verdict in ("tie", "loss")
    nan_seed = compare("slo_attainment", [[2.0, math.nan]], [[1.0, 1.0]])
    assert nan_seed.probability.tasks == 1  # the NaN evaluation seed is left out
    with pytest.raises(ValueError, match="same evaluation seeds"):
        compare("slo_attainment", [[1.0]], [[1.0, 2.0]])


def test_best_registered_heuristic_is_picked_by_the_headline_metric():
    results = {"a": [[{"e2e_p95_s": 2.0}, {"e2e_p95_s": 4.0}]], "b": [[{"e2e_p95_s": 1.0}, {"e2e_p95_s": 2.0}]],
               "c": [[{"e2e_p95_s": math.nan}, {"e2e_p95_s": math.nan}]]}
    assert pick_best("e2e_p95_s", results, ["a", "b", "c"]) == "b"
    assert pick_best("quality_mean", {"a": [[{"quality_mean": 70.0}]], "b": [[{"quality_mean": 60.0}]]}, ["a", "b"]) == "a"
    with pytest.raises(ValueError, match="no candidate"):
        pick_best("e2e_p95_s", results, [])


def test_fall_back_when_the_papers_heuristic_is_not_registered():
    pascal = choose_heuristics(load_recipe("pascal", quick=True))
    assert pascal.compared == "pascal" and pascal.note == "the paper's best heuristic"
    recipe = load_recipe("cascadeserve", quick=True)
    cascade = choose_heuristics(recipe)
    applicable = set(usable_policies(recipe, baselines.policy_names(recipe.env_id)))
    if "cascadeserve" in applicable:
        assert cascade.compared == "cascadeserve"
    elif "cascadia" in applicable:
        assert cascade.compared == "cascadia" and "not registered" in cascade.note
    else:
        assert cascade.compared is None and set(cascade.references) == applicable
    assert usable_policies(recipe, ["no_such_policy", "round_robin"]) == []  # unknown, and not a Cascade-v0 policy


def test_quick_run_reports_agent_against_the_papers_heuristic(tmp_path, capsys):
    assert main(["--scenario", "multitier", "--quick", "--train-seeds", "0,1", "--out", str(tmp_path / "out"),
                 "--runs", str(tmp_path / "runs")]) == 0
    out = tmp_path / "out" / "multitier"
    report = (out / "report.md").read_text()
    assert report in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert results["heuristic"] == "llumnix_migration" and results["seeds"] == [10_000, 10_001]
    assert results["train_seeds"] == [0, 1] and results["eval_mode"] == "deterministic"
    assert "**Headline verdict: " in report and "(provisional: 2 training seeds" in report
    assert "**Evaluation mode: deterministic" in report and "`llumnix_migration`" in report

    with open(out / "episodes.csv") as handle:
        rows = list(csv.DictReader(handle))
    per_policy = {p: [r for r in rows if r["policy"] == p] for p in ("agent", "llumnix_migration", "llumnix_migration_public")}
    assert [len(v) for v in per_policy.values()] == [4, 2, 2]  # agent: 2 training seeds x 2 evaluation seeds
    assert [r["train_seed"] for r in per_policy["agent"]] == ["0", "0", "1", "1"]
    # the heuristic's rows are its own rollouts on those seeds
    recipe = load_recipe("multitier", quick=True)
    env = gym.make(recipe.env_id, scenario="multitier", **recipe.env_kwargs)
    for row, seed in zip(per_policy["llumnix_migration"], results["seeds"]):
        episode = run_episode(env, baselines.make("llumnix_migration", env), seed)
        assert float(row["ttft_p99_s"]) == pytest.approx(episode["ttft_p99_s"])

    def matrix(policy: str, metric: str) -> np.ndarray:
        values = [float(r[metric]) if r[metric] != "" else math.nan for r in per_policy[policy]]
        return np.array(values).reshape(-1, 2)

    # the verdicts are the probability of improvement over the 2 x 2 agent matrix
    for comparison in results["comparisons"]:
        metric = comparison["metric"]
        expected = probability_of_improvement(matrix("agent", metric), matrix("llumnix_migration", metric),
                                              higher_is_better=better_when_higher(metric))
        if not math.isnan(expected.value):
            assert comparison["value"] == pytest.approx(expected.value) and comparison["runs"] == 2
    metrics = list(load_recipe("multitier").headline.metrics)
    aggregate = iqm_by_metric(np.stack([matrix("agent", m) for m in metrics], axis=-1))
    assert results["metrics"]["agent"][metrics[0]]["value"] == pytest.approx(aggregate[0].value, nan_ok=True)
    per_seed = results["per_training_seed"]["1"][metrics[0]]
    assert per_seed == pytest.approx(np.nanmean(matrix("agent", metrics[0])[1]), nan_ok=True)
    # each reference is compared with the agent on the headline metric too
    (beside,) = results["reference_comparisons"]
    assert beside["reference"] == "llumnix_migration_public" and beside["metric"] == "tier0.ttft_p99_s"
    assert "| `llumnix_migration_public` | " in report


def test_reuse_runs_evaluates_a_finished_run_and_trains_only_the_missing_seed(tmp_path, capsys):
    common = ["--scenario", "multitier", "--quick", "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs")]
    assert main([*common, "--train-seeds", "0"]) == 0
    first = json.loads((tmp_path / "out" / "multitier" / "results.json").read_text())
    (seed_0_run,) = first["run_dirs"]
    capsys.readouterr()
    assert main([*common, "--train-seeds", "0,1", "--reuse-runs"]) == 0
    assert f"seed 0: reusing {seed_0_run}" in capsys.readouterr().out
    second = json.loads((tmp_path / "out" / "multitier" / "results.json").read_text())
    assert second["run_dirs"][0] == seed_0_run and second["run_dirs"][1] != seed_0_run
    assert second["timesteps"] == [128, 128] and sorted(p.name for p in (tmp_path / "runs" / "multitier").iterdir()) == \
        sorted(Path(d).name for d in second["run_dirs"])
    assert second["per_training_seed"]["0"] == first["per_training_seed"]["0"]
    (tmp_path / "runs" / "multitier" / Path(seed_0_run).name / "final_model.zip").unlink()  # as if interrupted
    recipe = load_recipe("multitier", quick=True)
    assert finished_run(recipe, tmp_path / "runs" / "multitier", 0) is None
    assert finished_run(recipe, tmp_path / "runs" / "multitier", 1).run_dir == Path(second["run_dirs"][1])
    assert finished_run(recipe, tmp_path / "runs" / "multitier", 1, timesteps=64) is None  # another budget


def test_training_diagnostics_compare_entropy_with_the_uniform_policy(tmp_path):
    (tmp_path / "progress.csv").write_text(
        "rollout/ep_rew_mean,train/entropy_loss\n10.0,\n12.5,-2.0\n20.0,-1.0397207708399179\n")
    text = training_diagnostics(tmp_path, spaces.Discrete(8))  # uniform: ln 8 = 2.0794 nats
    assert "return 10 at the first log, 20 at the last" in text
    assert "entropy 1.04 nats, 50% of the uniform policy's 2.08" in text
    multi = training_diagnostics(tmp_path, spaces.MultiDiscrete([5, 5]))  # uniform: 2 ln 5 = 3.2189
    assert f"{1.0397207708399179 / (2 * math.log(5)):.0%} of the uniform policy's 3.22" in multi


def test_training_diagnostics_give_a_gaussian_policys_final_spread(tmp_path):
    (tmp_path / "progress.csv").write_text("rollout/ep_rew_mean,train/std\n-1300.0,\n-1290.0,0.2\n-1280.0,0.116\n")
    text = training_diagnostics(tmp_path, spaces.Box(-1.0, 1.0, (2,)))
    assert "return -1300 at the first log, -1280 at the last" in text
    assert "final Gaussian std 0.116 (mean over action dimensions), 5.8% of the action range" in text


def test_the_leaderboard_trains_each_recipe_as_agents_vs_papers_does():
    """Both pages' agents of a recipe and training seed are one model: the sweep's trial config
    equals the recipe's, but for the vector env (in a Ray worker the native one where it covers the
    cell, else DummyVecEnv; test_agents_train shows that the dummy, subprocess and native vector
    envs train the same model)."""
    sweep = load_sweep_config(Path(__file__).parent.parent / "agents" / "sweeps" / "leaderboard.yml")
    recipes = {recipe.scenario: recipe for recipe in map(load_recipe, recipe_names())}
    cells = [cell for cell in sweep.cells if cell.scenario in recipes]
    assert sorted(cell.scenario for cell in cells) == sorted(recipes)
    for cell in cells:
        board = dataclasses.asdict(sweep.train_config(cell, 2, {}))
        recipe = dataclasses.asdict(recipe_config(recipes[cell.scenario], 2))
        expected = "native" if cell.env_id in POOLS else "dummy"  # every recipe's reward is one the kernels compute
        assert board["vec_env"] == expected and recipe["vec_env"] in ("auto", "dummy", "native")
        assert {**board, "vec_env": None} == {**recipe, "vec_env": None}, cell.scenario
