"""A leaderboard from sweeps: every scenario x every applicable policy on the scenario's headline
metric, IQM with 95% stratified-bootstrap intervals (``agents.statistics``, rliable).

    python -m agents.leaderboard runs/sweeps/leaderboard [MORE_SWEEP_DIRS ...] \\
        [--out docs/leaderboard.md] [--all-configs] [--update]

Without ``--out`` the board goes to ``leaderboard.md`` in the first sweep directory: the
committed ``docs/leaderboard.md`` is written only when named. A sweep directory that does not
exist yet is refused with the command that makes it.

Reads each trial's ``evaluation.json`` under ``<sweep>/runs/`` (``agents.trial``). A section per
scenario and env ranks its policies, best first: each heuristic (one run over the evaluation
seeds) and each trained agent (an algorithm, reward and hyper-parameter assignment; its runs are
the training seeds). By default an algorithm and reward show their best assignment (chosen by
the IQM on the same evaluation seeds, so its interval is optimistic); ``--all-configs`` shows
every one, as a sweep's own ``table.md`` does. Beside ``--out`` go the same stem's ``.csv``
and ``.png`` (one panel per scenario). ``--update`` rebuilds only the boards the sweeps hold and
keeps the page's other boards as they are (``agents.leaderboard_kept``): a sweep of some
scenarios refreshes their sections of the committed board.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from agents.headline import better_when_higher
from agents.leaderboard_kept import KeptBoards, read_kept
from agents.statistics import BOOTSTRAP_REPS, Interval, iqm, probability_of_improvement
from simulator.cli import check_writable_dir, command

EVALUATION_GLOB = "runs/*/*/evaluation.json"
BOARD_FILE = "leaderboard.md"
SWEEPS_DIR = Path("agents") / "sweeps"


@dataclass(frozen=True)
class Entry:
    """One policy of one scenario's board: its scores (``runs x evaluation seeds``), interval and,
    where the board has a constraint (``(metric, minimum)``), the policy's mean of that metric."""

    board: str
    metric: str
    policy: str
    kind: str  # "heuristic" or "agent"
    scores: np.ndarray
    interval: Interval
    detail: str
    constraint: tuple[str, float] | None = None
    constraint_mean: float = math.nan
    improvement: Interval | None = None  # an agent's P(better than the board's best heuristic)

    @property
    def meets_constraint(self) -> bool:
        return self.constraint is None or self.constraint_mean >= self.constraint[1]


def load_records(sweep_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """Every finished trial's ``evaluation.json`` under the sweep directories (each trial once)."""
    records: dict[str, dict[str, Any]] = {}
    for folder in sweep_dirs:
        if not Path(folder).is_dir():
            config = SWEEPS_DIR / f"{Path(folder).name}.yml"
            first = (f"python -m agents.sweep {config}" if config.is_file()
                     else f"python -m agents.sweep CONFIG.yml --run-dir {folder}")
            raise ValueError(f"sweep directory {folder}: does not exist; run the sweep first: {first}")
        for path in sorted(Path(folder).glob(EVALUATION_GLOB)):
            try:
                record = json.loads(path.read_text())
            except ValueError as error:
                raise ValueError(f"{path}: not a trial's evaluation record: {error}") from None
            records.setdefault(record["trial_id"], record)
    return list(records.values())


def entries(records: Sequence[dict[str, Any]], best_only: bool = True) -> list[Entry]:
    """The board entries of ``records``, each board's best first; the heuristics of a board come
    from its first trial, and every trial of a board must share its evaluation seeds."""
    seeds_by_board: dict[tuple[str, str], list[int]] = {}
    setup_by_board: dict[tuple[str, str], tuple[str, Any]] = {}
    constraints: dict[tuple[str, str], tuple[str, float] | None] = {}
    heuristics: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    agents: dict[tuple[str, str, str], dict[float, dict[str, Any]]] = {}
    for record in records:
        board = (record["board"], record["metric"])
        seeds = [int(row["seed"]) for row in record["agent"]]
        if seeds_by_board.setdefault(board, seeds) != seeds:
            raise ValueError(f"trial {record['trial_id']} of {board[0]} was evaluated on seeds {seeds}, "
                             f"other trials on {seeds_by_board[board]}: boards need one set of evaluation seeds")
        setting = (record["env_kwargs"], record["constraint"])
        first, setup = setup_by_board.setdefault(board, (record["trial_id"], setting))
        if setup != setting:
            raise ValueError(f"trials {first} and {record['trial_id']} of {board[0]} ran different scenario arguments "
                             f"or constraints ({setup} and {setting}): a board compares one setting")
        constraints[board] = tuple(record["constraint"]) if record["constraint"] else None
        for name, rows in record["heuristics"].items():
            heuristics.setdefault((*board, name), rows)
        runs = agents.setdefault((*board, agent_label(record)), {})
        if record["seed"] in runs:
            raise ValueError(f"trials {runs[record['seed']]['trial_id']} and {record['trial_id']} train "
                             f"{agent_label(record)} on {board[0]} with the same seed {record['seed']}")
        runs[record["seed"]] = record
    found = [_entry(board, metric, name, "heuristic", [rows], "one run", constraints[(board, metric)])
             for (board, metric, name), rows in heuristics.items()]
    for (board, metric, label), runs in agents.items():
        ordered = [runs[seed] for seed in sorted(runs)]
        found.append(_entry(board, metric, label, "agent", [r["agent"] for r in ordered],
                            f"training seeds {', '.join(str(r['seed']) for r in ordered)}; "
                            f"{ordered[0]['timesteps']:,} steps", constraints[(board, metric)]))
    if best_only:
        found = _best_per_algorithm(found)
    return _with_improvement(sorted(found, key=lambda e: (e.board, _rank_key(e))))


def best_heuristic(members: Sequence[Entry]) -> Entry | None:
    """The best-ranked heuristic of one board's ranked entries (None without heuristics)."""
    return next((e for e in members if e.kind == "heuristic"), None)


def _with_improvement(ranked: list[Entry]) -> list[Entry]:
    """Each agent with its probability of improvement over its board's best heuristic (rliable,
    paired on the evaluation seeds; lower-is-better metrics compared negated)."""
    best = {board: best_heuristic([e for e in ranked if e.board == board]) for board in {e.board for e in ranked}}
    return [dataclasses.replace(e, improvement=probability_of_improvement(
                e.scores, best[e.board].scores, better_when_higher(e.metric)))
            if e.kind == "agent" and best[e.board] is not None else e for e in ranked]


def agent_label(record: dict[str, Any]) -> str:
    """``algo``, its reward, and the searched hyper-parameters' values: ``ppo (slo) [gamma=0.95]``."""
    label = record["algo"] + (f" ({record['reward']})" if record["reward"] else "")
    searched = [f"{key}={_short(record['hyperparams'][key])}" for key in record["searched"]]
    return label + (f" [{', '.join(searched)}]" if searched else "")


CSV_COLUMNS = ("board", "metric", "policy", "kind", "iqm", "ci_low", "ci_high", "runs", "tasks", "constraint",
               "constraint_mean", "meets_constraint", "poi_vs_best_heuristic", "poi_low", "poi_high", "partial")


def write_board(records: Sequence[dict[str, Any]], out: Path, *, best_only: bool = True, title: str = "Leaderboard",
                sources: Sequence[str] = (), partial: str | None = None, kept: KeptBoards | None = None) -> list[Entry]:
    """Write ``out`` (markdown), the same stem ``.csv`` and ``.png``; return the entries.
    ``partial`` says what a board from an unfinished sweep lacks: the markdown and the figure
    are marked partial with it, the CSV's ``partial`` column is true. ``kept``: boards of the
    earlier page at ``out`` written back beside the new ones (``agents.leaderboard_kept``)."""
    found = entries(records, best_only)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = markdown(found, title, sources, partial, kept)
    rows = [dict(zip(CSV_COLUMNS, [e.board, e.metric, e.policy, e.kind, e.interval.value, e.interval.low, e.interval.high,
                                   e.interval.runs, e.interval.tasks, _constraint_text(e.constraint), e.constraint_mean,
                                   e.meets_constraint, *((e.improvement.value, e.improvement.low, e.improvement.high)
                                                         if e.improvement is not None else ("", "", "")),
                                   partial is not None])) for e in found]
    shown = list(found)
    if kept is not None:
        rows += [{**row, "partial": row.get("partial") or "False"} for row in kept.rows]
        rows.sort(key=lambda row: row["board"])  # stable: each board keeps its ranking
        shown = sorted(found + [_kept_entry(row) for row in kept.rows], key=lambda e: e.board)
    out.write_text(text)
    with open(out.with_suffix(".csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    if shown:
        figure = plot(shown)
        if partial is not None:
            figure.suptitle("PARTIAL: not every trial of the sweep finished", color="C3", fontsize="medium")
        figure.savefig(out.with_suffix(".png"), dpi=120)
    return found


def _kept_entry(row: dict[str, str]) -> Entry:
    """A kept board's entry, for the figure: its interval as the CSV row gives it (no scores)."""
    interval = Interval(float(row["iqm"]), float(row["ci_low"]), float(row["ci_high"]), int(row["runs"]), int(row["tasks"]))
    return Entry(row["board"], row["metric"], row["policy"], row["kind"], np.empty((0, 0)), interval, "")


def markdown(found: Sequence[Entry], title: str, sources: Sequence[str], partial: str | None = None,
             kept: KeptBoards | None = None) -> str:
    """One table per board, policies ranked best first; ``partial``: what an unfinished sweep lacks;
    ``kept``: boards of an earlier page written back word for word, in board order with the new ones."""
    lines = [f"# {title}" + (" (partial)" if partial else ""), ""]
    if partial:
        lines += [f"**Partial: {partial}**", ""]
    if sources:
        lines += [f"From the sweep(s) {', '.join(f'`{s}`' for s in sources)}.", ""]
    if kept is not None and kept.sections:
        lines += [f"Kept from the previous page (not in these sweeps): {', '.join(kept.sections)}"
                  + (f", from the sweep(s) {', '.join(f'`{s}`' for s in kept.sources)}" if kept.sources else "")
                  + ".", ""]
    lines += [f"Cells: IQM over training seeds x evaluation seeds [95% stratified-bootstrap interval over both, "
              f"rliable, {BOOTSTRAP_REPS:,} resamples] (Agarwal et al., NeurIPS 2021); a heuristic is one run. "
              "Agents are evaluated deterministically: each trained policy takes its most likely action "
              "(`agents.trial`).", ""]
    sections = {board: _section([e for e in found if e.board == board]) for board in dict.fromkeys(e.board for e in found)}
    if kept is not None:
        sections = {board: sections.get(board) or kept.sections[board] for board in sorted({*sections, *kept.sections})}
    if not sections:
        return "\n".join(lines + ["No finished trial yet."]) + "\n"
    return "\n".join(lines) + "\n" + "".join(sections.values()).rstrip("\n") + "\n"


def _section(members: Sequence[Entry]) -> str:
    """One board's heading, notes and ranked table."""
    board, metric, constraint = members[0].board, members[0].metric, members[0].constraint
    heuristic = best_heuristic(members)
    poi = f"PoI vs {heuristic.policy}" if heuristic is not None else "PoI"
    lines = [f"## {board}: {metric} ({'higher' if better_when_higher(metric) else 'lower'} is better)", "",
             f"Evaluation seeds: {members[0].interval.tasks} per run. {poi}: an agent's probability of "
             "improvement over the best heuristic [95% CI], paired on the evaluation seeds."]
    if constraint is None:
        lines += ["", f"| rank | policy | kind | IQM [95% CI] | {poi} | runs | detail |", "|---:|---|---|---:|---:|---:|---|"]
        lines += [f"| {rank} | {e.policy} | {e.kind} | {e.interval} | {_improvement_text(e)} | {e.interval.runs} "
                  f"| {e.detail} |" for rank, e in enumerate(members, 1)]
    else:
        lines += [f"Target: mean {_constraint_text(constraint)}; a policy missing it (marked *missed*) ranks below "
                  "every policy meeting it.", "",
                  f"| rank | policy | kind | IQM [95% CI] | {poi} | mean {constraint[0]} | runs | detail |",
                  "|---:|---|---|---:|---:|---:|---:|---|"]
        lines += [f"| {rank} | {e.policy} | {e.kind} | {e.interval} | {_improvement_text(e)} | {e.constraint_mean:.4g}"
                  f"{'' if e.meets_constraint else ' *missed*'} | {e.interval.runs} | {e.detail} |"
                  for rank, e in enumerate(members, 1)]
    return "\n".join(lines) + "\n\n"


def plot(found: Sequence[Entry]) -> Figure:
    """One panel per board: each policy's IQM with its interval, agents and heuristics in two colours."""
    boards = list(dict.fromkeys(e.board for e in found))
    heights = [max(1.5, 0.35 * sum(e.board == b for e in found) + 0.8) for b in boards]
    figure = Figure(figsize=(7.5, sum(heights)), layout="constrained")
    for axes, board in zip(figure.subplots(len(boards), 1, squeeze=False, height_ratios=heights)[:, 0], boards):
        members = [e for e in found if e.board == board and not math.isnan(e.interval.value)][::-1]
        values = np.array([e.interval.value for e in members])
        errors = np.array([[e.interval.value - e.interval.low, e.interval.high - e.interval.value] for e in members]).T
        colors = ["C0" if e.kind == "agent" else "C7" for e in members]
        axes.barh(np.arange(len(members)), values, xerr=errors.reshape(2, -1), color=colors, capsize=3)
        axes.set_yticks(np.arange(len(members)), [e.policy for e in members], fontsize="small")
        axes.set_title(board, fontsize="medium")
        axes.set_xlabel(f"{members[0].metric if members else ''} (IQM, 95% CI)", fontsize="small")
        axes.grid(axis="x", alpha=0.3)
    return figure


def _entry(board: str, metric: str, policy: str, kind: str, runs: list[list[dict[str, float]]], detail: str,
           constraint: tuple[str, float] | None) -> Entry:
    scores = np.array([[row[metric] for row in rows] for rows in runs], dtype=float)
    mean = math.nan
    if constraint is not None:
        values = np.array([row[constraint[0]] for rows in runs for row in rows], dtype=float)
        mean = float(np.nanmean(values)) if np.any(~np.isnan(values)) else math.nan
    return Entry(board, metric, policy, kind, scores, iqm(scores), detail, constraint, mean)


def _rank_key(entry: Entry) -> tuple[bool, float]:
    """Policies meeting the board's constraint first, then by IQM (NaN last)."""
    value = entry.interval.value
    if math.isnan(value):
        return not entry.meets_constraint, math.inf
    return not entry.meets_constraint, -value if better_when_higher(entry.metric) else value


def _improvement_text(entry: Entry) -> str:
    return "" if entry.improvement is None else str(entry.improvement)


def _constraint_text(constraint: tuple[str, float] | None) -> str:
    return "" if constraint is None else f"{constraint[0]} >= {constraint[1]:g}"


def _best_per_algorithm(found: list[Entry]) -> list[Entry]:
    """Heuristics, and for each board, algorithm and reward its best-ranked assignment."""
    best: dict[tuple[str, str], Entry] = {}
    for entry in found:
        if entry.kind != "agent":
            continue
        key = (entry.board, entry.policy.split(" [")[0])
        if key not in best or _rank_key(entry) < _rank_key(best[key]):
            best[key] = entry
    return [e for e in found if e.kind != "agent"] + list(best.values())


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


@command("agents.leaderboard")
def main(argv: Sequence[str] | None = None) -> int:
    """Write the board; bad input (a missing sweep, an unwritable ``--out``) prints one line and returns 2."""
    parser = argparse.ArgumentParser(prog="agents.leaderboard", description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", type=Path, nargs="+", help="sweep directories (python -m agents.sweep --run-dir)")
    parser.add_argument("--out", type=Path, help=f"markdown file (default: {BOARD_FILE} in the first sweep directory; "
                                                 "docs/leaderboard.md only when named); the .csv and .png go beside it")
    parser.add_argument("--all-configs", action="store_true", help="every hyper-parameter assignment, not the best")
    parser.add_argument("--update", action="store_true",
                        help="rebuild only the boards these sweeps hold; keep the other boards of the page at --out")
    args = parser.parse_args(argv)
    out = args.out or args.sweeps[0] / BOARD_FILE
    if out.suffix != ".md":
        raise ValueError(f"--out {out}: must name a .md file (the .csv and .png go beside it)")
    records = load_records(args.sweeps)
    if not records:
        raise ValueError(f"sweeps {' '.join(map(str, args.sweeps))}: no finished trial (evaluation.json) yet")
    check_writable_dir("--out", out.parent)
    kept = read_kept(out, {record["board"] for record in records}) if args.update else None
    found = write_board(records, out, best_only=not args.all_configs, sources=[str(s) for s in args.sweeps], kept=kept)
    print(out.read_text())
    print(f"{len(found)} entries; written {out}, {out.with_suffix('.csv')}, {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
