"""Build the compact ServeGen files shipped in ``simulator/data/servegen/`` from the raw release.

The raw alibaba/ServeGen release (``data/reason/deepseek-r1/``, ``data/language/m-large/``)
is ~26 MB of per-client files; the simulator ships only pooled summaries:

* DeepSeek-R1 reasoning traffic: one pooled empirical distribution per field
  (``input_tokens``, ``output_tokens``, ``reason_ratio``). Each client's per-6-hour-window
  distribution is weighted by that client's request count in that window (sum of
  ``rate_rps`` x 600 s over the window's 10-minute rows of ``chunk-N-trace.csv``).
* Language m-large traffic: the total request count per 10-minute window over the
  14 days (sum over clients) and the dispersion-equivalent CV
  ``sqrt(sum_i rate_i cv_i^2 / sum_i rate_i)``: for independent renewal streams the
  superposition's asymptotic index of dispersion of counts is the rate-weighted mean of
  the streams' ``cv^2``, so a renewal stream with this CV is equally bursty in the long run.

Run ``python -m simulator.workloads.servegen_pooling SERVEGEN_DIR OUT_DIR`` where
``SERVEGEN_DIR`` holds ``reason_deepseek-r1/`` and ``language_m-large/``.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import numpy as np

WINDOW_10MIN_S = 600
REASONING_FIELDS = ("input_tokens", "output_tokens", "reason_ratio")


def _read_client_trace(path: Path) -> np.ndarray:
    """Rows ``(window_start_s, requests, interarrival_cv)`` of one ``chunk-N-trace.csv``."""
    table = np.genfromtxt(path, delimiter=",", usecols=(0, 1, 2), ndmin=2)
    if np.isnan(table).any():
        raise ValueError(f"{path}: NaN in window_start_s, rate_rps or interarrival_cv")
    requests = np.rint(table[:, 1] * WINDOW_10MIN_S)
    return np.column_stack([table[:, 0], requests, table[:, 2]])


def pool_reasoning_distributions(reason_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Request-weighted pooled ``(values, probabilities)`` per field over all clients and windows."""
    pooled: dict[str, dict[float, float]] = {field: {} for field in REASONING_FIELDS}
    dataset_paths = sorted(reason_dir.glob("chunk-*-dataset.json"))
    if not dataset_paths:
        raise ValueError(f"{reason_dir}: no chunk-*-dataset.json files")
    for dataset_path in dataset_paths:
        trace = _read_client_trace(dataset_path.with_name(dataset_path.name.replace("dataset.json", "trace.csv")))
        windows = json.loads(dataset_path.read_text())
        window_starts = sorted(int(start) for start in windows)
        for position, start in enumerate(window_starts):
            end = window_starts[position + 1] if position + 1 < len(window_starts) else np.inf
            in_window = (trace[:, 0] >= start) & (trace[:, 0] < end)
            weight = float(trace[in_window, 1].sum())
            if weight == 0:
                continue
            for field in REASONING_FIELDS:
                pmf = ast.literal_eval(windows[str(start)][field])
                if not pmf:
                    raise ValueError(f"{dataset_path}: window {start} has {weight:.0f} requests but no {field}")
                total = sum(pmf.values())
                for value, probability in pmf.items():
                    pooled[field][value] = pooled[field].get(value, 0.0) + weight * probability / total
    result = {}
    for field, masses in pooled.items():
        values = np.array(sorted(masses), dtype=np.float64)
        probabilities = np.array([masses[v] for v in sorted(masses)])
        result[field] = (values, probabilities / probabilities.sum())
    return result


def pool_rate_series(language_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(window_start_s, requests, dispersion_cv)`` summed over all clients, per 10-minute window."""
    trace_paths = sorted(language_dir.glob("chunk-*-trace.csv"))
    if not trace_paths:
        raise ValueError(f"{language_dir}: no chunk-*-trace.csv files")
    traces = [_read_client_trace(path) for path in trace_paths]
    window_start_s = traces[0][:, 0]
    for path, trace in zip(trace_paths, traces):
        if trace.shape != traces[0].shape or not np.array_equal(trace[:, 0], window_start_s):
            raise ValueError(f"{path}: windows differ from {trace_paths[0]}")
    requests = sum(trace[:, 1] for trace in traces)
    weighted_cv_squared = sum(trace[:, 1] * trace[:, 2] ** 2 for trace in traces)
    dispersion_cv = np.sqrt(np.divide(weighted_cv_squared, requests, out=np.ones_like(requests), where=requests > 0))
    return window_start_s, requests, dispersion_cv


def write_pooled_files(servegen_dir: Path, out_dir: Path) -> None:
    """Write ``deepseek_r1_<field>.csv`` (zero-probability values left out; they come only from
    client-windows with no recorded requests) and ``language_m_large_rate.csv`` into ``out_dir``."""
    for field, (values, probabilities) in pool_reasoning_distributions(servegen_dir / "reason_deepseek-r1").items():
        with open(out_dir / f"deepseek_r1_{field}.csv", "w") as out:
            out.write("value,probability\n")
            for value, probability in zip(values, probabilities):
                if probability == 0:
                    continue
                value_text = repr(float(value)) if field == "reason_ratio" else str(int(value))
                out.write(f"{value_text},{probability:.9g}\n")
    window_start_s, requests, dispersion_cv = pool_rate_series(servegen_dir / "language_m-large")
    with open(out_dir / "language_m_large_rate.csv", "w") as out:
        out.write("window_start_s,requests,dispersion_cv\n")
        for start, count, cv in zip(window_start_s, requests, dispersion_cv):
            out.write(f"{int(start)},{int(count)},{cv:.6g}\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m simulator.workloads.servegen_pooling SERVEGEN_DIR OUT_DIR")
    write_pooled_files(Path(sys.argv[1]), Path(sys.argv[2]))
