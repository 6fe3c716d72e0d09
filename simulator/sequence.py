"""Runtime state of a request inside the simulator (mutable; the ``Request`` stays as it arrived)."""

from __future__ import annotations

from enum import IntEnum

from simulator.outcome import RequestOutcome
from simulator.request import Phase, Request

NAN = float("nan")


class Residency(IntEnum):
    """Where a sequence's KV cache lives right now."""

    QUEUED = 0  # no KV anywhere (new, or preempted by recompute)
    RUNNING = 1  # KV in GPU blocks, in the batch
    SWAPPED = 2  # KV in host memory (preempted by swap)
    MOVING = 3  # in transit between instances (migration / PD transfer)


class Sequence:
    """A request being served: token counters, KV residency and the timestamps metrics need.

    Invariant while decoding: ``kv_tokens == prompt_tokens + generated_tokens - 1`` (the last
    generated token's KV is appended by the next decode iteration). A prefill pass computes
    ``prefill_target_tokens`` KV entries and emits one token; with a prefix-cache hit it starts
    at ``kv_tokens`` = the cached tokens. ``blocks`` counts every GPU block it reads, its own and
    those shared through the prefix cache (``cached_keys``).
    """

    __slots__ = (
        "request", "request_id", "arrival_s", "prompt_tokens", "output_tokens", "reasoning_tokens", "tier",
        "kv_tokens", "generated_tokens", "blocks", "residency", "phase", "demoted", "quantum_start_tokens",
        "instance_id", "first_scheduled_s", "first_token_s", "first_answer_token_s", "reasoning_end_s", "last_token_s",
        "max_tbt_s", "preempted_since_s", "preempted_s", "num_preemptions", "num_migrations", "token_curve",
        "queue_order", "pd_handoff", "block_keys", "block_tokens", "cached_keys",
    )

    def __init__(self, request: Request, record_token_curve: bool) -> None:
        self.request = request
        self.request_id = request.request_id
        self.arrival_s = request.arrival_s
        self.prompt_tokens = request.prompt_tokens
        self.output_tokens = request.output_tokens
        self.reasoning_tokens = request.reasoning_tokens
        self.tier = request.tier
        self.kv_tokens = 0
        self.generated_tokens = 0
        self.blocks = 0
        self.residency = Residency.QUEUED
        self.phase = Phase.WAITING
        self.demoted = False
        self.quantum_start_tokens = 0
        self.instance_id = -1
        self.first_scheduled_s = NAN
        self.first_token_s = NAN
        self.first_answer_token_s = NAN
        self.reasoning_end_s = NAN
        self.last_token_s = NAN
        self.max_tbt_s = 0.0
        self.preempted_since_s = NAN
        self.preempted_s = 0.0
        self.num_preemptions = 0
        self.num_migrations = 0
        self.token_curve: list[tuple[float, int]] | None = [] if record_token_curve else None
        self.queue_order = 0
        self.pd_handoff = False
        self.block_keys: tuple[int, ...] | None = None
        """Chained keys of its blocks of ``block_tokens`` tokens (``simulator.prefix_keys``), set by
        the cluster when the request carries ``block_hashes``; ``None``: it shares nothing."""
        self.block_tokens = 0
        self.cached_keys: list[int] | tuple[()] = ()
        """The leading ``block_keys`` whose prefix-cache entries it references now
        (``simulator.prefix_cache``): blocks shared, not its own."""

    @property
    def prefill_target_tokens(self) -> int:
        """KV entries a prefill pass must hold: the prompt plus every token generated so far."""
        return self.prompt_tokens + self.generated_tokens

    @property
    def remaining_prefill_tokens(self) -> int:
        return self.prefill_target_tokens - self.kv_tokens

    @property
    def in_decode(self) -> bool:
        return self.generated_tokens > 0 and self.kv_tokens == self.prompt_tokens + self.generated_tokens - 1

    @property
    def decode_phase(self) -> Phase:
        """Phase of the next token to generate."""
        return Phase.REASONING if self.generated_tokens < self.reasoning_tokens else Phase.ANSWERING

    def on_tokens(self, first_time_s: float, last_time_s: float, count: int, last_gap_s: float) -> None:
        """Record ``count`` tokens delivered, the first at ``first_time_s``, the last at ``last_time_s``.

        ``last_gap_s`` is the largest gap between consecutive tokens inside the run (decode
        iterations lengthen as context grows, so it is the run's last iteration time).
        """
        before = self.generated_tokens
        if before == 0:
            self.first_token_s = first_time_s
        else:
            gap = first_time_s - self.last_token_s
            if gap > self.max_tbt_s:
                self.max_tbt_s = gap
        if count > 1 and last_gap_s > self.max_tbt_s:
            self.max_tbt_s = last_gap_s
        after = before + count
        if after == self.reasoning_tokens:
            self.reasoning_end_s = last_time_s
        if self.reasoning_tokens and before <= self.reasoning_tokens < after:
            k = self.reasoning_tokens - before  # 0-based index inside the run of the first answer token
            if k != 0:
                raise RuntimeError(f"request {self.request_id}: reasoning ended inside a coalesced run")
            self.first_answer_token_s = first_time_s
        elif not self.reasoning_tokens and before == 0:
            self.first_answer_token_s = first_time_s
        self.generated_tokens = after
        self.last_token_s = last_time_s
        if self.token_curve is not None:
            self.token_curve.append((first_time_s, before + 1))
            if count > 1:
                self.token_curve.append((last_time_s, after))

    def outcome(self, finish_s: float, rejected_reason: str | None = None) -> RequestOutcome:
        curve = tuple(self.token_curve) if self.token_curve is not None else ()
        return RequestOutcome(
            request_id=self.request_id,
            tier=self.tier,
            instance_id=self.instance_id,
            arrival_s=self.arrival_s,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            reasoning_tokens=self.reasoning_tokens,
            first_scheduled_s=self.first_scheduled_s,
            first_token_s=self.first_token_s,
            first_answer_token_s=self.first_answer_token_s,
            reasoning_end_s=self.reasoning_end_s,
            finish_s=finish_s,
            max_tbt_s=self.max_tbt_s,
            preempted_s=self.preempted_s,
            num_preemptions=self.num_preemptions,
            num_migrations=self.num_migrations,
            token_curve=curve,
            slo=self.request.slo,
            rejected_reason=rejected_reason,
        )
