"""The harness every paper-reproduction script shares: its command line, its output folder and
clock, ``results.json``, TensorBoard runs, markdown tables and figures.

A script parses with ``ExperimentParser`` (``--quick``, ``--out`` defaulting to
``results/<name>``, and where the script takes them ``--seeds`` and ``simulator.fanout``'s
``--workers`` / ``--address``), opens a ``Run`` on ``--out``, builds its report's tables with
``markdown_table``, saves its figures with ``save_figure`` and ends with ``Run.finish``
(``results.json`` and one TensorBoard run per system). What it measures, its report's prose and
its figures' content stay in the script.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # figures go to files; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

from simulator import fanout  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
Scalar = tuple[str, float, int]  # a TensorBoard scalar: tag, value, step


class ExperimentParser(argparse.ArgumentParser):
    """A reproduction script's command line: ``--quick`` and ``--out`` (default
    ``results/<name>``); ``--seeds`` when the script has default ``seeds``; ``--workers`` /
    ``--address`` when it ``fans_out`` (``simulator.fanout``). Parsing checks the seeds (>= 0)
    and the workers (> 0), raising ``ValueError`` that names the flag."""

    def __init__(self, doc: str, name: str, quick_help: str, seeds: Sequence[int] | None = None,
                 fans_out: bool = False) -> None:
        super().__init__(description=doc.splitlines()[0])
        self.add_argument("--quick", action="store_true", help=quick_help)
        self.add_argument("--out", type=Path, default=REPO_ROOT / "results" / name,
                          help=f"output folder (default results/{name})")
        if seeds is not None:
            self.add_argument("--seeds", type=int, nargs="+", default=list(seeds),
                              help=f"episode seeds (default {' '.join(map(str, seeds))})")
        if fans_out:
            fanout.add_arguments(self)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:
        parsed = super().parse_args(args, namespace)
        seeds = getattr(parsed, "seeds", [])
        if any(seed < 0 for seed in seeds):
            raise ValueError(f"--seeds must be non-negative; got {seeds}")
        if hasattr(parsed, "workers"):
            fanout.check_workers(parsed.workers)
        return parsed


class Run:
    """One run of a script: its output folder (created when the run opens) and its wall clock."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self._started = time.perf_counter()

    @property
    def elapsed_s(self) -> float:
        """Wall seconds since the run opened."""
        return time.perf_counter() - self._started

    def log(self, message: str) -> None:
        """Print a progress line that ends with the run's wall seconds so far."""
        print(f"{message} ({self.elapsed_s:.0f} s)", flush=True)

    def write_results(self, results: Any) -> Path:
        """``results.json``: ``results`` indented by 1, a value json cannot write as its ``str``."""
        path = self.out / "results.json"
        path.write_text(json.dumps(results, indent=1, default=str) + "\n")
        return path

    def write_tensorboard(self, runs: Mapping[str, Iterable[Scalar]]) -> Path:
        """``tensorboard/<run_name(system)>/``: one run per system holding its scalars, in order;
        what an earlier run left there is removed first, so no stale run survives."""
        root = self.out / "tensorboard"
        folders = [run_name(system) for system in runs]
        if len(set(folders)) != len(folders):
            raise ValueError(f"systems {list(runs)} share a TensorBoard run folder: {folders}")
        if root.exists():
            shutil.rmtree(root)
        for folder, scalars in zip(folders, runs.values()):
            writer = SummaryWriter(log_dir=str(root / folder))
            for tag, value, step in scalars:
                writer.add_scalar(tag, value, step)
            writer.close()
        return root

    def finish(self, results: Any, runs: Mapping[str, Iterable[Scalar]]) -> int:
        """Write ``results.json`` and the TensorBoard ``runs``, say where the outputs are, and
        return the script's exit status (0)."""
        self.write_results(results)
        self.write_tensorboard(runs)
        self.log(f"wrote {self.out}")
        return 0


def mean_over_seeds(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per key, the mean of the seeds' values (NaN if one is NaN); a list is averaged element by element."""
    return {key: np.mean([c[key] for c in cells], axis=0).tolist() if isinstance(cells[0][key], list)
            else float(np.mean([c[key] for c in cells])) for key in cells[0]}


def run_name(system: str) -> str:
    """``system`` as a TensorBoard run folder: ASCII letters, digits and '-', accents dropped,
    '*' spelt '_star' (``Cauchy*`` stays apart from ``Cauchy``), every other run of characters
    one '_', none at either end."""
    plain = unicodedata.normalize("NFKD", system.replace("*", "_star")).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9-]+", "_", plain).strip("_")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A markdown table's lines (``pandas.DataFrame.to_markdown``, columns padded to one width):
    the header, the separator and one line per row, each cell as ``str`` of it, never re-read
    as a number; a row of another width than the header raises."""
    cells = []
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"table row {list(row)} has {len(row)} cells for {len(header)} columns {list(header)}")
        cells.append([str(cell) for cell in row])
    return pd.DataFrame(cells, columns=list(header)).to_markdown(index=False, disable_numparse=True).splitlines()


def save_figure(fig: Figure, path: Path, dpi: int) -> None:
    """Lay ``fig`` out, write it to ``path`` at ``dpi`` and close it (an open figure keeps its memory)."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
