"""Trace files: servegym's own CSV format and the Azure LLM inference trace format.

servegym trace CSV (header row, then one request per row, sorted by arrival):

    arrival_s,prompt_tokens,output_tokens[,reasoning_tokens][,tier]

``arrival_s`` seconds in [0, 1e9] (``simulator.request.MAX_ARRIVAL_S``), non-decreasing;
``prompt_tokens`` and ``output_tokens`` integers >= 1; ``reasoning_tokens`` integer in
[0, output_tokens] (default 0); token counts at most ``MAX_TOKENS``; ``tier`` integer >= 0
(default 0, the highest). SLOs,
difficulty and per-model quality are not part of a trace. Any other column, a missing
required column, a bad value or no row at all raises ``ValueError`` naming file, line and
problem.

Azure format (Azure/AzurePublicDataset ``AzureLLMInferenceTrace_*.csv``): ``TIMESTAMP``
(wall clock, e.g. ``2023-11-16 18:17:03.9799600``), ``ContextTokens`` (prompt),
``GeneratedTokens`` (output).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterable

import numpy as np

from simulator.request import MAX_ARRIVAL_S, Request
from simulator.workloads._checks import count, positive_float
from simulator.workloads.data_files import AZURE_TRACE_FILES

TRACE_REQUIRED_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
TRACE_OPTIONAL_COLUMNS = ("reasoning_tokens", "tier")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
# No model's context comes near a billion tokens; a larger count is a broken row, refused when
# read (it would overflow the int64 columns of the metrics after the whole simulation ran).
MAX_TOKENS = 10**9


def _check_header(path: Path, header: list[str] | None, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    if header is None:
        raise ValueError(f"{path}, line 1: empty file, expected header {','.join(required)}")
    missing = [name for name in required if name not in header]
    if missing:
        raise ValueError(f"{path}, line 1: missing column(s) {missing}; header is {header}")
    unknown = [name for name in header if name not in required + optional]
    if unknown:
        raise ValueError(f"{path}, line 1: unknown column(s) {unknown}; known: {list(required + optional)}")
    duplicated = sorted({name for name in header if header.count(name) > 1})
    if duplicated:
        raise ValueError(f"{path}, line 1: duplicated column(s) {duplicated}")


def _parse_int(text: str, column: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{column} {text!r} is not an integer") from None


def _parse_float(text: str, column: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{column} {text!r} is not a number") from None


def _row_problem(
    arrival_s: float, previous_arrival_s: float, prompt: int, output: int, reasoning: int, tier: int
) -> str | None:
    """What is wrong with one parsed request row, or ``None``."""
    if not math.isfinite(arrival_s) or arrival_s < 0:
        return f"arrival_s {arrival_s!r} is not a finite number >= 0"
    if arrival_s > MAX_ARRIVAL_S:
        return f"arrival_s {arrival_s!r} is after {MAX_ARRIVAL_S:g} s (simulator.request.MAX_ARRIVAL_S)"
    if arrival_s < previous_arrival_s:
        return f"arrival_s {arrival_s!r} is before the previous row's {previous_arrival_s!r} (rows must be sorted)"
    for column, tokens in (("prompt_tokens", prompt), ("output_tokens", output)):
        if tokens < 1:
            return f"{column} {tokens} is {'negative' if tokens < 0 else 'zero'} (must be >= 1)"
        if tokens > MAX_TOKENS:
            return f"{column} {tokens} is above {MAX_TOKENS:,} (simulator.workloads.traces.MAX_TOKENS)"
    if reasoning < 0:
        return f"reasoning_tokens {reasoning} is negative"
    if reasoning > output:
        return f"reasoning_tokens {reasoning} exceeds output_tokens {output}"
    if tier < 0:
        return f"tier {tier} is negative"
    return None


def load_trace_csv(path: str | Path, max_requests: int | None = None) -> list[Request]:
    """Requests of a servegym trace CSV (schema in the module docstring), ids 0..n-1 in row order;
    with ``max_requests``, only the first that many rows are read."""
    path = Path(path)
    if max_requests is not None:
        max_requests = count("max_requests", max_requests, minimum=1)
    requests = []
    with open(path, newline="") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        _check_header(path, header, TRACE_REQUIRED_COLUMNS, TRACE_OPTIONAL_COLUMNS)
        column = {name: header.index(name) for name in header}
        previous_arrival_s = 0.0
        for row in reader:
            if len(requests) == max_requests:
                break
            line = reader.line_num
            try:
                if len(row) != len(header):
                    raise ValueError(f"{len(row)} fields, header has {len(header)}")
                fields = {name: row[index] for name, index in column.items()}
                arrival_s = _parse_float(fields["arrival_s"], "arrival_s")
                prompt = _parse_int(fields["prompt_tokens"], "prompt_tokens")
                output = _parse_int(fields["output_tokens"], "output_tokens")
                reasoning = _parse_int(fields.get("reasoning_tokens", "0"), "reasoning_tokens")
                tier = _parse_int(fields.get("tier", "0"), "tier")
                problem = _row_problem(arrival_s, previous_arrival_s, prompt, output, reasoning, tier)
                if problem is not None:
                    raise ValueError(problem)
            except ValueError as error:
                raise ValueError(f"{path}, line {line}: {error}") from None
            previous_arrival_s = arrival_s
            requests.append(Request(len(requests), arrival_s, prompt, output, reasoning_tokens=reasoning, tier=tier))
    if not requests:
        raise ValueError(f"{path}: the trace has a header but no request rows")
    return requests


def write_trace_csv(requests: Iterable[Request], path: str | Path) -> None:
    """Write ``requests`` as a servegym trace CSV with all five columns; ``arrival_s`` is written
    with ``repr`` so ``load_trace_csv`` reads back the identical float. Raises (before writing
    anything) if a request would make a malformed trace."""
    path = Path(path)
    rows = []
    previous_arrival_s = 0.0
    for position, request in enumerate(requests):
        problem = _row_problem(
            request.arrival_s, previous_arrival_s, request.prompt_tokens, request.output_tokens,
            request.reasoning_tokens, request.tier,
        )
        if problem is not None:
            raise ValueError(f"cannot write request {request.request_id} (position {position}) to {path}: {problem}")
        previous_arrival_s = request.arrival_s
        rows.append(
            f"{float(request.arrival_s)!r},{request.prompt_tokens},{request.output_tokens},"
            f"{request.reasoning_tokens},{request.tier}\n"
        )
    with open(path, "w", newline="") as file:
        file.write(",".join(TRACE_REQUIRED_COLUMNS + TRACE_OPTIONAL_COLUMNS) + "\n")
        file.writelines(rows)


def read_azure_columns(path: str | Path, max_rows: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(arrival_s relative to the first row, prompt_tokens, output_tokens)`` of an Azure-format
    CSV; with ``max_rows``, of its first that many rows only (the rest is not read)."""
    path = Path(path)
    timestamps_ns, prompts, outputs = [], [], []
    with open(path, newline="", encoding="utf-8-sig") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        _check_header(path, header, AZURE_COLUMNS, ())
        column = {name: header.index(name) for name in header}
        for row in reader:
            if len(timestamps_ns) == max_rows:
                break
            line = reader.line_num
            try:
                if len(row) != len(header):
                    raise ValueError(f"{len(row)} fields, header has {len(header)}")
                text = row[column["TIMESTAMP"]]
                try:
                    timestamp_ns = int(np.datetime64(text.strip(), "ns").astype(np.int64))
                except ValueError:
                    raise ValueError(f"TIMESTAMP {text!r} is not a date-time") from None
                prompt = _parse_int(row[column["ContextTokens"]], "ContextTokens")
                output = _parse_int(row[column["GeneratedTokens"]], "GeneratedTokens")
                if timestamps_ns and timestamp_ns < timestamps_ns[-1]:
                    raise ValueError(f"TIMESTAMP {text!r} is before the previous row's (rows must be sorted)")
                for name, tokens in (("ContextTokens", prompt), ("GeneratedTokens", output)):
                    if tokens < 1:
                        raise ValueError(f"{name} {tokens} is {'negative' if tokens < 0 else 'zero'} (must be >= 1)")
                    if tokens > MAX_TOKENS:
                        raise ValueError(f"{name} {tokens} is above {MAX_TOKENS:,} "
                                         "(simulator.workloads.traces.MAX_TOKENS)")
            except ValueError as error:
                raise ValueError(f"{path}, line {line}: {error}") from None
            timestamps_ns.append(timestamp_ns)
            prompts.append(prompt)
            outputs.append(output)
    if not timestamps_ns:
        raise ValueError(f"{path}: no requests after the header")
    relative_ns = np.array(timestamps_ns, dtype=np.int64) - timestamps_ns[0]
    return relative_ns / 1e9, np.array(prompts, dtype=np.int64), np.array(outputs, dtype=np.int64)


def load_azure_trace(
    source: str | Path,
    *,
    time_scale: float = 1.0,
    target_rate_rps: float | None = None,
    max_requests: int | None = None,
) -> list[Request]:
    """Requests of an Azure LLM inference trace, arrivals relative to its first request.

    ``source`` is ``"azure_code"`` / ``"azure_conv"`` (the shipped Azure 2023 traces) or a
    path. ``max_requests`` keeps the first that many. Then arrival times are multiplied by
    ``time_scale``, or, with ``target_rate_rps``, rescaled so the mean rate (n - 1) / span
    equals it, e.g. Cauchy's "Azure trace scaled to QPS 54/50/6" (Cauchy §4.1).
    """
    if isinstance(source, str) and source in AZURE_TRACE_FILES:
        path = AZURE_TRACE_FILES[source]
    elif Path(source).is_file():
        path = Path(source)
    else:
        raise ValueError(
            f"unknown Azure trace {str(source)!r}: not one of {sorted(AZURE_TRACE_FILES)} and no such file"
        )
    time_scale = positive_float("time_scale", time_scale)
    if max_requests is not None:
        max_requests = count("max_requests", max_requests, minimum=1)
    arrival_s, prompts, outputs = read_azure_columns(path, max_requests)
    if target_rate_rps is not None:
        target_rate_rps = positive_float("target_rate_rps", target_rate_rps)
        if time_scale != 1.0:
            raise ValueError(
                f"give time_scale or target_rate_rps, not both (got {time_scale!r} and {target_rate_rps!r})"
            )
        if arrival_s.size < 2 or arrival_s[-1] == 0:
            raise ValueError(f"{path}: target_rate_rps needs >= 2 requests spanning > 0 s, got {arrival_s.size}")
        time_scale = (arrival_s.size - 1) / arrival_s[-1] / target_rate_rps
    return [
        Request(request_id, float(arrival * time_scale), int(prompt), int(output))
        for request_id, (arrival, prompt, output) in enumerate(zip(arrival_s, prompts, outputs))
    ]
