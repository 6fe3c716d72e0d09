"""KV admission on one instance (``simulator.admission``): the blocks each move takes or frees,
the queue a sequence lands in, and the swap traffic charged to the next iteration."""

from __future__ import annotations

from null_host import NullHost
from simulator.admission import admit, decode_slot_blocks, preempt, reserve_decode_slots, swap_in
from simulator.events import EventQueue
from simulator.instance import Instance, InstanceConfig
from simulator.request import Request
from simulator.sequence import Residency, Sequence

GPU, MODEL = "A100-80GB", "Llama-2-7B"
PROMPT = 800  # 50 blocks of 16 tokens


def make_instance(**config) -> Instance:
    """100 KV blocks of 16 tokens, 1 of them the watermark."""
    return Instance(0, InstanceConfig(gpu=GPU, model=MODEL, kv_blocks=100, **config), EventQueue(), NullHost())


def enqueued(instance: Instance, count: int) -> list[Sequence]:
    seqs = [Sequence(Request(i, 0.0, PROMPT, 10), record_token_curve=False) for i in range(count)]
    for seq in seqs:
        instance.enqueue(seq)
    return seqs


def decoding(instance: Instance, count: int) -> list[Sequence]:
    """``count`` running sequences that finished their prefill (next step: decode token 2)."""
    seqs = enqueued(instance, count)
    for seq in seqs:
        assert admit(instance, seq, 0.0, watermark=False)
        seq.kv_tokens, seq.generated_tokens = PROMPT, 1
    return seqs


def test_admit_gives_the_prefill_its_blocks_and_keeps_the_watermark_free():
    instance = make_instance()
    first, second = enqueued(instance, 2)
    assert admit(instance, first, 0.5)
    assert (first.blocks, instance.kv.used_blocks, first.residency, first.first_scheduled_s) == (
        50, 50, Residency.RUNNING, 0.5)
    assert instance.running == [first] and instance.waiting == [second]
    assert not admit(instance, second, 0.5)  # 50 free, and 1 must stay free
    assert instance.waiting == [second] and instance.kv.used_blocks == 50
    assert admit(instance, second, 0.75, watermark=False)
    assert instance.kv.free_blocks == 0 and instance.running == [first, second] and not instance.waiting


def test_preemption_by_recompute_drops_the_kv_and_requeues_the_request():
    instance = make_instance()
    [seq] = decoding(instance, 1)
    preempt(instance, seq)
    assert (seq.kv_tokens, seq.blocks, seq.residency, seq.num_preemptions) == (0, 0, Residency.QUEUED, 1)
    assert instance.waiting == [seq] and not instance.running and instance.kv.used_blocks == 0
    assert instance.memory_moved and instance.swap_tokens == 0


def test_preemption_by_swap_keeps_the_kv_on_the_host_and_swap_in_charges_the_copy_back():
    instance = make_instance(preemption="swap")
    [seq] = decoding(instance, 1)
    preempt(instance, seq)
    assert (seq.kv_tokens, seq.blocks, seq.residency) == (PROMPT, 0, Residency.SWAPPED)
    assert instance.swapped == [seq] and instance.kv.used_blocks == 0 and instance.swap_tokens == PROMPT
    swap_in(instance, seq, 2.0)
    assert seq.blocks == decode_slot_blocks(seq, 16) == 51  # 801 tokens after the next step
    assert instance.running == [seq] and not instance.swapped and instance.kv.used_blocks == 51
    assert instance.swap_tokens == 2 * PROMPT and seq.preempted_s == 2.0


def test_reserving_decode_slots_preempts_the_newest_while_memory_is_short():
    instance = make_instance()
    old, new = decoding(instance, 2)  # 100 of 100 blocks; each next token needs a 51st block
    reserve_decode_slots(instance)
    assert instance.running == [old] and old.blocks == 51 and new.residency == Residency.QUEUED
    assert instance.kv.used_blocks == 51 and instance.waiting == [new]


def test_preemption_by_swap_recomputes_a_request_that_has_not_decoded_yet():
    """``preempt`` swaps only a sequence that has decoded (its KV is worth copying); one preempted
    mid-prefill (a chunked prompt, no token yet) goes back to the waiting queue with no KV."""
    instance = make_instance(preemption="swap")
    [seq] = enqueued(instance, 1)
    assert admit(instance, seq, 0.0, watermark=False)
    seq.kv_tokens = 512  # two chunks of 256 prefilled, no token generated
    preempt(instance, seq)
    assert (seq.kv_tokens, seq.blocks, seq.residency, seq.num_preemptions) == (0, 0, Residency.QUEUED, 1)
    assert instance.waiting == [seq] and not instance.swapped and instance.swap_tokens == 0


def test_a_sequence_handing_its_decode_to_another_instance_gets_no_decode_slot():
    """A sequence whose first token ended its prefill on a prefill instance (``pd_handoff``) moves
    to a decode instance for its next tokens: no block is reserved for them here, though its
    800-token KV fills 50 blocks and a next token would start a 51st, as the decoding one's does."""
    instance = Instance(0, InstanceConfig(gpu=GPU, model=MODEL, kv_blocks=120), EventQueue(), NullHost())
    handing_off, staying = decoding(instance, 2)
    handing_off.pd_handoff = True
    reserve_decode_slots(instance)
    assert (handing_off.blocks, staying.blocks, instance.kv.used_blocks) == (50, 51, 101)
    assert instance.running == [handing_off, staying]
