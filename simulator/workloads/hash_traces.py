"""Traces whose requests carry prefix identity: Mooncake's JSON-lines format.

One request per line (Mooncake FAST'25 release, ``FAST25-release/traces/``)::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ..., 2354]}

``timestamp`` milliseconds from the trace start (non-decreasing), ``input_length`` and
``output_length`` tokens (integers >= 1), ``hash_ids`` the prompt's blocks of 512 tokens:
exactly ``ceil(input_length / 512)`` integers >= 0, the last block possibly partial. In
Mooncake's traces an id names the whole prefix up to its block, so an id never repeats inside
one request and always follows the same id (or stands first) wherever it appears; the reader
checks that too. Any other key, a missing key, a bad value or no row at all raises
``ValueError`` naming the file, the line and the problem. A file ending in ``.gz`` is read
through ``gzip`` (the shipped copies are compressed).

``load_hash_trace`` turns rows into ``Request`` objects with ``BlockHashes`` (ids 0..n-1 in row
order); the shipped Mooncake traces are named ``mooncake_conversation`` and
``mooncake_synthetic`` (``simulator/data/mooncake/``: sources, license and credit there).
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from simulator.request import MAX_ARRIVAL_S, BlockHashes, Request
from simulator.workloads._checks import count, positive_float
from simulator.workloads.data_files import MOONCAKE_TRACE_FILES

MOONCAKE_BLOCK_TOKENS = 512
HASH_TRACE_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class HashTrace:
    """A hash-list trace read and checked: arrival seconds, prompt and output tokens per row,
    and each row's block hashes (read-only)."""

    path: Path
    block_tokens: int
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    hashes: tuple[tuple[int, ...], ...]

    def __len__(self) -> int:
        return len(self.hashes)


def _integer(row: dict[str, Any], key: str, minimum: int) -> int:
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} {value!r} is not an integer")
    if value < minimum:
        raise ValueError(f"{key} {value} is below {minimum}")
    return value


def _row(text: str, previous_ms: float, block_tokens: int, parent_of: dict[int, int]) -> tuple[float, int, int, tuple[int, ...]]:
    """One line parsed and checked against the rows before it (``parent_of``: each id seen so far
    and the id before it, -1 at the start; updated)."""
    try:
        row = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not a JSON object ({error.msg})") from None
    if not isinstance(row, dict):
        raise ValueError(f"not a JSON object but {type(row).__name__}")
    missing = [key for key in HASH_TRACE_KEYS if key not in row]
    if missing:
        raise ValueError(f"missing key(s) {missing}")
    unknown = sorted(set(row) - set(HASH_TRACE_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; known: {list(HASH_TRACE_KEYS)}")
    timestamp = row["timestamp"]
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not math.isfinite(timestamp) or timestamp < 0:
        raise ValueError(f"timestamp {timestamp!r} is not a finite number >= 0 (milliseconds)")
    if timestamp < previous_ms:
        raise ValueError(f"timestamp {timestamp!r} is before the previous row's {previous_ms!r} (rows must be sorted)")
    if timestamp / 1000.0 > MAX_ARRIVAL_S:
        raise ValueError(f"timestamp {timestamp!r} ms is after {MAX_ARRIVAL_S:g} s (simulator.request.MAX_ARRIVAL_S)")
    prompt = _integer(row, "input_length", 1)
    output = _integer(row, "output_length", 1)
    ids = row["hash_ids"]
    if not isinstance(ids, list):
        raise ValueError(f"hash_ids is not a list but {type(ids).__name__}")
    expected = -(-prompt // block_tokens)
    if len(ids) != expected:
        raise ValueError(f"{len(ids)} hash_ids for input_length {prompt}: expected ceil({prompt} / {block_tokens}) = {expected}")
    parent = -1
    for position, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"hash_ids[{position}] {value!r} is not an integer >= 0")
        seen = parent_of.get(value)
        if seen is None:
            parent_of[value] = parent
        elif seen != parent:
            before = "the start" if seen == -1 else f"id {seen}"
            here = "the start" if parent == -1 else f"id {parent}"
            raise ValueError(f"hash_ids[{position}] {value} follows {here} here but {before} on an earlier line "
                             "(an id names a whole prefix)")
        parent = value
    if len(set(ids)) != len(ids):
        raise ValueError("an id repeats within hash_ids (an id names a whole prefix)")
    return timestamp / 1000.0, prompt, output, tuple(ids)


@lru_cache(maxsize=8)
def read_hash_trace(path: str | Path, block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> HashTrace:
    """Every row of a hash-list trace (format in the module docstring), checked; cached per path."""
    path = Path(path)
    block_tokens = count("block_tokens", block_tokens, minimum=1)
    opener = gzip.open if path.suffix == ".gz" else open
    arrival_s: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    hashes: list[tuple[int, ...]] = []
    parent_of: dict[int, int] = {}
    previous_ms = 0.0
    with opener(path, "rt", encoding="utf-8") as file:
        for line, text in enumerate(file, start=1):
            if not text.strip():
                raise ValueError(f"{path}, line {line}: empty line")
            try:
                arrival, prompt, output, ids = _row(text, previous_ms, block_tokens, parent_of)
            except ValueError as error:
                raise ValueError(f"{path}, line {line}: {error}") from None
            previous_ms = arrival * 1000.0
            arrival_s.append(arrival)
            prompts.append(prompt)
            outputs.append(output)
            hashes.append(ids)
    if not hashes:
        raise ValueError(f"{path}: no request rows")
    columns = [np.array(values) for values in (arrival_s, prompts, outputs)]
    for column in columns:
        column.flags.writeable = False
    return HashTrace(path, block_tokens, columns[0], columns[1], columns[2], tuple(hashes))


def hash_trace_path(source: str | Path) -> Path:
    """The file of a shipped trace name (``MOONCAKE_TRACE_FILES``) or of a path."""
    if isinstance(source, str) and source in MOONCAKE_TRACE_FILES:
        return MOONCAKE_TRACE_FILES[source]
    if Path(source).is_file():
        return Path(source)
    raise ValueError(f"unknown hash trace {str(source)!r}: not one of {sorted(MOONCAKE_TRACE_FILES)} and no such file")


def load_hash_trace(
    source: str | Path,
    *,
    first_request: int = 0,
    max_requests: int | None = None,
    time_scale: float = 1.0,
    target_rate_rps: float | None = None,
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> list[Request]:
    """Requests with ``block_hashes`` from a hash-list trace: ``source`` is ``mooncake_conversation``,
    ``mooncake_synthetic`` or a path. Rows ``first_request`` .. (+ ``max_requests``) are kept,
    arrivals made relative to the first kept one, then multiplied by ``time_scale`` or rescaled so
    the mean rate (n - 1) / span is ``target_rate_rps``."""
    trace = read_hash_trace(hash_trace_path(source), block_tokens)
    first_request = count("first_request", first_request)
    if first_request >= len(trace):
        raise ValueError(f"first_request {first_request} is past the {len(trace)} rows of {trace.path}")
    stop = len(trace) if max_requests is None else first_request + count("max_requests", max_requests, minimum=1)
    if stop > len(trace):
        raise ValueError(f"{trace.path} has {len(trace)} rows; rows {first_request} to {stop - 1} asked")
    time_scale = positive_float("time_scale", time_scale)
    arrival_s = trace.arrival_s[first_request:stop] - trace.arrival_s[first_request]
    if target_rate_rps is not None:
        target_rate_rps = positive_float("target_rate_rps", target_rate_rps)
        if time_scale != 1.0:
            raise ValueError(f"give time_scale or target_rate_rps, not both (got {time_scale!r} and {target_rate_rps!r})")
        if arrival_s.size < 2 or arrival_s[-1] == 0:
            raise ValueError(f"{trace.path}: target_rate_rps needs >= 2 requests spanning > 0 s, got {arrival_s.size}")
        time_scale = (arrival_s.size - 1) / arrival_s[-1] / target_rate_rps
    return [
        Request(request_id, float(arrival * time_scale), int(prompt), int(output),
                block_hashes=BlockHashes(block_tokens, ids))
        for request_id, (arrival, prompt, output, ids) in enumerate(zip(
            arrival_s.tolist(), trace.prompt_tokens[first_request:stop].tolist(),
            trace.output_tokens[first_request:stop].tolist(), trace.hashes[first_request:stop]))
    ]
