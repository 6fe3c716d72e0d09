"""Coalesced decode segments: when each iteration of an instance's next segment ends.

Between two events that can change the batch (an arrival, a completion, a preemption, a phase
change, a quantum expiry, a migration), a decode batch is fixed, so an instance plans all of
its iterations at once (a running sum of per-iteration times, in Python for a short segment
and ``cumsum`` for a long one: the float operations one iteration at a time would do) and
schedules a single event at the segment's end. An external
event that lands mid-segment truncates it after the iteration in progress. A planner capped
at one iteration per segment is the slow path the tests use as an oracle (results are
bit-identical).
"""

from __future__ import annotations

import numpy as np

from hardware.latency import IterationLatencyModel
from simulator.kv_blocks import KVBlockManager
from simulator.request import Phase
from simulator.schedulers import LocalScheduler
from simulator.sequence import Sequence

_ONE_TO_N = np.arange(1, 1 << 16, dtype=np.int64)
PYTHON_SUM_MAX_ITERATIONS = 32  # up to here a Python loop beats numpy's per-call cost


class SegmentPlanner:
    """Plans one instance's segments from its latency model, KV pool and scheduler: a prefill
    iteration alone, or up to ``max_iterations`` decode iterations, cut where a sequence ends
    its output or its reasoning, where its priority may change, or where KV memory runs out."""

    __slots__ = ("latency", "kv", "scheduler", "max_iterations", "_priority_may_change")

    def __init__(
        self, latency: IterationLatencyModel, kv: KVBlockManager, scheduler: LocalScheduler, max_iterations: int
    ) -> None:
        self.latency = latency
        self.kv = kv
        self.scheduler = scheduler
        self.max_iterations = max_iterations
        self._priority_may_change = (
            type(scheduler).iterations_until_change is not LocalScheduler.iterations_until_change
        )

    def mixed_iteration_s(self, prefills: list[tuple[Sequence, int]], decode: list[Sequence]) -> float:
        """Latency of one iteration with prefill chunks (their requests enter PREFILL)."""
        prefill_tokens = 0
        pairs = 0.0
        for seq, tokens in prefills:
            prefill_tokens += tokens
            pairs += tokens * (seq.kv_tokens + (tokens + 1) / 2)
            if seq.phase == Phase.WAITING:
                seq.phase = Phase.PREFILL
        context = 0
        for seq in decode:
            context += seq.kv_tokens + 1
        return self.latency.iteration_time_s(prefill_tokens, pairs, len(decode), context)

    def decode_ends(self, now: float, decode: list[Sequence], extra_s: float, single_iteration: bool) -> list[float]:
        """End times of the decode iterations of ``decode`` from ``now`` until the batch could
        change, the first lengthened by ``extra_s`` (swap traffic). After a preemption or
        swap-in (``single_iteration``) the next boundary may admit what this one could not, so
        such a plan runs one iteration."""
        batch = len(decode)
        horizon = 1 if single_iteration else self.max_iterations
        context = 0
        for seq in decode:
            context += seq.kv_tokens
            left = seq.output_tokens - seq.generated_tokens
            if seq.generated_tokens < seq.reasoning_tokens and seq.reasoning_tokens - seq.generated_tokens < left:
                left = seq.reasoning_tokens - seq.generated_tokens
            if left < horizon:
                horizon = left
        if self._priority_may_change and horizon > 1:
            for seq in decode:
                change = self.scheduler.iterations_until_change(seq)
                if change is not None and change < horizon:
                    horizon = change
        # Cheap bound first: each sequence crosses at most ceil((horizon-1)/block_size)+1 blocks.
        if horizon > 1 and batch * (-(-(horizon - 1) // self.kv.block_size) + 1) > self.kv.free_blocks:
            kv = np.fromiter((s.kv_tokens for s in decode), dtype=np.int64, count=batch)
            horizon = self._memory_horizon(kv, horizon)
        base_s, per_token_s = self.latency.decode_coefficients(batch)
        # ends[j] = now + dt[0] + ... + dt[j], summed left to right exactly as one iteration
        # at a time would; dt[j] = base + per_token * (context of iteration j). A short segment
        # (most are cut by the next arrival or completion) sums in Python, a long one in numpy:
        # the same float operations either way.
        if horizon <= PYTHON_SUM_MAX_ITERATIONS:
            ends = []
            end_s = now
            for j in range(1, horizon + 1):
                dt = (context + batch * j) * per_token_s + base_s
                end_s += dt + extra_s if j == 1 else dt
                ends.append(end_s)
            return ends
        times = np.empty(horizon + 1)
        times[0] = now
        np.multiply(context + batch * _ONE_TO_N[:horizon], per_token_s, out=times[1:])
        times[1:] += base_s
        times[1] += extra_s
        times.cumsum(out=times)
        return times[1:].tolist()

    def _memory_horizon(self, kv: np.ndarray, horizon: int) -> int:
        """Largest k <= horizon such that k decode iterations fit in the free KV blocks."""
        block_size = self.kv.block_size
        free = self.kv.free_blocks
        held = -(-(kv + 1) // block_size)  # blocks allocated for the first iteration
        if int((-(-(kv + horizon) // block_size) - held).sum()) <= free:
            return horizon
        low, high = 1, horizon  # 1 iteration always fits (its blocks are allocated)
        while low < high:
            mid = (low + high + 1) // 2
            if int((-(-(kv + mid) // block_size) - held).sum()) <= free:
                low = mid
            else:
                high = mid - 1
        return low


def block_growth(decode: list[Sequence], block_size: int) -> tuple[int, int, list[int]]:
    """For a segment's decode sequences: Σ ceil(kv / b)-style quotients less their blocks, their
    number, and how many have each remainder or more, so that for d = q·b + r iterations
    Σ ceil((kv + d) / b) − blocks = held + count·q + at_least[b − r]."""
    held = 0
    remainders = [0] * (block_size + 1)
    for seq in decode:
        quotient, remainder = divmod(seq.kv_tokens + block_size - 1, block_size)
        held += quotient - seq.blocks
        remainders[remainder] += 1
    at_least = [0] * (block_size + 1)
    for value in range(block_size - 1, -1, -1):
        at_least[value] = at_least[value + 1] + remainders[value]
    return held, len(decode), at_least
