"""One model replica on TP x PP GPUs of one type: paged KV memory and continuous batching.

``Instance`` owns a replica's state (its queues, KV pool and the segment in progress) and its
events (requests entering or leaving, iteration boundaries); the rest lives beside it:
- its local scheduler forms each batch (``simulator.schedulers``, as Vidur's replica
  schedulers), with ``simulator.admission`` moving sequences into and out of KV blocks;
- ``simulator.segments`` plans *coalesced decode segments*, many decode iterations of a fixed
  batch under one event, for speed; ``coalesce=False`` plans one iteration per event, the
  slow path the tests use as an oracle (results are bit-identical);
- ``simulator.queue_gate`` holds new prefills until a minimum queue length is reached
  (CascadeServe's batching, CascadeServe §4.5; ``set_min_queue_length``), off by default;
- ``simulator.pacer`` gives PASCAL's token-pacer SLO flag (``answering_behind_pace``).

This class runs one batch at a time through all of its GPUs; a ``pp > 1`` replica that keeps
several microbatches in its pipeline is ``simulator.pipeline.PipelinedInstance``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from hardware.engines import DEFAULT_ENGINE, EngineProfile, get_engine
from hardware.gpus import GPUSpec, get_gpu
from hardware.latency import IterationLatencyModel, kv_capacity_tokens, latency_model
from hardware.models import ModelSpec
from simulator import pacer
from simulator.context import CONTEXT_REJECT_REASON, fit_to_context
from simulator.events import EventQueue
from simulator.instance_arrays import RUNNING, SWAPPED, WAITING, InstanceArrays
from simulator.kv_blocks import KVBlockManager, blocks_for_tokens
from simulator.prefix_cache import PrefixCache
from simulator.queue_gate import QueueGate
from simulator.queue_order import take_from_queue
from simulator.request import Phase
from simulator.schedulers import make_scheduler
from simulator.segments import SegmentPlanner, block_growth
from simulator.sequence import Residency, Sequence


class Role(str, Enum):
    AGGREGATED = "aggregated"
    PREFILL = "prefill"
    DECODE = "decode"


class Lifecycle(str, Enum):
    STARTING = "starting"
    SERVING = "serving"
    DRAINING = "draining"
    STOPPED = "stopped"


@dataclass(frozen=True)
class InstanceConfig:
    """What one replica is: hardware, model, parallelism, serving engine, memory and batching
    limits, scheduler.

    ``engine`` names the serving engine it runs (``hardware.engines``; default: a current vLLM),
    or is an ``EngineProfile`` itself (a calibration trying out a profile).
    The engine sets the iteration latency (its kernels and CPU time) and the batching defaults
    that the fields left at ``None`` take: ``scheduler``, ``max_batch_size`` (vLLM's
    ``max_num_seqs``), ``max_batched_tokens`` (the prompt tokens of one prefill iteration, a
    longer prompt still running alone as vLLM requires; with the engine's chunked-prefill
    scheduler also the chunk budget) and ``preemption`` (``"recompute"`` or ``"swap"``; still
    ``None`` after that: the scheduler's default). ``Instance`` holds the config with those
    fields resolved (``resolved``). ``kv_blocks`` fixes the KV pool's size in blocks (a
    simulator's stated pool, e.g. Vidur's ``num_blocks``); ``None`` sizes it from GPU memory.
    ``scheduler_options`` go to the scheduler (``quantum_tokens``, ``demotion_kv_tokens``,
    ``chunk_tokens``).

    ``cpu_overhead_s`` replaces the engine's CPU time per iteration by a fixed one (0 models an
    engine that hides it behind the GPU, or Vidur's own default; see ``hardware/latency.py``).
    ``microbatches_in_flight`` caps the batches a ``pp > 1`` replica keeps in its pipeline at
    once (``None``: ``pp``, one per stage, as vLLM's virtual engines and Vidur do; 1: one batch
    passes through all stages before the next starts); each microbatch holds at most
    ``max_batch_size // microbatches_in_flight`` sequences (Vidur's ``batch_size_cap //
    num_stages``). See ``simulator/pipeline.py``.

    ``prefix_caching`` turns on automatic prefix caching (``simulator.prefix_cache``: requests
    that carry ``block_hashes`` share the KV of equal prefixes); ``None`` takes the engine's
    (vLLM V1: on). ``host_cache_gb`` (with it) keeps evicted prefixes in that many GB of host
    memory, a second tier loaded over the GPUs' host links instead of recomputed.
    """

    gpu: str
    model: str
    tp: int = 1
    pp: int = 1
    dtype: str = "fp16"
    engine: str | EngineProfile = DEFAULT_ENGINE
    scheduler: str | None = None
    block_size: int = 16
    memory_utilization: float = 0.9
    max_batch_size: int | None = None
    max_batched_tokens: int | None = None
    preemption: str | None = None
    role: Role = Role.AGGREGATED
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    kv_blocks: int | None = None
    cpu_overhead_s: float | None = None
    microbatches_in_flight: int | None = None
    prefix_caching: bool | None = None
    host_cache_gb: float = 0.0

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def pipeline_depth(self) -> int:
        """Microbatches in flight at most: ``microbatches_in_flight``, or ``pp`` when unset."""
        return self.pp if self.microbatches_in_flight is None else self.microbatches_in_flight

    def resolved(self) -> InstanceConfig:
        """This config with the engine's defaults in the fields left at ``None`` (batching, prefix
        caching; ``hardware.engines``); a chunked-prefill scheduler taken from the engine chunks
        at the engine's token budget. Validates the result."""
        self.validate()
        engine = get_engine(self.engine)
        batching = engine.batching(get_gpu(self.gpu))
        options = self.scheduler_options
        if self.scheduler is None and batching.scheduler == "sarathi" and "chunk_tokens" not in options:
            budget = batching.max_num_batched_tokens if self.max_batched_tokens is None else self.max_batched_tokens
            options = {**options, "chunk_tokens": budget}
        resolved = replace(
            self,
            scheduler=batching.scheduler if self.scheduler is None else self.scheduler,
            max_batch_size=batching.max_num_seqs if self.max_batch_size is None else self.max_batch_size,
            max_batched_tokens=(
                batching.max_num_batched_tokens if self.max_batched_tokens is None else self.max_batched_tokens
            ),
            preemption=batching.preemption if self.preemption is None else self.preemption,
            scheduler_options=options,
            prefix_caching=engine.prefix_caching if self.prefix_caching is None else self.prefix_caching,
        )
        resolved.validate()
        return resolved

    def validate(self) -> None:
        """Check every field; the batching fields may still be ``None`` (the engine's)."""
        get_engine(self.engine)
        for name in ("tp", "pp", "block_size", "max_batch_size", "max_batched_tokens"):
            value = getattr(self, name)
            if value is None and name in ("max_batch_size", "max_batched_tokens"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"InstanceConfig.{name} must be a positive integer, got {value!r}")
        if self.kv_blocks is not None and (
            not isinstance(self.kv_blocks, int) or isinstance(self.kv_blocks, bool) or self.kv_blocks <= 0
        ):
            raise ValueError(f"InstanceConfig.kv_blocks must be a positive integer or None, got {self.kv_blocks!r}")
        overhead = self.cpu_overhead_s
        if overhead is not None and (
            isinstance(overhead, bool) or not isinstance(overhead, (int, float)) or not 0.0 <= overhead < float("inf")
        ):
            raise ValueError(f"InstanceConfig.cpu_overhead_s must be a finite number >= 0 (seconds), got {overhead!r}")
        depth = self.microbatches_in_flight
        if depth is not None and (
            not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= self.pp
        ):
            raise ValueError(
                f"InstanceConfig.microbatches_in_flight must be None or an integer in [1, pp={self.pp}], got {depth!r}"
            )
        if self.max_batch_size is not None and self.max_batch_size < self.pipeline_depth:
            raise ValueError(
                f"InstanceConfig.max_batch_size={self.max_batch_size} is below the {self.pipeline_depth} microbatches "
                "in flight: each microbatch needs at least one sequence"
            )
        if self.prefix_caching is not None and not isinstance(self.prefix_caching, bool):
            raise ValueError(f"InstanceConfig.prefix_caching must be True, False or None, got {self.prefix_caching!r}")
        host = self.host_cache_gb
        if isinstance(host, bool) or not isinstance(host, (int, float)) or not 0.0 <= host < float("inf"):
            raise ValueError(f"InstanceConfig.host_cache_gb must be a finite number >= 0 (GB), got {host!r}")
        if host and self.prefix_caching is False:
            raise ValueError(f"InstanceConfig.host_cache_gb={host!r} needs prefix_caching=True (it holds evicted prefixes)")
        if not 0.0 < self.memory_utilization <= 1.0:
            raise ValueError(f"memory_utilization must be in (0, 1], got {self.memory_utilization}")
        if self.preemption not in (None, "recompute", "swap"):
            raise ValueError(f"preemption must be 'recompute' or 'swap', got {self.preemption!r}")
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise ValueError(f"InstanceConfig.scheduler must be a scheduler name or None, got {self.scheduler!r}")
        Role(self.role)


class InstanceHost(Protocol):
    """What an instance tells the cluster around it."""

    def on_complete(self, instance: Instance, seq: Sequence) -> None: ...
    def on_reject(self, seq: Sequence, reason: str) -> None: ...
    def on_phase_change(self, instance: Instance, seq: Sequence) -> None: ...
    def on_prefill_done(self, instance: Instance, seq: Sequence) -> None: ...
    def on_idle(self, instance: Instance) -> None: ...


class Instance:
    """A serving replica. Requests enter with ``enqueue``; the cluster is told of completions.

    ``waiting`` and ``swapped`` are ordered on insert rather than re-sorted at every
    iteration (``simulator.queue_order``): ``waiting_ordered`` / ``swapped_ordered`` count
    their leading entries in priority order, and the scheduler sorts only the entries added
    since into place. Only this class, its scheduler and ``simulator.admission`` add to or
    remove from the queues.
    """

    def __init__(
        self,
        instance_id: int,
        config: InstanceConfig,
        events: EventQueue,
        host: InstanceHost,
        *,
        coalesce: bool = True,
        max_segment_iterations: int = 1024,
    ) -> None:
        self.config = config
        """The config as given (batching fields ``None`` where the engine decides)."""
        config = config.resolved()
        self.settings = config
        """The config with the engine's batching defaults filled in (``InstanceConfig.resolved``)."""
        self.instance_id = instance_id
        self.events = events
        self.host = host
        self.role = Role(config.role)
        self.latency: IterationLatencyModel = latency_model(
            config.gpu, config.model, config.tp, config.pp, config.dtype, config.engine, config.cpu_overhead_s
        )
        self.gpu: GPUSpec = self.latency.gpu
        self.model: ModelSpec = self.latency.model
        capacity = kv_capacity_tokens(
            self.gpu, self.model, config.tp, config.pp, config.dtype, config.memory_utilization
        )
        blocks = capacity // config.block_size if config.kv_blocks is None else config.kv_blocks
        self.kv = KVBlockManager(blocks, config.block_size)
        self.prefix_cache: PrefixCache | None = None
        """Cached prefixes (``InstanceConfig.prefix_caching``), also reachable as ``kv.cache``."""
        if config.prefix_caching:
            host_tokens = int(config.host_cache_gb * 1e9 / self.model.kv_bytes_per_token)
            self.prefix_cache = PrefixCache(self.kv, host_tokens // config.block_size)
        self.scheduler = make_scheduler(config.scheduler, **config.scheduler_options)
        self.preemption = config.preemption or self.scheduler.default_preemption
        self.planner = SegmentPlanner(
            self.latency, self.kv, self.scheduler, max_segment_iterations if coalesce else 1
        )
        self.gate = QueueGate(events, self.poke)
        self.arrays: InstanceArrays | None = None
        """The cluster's per-instance arrays whose row ``instance_id`` this instance keeps current."""
        self._lifecycle = Lifecycle.SERVING
        self._growth_key: tuple[int, int, int] | None = None
        self._growth: tuple[int, int, list[int]] = (0, 0, [])
        self.max_batch_size = config.max_batch_size
        """Sequences one batch may hold (a microbatch's share in ``simulator.pipeline``)."""
        self.max_batched_tokens = config.max_batched_tokens
        """Prompt tokens of one prefill iteration (a longer prompt still runs alone)."""
        self._flying: set[int] = set()
        """``id`` of the sequences inside a batch still in the pipeline (``simulator.pipeline``)."""
        self._flying_blocks = 0
        self._swap_s_per_token = self.model.kv_bytes_per_token / (self.gpu.host_link_gbps * 1e9 * config.num_gpus)
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.swapped: list[Sequence] = []
        self.waiting_ordered = 0
        """Leading entries of ``waiting`` in priority order."""
        self.swapped_ordered = 0
        """Leading entries of ``swapped`` in priority order."""
        self.swap_tokens = 0
        """KV tokens swapped in or out since the last batch formed: the next iteration waits for them."""
        self.memory_moved = False
        """A preemption or swap-in since the last batch formed: the next decode plan runs one iteration."""
        self.busy = False
        self._version = 0
        self._seg_start_s = 0.0
        self._seg_ends: list[float] = []
        self._seg_pos = 0
        self._seg_len = 0
        self._seg_decode: list[Sequence] = []
        self._seg_prefill: list[tuple[Sequence, int]] = []
        self._detach: list[tuple[Sequence, Callable[[Sequence], None], Callable[[Sequence], None] | None]] = []
        self.busy_time_s = 0.0
        self.iterations = 0
        self.context_truncated = 0
        """Requests whose output this instance capped at its model's context (``simulator.context``)."""

    # ----------------------------------------------------------------- queries
    @property
    def lifecycle(self) -> Lifecycle:
        return self._lifecycle

    @lifecycle.setter
    def lifecycle(self, value: Lifecycle) -> None:
        self._lifecycle = value
        if self.arrays is not None:
            self.arrays.set_lifecycle(self.instance_id, value.value)

    def track(self, arrays: InstanceArrays) -> None:
        """Keep row ``instance_id`` of ``arrays`` current from now on (queues, KV, lifecycle)."""
        if self.sequences():
            raise ValueError(f"instance {self.instance_id} already holds requests; track it before it serves")
        arrays.add_row(self.instance_id, self.kv.total_blocks, self.kv.watermark_blocks, self.kv.block_size,
                       self.role.value)
        self.arrays = arrays
        self.kv.track(arrays, self.instance_id)
        self.lifecycle = self._lifecycle

    @property
    def swap_s_per_token(self) -> float:
        """Seconds one KV token takes over the host links when swapped in or out."""
        return self._swap_s_per_token

    @property
    def num_requests(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)

    @property
    def max_request_tokens(self) -> int:
        """Largest prompt + output a request may have here (the KV it needs at its end)."""
        return (self.kv.total_blocks - self.kv.watermark_blocks) * self.kv.block_size

    @property
    def batch_capacity_blocks(self) -> int:
        """KV blocks a new batch may hold: the pool less those of sequences inside a batch still
        in the pipeline (``simulator.pipeline``)."""
        return self.kv.total_blocks - self._flying_blocks

    def sequences(self) -> list[Sequence]:
        return self.running + self.swapped + self.waiting

    def request_counts(self, overdue_before_s: float, fresh_tokens: int) -> tuple[int, int, int, int, int]:
        """Its requests now: (reasoning, answering, fresh answering: answered fewer than
        ``fresh_tokens`` tokens since reasoning, demoted reasoning (PASCAL), answers overdue:
        reasoning ended before ``overdue_before_s`` and not running since)."""
        reasoning = answering = fresh = demoted = overdue = 0
        for seq in self.sequences():
            if seq.reasoning_tokens and seq.generated_tokens < seq.reasoning_tokens:
                reasoning += 1
                demoted += seq.demoted
            elif seq.generated_tokens > 0:
                answering += 1
                if (
                    seq.generated_tokens == seq.reasoning_tokens
                    and seq.residency != Residency.RUNNING
                    and seq.reasoning_end_s < overdue_before_s
                ):
                    overdue += 1
                if seq.reasoning_tokens and seq.generated_tokens - seq.reasoning_tokens < fresh_tokens:
                    fresh += 1
        return reasoning, answering, fresh, demoted, overdue

    def migration_candidate(self, excluded: Collection[int] = ()) -> Sequence | None:
        """The request this instance would migrate out (Llumnix-K §3.5: "queued requests (no KV
        state, cheap to migrate) first, then low-priority running requests with small KV
        footprints"): the last queued request in the local scheduler's order (the one that would
        wait longest); else the running decode request of the lowest priority (highest tier) with
        the fewest KV tokens (ties: earliest enqueued), skipping request ids in ``excluded``."""
        if self.waiting:
            return max(self.waiting, key=self.scheduler.priority_key)
        best, best_key = None, None
        for seq in self.running:  # min() over the decode requests, in one pass (every step, every instance)
            generated = seq.generated_tokens
            if (
                generated
                and seq.kv_tokens == seq.prompt_tokens + generated - 1  # ``Sequence.in_decode``
                and not seq.pd_handoff
                and seq.request_id not in excluded
            ):
                key = (-seq.tier, seq.kv_tokens, seq.queue_order)
                if best is None or key < best_key:
                    best, best_key = seq, key
        return best

    def head_of_line_demand_blocks(self) -> int:
        """The blocks the first queued (waiting, then swapped) request in the local scheduler's
        order would take: its prefill's, or a swapped one's KV plus its next token's slot; 0 with
        nothing queued (req.demand of Llumnix-K eq. 2 for the head of line)."""
        queued = self.waiting + self.swapped
        if not queued:
            return 0
        seq = min(queued, key=self.scheduler.priority_key)
        tokens = seq.kv_tokens + 1 if seq.residency == Residency.SWAPPED else seq.prefill_target_tokens
        return blocks_for_tokens(tokens, self.kv.block_size)

    def kv_used_blocks_now(self) -> int:
        """KV blocks in use at this moment, counting the decode iterations of the running segment
        finished by now, without changing any state (cheap enough for every observation)."""
        return self.kv.used_blocks + self.unsynced_kv_blocks()

    def unsynced_kv_blocks(self) -> int:
        """KV blocks the decode iterations finished by now but not yet applied (``sync``) fill:
        Σ over the segment's sequences of ceil((kv + d) / b) − blocks for d iterations done."""
        if not self._seg_decode or self._seg_pos >= self._seg_len:
            return 0
        now = self.events.now_s
        if self._seg_ends[self._seg_pos] > now:
            return 0
        return self._decode_growth_blocks(bisect_right(self._seg_ends, now, self._seg_pos, self._seg_len) - self._seg_pos)

    def committed_kv_blocks(self) -> int:
        """KV blocks the segment's decode iterations up to the one in progress now fill beyond the
        blocks applied: ``unsynced_kv_blocks`` plus the growth of the iteration under way, which a
        re-plan (``_truncate``) keeps and applies at its end. What a sequence joining the batch now
        must leave free."""
        if not self._seg_decode or self._seg_pos >= self._seg_len:
            return 0
        done = bisect_right(self._seg_ends, self.events.now_s, self._seg_pos, self._seg_len) - self._seg_pos
        return self._decode_growth_blocks(min(done + 1, self._seg_len - self._seg_pos))

    def _decode_growth_blocks(self, done: int) -> int:
        """Σ over the segment's decode sequences of ceil((kv + done) / b) − blocks (``block_growth``)."""
        key = (self._version, self._seg_pos, id(self._seg_decode))
        if self._growth_key != key:
            self._growth_key, self._growth = key, block_growth(self._seg_decode, self.kv.block_size)
        held, count, at_least = self._growth
        whole, rest = divmod(done, self.kv.block_size)
        return held + count * whole + at_least[self.kv.block_size - rest]

    def answering_behind_pace(self, tpot_target_s: float) -> bool:
        """PASCAL's token-pacer SLO flag for the requests here now (``simulator.pacer``)."""
        self.sync()
        return pacer.answering_behind_pace(self.sequences(), self.events.now_s, tpot_target_s)

    # ----------------------------------------------------------------- batching gate
    @property
    def min_queue_length(self) -> int:
        """The queue gate's minimum queue length (1: off)."""
        return self.gate.min_length

    def set_min_queue_length(self, length: int, max_wait_s: float) -> None:
        """Start no new prefill batch here until ``length`` requests wait or the oldest waiting
        one has waited ``max_wait_s`` seconds (``simulator.queue_gate``; requests already waiting
        count from now); ``length=1`` turns the gate off. Re-plans if that changed anything."""
        if self.gate.set(length, max_wait_s, self.waiting) and self.waiting:
            self.poke()

    # ----------------------------------------------------------------- entry points
    def enqueue(self, seq: Sequence) -> None:
        """A request (new, or migrated while queued) joins this instance's waiting queue, after
        the context rule of this instance's model (``simulator.context``): a prompt longer than
        the context is rejected, a longer output capped."""
        fits = fit_to_context(seq, self.model.context_tokens)
        if fits is None:
            self.host.on_reject(seq, CONTEXT_REJECT_REASON)
            return
        if fits:
            self.context_truncated += 1
        if seq.prompt_tokens + seq.output_tokens > self.max_request_tokens:
            self.host.on_reject(seq, "exceeds_kv_capacity")
            return
        if seq.block_keys is not None and self.prefix_cache is not None:
            self.prefix_cache.check_block_tokens(seq)
        seq.instance_id = self.instance_id
        seq.residency = Residency.QUEUED
        if seq.generated_tokens == 0:
            seq.phase = Phase.WAITING
        self.scheduler.on_enqueue(seq)
        self.waiting.append(seq)
        if self.arrays is not None:
            self.arrays.join(self.instance_id, seq, WAITING)
        self.gate.enter(seq, self.events.now_s)
        self.poke()

    def accept_running(self, seq: Sequence) -> bool:
        """Take a sequence whose KV arrives over the network (migration, PD transfer).

        Allocates its blocks here; returns False (and takes nothing) if they do not fit now.
        """
        need = blocks_for_tokens(seq.kv_tokens + 1, self.kv.block_size)
        # The decode iterations finished by now, and the one under way, grow into blocks not applied yet: count them.
        if len(self.running) >= self.settings.max_batch_size or not self.kv.can_admit(need + self.committed_kv_blocks()):
            return False
        self.sync()
        self.kv.allocate(need)
        seq.blocks = need
        seq.instance_id = self.instance_id
        seq.residency = Residency.RUNNING
        self.scheduler.on_enqueue(seq)
        self.running.append(seq)
        if self.arrays is not None:
            self.arrays.join(self.instance_id, seq, RUNNING)
        self.poke()
        return True

    def accept_transferred(self, seq: Sequence) -> None:
        """Take a sequence whose KV just arrived over the network: into the batch if its blocks
        fit now, else parked in host memory with the swapped requests (swap-in cost applies)."""
        if seq.prompt_tokens + seq.output_tokens > self.max_request_tokens:
            self.host.on_reject(seq, "exceeds_kv_capacity")
            return
        if self.accept_running(seq):
            return
        seq.instance_id = self.instance_id
        seq.residency = Residency.SWAPPED
        seq.preempted_since_s = self.events.now_s
        self.scheduler.on_enqueue(seq)
        self.swapped.append(seq)
        if self.arrays is not None:
            self.arrays.join(self.instance_id, seq, SWAPPED)
        self.poke()

    def remove(self, seq: Sequence) -> None:
        """Take ``seq`` out (it leaves for another instance); its GPU blocks are freed."""
        self.sync()
        self._truncate()
        if seq in self._seg_decode or id(seq) in self._flying:
            raise RuntimeError(f"request {seq.request_id} is inside the iteration in progress")
        if seq in self.running:
            self.running.remove(seq)
            code = RUNNING
        elif seq in self.swapped:
            self.swapped_ordered = take_from_queue(self.swapped, seq, self.swapped_ordered)
            code = SWAPPED
        elif seq in self.waiting:
            self.waiting_ordered = take_from_queue(self.waiting, seq, self.waiting_ordered)
            self.gate.leave(seq)
            code = WAITING
        else:
            raise ValueError(f"request {seq.request_id} is not on instance {self.instance_id}")
        if self.arrays is not None:
            self.arrays.leave(self.instance_id, seq, code)
        if seq.residency == Residency.RUNNING:
            self.kv.free(seq)
        seq.blocks = 0
        seq.residency = Residency.MOVING

    def detach_at_boundary(
        self, seq: Sequence, callback: Callable[[Sequence], None], on_gone: Callable[[Sequence], None] | None = None
    ) -> None:
        """Take a running ``seq`` out after the iteration in progress, then call ``callback(seq)``
        (the hand-off of live migration, Llumnix-K §3.5). If ``seq`` left the batch
        at that boundary (it completed, or reached a phase change that took it out), nothing
        is taken out and ``on_gone(seq)`` is called instead."""
        if seq.instance_id != self.instance_id or seq.residency != Residency.RUNNING:
            raise ValueError(f"request {seq.request_id} is not running on instance {self.instance_id}")
        self._detach.append((seq, callback, on_gone))
        self.poke()

    def poke(self) -> None:
        """Something changed: re-plan at the next iteration boundary."""
        if self.busy:
            self._truncate()
        else:
            self.busy = True
            self._version += 1
            self._seg_decode = []
            self._seg_prefill = []
            self._seg_len = 0
            self._seg_pos = 0
            self.events.schedule(self.events.now_s, self._on_boundary, self._version)

    def sync(self) -> None:
        """Apply the decode iterations finished by now, so counters and KV use are current."""
        if self._seg_decode and self._seg_pos < self._seg_len:
            done = bisect_right(self._seg_ends, self.events.now_s, self._seg_pos, self._seg_len)
            if done > self._seg_pos:
                self._apply_decode(done)

    # ----------------------------------------------------------------- segments
    def _truncate(self) -> None:
        """Cut the planned segment after the iteration in progress now."""
        if self._seg_len <= 1:
            return
        keep = 1 + bisect_left(self._seg_ends, self.events.now_s, 0, self._seg_len - 1)
        if keep < self._seg_len:
            self._seg_len = keep
            self._version += 1
            self.events.schedule(self._seg_ends[keep - 1], self._on_boundary, self._version)

    def _apply_decode(self, upto: int) -> list[Sequence]:
        """Apply the segment's decode iterations up to ``upto``; at the segment's end, return the
        sequences that need attention there (completed, reasoning ended, PD hand-off)."""
        ends = self._seg_ends
        start, count = self._seg_pos, upto - self._seg_pos
        first_s = ends[start]
        last_s = ends[upto - 1]
        # Iterations lengthen by per_context_token_s x batch each step, so a run's largest
        # inner gap is its last one.
        last_gap_s = last_s - ends[upto - 2] if count > 1 else 0.0
        block_size = self.kv.block_size
        at_end = upto == self._seg_len
        attention: list[Sequence] = []
        grown = 0
        for seq in self._seg_decode:
            kv_tokens = seq.kv_tokens + count
            seq.kv_tokens = kv_tokens
            before = seq.generated_tokens
            after = before + count
            reasoning = seq.reasoning_tokens
            if before and (reasoning < before or reasoning > after) and seq.token_curve is None:
                # ``Sequence.on_tokens`` where neither the first token nor the end of reasoning
                # is in the run (nearly every sequence of every segment), inlined for speed.
                max_tbt_s = seq.max_tbt_s
                gap_s = first_s - seq.last_token_s
                if gap_s > max_tbt_s:
                    max_tbt_s = gap_s
                if last_gap_s > max_tbt_s:
                    max_tbt_s = last_gap_s
                seq.max_tbt_s = max_tbt_s
                seq.generated_tokens = after
                seq.last_token_s = last_s
            else:
                seq.on_tokens(first_s, last_s, count, last_gap_s)
            blocks = -(-kv_tokens // block_size)
            grown += blocks - seq.blocks
            seq.blocks = blocks
            if at_end and (after >= seq.output_tokens or after == reasoning or seq.pd_handoff):
                attention.append(seq)
        self.kv.allocate(grown)
        self._seg_pos = upto
        return attention

    def _on_boundary(self, version: int) -> None:
        if version != self._version:
            return
        now = self.events.now_s
        self._end_segment(now)
        self._plan(now)

    def _end_segment(self, now: float) -> None:
        """Apply the finished segment's tokens, completions and phase changes, then the
        detaches that waited for this boundary."""
        if self._seg_len:
            self.busy_time_s += now - self._seg_start_s
            self.iterations += self._seg_len
        finished: list[Sequence] = []
        if self._seg_prefill:
            cache = self.prefix_cache
            for seq, tokens in self._seg_prefill:
                seq.kv_tokens += tokens
                if cache is not None and seq.block_keys is not None:
                    cache.register(seq)
                if seq.kv_tokens == seq.prefill_target_tokens:
                    seq.on_tokens(now, now, 1, 0.0)
                    finished.append(seq)
        if self._seg_decode:
            # Only completions, the end of reasoning and PD hand-offs need attention here.
            if self._seg_pos < self._seg_len:
                finished += self._apply_decode(self._seg_len)
            else:
                finished += [
                    seq for seq in self._seg_decode
                    if seq.generated_tokens >= seq.output_tokens
                    or seq.generated_tokens == seq.reasoning_tokens
                    or seq.pd_handoff
                ]
        self._seg_decode = []
        self._seg_prefill = []
        self._seg_len = self._seg_pos = 0
        for seq in finished:
            self._after_token(seq)
        if self._detach:
            self._run_detaches()

    def _run_detaches(self) -> None:
        """Hand off the sequences ``detach_at_boundary`` asked for (those still in a batch in
        flight wait for its end)."""
        detach, self._detach = self._detach, []
        for item in detach:
            seq, callback, on_gone = item
            if id(seq) in self._flying:
                self._detach.append(item)
            elif seq in self.running:
                self.remove(seq)
                callback(seq)
            elif on_gone is not None:
                on_gone(seq)

    def _after_token(self, seq: Sequence) -> None:
        """Completion, prefill hand-off and phase change, after ``seq`` emitted a token."""
        if seq.residency != Residency.RUNNING or seq.instance_id != self.instance_id:
            return
        if seq.generated_tokens >= seq.output_tokens:
            self.running.remove(seq)
            if self.arrays is not None:
                self.arrays.leave(self.instance_id, seq, RUNNING)
            self.kv.free(seq)
            seq.phase = Phase.DONE
            self.host.on_complete(self, seq)
            return
        phase = seq.decode_phase
        if seq.phase != phase:
            seq.phase = phase
            if phase == Phase.ANSWERING and seq.reasoning_tokens > 0:
                self.scheduler.on_phase_change(seq)
                self.host.on_phase_change(self, seq)
                if seq.instance_id != self.instance_id or seq.residency != Residency.RUNNING:
                    return
        if seq.pd_handoff:
            self.host.on_prefill_done(self, seq)

    # ----------------------------------------------------------------- planning
    def _plan(self, now: float) -> None:
        if self.lifecycle == Lifecycle.STOPPED:
            self.busy = False
            return
        batch = self._form_batch(now)
        if batch is None:
            self.busy = False
            self.host.on_idle(self)
            return
        prefills, decode, extra_s, single_iteration = batch
        self.busy = True
        self._version += 1
        self._seg_start_s = now
        self._seg_pos = 0
        self._seg_decode = decode
        self._seg_prefill = prefills
        if prefills:
            dt = self.planner.mixed_iteration_s(prefills, decode) + extra_s
            ends = [now + dt]
        else:
            ends = self.planner.decode_ends(now, decode, extra_s, single_iteration)
        self._seg_ends = ends
        self._seg_len = len(ends)
        self.events.schedule(ends[-1], self._on_boundary, self._version)

    def _form_batch(
        self, now: float
    ) -> tuple[list[tuple[Sequence, int]], list[Sequence], float, bool] | None:
        """The next batch (``scheduler.form_batch``): (prefill chunks, decode sequences, swap-in
        seconds to add, whether memory moved); ``None`` if empty. While the queue gate holds,
        the scheduler does not see the waiting requests."""
        waiting = self.waiting
        if waiting and self.gate.holds(waiting, now):
            held_ordered = self.waiting_ordered
            self.waiting = []
            self.waiting_ordered = 0
            prefills, decode = self.scheduler.form_batch(self, now)
            self.waiting = waiting + self.waiting
            self.waiting_ordered = held_ordered
        else:
            prefills, decode = self.scheduler.form_batch(self, now)
        if not prefills and not decode:
            return None
        extra_s = self.swap_tokens * self._swap_s_per_token
        self.swap_tokens = 0
        single_iteration = self.memory_moved
        self.memory_moved = False
        return prefills, decode, extra_s, single_iteration
