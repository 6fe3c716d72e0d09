"""Assemble a synthetic workload: arrivals x lengths x priority tiers x SLOs -> ``Request`` stream.

``stream_requests`` makes the requests lazily, a block at a time, with the very draws and
values of one vectorised call per column (``generate_requests`` is its list); a simulation
then holds only the block being read (``Cluster.submit`` takes any iterable).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from simulator.request import MAX_ARRIVAL_S, SLO, Request
from simulator.request_table import RequestTable
from simulator.workloads._checks import count
from simulator.workloads.arrivals import ArrivalProcess
from simulator.workloads.lengths import LengthSampler
from simulator.workloads.priorities import sample_tiers
from simulator.workloads.reasoning import ReasoningLengthSampler

CHUNK_REQUESTS = 65_536
"""Requests per block of ``stream_requests`` (about 2.6 MB of numpy columns)."""

LENGTH_COLUMNS = ("prompt_tokens", "output_tokens", "reasoning_tokens")

Blocks = Callable[[np.random.Generator], Iterator[tuple[np.ndarray, ...]]]
"""One column group (arrivals, lengths or tiers) drawn from a generator, block after block."""


def generate_requests(
    arrivals: ArrivalProcess,
    lengths: LengthSampler | ReasoningLengthSampler,
    num_requests: int,
    rng: np.random.Generator,
    *,
    priorities: str | None = None,
    num_tiers: int = 1,
    slo: SLO | Callable[[int], SLO] | None = None,
) -> list[Request]:
    """``num_requests`` requests with ids 0..n-1 in arrival order.

    ``lengths.sample(n, rng)`` returns ``(prompt, output)`` or ``(prompt, output, reasoning)``.
    ``priorities`` names a tier distribution (``priorities.PRIORITY_DISTRIBUTIONS``) over
    ``num_tiers`` tiers; ``None`` puts every request in tier 0 and needs ``num_tiers == 1``.
    ``slo`` is one ``SLO`` every request holds, or a function tier -> ``SLO`` (called once per
    tier of each block of requests; ``SLO`` is immutable, so a tier's requests share its);
    ``None`` gives no targets. Random draws happen in the fixed order arrivals, lengths, tiers.
    """
    return list(_objects(*_column_blocks(arrivals, lengths, num_requests, rng, priorities, num_tiers, slo,
                                         CHUNK_REQUESTS, keep_drawn=True)))


def stream_requests(
    arrivals: ArrivalProcess,
    lengths: LengthSampler | ReasoningLengthSampler,
    num_requests: int,
    rng: np.random.Generator,
    *,
    priorities: str | None = None,
    num_tiers: int = 1,
    slo: SLO | Callable[[int], SLO] | None = None,
    chunk_requests: int = CHUNK_REQUESTS,
) -> Iterator[Request]:
    """The requests of ``generate_requests`` (same arguments), bit for bit, made lazily in
    blocks of ``chunk_requests``.

    Every draw and check happens in this call: ``rng`` ends where ``generate_requests`` leaves
    it, and bad values raise here, not while the requests are read. A column group is drawn
    block by block and drawn again from a copy of the generator as the requests are read, when
    its source draws one value per request in order: arrival processes with
    ``arrival_time_chunks``, length samplers with ``chunkable = True``, tiers. Any other is
    drawn whole and kept (8 bytes per request and column).
    """
    return _objects(*_column_blocks(arrivals, lengths, num_requests, rng, priorities, num_tiers, slo, chunk_requests,
                                    keep_drawn=False))


def generate_request_table(
    arrivals: ArrivalProcess,
    lengths: LengthSampler | ReasoningLengthSampler,
    num_requests: int,
    rng: np.random.Generator,
    *,
    priorities: str | None = None,
    num_tiers: int = 1,
    slo: SLO | Callable[[int], SLO] | None = None,
) -> RequestTable | list[Request]:
    """The requests of ``generate_requests`` (same arguments, same draws, equal requests) as a
    ``RequestTable``: columns, each ``Request`` object made only when read. ``slo`` (a function)
    is called once per tier. A length sampler whose columns are not integers gives the list of
    ``generate_requests`` instead (the cluster's checks name the bad request)."""
    blocks, slo_for_tier = _column_blocks(arrivals, lengths, num_requests, rng, priorities, num_tiers, slo,
                                          CHUNK_REQUESTS, keep_drawn=True)
    drawn = list(blocks)
    columns = [np.concatenate([block[k] for block in drawn]) if drawn else np.zeros(0) for k in range(5)]
    arrival_s, prompt, output, reasoning, tiers = columns
    if not all(column.dtype.kind in "iu" for column in (prompt, output, reasoning, tiers)) or not drawn:
        return list(_objects(iter(drawn), slo_for_tier))
    slo_by_tier = {tier: _checked_slo(slo_for_tier(tier), tier) for tier in np.unique(tiers).tolist()}
    as_int = {name: np.asarray(column, dtype=np.int64) for name, column in
              (("prompt", prompt), ("output", output), ("reasoning", reasoning), ("tiers", tiers))}
    return RequestTable(np.arange(len(tiers), dtype=np.int64), np.asarray(arrival_s, dtype=np.float64),
                        as_int["prompt"], as_int["output"], as_int["reasoning"], as_int["tiers"], slo_by_tier)


ColumnBlock = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""A block of requests as columns: arrival times, prompt, output and reasoning tokens, tiers."""


def _column_blocks(
    arrivals: ArrivalProcess,
    lengths: LengthSampler | ReasoningLengthSampler,
    num_requests: int,
    rng: np.random.Generator,
    priorities: str | None,
    num_tiers: int,
    slo: SLO | Callable[[int], SLO] | None,
    chunk_requests: int,
    *,
    keep_drawn: bool,
) -> tuple[Iterator[ColumnBlock], Callable[[int], SLO]]:
    """Every draw and check of ``stream_requests`` now; the blocks of columns to read, and the
    tier -> ``SLO`` function. With ``keep_drawn`` every column group is kept as drawn rather than
    drawn again from a copy of the generator (a caller that holds every request anyway)."""
    num_requests = count("num_requests", num_requests)
    num_tiers = count("num_tiers", num_tiers, minimum=1)
    chunk_requests = count("chunk_requests", chunk_requests, minimum=1)
    if priorities is None and num_tiers != 1:
        raise ValueError(f"num_tiers={num_tiers} needs a priority distribution, got priorities=None")
    slo_for_tier = _slo_function(slo)
    sizes = [min(chunk_requests, num_requests - start) for start in range(0, num_requests, chunk_requests)]

    if hasattr(arrivals, "arrival_time_chunks"):
        arrival_stage = _Stage(lambda gen: ((t,) for t in arrivals.arrival_time_chunks(num_requests, gen, chunk_requests)),
                               lazy=True)
    else:
        arrival_stage = _whole(lambda gen: (np.asarray(arrivals.sample_arrival_times(num_requests, gen), dtype=np.float64),),
                               ("arrival times",), sizes)
    if getattr(lengths, "chunkable", False):
        length_stage = _Stage(lambda gen: (lengths.sample(size, gen) for size in sizes), lazy=True)
    else:
        length_stage = _whole(lambda gen: lengths.sample(num_requests, gen), LENGTH_COLUMNS, sizes)
    if priorities is None:
        tier_stage = _Stage(lambda gen: ((np.zeros(size, dtype=np.int64),) for size in sizes), lazy=True)
    else:
        tier_stage = _Stage(lambda gen: ((sample_tiers(priorities, num_tiers, size, gen),) for size in sizes), lazy=True)
    if keep_drawn:
        arrival_stage, length_stage, tier_stage = (stage._replace(lazy=False)
                                                   for stage in (arrival_stage, length_stage, tier_stage))
    replays = [
        _drawn(arrival_stage, rng, _ArrivalCheck(num_requests)),
        _drawn(length_stage, rng, _check_lengths),
        _drawn(tier_stage, rng, lambda block: None),
    ]

    def blocks() -> Iterator[ColumnBlock]:
        for (arrival_s,), sampled, (tiers,) in zip(*(replay() for replay in replays)):
            reasoning = sampled[2] if len(sampled) == 3 else np.zeros(len(tiers), dtype=np.int64)
            yield arrival_s, sampled[0], sampled[1], reasoning, tiers

    return blocks(), slo_for_tier


def _objects(blocks: Iterator[ColumnBlock], slo_for_tier: Callable[[int], SLO]) -> Iterator[Request]:
    """The ``Request`` objects of ``blocks``, ids from 0 (``slo_for_tier`` called once per tier of a block)."""
    first_id = 0
    for arrival_s, prompt, output, reasoning, tiers in blocks:
        tier_list = tiers.tolist()
        slo_by_tier = {tier: _checked_slo(slo_for_tier(tier), tier) for tier in dict.fromkeys(tier_list)}
        yield from map(Request, range(first_id, first_id + len(tier_list)), arrival_s.tolist(), prompt.tolist(),
                       output.tolist(), reasoning.tolist(), tier_list, map(slo_by_tier.__getitem__, tier_list))
        first_id += len(tier_list)


def _checked_slo(slo: object, tier: int) -> SLO:
    """``slo``, the targets ``slo(tier)`` returned, or ``ValueError`` if it is not an ``SLO``."""
    if not isinstance(slo, SLO):
        raise ValueError(f"slo({tier}) returned {slo!r}, not an SLO")
    return slo


def _slo_function(slo: SLO | Callable[[int], SLO] | None) -> Callable[[int], SLO]:
    """tier -> the SLO of its requests (one template for every tier: ``SLO`` is immutable, so
    requests share it)."""
    if slo is None or isinstance(slo, SLO):
        template = SLO() if slo is None else slo
        return lambda tier: template
    if callable(slo):
        return slo
    raise ValueError(f"slo must be None, an SLO or a function tier -> SLO, got {slo!r}")


class _Stage(NamedTuple):
    """A column group's blocks, and whether they can be drawn again from a copy of the generator
    (one draw per request, in order) rather than kept."""

    blocks: Blocks
    lazy: bool


def _whole(draw: Callable[[np.random.Generator], tuple[np.ndarray, ...]], names: tuple[str, ...],
           sizes: list[int]) -> _Stage:
    """A stage drawn in one call, its arrays checked against the whole length and cut in blocks."""
    num_requests = sum(sizes)

    def blocks(gen: np.random.Generator) -> Iterator[tuple[np.ndarray, ...]]:
        columns = draw(gen)
        if names is LENGTH_COLUMNS and len(columns) not in (2, 3):
            raise ValueError(f"lengths.sample must return 2 or 3 arrays, got {len(columns)}")
        for name, values in zip(names, columns):
            if np.shape(values) != (num_requests,):
                raise ValueError(f"{name} has shape {np.shape(values)}, expected ({num_requests},)")
        start = 0
        for size in sizes:
            yield tuple(np.asarray(values)[start:start + size] for values in columns)
            start += size

    return _Stage(blocks, lazy=False)


def _drawn(stage: _Stage, rng: np.random.Generator, check: Callable[[tuple[np.ndarray, ...]], None]
           ) -> Callable[[], Iterator[tuple[np.ndarray, ...]]]:
    """Draw ``stage`` from ``rng`` now, checking every block, and return how to read its blocks
    again: a lazy stage is drawn again from a copy of ``rng`` as it was, a whole one is kept."""
    if stage.lazy:
        start = copy.deepcopy(rng)
        for block in stage.blocks(rng):
            check(block)
        return lambda: stage.blocks(start)
    kept = list(stage.blocks(rng))
    for block in kept:
        check(block)
    return lambda: iter(kept)


class _ArrivalCheck:
    """Arrival times finite, >= 0 and non-decreasing across blocks, the last <= ``MAX_ARRIVAL_S``."""

    def __init__(self, num_requests: int) -> None:
        self.num_requests = num_requests
        self.seen = 0
        self.latest_s = 0.0

    def __call__(self, block: tuple[np.ndarray, ...]) -> None:
        (arrival_s,) = block
        if not np.all(np.isfinite(arrival_s)) or arrival_s[0] < self.latest_s or np.any(np.diff(arrival_s) < 0):
            raise ValueError("arrival times must be finite, >= 0 and non-decreasing")
        self.latest_s = float(arrival_s[-1])
        self.seen += arrival_s.size
        if self.seen == self.num_requests and self.latest_s > MAX_ARRIVAL_S:
            raise ValueError(f"the last of {self.num_requests} arrivals is at {self.latest_s:.4g} s, after the "
                             f"{MAX_ARRIVAL_S:g} s a simulation accepts (simulator.request.MAX_ARRIVAL_S): is the "
                             "arrival rate that low?")


def _check_lengths(sampled: tuple[np.ndarray, ...]) -> None:
    """prompt >= 1, output >= 1, 0 <= reasoning <= output in one block."""
    prompts, outputs = sampled[0], sampled[1]
    if np.any(prompts < 1) or np.any(outputs < 1) or (
        len(sampled) == 3 and (np.any(sampled[2] < 0) or np.any(sampled[2] > outputs))
    ):
        raise ValueError("lengths must satisfy prompt >= 1, output >= 1, 0 <= reasoning <= output")
