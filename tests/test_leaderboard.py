"""agents.leaderboard from hand-made trial records: ranking on the headline metric (lower is
better for latencies), training seeds as runs, the best assignment per algorithm, a headline
constraint (a target the mean must meet), and the errors that keep incomparable trials off one board."""

import json
import math

import numpy as np
import pytest

from agents import leaderboard
from agents.statistics import iqm

SEEDS = [10000, 10001, 10002]


def _rows(values, metric="e2e_p95_s"):
    return [{metric: v, "seed": float(s)} for v, s in zip(values, SEEDS)]


def _record(trial, seed, agent, lr, heuristics=None, env_kwargs=None, constraint=None):
    return {"trial_id": trial, "board": "cascadia (servegym/Cascade-v0)", "metric": "e2e_p95_s", "algo": "ppo",
            "constraint": constraint,
            "reward": "quality_episode", "seed": seed, "hyperparams": {"learning_rate": lr}, "searched": ["learning_rate"],
            "timesteps": 64, "env_kwargs": env_kwargs or {"episode_requests": 60}, "agent": _rows(agent),
            "heuristics": heuristics or {"cascadia": _rows([2.0, 2.2, 2.1])}}


RECORDS = [_record("t0", 0, [1.5, 1.6, 1.7], 1e-4), _record("t1", 1, [1.9, 1.4, 1.8], 1e-4),
           _record("t2", 0, [3.0, 3.1, 3.2], 3e-4), _record("t3", 1, [2.9, 3.3, 3.0], 3e-4)]


def test_entries_rank_each_policy_best_first_with_seeds_as_runs():
    found = leaderboard.entries(RECORDS, best_only=False)
    assert [e.policy for e in found] == ["ppo (quality_episode) [learning_rate=0.0001]", "cascadia",
                                         "ppo (quality_episode) [learning_rate=0.0003]"]  # lower P95 first
    best = found[0]
    assert best.kind == "agent" and best.scores.shape == (2, 3) and best.detail.startswith("training seeds 0, 1")
    assert best.interval == iqm(np.array([[1.5, 1.6, 1.7], [1.9, 1.4, 1.8]]))


def test_write_board_writes_markdown_csv_and_plot(tmp_path):
    sweep = tmp_path / "sweep"
    for record in RECORDS:
        path = sweep / "runs" / record["trial_id"] / "run" / "evaluation.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(record))
    out = tmp_path / "docs" / "leaderboard.md"
    assert leaderboard.main([str(sweep), "--out", str(out)]) == 0
    text = out.read_text()
    assert "## cascadia (servegym/Cascade-v0): e2e_p95_s (lower is better)" in text
    assert "| 1 | ppo (quality_episode) [learning_rate=0.0001] | agent |" in text and "| 2 | cascadia | heuristic |" in text
    assert "learning_rate=0.0003" not in text  # by default an algorithm shows its best assignment only
    assert out.with_suffix(".csv").read_text().count("\n") == 3 and out.with_suffix(".png").stat().st_size > 0


def test_incomparable_trials_raise():
    with pytest.raises(ValueError, match="evaluated on seeds \\[10000, 10001\\], other trials on \\[10000, 10001, 10002\\]"):
        other = _record("t9", 2, [1.0, 1.0], 1e-4)
        leaderboard.entries([RECORDS[0], {**other, "agent": other["agent"][:2]}])
    with pytest.raises(ValueError, match="trials t0 and t9 .* ran different scenario arguments or constraints"):
        leaderboard.entries([RECORDS[0], _record("t9", 2, [1.0] * 3, 1e-4, env_kwargs={"episode_requests": 90})])
    with pytest.raises(ValueError, match="trials t0 and t9 train .* with the same seed 0"):
        leaderboard.entries([RECORDS[0], _record("t9", 0, [1.0] * 3, 1e-4)])
    with pytest.raises(ValueError, match="sweep directory /nowhere: does not exist; run the sweep first"):
        leaderboard.load_records(["/nowhere"])


def test_a_policy_missing_the_constraint_ranks_below_those_meeting_it():
    def quality(rows, value):
        return [{**row, "quality_mean": value} for row in rows]

    record = _record("t0", 0, [1.5, 1.6, 1.7], 1e-4, constraint=["quality_mean", 80.0])
    record = {**record, "agent": quality(record["agent"], 79.5),
              "heuristics": {"cascadia": quality(record["heuristics"]["cascadia"], 80.6)}}
    found = leaderboard.entries([record])
    assert [(e.policy, e.meets_constraint) for e in found] == [("cascadia", True),
                                                                ("ppo (quality_episode) [learning_rate=0.0001]", False)]
    text = leaderboard.markdown(found, "Leaderboard", [])
    assert "Target: mean quality_mean >= 80" in text and "| 79.5 *missed* |" in text and "| 80.6 |" in text


def test_a_metric_with_no_value_ranks_last():
    nan_heuristic = {"cascadia": _rows([math.nan] * 3)}
    found = leaderboard.entries([_record("t0", 0, [1.5, 1.6, 1.7], 1e-4, heuristics=nan_heuristic)])
    assert [e.kind for e in found] == ["agent", "heuristic"] and math.isnan(found[1].interval.value)


def test_each_agent_carries_its_probability_of_improvement_over_the_best_heuristic(tmp_path):
    found = leaderboard.entries(RECORDS, best_only=False)
    by_policy = {e.policy: e for e in found}
    assert by_policy["cascadia"].improvement is None
    better = by_policy["ppo (quality_episode) [learning_rate=0.0001]"].improvement
    worse = by_policy["ppo (quality_episode) [learning_rate=0.0003]"].improvement
    # lower P95 is better: every agent score of 1e-4 (1.4-1.9 s) beats every cascadia score (2.0-2.2 s), none of 3e-4's
    assert (better.value, better.low, better.high, better.runs, better.tasks) == (1.0, 1.0, 1.0, 2, 3)
    assert (worse.value, worse.low, worse.high) == (0.0, 0.0, 0.0)
    text = leaderboard.markdown(found, "Board", [])
    assert "| IQM [95% CI] | PoI vs cascadia |" in text and "| 1 [1, 1] |" in text and "| 0 [0, 0] |" in text


def _write_sweep(folder, records):
    for record in records:
        path = folder / "runs" / record["trial_id"] / "run" / "evaluation.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(record))


def test_update_rebuilds_the_swept_boards_and_keeps_the_others_word_for_word(tmp_path):
    """A board of cascadia and one of default; a second sweep of default only, with --update,
    replaces default's section and rows and leaves cascadia's section, rows and bars as they were."""
    default_records = [{**r, "trial_id": r["trial_id"] + "d", "board": "default (servegym/Routing-v0)"} for r in RECORDS]
    first, second = tmp_path / "first", tmp_path / "second"
    _write_sweep(first, RECORDS + default_records)
    out = tmp_path / "board.md"
    assert leaderboard.main([str(first), "--out", str(out)]) == 0
    before = out.read_text()
    cascadia_section = before[before.index("## cascadia"):before.index("## default")]
    cascadia_rows = [line for line in out.with_suffix(".csv").read_text().splitlines() if line.startswith("cascadia")]
    better = [{**r, "agent": _rows([0.5, 0.6, 0.7])} for r in default_records]
    _write_sweep(second, better)
    assert leaderboard.main([str(second), "--out", str(out), "--update"]) == 0
    after = out.read_text()
    assert after[after.index("## cascadia"):after.index("## default")] == cascadia_section
    assert f"From the sweep(s) `{second}`." in after
    assert f"Kept from the previous page (not in these sweeps): cascadia (servegym/Cascade-v0), from the sweep(s) `{first}`." in after
    default_section = after[after.index("## default"):]
    assert "| 1 | ppo (quality_episode) [learning_rate=0.0001] | agent | 0.6 [0.5, 0.7]" in default_section
    lines = out.with_suffix(".csv").read_text().splitlines()
    assert [line for line in lines if line.startswith("cascadia")] == cascadia_rows
    assert sum(line.startswith("default") for line in lines) == 2 and len(lines) == 5
    third = tmp_path / "third"
    _write_sweep(third, [{**r, "trial_id": r["trial_id"] + "c"} for r in RECORDS])
    assert leaderboard.main([str(third), "--out", str(out), "--update"]) == 0
    # the kept default board came from the second sweep; the page also names the first, whose board it had kept
    assert (f"Kept from the previous page (not in these sweeps): default (servegym/Routing-v0), from the sweep(s) "
            f"`{second}`, `{first}`.") in out.read_text()
    without_update = tmp_path / "fresh.md"
    assert leaderboard.main([str(second), "--out", str(without_update)]) == 0
    assert "## cascadia" not in without_update.read_text()


def test_update_without_a_page_says_to_write_the_whole_board_first(tmp_path, capsys):
    _write_sweep(tmp_path / "sweep", RECORDS)
    assert leaderboard.main([str(tmp_path / "sweep"), "--out", str(tmp_path / "none.md"), "--update"]) == 2
    assert "none.md does not exist; write the whole board first (without --update)" in capsys.readouterr().err
