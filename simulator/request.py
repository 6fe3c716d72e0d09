"""The request record: what arrives, what it asks for, and what happened to it."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from enum import IntEnum

MAX_ARRIVAL_S = 1e9
"""Latest arrival time accepted, in seconds (about 32 years). A float's resolution at 1e9 s is
about 1e-7 s; much later, sums such as ``arrival_s + iteration time`` round back to
``arrival_s`` and latencies silently read 0."""


class Phase(IntEnum):
    """Lifecycle of a request. Reasoning requests decode ``REASONING`` then ``ANSWERING``."""

    WAITING = 0
    PREFILL = 1
    REASONING = 2
    ANSWERING = 3
    DONE = 4
    REJECTED = 5


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency targets of one request; ``None`` means no target, else a finite number > 0
    (checked when the SLO is made). Immutable, so requests of one tier share one.

    ``ttft_s`` time to first token, ``tbt_s`` worst gap between tokens (also the TPOT target),
    ``ttfat_s`` time to first *answer* token (reasoning models, PASCAL §V-A),
    ``e2e_s`` end-to-end latency.
    """

    ttft_s: float | None = None
    tbt_s: float | None = None
    ttfat_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        """Every target is None or a finite number > 0 (a NaN target would be met and missed at once)."""
        for name, value in (("ttft_s", self.ttft_s), ("tbt_s", self.tbt_s), ("ttfat_s", self.ttfat_s),
                            ("e2e_s", self.e2e_s)):
            if value is not None and not (type(value) is float and 0.0 < value < math.inf) and (
                isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0)
            ):
                raise ValueError(f"SLO {name} must be a finite number > 0 or None (no target), got {value!r}")


@dataclass(frozen=True, slots=True)
class BlockHashes:
    """The prefix identity of a prompt: ``hashes[i]`` identifies the content of its i-th block of
    ``block_tokens`` tokens (Mooncake's ``hash_ids``: 512-token blocks; Qwen-Bailian's: 16).
    Equal hashes at equal positions after equal predecessors mean an equal prefix; the simulator
    chains them (``simulator.prefix_keys``), as vLLM's automatic prefix caching hashes each block
    with its parent's hash. The hashes cover the prompt (``ceil(prompt / block_tokens)`` of
    them, the last block possibly partial) and may go on over the output (a multi-turn session's
    answer, which the next turn's prompt repeats): at most ``ceil((prompt + output) /
    block_tokens)``; ``Request`` checks both bounds."""

    block_tokens: int
    hashes: tuple[int, ...]

    def __post_init__(self) -> None:
        if isinstance(self.block_tokens, bool) or not isinstance(self.block_tokens, int) or self.block_tokens <= 0:
            raise ValueError(f"BlockHashes.block_tokens must be a positive integer, got {self.block_tokens!r}")
        if not isinstance(self.hashes, tuple):
            raise ValueError(f"BlockHashes.hashes must be a tuple of integers, got {type(self.hashes).__name__}")
        for position, value in enumerate(self.hashes):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"BlockHashes.hashes[{position}] must be an integer, got {value!r}")


@dataclass(slots=True)
class Request:
    """One inference request.

    ``output_tokens`` counts every generated token; of those, the first
    ``reasoning_tokens`` are reasoning (``<think>`` ... ``</think>``) and the rest answer.
    ``tier`` is the priority tier, 0 the highest. ``model`` names the model that must serve it
    (``None``: any instance). Cascade attributes are optional. ``block_hashes`` gives the
    prompt's prefix identity for prefix caching (``None``: it shares nothing); ``session_id``
    the conversation it is a turn of (``None``: none known), for session-affinity routing.
    Timing fields are filled by the simulator (seconds, simulation clock; NaN = not yet).
    """

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    reasoning_tokens: int = 0
    tier: int = 0
    slo: SLO = field(default_factory=SLO)
    model: str | None = None
    difficulty: float = 0.0
    quality_by_model: dict[str, float] | None = None
    block_hashes: BlockHashes | None = None
    session_id: int | None = None

    def __post_init__(self) -> None:
        """``arrival_s`` is a number in [0, ``MAX_ARRIVAL_S``]; ``block_hashes`` (when given)
        cover the prompt and at most the output after it."""
        arrival_s = self.arrival_s
        if not (type(arrival_s) is float and 0.0 <= arrival_s <= MAX_ARRIVAL_S) and (
            isinstance(arrival_s, bool) or not isinstance(arrival_s, numbers.Real) or not 0 <= arrival_s <= MAX_ARRIVAL_S
        ):
            raise ValueError(f"request {self.request_id}: arrival_s must be a number in [0, {MAX_ARRIVAL_S:g}] s, "
                             f"got {arrival_s!r}")
        if self.block_hashes is not None:
            check_block_hashes(self)

    @property
    def answer_tokens(self) -> int:
        return self.output_tokens - self.reasoning_tokens


def check_block_hashes(request: Request) -> None:
    """``request.block_hashes`` is a ``BlockHashes`` with at least ``ceil(prompt / block_tokens)``
    and at most ``ceil((prompt + output) / block_tokens)`` hashes (raises naming the request)."""
    blocks = request.block_hashes
    if not isinstance(blocks, BlockHashes):
        raise ValueError(f"request {request.request_id}: block_hashes must be a BlockHashes or None, got {blocks!r}")
    size = blocks.block_tokens
    low = -(-request.prompt_tokens // size) if isinstance(request.prompt_tokens, int) else 0
    high = -(-(request.prompt_tokens + request.output_tokens) // size) if isinstance(request.output_tokens, int) else low
    if not low <= len(blocks.hashes) <= high:
        raise ValueError(
            f"request {request.request_id}: {len(blocks.hashes)} block hashes for a {request.prompt_tokens}-token prompt "
            f"and {request.output_tokens}-token output in {size}-token blocks (expected {low} to {high})"
        )
