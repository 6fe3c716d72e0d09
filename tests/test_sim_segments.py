"""Segment planning (``simulator.segments``): a coalesced decode segment's end times are the
sums one iteration at a time would make, and it stops where the batch could change."""

from __future__ import annotations

import random

import pytest

from hardware.latency import latency_model
from simulator.kv_blocks import KVBlockManager
from simulator.request import Request
from simulator.schedulers import make_scheduler
from simulator.segments import SegmentPlanner, block_growth
from simulator.sequence import Sequence

GPU, MODEL = "A100-80GB", "Llama-2-7B"


def decoding(prompt: int, output: int, generated: int, reasoning: int = 0) -> Sequence:
    seq = Sequence(Request(0, 0.0, prompt, output, reasoning_tokens=reasoning), record_token_curve=False)
    seq.generated_tokens, seq.kv_tokens = generated, prompt + generated - 1
    seq.blocks = -(-(seq.kv_tokens + 1) // 16)
    return seq


def planner(scheduler: str = "fcfs", free_blocks: int = 10_000, max_iterations: int = 1024) -> SegmentPlanner:
    kv = KVBlockManager(free_blocks + 1_000, 16, watermark_fraction=0.0)
    kv.allocate(1_000)
    options = {"quantum_tokens": 7} if scheduler == "rr" else {}
    return SegmentPlanner(latency_model(GPU, MODEL), kv, make_scheduler(scheduler, **options), max_iterations)


@pytest.mark.parametrize("reasoning, iterations", [(30, 20), (300, 290)])  # summed in Python, in numpy
def test_decode_ends_are_the_one_iteration_sums_until_the_first_reasoning_end(reasoning, iterations):
    batch = [decoding(100, 500, 10), decoding(200, 600, 10, reasoning=reasoning)]
    ends = planner().decode_ends(1.0, batch, 0.25, False)
    base_s, per_token_s = latency_model(GPU, MODEL).decode_coefficients(2)
    context, t, expected = sum(s.kv_tokens for s in batch), 1.0, []
    for j in range(iterations):  # the second request ends its reasoning after reasoning - 10 tokens
        dt = (context + 2 * (j + 1)) * per_token_s + base_s
        t += dt + 0.25 if j == 0 else dt
        expected.append(t)
    assert ends == expected  # bit for bit


@pytest.mark.parametrize("scheduler, single_iteration, max_iterations, iterations", [
    ("fcfs", True, 1024, 1),  # after a preemption or swap-in
    ("fcfs", False, 16, 16),  # the planner's cap
    ("fcfs", False, 1024, 40),  # the first output to end
    ("rr", False, 1024, 4),  # a quantum of 7 tokens, 3 used
])
def test_decode_segment_stops_where_the_batch_could_change(scheduler, single_iteration, max_iterations, iterations):
    batch = [decoding(100, 50, 10), decoding(100, 500, 10)]
    for seq in batch:
        seq.quantum_start_tokens = 7
    ends = planner(scheduler, max_iterations=max_iterations).decode_ends(0.0, batch, 0.0, single_iteration)
    assert len(ends) == iterations


def test_decode_segment_stops_before_its_blocks_outgrow_free_memory():
    batch = [decoding(100, 1000, 10), decoding(100, 1000, 10)]  # 109 KV tokens, 7 blocks each
    # 2 free blocks: the 8th block of each fills at 113 tokens (iteration 4), the 9th at 129 (iteration 20)
    assert len(planner(free_blocks=2).decode_ends(0.0, batch, 0.0, False)) == 19


def test_block_growth_gives_the_blocks_any_number_of_iterations_fills():
    rng = random.Random(0)
    batch = [decoding(rng.randrange(1, 300), 2_000, rng.randrange(1, 300)) for _ in range(12)]
    held, count, at_least = block_growth(batch, 16)
    for done in range(100):
        whole, rest = divmod(done, 16)
        brute = sum(-(-(s.kv_tokens + done) // 16) - s.blocks for s in batch)
        assert held + count * whole + at_least[16 - rest] == brute


def test_a_mixed_iteration_starts_its_waiting_prompts_prefill_and_keeps_a_running_chunks_phase():
    """``mixed_iteration_s`` moves a prompt it starts from WAITING to PREFILL; a chunked prompt
    already in PREFILL stays there. Its latency is the latency model's for the iteration's
    prefill tokens, their attention pairs (each chunk after its cached context) and the decodes."""
    from simulator.request import Phase

    fresh = Sequence(Request(1, 0.0, 100, 5), record_token_curve=False)
    chunked = Sequence(Request(2, 0.0, 300, 5), record_token_curve=False)
    chunked.phase, chunked.kv_tokens = Phase.PREFILL, 200
    decode = [decoding(50, 10, 3)]
    iteration_s = planner().mixed_iteration_s([(fresh, 100), (chunked, 100)], decode)
    assert (fresh.phase, chunked.phase) == (Phase.PREFILL, Phase.PREFILL)
    pairs = 100 * (0 + 101 / 2) + 100 * (200 + 101 / 2)
    assert iteration_s == latency_model(GPU, MODEL).iteration_time_s(200, pairs, 1, 52 + 1)
