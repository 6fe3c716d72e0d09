"""The local-scheduler interface: how one instance orders its requests and forms each batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from simulator.admission import admission_plan, admit, decode_slot_blocks, reserve_decode_slots, swap_in
from simulator.queue_order import order_queue
from simulator.sequence import Sequence

if TYPE_CHECKING:
    from simulator.instance import Instance


class LocalScheduler:
    """One instance's iteration-level scheduler: request order, preemption victims, and how a
    batch is formed.

    As Vidur's replica schedulers (``BaseReplicaScheduler._get_next_batch``, one subclass per
    engine) and vLLM's ``Scheduler._schedule``, the scheduler forms every batch
    (``form_batch``); the instance (``simulator.instance.Instance``) owns the queues, the KV
    pool and the events, and ``simulator.admission`` moves sequences in and out of KV blocks.
    A scheduler says
    - ``priority_key(seq)``: smaller runs first; the preemption victim is the largest key. Its
      value must not change while ``seq`` waits or is swapped out (the instance keeps those
      queues ordered as sequences join them, ``simulator.queue_order``); it may change while
      ``seq`` runs (a new ``queue_order`` at a quantum's end, PASCAL's demotion and phase change);
    - ``schedule(instance, now)``: who holds GPU memory in the next batch and which prompt
      chunks it prefills. This class admits waiting requests in order into free memory, as
      vLLM v0; ``SarathiScheduler`` chunks prefills; ``RoundRobinScheduler`` time-shares,
      preempting running requests that fall outside the batch;
    - ``chunked_prefill_tokens``: Sarathi-style token budget per iteration (``None``: whole
      prefills in prefill-only iterations, as vLLM);
    - ``default_preemption``: ``"recompute"`` or ``"swap"``;
    - ``iterations_until_change(seq)``: decode iterations until ``seq``'s priority changes (the
      instance re-plans at that point), or ``None``;
    - ``on_boundary(running)`` / ``on_enqueue(seq)`` / ``on_phase_change(seq)``: bookkeeping.
    """

    name: ClassVar[str] = ""
    default_preemption: ClassVar[str] = "recompute"
    chunked_prefill_tokens: int | None = None

    def __init__(self) -> None:
        self._order = 0

    def next_order(self) -> int:
        self._order += 1
        return self._order

    def on_enqueue(self, seq: Sequence) -> None:
        seq.queue_order = self.next_order()

    def priority_key(self, seq: Sequence) -> tuple:
        return (seq.queue_order,)

    def iterations_until_change(self, seq: Sequence) -> int | None:
        return None

    def on_boundary(self, running: list[Sequence]) -> None:
        """Called at every iteration boundary, before the batch is formed."""

    def on_phase_change(self, seq: Sequence) -> None:
        """Called when ``seq`` finished reasoning (its next token is the first answer token)."""

    # ----------------------------------------------------------------- batch forming
    def form_batch(self, instance: Instance, now: float) -> tuple[list[tuple[Sequence, int]], list[Sequence]]:
        """The next batch on ``instance``: its prefill chunks and its decode sequences (every
        running one between tokens; none beside whole prefills unless prefills are chunked)."""
        self.on_boundary(instance.running)
        prefills = self.schedule(instance, now)
        if prefills and self.chunked_prefill_tokens is None:
            return prefills, []
        decode = [
            s for s in instance.running
            if s.generated_tokens and not s.pd_handoff and s.kv_tokens == s.prompt_tokens + s.generated_tokens - 1
        ]
        return prefills, decode

    def schedule(self, instance: Instance, now: float) -> list[tuple[Sequence, int]]:
        """vLLM v0 (``Scheduler._schedule_default``): keep running requests; admit waiting ones
        in priority order into free memory for a prefill-only iteration of at most
        ``max_batched_tokens`` prompt tokens to compute (a longer prompt runs alone; a
        prefix-cache hit is not computed), none while a request is swapped out; with none admitted, reserve the decode slots and swap back in what fits."""
        prefills: list[tuple[Sequence, int]] = []
        waiting = instance.waiting
        if not instance.swapped and waiting:
            self._order_waiting(instance)
            running = instance.running
            max_batch_size = instance.max_batch_size
            budget = instance.max_batched_tokens
            cached = instance.kv.cache is not None
            while waiting and len(running) < max_batch_size:
                seq = waiting[0]
                tokens = admission_plan(instance, seq)[0] if cached else seq.remaining_prefill_tokens
                if prefills and tokens > budget:
                    break
                if not admit(instance, seq, now):
                    break
                prefills.append((seq, tokens))
                budget -= tokens
            if prefills:
                return prefills
        reserve_decode_slots(instance)
        self._swap_in_in_order(instance, now)
        return prefills

    def _order_waiting(self, instance: Instance) -> None:
        order_queue(instance.waiting, instance.waiting_ordered, self.priority_key)
        instance.waiting_ordered = len(instance.waiting)

    def _order_swapped(self, instance: Instance) -> None:
        order_queue(instance.swapped, instance.swapped_ordered, self.priority_key)
        instance.swapped_ordered = len(instance.swapped)

    def _swap_in_in_order(self, instance: Instance, now: float) -> None:
        """Swap sequences back in, in priority order, while their decode slots fit."""
        swapped = instance.swapped
        if not swapped:
            return
        self._order_swapped(instance)
        running, kv = instance.running, instance.kv
        while swapped and len(running) < instance.max_batch_size:
            seq = swapped[0]
            if not kv.can_admit(decode_slot_blocks(seq, kv.block_size)):
                break
            swap_in(instance, seq, now)
