"""Readers for the real data shipped in ``simulator/data/`` (sources and licenses in its README files).

Everything is read once and cached; returned arrays are read-only so callers cannot
corrupt the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

VIDUR_LENGTH_FILES = {
    "sharegpt": DATA_DIR / "lengths" / "sharegpt_llama2.csv",
    "arxiv_summarization": DATA_DIR / "lengths" / "arxiv_summarization_llama2.csv",
}
AZURE_TRACE_FILES = {
    "azure_code": DATA_DIR / "azure2023" / "code.csv",
    "azure_conv": DATA_DIR / "azure2023" / "conv.csv",
}
MOONCAKE_TRACE_FILES = {
    "mooncake_conversation": DATA_DIR / "mooncake" / "conversation_trace.jsonl.gz",
    "mooncake_synthetic": DATA_DIR / "mooncake" / "synthetic_trace.jsonl.gz",
}
SERVEGEN_DIR = DATA_DIR / "servegen"
SERVEGEN_RATE_WINDOW_S = 600.0


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@lru_cache(maxsize=None)
def vidur_lengths(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(prompt_tokens, output_tokens)`` int64 rows of a Vidur processed trace (Llama-2 tokenizer)."""
    if name not in VIDUR_LENGTH_FILES:
        raise ValueError(f"unknown Vidur length dataset {name!r}; known: {sorted(VIDUR_LENGTH_FILES)}")
    path = VIDUR_LENGTH_FILES[name]
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    if table.shape[1] != 2 or np.any(table != np.round(table)) or np.any(table < 1):
        raise ValueError(f"{path}: expected two columns of integer token counts >= 1")
    return _read_only(table[:, 0].astype(np.int64)), _read_only(table[:, 1].astype(np.int64))


@lru_cache(maxsize=None)
def servegen_reasoning_pmf(field: str) -> tuple[np.ndarray, np.ndarray]:
    """Pooled ServeGen DeepSeek-R1 ``(values, probabilities)`` of ``input_tokens``,
    ``output_tokens`` or ``reason_ratio`` (see ``servegen_pooling``); renormalised to sum 1."""
    fields = ("input_tokens", "output_tokens", "reason_ratio")
    if field not in fields:
        raise ValueError(f"unknown ServeGen reasoning field {field!r}; known: {list(fields)}")
    table = np.loadtxt(SERVEGEN_DIR / f"deepseek_r1_{field}.csv", delimiter=",", skiprows=1, ndmin=2)
    values, probabilities = table[:, 0], table[:, 1]
    return _read_only(values.copy()), _read_only(probabilities / probabilities.sum())


@dataclass(frozen=True)
class RateSeries:
    """Pooled ServeGen language m-large load: one row per 10-minute window over 14 days.

    ``dispersion_cv`` is ``sqrt(sum_i rate_i cv_i^2 / sum_i rate_i)`` over clients i
    (see ``servegen_pooling``).
    """

    window_start_s: np.ndarray
    rate_rps: np.ndarray
    dispersion_cv: np.ndarray


@lru_cache(maxsize=None)
def servegen_rate_series() -> RateSeries:
    """Total request rate of ServeGen's 162 m-large clients per 10-minute window (196 req/s mean)."""
    table = np.loadtxt(SERVEGEN_DIR / "language_m_large_rate.csv", delimiter=",", skiprows=1, ndmin=2)
    return RateSeries(
        window_start_s=_read_only(table[:, 0].copy()),
        rate_rps=_read_only(table[:, 1] / SERVEGEN_RATE_WINDOW_S),
        dispersion_cv=_read_only(table[:, 2].copy()),
    )
