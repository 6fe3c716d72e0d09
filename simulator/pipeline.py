"""Pipeline parallelism with several microbatches in flight: each PP stage is a resource.

A ``pp``-stage replica keeps up to ``InstanceConfig.pipeline_depth`` microbatches in its
pipeline (default ``pp``, one per stage), as vLLM's virtual engines and Vidur 0.0.26 do.
A new microbatch is formed whenever stage 0 is free and fewer than that many are in flight,
from the sequences that are not in flight (a sequence's next token needs its previous one);
it holds at most ``max_batch_size // pipeline_depth`` sequences (Vidur's
``batch_size_cap // num_stages``). Its stages run in order, each as soon as the stage is
free, with the stage times of ``IterationLatencyModel.stage_times_s`` (the latency
``iteration_time_s`` split by stage). So a microbatch's latency is the sum of its stage
times (plus a wait where an earlier, longer microbatch still holds a stage), and in steady
state a new microbatch leaves every slowest-stage time rather than every iteration latency.
With one microbatch in flight the instance behaves exactly as ``Instance`` (the oracle the
tests use). KV memory is one pool per replica, as before (the per-stage capacity).

Differences from Vidur: Vidur forms up to ``num_stages`` batches at once when it schedules
(they queue at stage 0); here a microbatch forms when stage 0 frees, so it sees the requests
that arrived meanwhile. Vidur charges no CPU time; here the CPU overhead sits on stage 0
(vLLM's driver worker is stage 0's first GPU).

Checked against Cascadia's measurements (Cascadia Table 1: Llama3-70B on four H100s,
1,600 prompt / 16 output tokens): real throughput 0.21 req/s with TP 4, 0.26 with TP 2 x PP 2
and 0.27 with PP 4, so PP >= TP at equal GPU count on long prompts and short outputs.
``tests/test_pipeline.py`` checks that ordering on the same setup with chunked prefill
(``sarathi``, 512-token chunks), where every microbatch is alike. With prefill-first batching
(``fcfs``, vLLM v0 without chunking) microbatches alternate long prefills and short decodes,
a short one waits behind a long one at every stage and holds a pipeline slot meanwhile, and
PP 4 falls below TP 4 on that workload: the pipeline bubble that Sarathi-Serve (OSDI '24,
cited in Llumnix-K) removes with uniform chunks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from simulator.events import EventQueue
from simulator.instance import Instance, InstanceConfig, InstanceHost, Lifecycle
from simulator.sequence import Sequence


@dataclass(slots=True, eq=False)
class Microbatch:
    """One batch inside the pipeline: its prefill chunks, decode sequences, start and end times."""

    prefills: list[tuple[Sequence, int]]
    decode: list[Sequence]
    start_s: float
    end_s: float


class PipelinedInstance(Instance):
    """An ``Instance`` whose ``pp`` stages each work on a different microbatch."""

    def __init__(self, instance_id: int, config: InstanceConfig, events: EventQueue, host: InstanceHost) -> None:
        super().__init__(instance_id, config, events, host, coalesce=False)
        self.pipeline_depth = config.pipeline_depth
        self.max_batch_size = self.settings.max_batch_size // self.pipeline_depth
        self.in_flight: deque[Microbatch] = deque()
        self.stage_free_s = [0.0] * config.pp
        """When each stage finishes the work it has been given."""
        self._busy_until_s = 0.0
        self._wake_version = 0
        self._wake_pending = False

    # ----------------------------------------------------------------- events
    def poke(self) -> None:
        """Something changed: form a microbatch as soon as stage 0 and a pipeline slot are free."""
        if not self._wake_pending and len(self.in_flight) < self.pipeline_depth:
            self._wake_at(max(self.events.now_s, self.stage_free_s[0]))

    def _wake_at(self, time_s: float) -> None:
        self._wake_version += 1
        self._wake_pending = True
        self.busy = True
        self.events.schedule(time_s, self._on_wake, self._wake_version)

    def _on_wake(self, version: int) -> None:
        if version != self._wake_version:
            return
        self._run_detaches()
        self._fill(self.events.now_s)

    def _on_microbatch_end(self, batch: Microbatch) -> None:
        now = self.events.now_s
        self.in_flight.remove(batch)
        flying = self._flying
        for seq, _ in batch.prefills:
            flying.discard(id(seq))
        for seq in batch.decode:
            flying.discard(id(seq))
        # The base class's boundary handling, for this one microbatch; busy time counts the
        # time any microbatch is in flight.
        self._seg_start_s = max(batch.start_s, self._busy_until_s)
        self._busy_until_s = now
        self._seg_prefill = batch.prefills
        self._seg_decode = batch.decode
        self._seg_ends = [now]
        self._seg_len = 1
        self._seg_pos = 0
        self._end_segment(now)
        self._fill(now)

    # ----------------------------------------------------------------- planning
    def _fill(self, now: float) -> None:
        """Start a microbatch if stage 0 and a slot are free; wake again when stage 0 frees."""
        self._wake_version += 1
        self._wake_pending = False
        if self.lifecycle == Lifecycle.STOPPED:
            self.busy = bool(self.in_flight)
            return
        if len(self.in_flight) < self.pipeline_depth:
            if self.stage_free_s[0] > now:
                self._wake_at(self.stage_free_s[0])
            elif self._start_microbatch(now) and len(self.in_flight) < self.pipeline_depth:
                self._wake_at(self.stage_free_s[0])
        if self.in_flight or self._wake_pending:
            self.busy = True
        else:
            self.busy = False
            self.host.on_idle(self)

    def _start_microbatch(self, now: float) -> bool:
        """Form a microbatch from the sequences not in flight and send it down the pipeline."""
        flying = self._flying
        everyone = self.running
        if flying:
            self.running = [s for s in everyone if id(s) not in flying]
            self._flying_blocks = sum(s.blocks for s in everyone if id(s) in flying)
        formed = self._form_batch(now)
        if flying:
            self.running = [s for s in everyone if id(s) in flying] + self.running
            self._flying_blocks = 0
        if formed is None:
            return False
        prefills, decode, extra_s, _ = formed
        room = self.max_batch_size - len(prefills)
        if len(decode) > room:  # more sequences came back than one microbatch holds
            decode = sorted(decode, key=self.scheduler.priority_key)[: max(room, 0)]
        if prefills:
            iteration_s = self.planner.mixed_iteration_s(prefills, decode)
            tokens = sum(tokens for _, tokens in prefills) + len(decode)
            logit_tokens = len(decode) + 1
        else:
            batch_size = len(decode)
            context = batch_size
            for seq in decode:
                context += seq.kv_tokens
            base_s, per_token_s = self.latency.decode_coefficients(batch_size)
            iteration_s = context * per_token_s + base_s  # the float operations of a decode segment
            tokens = logit_tokens = batch_size
        end_s = now + (iteration_s + extra_s)
        free = self.stage_free_s
        time_s = now
        waited = False
        for stage, stage_s in enumerate(self.latency.stage_times_s(tokens, logit_tokens, iteration_s)):
            if free[stage] > time_s:
                time_s = free[stage]
                waited = True
            time_s += stage_s + extra_s if stage == 0 else stage_s
            free[stage] = time_s
        if waited:
            end_s = time_s
        batch = Microbatch(prefills, decode, now, end_s)
        self.in_flight.append(batch)
        for seq, _ in prefills:
            flying.add(id(seq))
        for seq in decode:
            flying.add(id(seq))
        self.events.schedule(end_s, self._on_microbatch_end, batch)
        return True


def create_instance(
    instance_id: int, config: InstanceConfig, events: EventQueue, host: InstanceHost, *, coalesce: bool = True
) -> Instance:
    """A ``PipelinedInstance`` when ``config`` keeps more than one microbatch in flight, else an
    ``Instance`` (``coalesce`` applies to it; microbatches are planned one at a time)."""
    config.validate()  # the pipeline depth is a valid number (the instance resolves the rest)
    if config.pipeline_depth > 1:
        return PipelinedInstance(instance_id, config, events, host)
    return Instance(instance_id, config, events, host, coalesce=coalesce)
