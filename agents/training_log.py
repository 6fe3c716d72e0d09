"""A run's training log and progress bar, continued across interruptions and resumes.

SB3 writes ``progress.csv`` afresh and counts ``time/iterations`` from 1 in every ``learn``
call, and its progress bar's total is the step budget although training stops only after the
rollout that reaches it (100,352 of 100,000 steps). Here a resumed run continues the same
``progress.csv`` (rows past its checkpoint dropped, as ``agents.train.rewind_monitor`` drops
monitor rows) and the same iteration count, and the bar's total is the steps ``learn`` will take.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import CSVOutputFormat, KVWriter, Logger
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.type_aliases import TrainFrequencyUnit
from tqdm import tqdm

ITERATIONS = "time/iterations"
TOTAL_STEPS = "time/total_timesteps"


class ContinuedCSVOutputFormat(CSVOutputFormat):
    """SB3's CSV log, continuing the file at ``filename``: its rows logged at up to ``steps``
    total steps are kept (a later or half-written row is dropped), new rows follow them."""

    def __init__(self, filename: str, steps: int) -> None:
        header, rows = _rows_up_to(Path(filename), steps)
        super().__init__(filename)
        if header:
            writer = csv.writer(self.file, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)
            self.file.flush()
            self.keys = list(header)


def _rows_up_to(path: Path, steps: int) -> tuple[list[str], list[list[str]]]:
    """The header and the complete rows of the CSV log at ``path`` before the first with
    ``TOTAL_STEPS`` > ``steps`` (a row without it, such as the last update's losses, goes with
    the rows before it)."""
    if not path.is_file():
        return [], []
    text = path.read_text()
    lines = list(csv.reader(text.splitlines(keepends=True)))
    if not lines or TOTAL_STEPS not in lines[0]:
        return [], []
    header, column = lines[0], lines[0].index(TOTAL_STEPS)
    complete = lines[1:] if text.endswith("\n") else lines[1:-1]
    kept = []
    for row in complete:
        try:
            if len(row) != len(header) or (row[column] and float(row[column]) > steps):
                break
        except ValueError:
            break
        kept.append(row)
    return header, kept


class ContinuedLogger(Logger):
    """SB3's logger with ``iteration_offset`` added to ``time/iterations`` (the iterations a
    resumed run trained before), so a run counts its iterations once from its start."""

    def __init__(self, folder: str | None, output_formats: list[KVWriter], iteration_offset: int = 0) -> None:
        super().__init__(folder, output_formats)
        self.iteration_offset = iteration_offset

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        if key == ITERATIONS:
            value = value + self.iteration_offset
        super().record(key, value, exclude)


def steps_per_iteration(model: BaseAlgorithm) -> int:
    """Env steps one iteration of ``learn`` gathers: a rollout of ``n_steps`` per env
    (on-policy), ``train_freq`` steps per env (off-policy, counted in steps), else one step per env."""
    if isinstance(model, OnPolicyAlgorithm):
        return model.n_steps * model.n_envs
    train_freq = getattr(model, "train_freq", None)
    if isinstance(model, OffPolicyAlgorithm) and train_freq is not None and train_freq.unit == TrainFrequencyUnit.STEP:
        return train_freq.frequency * model.n_envs
    return model.n_envs


def planned_steps(model: BaseAlgorithm, budget_steps: int) -> int:
    """The steps ``learn`` takes to train ``budget_steps`` more: whole iterations, the last one
    reaching or passing the budget."""
    per = steps_per_iteration(model)
    return math.ceil(budget_steps / per) * per


class StepProgressBar(BaseCallback):
    """A progress bar over the steps ``learn`` will take (``planned_steps``); it ends at its
    total, or where training stopped when interrupted. Should an iteration run longer than
    planned (episodes as off-policy training units), the total grows with it."""

    def __init__(self, budget_steps: int) -> None:
        super().__init__()
        self.budget_steps = budget_steps
        self.bar: tqdm | None = None

    def _on_training_start(self) -> None:
        self.bar = tqdm(total=planned_steps(self.model, self.budget_steps), unit="steps", unit_scale=True,
                        dynamic_ncols=True)

    def _on_step(self) -> bool:
        assert self.bar is not None
        if self.bar.n + self.model.n_envs > self.bar.total:
            self.bar.total = self.bar.n + self.model.n_envs
        self.bar.update(self.model.n_envs)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()
