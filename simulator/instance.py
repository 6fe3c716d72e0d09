"""One model replica on TP x PP GPUs of one type: paged KV memory and continuous batching.

Speed comes from *coalesced decode segments*: between two events that can change the
batch (an arrival, a completion, a preemption, a phase change, a quantum expiry, a
migration), a decode batch is fixed, so the instance plans all of its iterations at once
(``np.cumsum`` of per-iteration times, the same float operations one iteration at a time
would do) and schedules a single event at the segment's end. An external event that lands
mid-segment truncates it after the iteration in progress. ``coalesce=False`` plans one
iteration per event: the slow path the tests use as an oracle (results are bit-identical).

This class runs one batch at a time through all of its GPUs; a ``pp > 1`` replica that keeps
several microbatches in its pipeline is ``simulator.pipeline.PipelinedInstance``.

An optional gate holds new prefills until a minimum queue length is reached (CascadeServe's
batching, cascadeserve.txt §4.5; ``set_min_queue_length``); it is off by default.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import numpy as np

from hardware.gpus import GPUSpec
from hardware.latency import DEFAULT_CPU_OVERHEAD_S, IterationLatencyModel, kv_capacity_tokens, latency_model
from hardware.models import ModelSpec
from simulator.context import CONTEXT_REJECT_REASON, fit_to_context
from simulator.events import EventQueue
from simulator.instance_arrays import LIFECYCLE, LIFECYCLE_CODES, RUNNING, SWAPPED, WAITING, WIDTH, InstanceArrays
from simulator.kv_blocks import KVBlockManager, blocks_for_tokens
from simulator.request import Phase
from simulator.schedulers import LocalScheduler, make_scheduler
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
    """What one replica is: hardware, model, parallelism, memory and batching limits, scheduler.

    ``max_batched_tokens`` caps the prompt tokens of one prefill iteration (a single longer
    prompt still runs alone, as vLLM requires). ``kv_blocks`` fixes the KV pool's size in blocks
    (a simulator's stated pool, e.g. Vidur's ``num_blocks``); ``None`` sizes it from GPU memory.
    ``preemption`` is ``"recompute"`` or ``"swap"``; ``None`` takes the scheduler's default.
    ``scheduler_options`` go to the scheduler (``quantum_tokens``, ``demotion_kv_tokens``,
    ``chunk_tokens``).

    ``cpu_overhead_s`` is the CPU time charged per iteration (default: Vidur's vLLM profile,
    2.98 ms; 0 models an engine that hides it behind the GPU, or Vidur's own default; see
    ``hardware/latency.py``). ``microbatches_in_flight`` caps the batches a ``pp > 1``
    replica keeps in its pipeline at once (``None``: ``pp``, one per stage, as vLLM's virtual
    engines and Vidur do; 1: one batch passes through all stages before the next starts);
    each microbatch holds at most ``max_batch_size // microbatches_in_flight`` sequences
    (Vidur's ``batch_size_cap // num_stages``). See ``simulator/pipeline.py``.
    """

    gpu: str
    model: str
    tp: int = 1
    pp: int = 1
    dtype: str = "fp16"
    scheduler: str = "fcfs"
    block_size: int = 16
    memory_utilization: float = 0.9
    max_batch_size: int = 256
    max_batched_tokens: int = 4096
    preemption: str | None = None
    role: Role = Role.AGGREGATED
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    kv_blocks: int | None = None
    cpu_overhead_s: float = DEFAULT_CPU_OVERHEAD_S
    microbatches_in_flight: int | None = None

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def pipeline_depth(self) -> int:
        """Microbatches in flight at most: ``microbatches_in_flight``, or ``pp`` when unset."""
        return self.pp if self.microbatches_in_flight is None else self.microbatches_in_flight

    def validate(self) -> None:
        for name in ("tp", "pp", "block_size", "max_batch_size", "max_batched_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"InstanceConfig.{name} must be a positive integer, got {value!r}")
        if self.kv_blocks is not None and (
            not isinstance(self.kv_blocks, int) or isinstance(self.kv_blocks, bool) or self.kv_blocks <= 0
        ):
            raise ValueError(f"InstanceConfig.kv_blocks must be a positive integer or None, got {self.kv_blocks!r}")
        overhead = self.cpu_overhead_s
        if isinstance(overhead, bool) or not isinstance(overhead, (int, float)) or not 0.0 <= overhead < float("inf"):
            raise ValueError(f"InstanceConfig.cpu_overhead_s must be a finite number >= 0 (seconds), got {overhead!r}")
        depth = self.microbatches_in_flight
        if depth is not None and (
            not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= self.pp
        ):
            raise ValueError(
                f"InstanceConfig.microbatches_in_flight must be None or an integer in [1, pp={self.pp}], got {depth!r}"
            )
        if self.max_batch_size < self.pipeline_depth:
            raise ValueError(
                f"InstanceConfig.max_batch_size={self.max_batch_size} is below the {self.pipeline_depth} microbatches "
                "in flight: each microbatch needs at least one sequence"
            )
        if not 0.0 < self.memory_utilization <= 1.0:
            raise ValueError(f"memory_utilization must be in (0, 1], got {self.memory_utilization}")
        if self.preemption not in (None, "recompute", "swap"):
            raise ValueError(f"preemption must be 'recompute' or 'swap', got {self.preemption!r}")
        Role(self.role)


class InstanceHost(Protocol):
    """What an instance tells the cluster around it."""

    def on_complete(self, instance: Instance, seq: Sequence) -> None: ...
    def on_reject(self, seq: Sequence, reason: str) -> None: ...
    def on_phase_change(self, instance: Instance, seq: Sequence) -> None: ...
    def on_prefill_done(self, instance: Instance, seq: Sequence) -> None: ...
    def on_idle(self, instance: Instance) -> None: ...


PriorityKey = Callable[[Sequence], Any]


def _order(queue: list[Sequence], ordered: int, key: PriorityKey) -> None:
    """Put ``queue`` in the order ``queue.sort(key=key)`` gives, knowing its first ``ordered``
    entries already are: the rest are sorted and inserted by bisection (each after its equals,
    as the stable sort puts them), so a queue of n with k new entries costs O(k log n) keys."""
    if ordered >= len(queue):
        return
    if ordered == 0:
        queue.sort(key=key)
        return
    tail = queue[ordered:]
    del queue[ordered:]
    tail.sort(key=key)
    if not key(tail[0]) < key(queue[-1]):
        queue.extend(tail)
        return
    for seq in tail:
        insort(queue, seq, key=key)


def _take(queue: list[Sequence], seq: Sequence, ordered: int) -> int:
    """Remove ``seq`` from ``queue``; return how many leading entries stay in order."""
    index = queue.index(seq)
    del queue[index]
    return ordered - 1 if index < ordered else ordered


_EMPTY = np.empty(0)
_ONE_TO_N = np.arange(1, 1 << 16, dtype=np.int64)


def _decoding(seq: Sequence) -> bool:
    """Running and between tokens: its next iteration is a decode step."""
    return (
        seq.generated_tokens > 0
        and not seq.pd_handoff
        and seq.kv_tokens == seq.prompt_tokens + seq.generated_tokens - 1
    )


class Instance:
    """A serving replica. Requests enter with ``enqueue``; the cluster is told of completions.

    ``waiting`` and ``swapped`` are ordered on insert rather than re-sorted at every
    iteration: each keeps how many of its leading entries are in priority order
    (``scheduler.priority_key``, whose value is fixed while a sequence is queued), and a batch
    sorts only the entries added since into place, giving the list a full stable sort would.
    Only this class adds to or removes from them.
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
        config.validate()
        self.instance_id = instance_id
        self.config = config
        self.events = events
        self.host = host
        self.role = Role(config.role)
        self.latency: IterationLatencyModel = latency_model(
            config.gpu, config.model, config.tp, config.pp, config.dtype, config.cpu_overhead_s
        )
        self.gpu: GPUSpec = self.latency.gpu
        self.model: ModelSpec = self.latency.model
        capacity = kv_capacity_tokens(
            self.gpu, self.model, config.tp, config.pp, config.dtype, config.memory_utilization
        )
        blocks = capacity // config.block_size if config.kv_blocks is None else config.kv_blocks
        self.kv = KVBlockManager(blocks, config.block_size)
        self.scheduler = make_scheduler(config.scheduler, **config.scheduler_options)
        self.preemption = config.preemption or self.scheduler.default_preemption
        self._priority_may_change = (
            type(self.scheduler).iterations_until_change is not LocalScheduler.iterations_until_change
        )
        self._arrays: InstanceArrays | None = None
        self._lifecycle = Lifecycle.SERVING
        self._growth_key: tuple[int, int, int] | None = None
        self._growth: tuple[int, int, list[int]] = (0, 0, [])
        self.max_segment_iterations = max_segment_iterations if coalesce else 1
        self.max_batch_size = config.max_batch_size
        """Sequences one batch may hold (a microbatch's share in ``simulator.pipeline``)."""
        self._flying: set[int] = set()
        """``id`` of the sequences inside a batch still in the pipeline (``simulator.pipeline``)."""
        self._flying_blocks = 0
        self._swap_s_per_token = self.model.kv_bytes_per_token / (self.gpu.host_link_gbps * 1e9 * config.num_gpus)
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.swapped: list[Sequence] = []
        self._waiting_ordered = 0
        """Leading entries of ``waiting`` in priority order (``_order``)."""
        self._swapped_ordered = 0
        """Leading entries of ``swapped`` in priority order."""
        self.busy = False
        self._version = 0
        self._seg_start_s = 0.0
        self._seg_ends: np.ndarray = _EMPTY
        self._seg_pos = 0
        self._seg_len = 0
        self._seg_decode: list[Sequence] = []
        self._seg_prefill: list[tuple[Sequence, int]] = []
        self._swap_tokens = 0
        self._memory_moved = False
        self._detach: list[tuple[Sequence, Callable[[Sequence], None], Callable[[Sequence], None] | None]] = []
        self.busy_time_s = 0.0
        self.iterations = 0
        self.context_truncated = 0
        """Requests whose output this instance capped at its model's context (``simulator.context``)."""
        self.min_queue_length = 1
        self.max_queue_wait_s = 0.0
        self._waiting_since_s: dict[int, float] = {}
        """With the gate on: when each waiting request entered the queue (by request id)."""
        self._gate_wake_s = float("inf")

    # ----------------------------------------------------------------- queries
    @property
    def lifecycle(self) -> Lifecycle:
        return self._lifecycle

    @lifecycle.setter
    def lifecycle(self, value: Lifecycle) -> None:
        self._lifecycle = value
        if self._arrays is not None:
            self._arrays.values[self.instance_id * WIDTH + LIFECYCLE] = LIFECYCLE_CODES[value.value]

    def track(self, arrays: InstanceArrays) -> None:
        """Keep row ``instance_id`` of ``arrays`` current from now on (queues, KV, lifecycle)."""
        if self.sequences():
            raise ValueError(f"instance {self.instance_id} already holds requests; track it before it serves")
        arrays.add_row(self.instance_id, self.kv.total_blocks, self.kv.watermark_blocks, self.kv.block_size,
                       self.role.value)
        self._arrays = arrays
        self.kv.track(arrays, self.instance_id)
        self.lifecycle = self._lifecycle

    @property
    def num_requests(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)

    @property
    def max_request_tokens(self) -> int:
        """Largest prompt + output a request may have here (the KV it needs at its end)."""
        return (self.kv.total_blocks - self.kv.watermark_blocks) * self.kv.block_size

    def sequences(self) -> list[Sequence]:
        return self.running + self.swapped + self.waiting

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
        done = int(self._seg_ends[: self._seg_len].searchsorted(now, side="right")) - self._seg_pos
        key = (self._version, self._seg_pos, id(self._seg_decode))
        if self._growth_key != key:
            self._growth_key, self._growth = key, self._block_growth()
        held, count, at_least = self._growth
        whole, rest = divmod(done, self.kv.block_size)
        return held + count * whole + at_least[self.kv.block_size - rest]

    def _block_growth(self) -> tuple[int, int, list[int]]:
        """For the segment's sequences: Σ ceil(kv / b)-style quotients less their blocks, their
        number, and how many have each remainder or more, so that for d = q·b + r iterations
        Σ ceil((kv + d) / b) − blocks = held + count·q + at_least[b − r]."""
        block_size = self.kv.block_size
        held = 0
        remainders = [0] * (block_size + 1)
        for seq in self._seg_decode:
            quotient, remainder = divmod(seq.kv_tokens + block_size - 1, block_size)
            held += quotient - seq.blocks
            remainders[remainder] += 1
        at_least = [0] * (block_size + 1)
        for value in range(block_size - 1, -1, -1):
            at_least[value] = at_least[value + 1] + remainders[value]
        return held, len(self._seg_decode), at_least

    def answering_behind_pace(self, tpot_target_s: float) -> bool:
        """The token pacer's SLO flag (pascal.txt §IV-B, Alg. 1 ``t_i`` is its negation): True
        when an answering request here has delivered fewer answer tokens than a reader taking
        one token per ``tpot_target_s`` since its first answer token would have read, i.e. its
        pacer buffer ran dry."""
        if not tpot_target_s > 0:
            raise ValueError(f"tpot_target_s must be positive, got {tpot_target_s}")
        self.sync()
        now = self.events.now_s
        for seq in self.sequences():
            answered = seq.generated_tokens - seq.reasoning_tokens
            if answered > 0 and answered < seq.output_tokens - seq.reasoning_tokens:
                if answered < 1 + int((now - seq.first_answer_token_s) / tpot_target_s):
                    return True
        return False

    # ----------------------------------------------------------------- batching gate
    def set_min_queue_length(self, length: int, max_wait_s: float) -> None:
        """CascadeServe's minimum queue length (cascadeserve.txt §4.5): no new prefill batch starts
        here until ``length`` requests wait or the oldest waiting one has waited ``max_wait_s``
        seconds (our bound, so no request waits forever: the paper's planner simulator only
        flushes short queues when the trace ends, App. C.1). Waiting time counts from entering
        this instance's queue (requests already waiting count from now); running requests keep
        decoding meanwhile; when the gate opens the batch forms as usual. ``length=1`` turns the
        gate off (the default)."""
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(f"min queue length must be a positive integer, got {length!r}")
        if not (isinstance(max_wait_s, (int, float)) and 0.0 <= max_wait_s < float("inf")):
            raise ValueError(f"max_wait_s must be a finite number >= 0, got {max_wait_s!r}")
        now = self.events.now_s
        self._waiting_since_s = (
            {s.request_id: self._waiting_since_s.get(s.request_id, now) for s in self.waiting} if length > 1 else {}
        )
        changed = (length, float(max_wait_s)) != (self.min_queue_length, self.max_queue_wait_s)
        self.min_queue_length = length
        self.max_queue_wait_s = float(max_wait_s)
        if changed and self.waiting:
            self.poke()

    def _gate_holds(self, now: float) -> bool:
        """Whether the gate holds the waiting requests back now; if so, wake at its deadline."""
        if len(self.waiting) >= self.min_queue_length:
            return False
        since = self._waiting_since_s
        deadline = min(since.get(s.request_id, now) for s in self.waiting) + self.max_queue_wait_s
        if now >= deadline:
            return False
        if deadline != self._gate_wake_s:
            self._gate_wake_s = deadline
            self.events.schedule(deadline, self._on_gate_deadline, deadline)
        return True

    def _on_gate_deadline(self, deadline: float) -> None:
        if deadline == self._gate_wake_s:
            self._gate_wake_s = float("inf")
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
        seq.instance_id = self.instance_id
        seq.residency = Residency.QUEUED
        if seq.generated_tokens == 0:
            seq.phase = Phase.WAITING
        self.scheduler.on_enqueue(seq)
        self.waiting.append(seq)
        if self._arrays is not None:
            self._arrays.join(self.instance_id, seq, WAITING)
        if self.min_queue_length > 1:
            self._waiting_since_s[seq.request_id] = self.events.now_s
        self.poke()

    def accept_running(self, seq: Sequence) -> bool:
        """Take a sequence whose KV arrives over the network (migration, PD transfer).

        Allocates its blocks here; returns False (and takes nothing) if they do not fit now.
        """
        need = blocks_for_tokens(seq.kv_tokens + 1, self.kv.block_size)
        if len(self.running) >= self.config.max_batch_size or not self.kv.can_admit(need):
            return False
        self.sync()
        self.kv.allocate(need)
        seq.blocks = need
        seq.instance_id = self.instance_id
        seq.residency = Residency.RUNNING
        self.scheduler.on_enqueue(seq)
        self.running.append(seq)
        if self._arrays is not None:
            self._arrays.join(self.instance_id, seq, RUNNING)
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
        if self._arrays is not None:
            self._arrays.join(self.instance_id, seq, SWAPPED)
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
            self._swapped_ordered = _take(self.swapped, seq, self._swapped_ordered)
            code = SWAPPED
        elif seq in self.waiting:
            self._waiting_ordered = _take(self.waiting, seq, self._waiting_ordered)
            self._waiting_since_s.pop(seq.request_id, None)
            code = WAITING
        else:
            raise ValueError(f"request {seq.request_id} is not on instance {self.instance_id}")
        if self._arrays is not None:
            self._arrays.leave(self.instance_id, seq, code)
        if seq.residency == Residency.RUNNING:
            self.kv.release(seq.blocks)
        seq.blocks = 0
        seq.residency = Residency.MOVING

    def detach_at_boundary(
        self, seq: Sequence, callback: Callable[[Sequence], None], on_gone: Callable[[Sequence], None] | None = None
    ) -> None:
        """Take a running ``seq`` out after the iteration in progress, then call ``callback(seq)``
        (the hand-off of live migration, multitier-llumnix.txt §3.5). If ``seq`` left the batch
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
            done = int(np.searchsorted(self._seg_ends[: self._seg_len], self.events.now_s, side="right"))
            if done > self._seg_pos:
                self._apply_decode(done)

    # ----------------------------------------------------------------- segments
    def _truncate(self) -> None:
        """Cut the planned segment after the iteration in progress now."""
        if self._seg_len <= 1:
            return
        keep = 1 + int(np.searchsorted(self._seg_ends[: self._seg_len - 1], self.events.now_s, side="left"))
        if keep < self._seg_len:
            self._seg_len = keep
            self._version += 1
            self.events.schedule(float(self._seg_ends[keep - 1]), self._on_boundary, self._version)

    def _apply_decode(self, upto: int) -> None:
        ends = self._seg_ends
        start, count = self._seg_pos, upto - self._seg_pos
        first_s = float(ends[start])
        last_s = float(ends[upto - 1])
        # Iterations lengthen by per_context_token_s x batch each step, so a run's largest
        # inner gap is its last one.
        last_gap_s = last_s - float(ends[upto - 2]) if count > 1 else 0.0
        block_size = self.kv.block_size
        grown = 0
        for seq in self._seg_decode:
            seq.kv_tokens += count
            seq.on_tokens(first_s, last_s, count, last_gap_s)
            blocks = -(-seq.kv_tokens // block_size)
            grown += blocks - seq.blocks
            seq.blocks = blocks
        self.kv.allocate(grown)
        self._seg_pos = upto

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
            for seq, tokens in self._seg_prefill:
                seq.kv_tokens += tokens
                if seq.kv_tokens == seq.prefill_target_tokens:
                    seq.on_tokens(now, now, 1, 0.0)
                    finished.append(seq)
        if self._seg_decode:
            if self._seg_pos < self._seg_len:
                self._apply_decode(self._seg_len)
            # Only completions, the end of reasoning and PD hand-offs need attention here.
            for seq in self._seg_decode:
                if (
                    seq.generated_tokens >= seq.output_tokens
                    or seq.generated_tokens == seq.reasoning_tokens
                    or seq.pd_handoff
                ):
                    finished.append(seq)
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
            if self._arrays is not None:
                self._arrays.leave(self.instance_id, seq, RUNNING)
            self.kv.release(seq.blocks)
            seq.blocks = 0
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
            dt = self._mixed_iteration_s(prefills, decode) + extra_s
            self._seg_ends = np.array([now + dt])
            self._seg_len = 1
        else:
            self._plan_decode_segment(now, decode, extra_s, single_iteration)
        self.events.schedule(float(self._seg_ends[self._seg_len - 1]), self._on_boundary, self._version)

    def _form_batch(
        self, now: float
    ) -> tuple[list[tuple[Sequence, int]], list[Sequence], float, bool] | None:
        """The next batch from ``self.running`` / ``waiting`` / ``swapped``: (prefill chunks,
        decode sequences, swap-in seconds to add, whether memory moved); ``None`` if empty."""
        self.scheduler.on_boundary(self.running)
        held = self.waiting if self.min_queue_length > 1 and self.waiting and self._gate_holds(now) else None
        if held is not None:
            held_ordered = self._waiting_ordered
            self.waiting = []
            self._waiting_ordered = 0
        if self.scheduler.preemptive:
            prefills = self._select_by_priority(now)
        else:
            prefills = self._select_in_order(now)
        if held is not None:
            self.waiting = held + self.waiting
            self._waiting_ordered = held_ordered
        decode = [
            s for s in self.running
            if s.generated_tokens and not s.pd_handoff and s.kv_tokens == s.prompt_tokens + s.generated_tokens - 1
        ]
        if self.scheduler.chunked_prefill_tokens is None and prefills:
            decode = []
        if not prefills and not decode:
            return None
        extra_s = self._swap_tokens * self._swap_s_per_token
        self._swap_tokens = 0
        single_iteration = self._memory_moved
        self._memory_moved = False
        return prefills, decode, extra_s, single_iteration

    def _mixed_iteration_s(self, prefills: list[tuple[Sequence, int]], decode: list[Sequence]) -> float:
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

    def _plan_decode_segment(self, now: float, decode: list[Sequence], extra_s: float, single_iteration: bool) -> None:
        """Plan decode iterations until the batch could change. After a preemption or swap-in
        the next boundary may admit what this one could not, so such a plan runs one iteration."""
        batch = len(decode)
        horizon = 1 if single_iteration else self.max_segment_iterations
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
        # at a time would; dt[j] = base + per_token * (context of iteration j).
        times = np.empty(horizon + 1)
        times[0] = now
        np.multiply(context + batch * _ONE_TO_N[:horizon], per_token_s, out=times[1:])
        times[1:] += base_s
        times[1] += extra_s
        np.cumsum(times, out=times)
        self._seg_ends = times[1:]
        self._seg_len = horizon

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

    # ----------------------------------------------------------------- batch forming
    def _decode_slot_blocks(self, seq: Sequence) -> int:
        """Blocks ``seq`` holds after reserving the slot for its next decode token."""
        return -(-(seq.kv_tokens + 1) // self.kv.block_size)

    def _reserve_decode_slots(self) -> None:
        """Give every running decode sequence the block its next token needs, preempting the
        lowest-priority running sequences (largest key) while memory is short."""
        block_size = self.kv.block_size
        while True:
            need = 0
            growing = []
            for seq in self.running:
                if (
                    seq.generated_tokens
                    and not seq.pd_handoff
                    and seq.kv_tokens == seq.prompt_tokens + seq.generated_tokens - 1
                ):
                    extra = (seq.kv_tokens + block_size) // block_size - seq.blocks
                    if extra:
                        need += extra
                        growing.append((seq, extra))
            if need <= self.kv.free_blocks:
                break
            self._preempt(max(self.running, key=self.scheduler.priority_key))
        self.kv.allocate(need)
        for seq, extra in growing:
            seq.blocks += extra

    def _select_in_order(self, now: float) -> list[tuple[Sequence, int]]:
        """vLLM v0 (and Sarathi with a chunk budget): keep running requests, admit waiting ones
        in priority order into free memory; swap back in only when nothing waits to be admitted."""
        key = self.scheduler.priority_key
        chunk_budget = self.scheduler.chunked_prefill_tokens
        prefills: list[tuple[Sequence, int]] = []
        if chunk_budget is not None:
            self._reserve_decode_slots()
            self._swap_in_in_order(now)
            budget = chunk_budget - sum(1 for s in self.running if _decoding(s))
            for seq in sorted((s for s in self.running if not s.in_decode), key=key):
                if budget <= 0:
                    break
                tokens = min(seq.remaining_prefill_tokens, budget)
                prefills.append((seq, tokens))
                budget -= tokens
            if not self.swapped and budget > 0:
                self._order_waiting()
                while self.waiting and budget > 0 and len(self.running) < self.max_batch_size:
                    seq = self.waiting[0]
                    if not self._admit(seq, now):
                        break
                    tokens = min(seq.remaining_prefill_tokens, budget)
                    prefills.append((seq, tokens))
                    budget -= tokens
            return prefills
        if not self.swapped and self.waiting:
            self._order_waiting()
            budget = self.config.max_batched_tokens
            while self.waiting and len(self.running) < self.max_batch_size:
                seq = self.waiting[0]
                tokens = seq.remaining_prefill_tokens
                if prefills and tokens > budget:
                    break
                if not self._admit(seq, now):
                    break
                prefills.append((seq, tokens))
                budget -= tokens
            if prefills:
                return prefills
        self._reserve_decode_slots()
        self._swap_in_in_order(now)
        return prefills

    def _order_waiting(self) -> None:
        _order(self.waiting, self._waiting_ordered, self.scheduler.priority_key)
        self._waiting_ordered = len(self.waiting)

    def _order_swapped(self) -> None:
        _order(self.swapped, self._swapped_ordered, self.scheduler.priority_key)
        self._swapped_ordered = len(self.swapped)

    def _swap_in_in_order(self, now: float) -> None:
        self._order_swapped()
        while self.swapped and len(self.running) < self.max_batch_size:
            seq = self.swapped[0]
            if not self.kv.can_admit(self._decode_slot_blocks(seq)):
                break
            self._swap_in(seq, now)

    def _select_by_priority(self, now: float) -> list[tuple[Sequence, int]]:
        """Time-sharing (RR, PASCAL): the batch is the longest prefix of the priority order that
        fits in KV memory and the batch size; running sequences outside it are preempted."""
        key = self.scheduler.priority_key
        self._order_swapped()
        self._order_waiting()
        # The stable sort of running + swapped + waiting, read lazily: only the batch's prefix.
        candidates = heapq.merge(sorted(self.running, key=key), self.swapped, self.waiting, key=key)
        capacity = self.kv.total_blocks - self._flying_blocks
        used = 0
        chosen: list[Sequence] = []
        budget = self.config.max_batched_tokens
        new_prefill = False
        for seq in candidates:
            if len(chosen) >= self.max_batch_size:
                break
            if seq.residency == Residency.QUEUED:
                need = blocks_for_tokens(seq.prefill_target_tokens, self.kv.block_size)
                tokens = seq.remaining_prefill_tokens
                if (new_prefill and tokens > budget) or used + need > capacity - self.kv.watermark_blocks:
                    break
                budget -= tokens
                new_prefill = True
            else:
                need = self._decode_slot_blocks(seq)
                if used + need > capacity:
                    break
            chosen.append(seq)
            used += need
        chosen_ids = {id(s) for s in chosen}
        for seq in [s for s in self.running if id(s) not in chosen_ids]:
            self._preempt(seq)
        self._reserve_decode_slots()
        prefills: list[tuple[Sequence, int]] = []
        for seq in chosen:
            if seq.residency == Residency.SWAPPED:
                self._swap_in(seq, now)
            elif seq.residency == Residency.QUEUED:
                if not self._admit(seq, now, watermark=False):
                    raise RuntimeError(f"request {seq.request_id} was chosen but does not fit")
                prefills.append((seq, seq.remaining_prefill_tokens))
        return prefills

    # ----------------------------------------------------------------- transitions
    def _admit(self, seq: Sequence, now: float, watermark: bool = True) -> bool:
        need = blocks_for_tokens(seq.prefill_target_tokens, self.kv.block_size)
        fits = self.kv.can_admit(need) if watermark else need <= self.kv.free_blocks
        if not fits:
            return False
        self.kv.allocate(need)
        self._waiting_ordered = _take(self.waiting, seq, self._waiting_ordered)
        self._waiting_since_s.pop(seq.request_id, None)
        seq.blocks = need
        seq.residency = Residency.RUNNING
        if seq.first_scheduled_s != seq.first_scheduled_s:
            seq.first_scheduled_s = now
        self._end_preemption(seq, now)
        self.running.append(seq)
        if self._arrays is not None:
            self._arrays.remove(self.instance_id, seq, WAITING)
            self._arrays.add(self.instance_id, seq, RUNNING)
        return True

    def _swap_in(self, seq: Sequence, now: float) -> None:
        need = self._decode_slot_blocks(seq)
        self.kv.allocate(need)
        seq.blocks = need
        self._swapped_ordered = _take(self.swapped, seq, self._swapped_ordered)
        seq.residency = Residency.RUNNING
        self._end_preemption(seq, now)
        self.running.append(seq)
        if self._arrays is not None:
            self._arrays.remove(self.instance_id, seq, SWAPPED)
            self._arrays.add(self.instance_id, seq, RUNNING)
        self._swap_tokens += seq.kv_tokens
        self._memory_moved = True

    def _preempt(self, seq: Sequence) -> None:
        """Move a running sequence out of GPU memory (swap to host, or drop KV to recompute)."""
        self.running.remove(seq)
        if self._arrays is not None:
            self._arrays.remove(self.instance_id, seq, RUNNING)
        self.kv.release(seq.blocks)
        seq.blocks = 0
        seq.num_preemptions += 1
        seq.preempted_since_s = self.events.now_s
        self._memory_moved = True
        if self.preemption == "swap" and seq.generated_tokens > 0:
            seq.residency = Residency.SWAPPED
            self.swapped.append(seq)
            if self._arrays is not None:
                self._arrays.add(self.instance_id, seq, SWAPPED)
            self._swap_tokens += seq.kv_tokens
            return
        seq.kv_tokens = 0
        seq.residency = Residency.QUEUED
        self.waiting.append(seq)
        if self._arrays is not None:
            self._arrays.add(self.instance_id, seq, WAITING)
        if self.min_queue_length > 1:
            self._waiting_since_s[seq.request_id] = self.events.now_s

    @staticmethod
    def _end_preemption(seq: Sequence, now: float) -> None:
        if seq.preempted_since_s == seq.preempted_since_s:
            seq.preempted_s += now - seq.preempted_since_s
            seq.preempted_since_s = float("nan")

