"""Each local scheduler's rule on small hand-built scenarios, timed exactly from the latency model.

Memory is sized in KV blocks (16 tokens); below 100 blocks vLLM's 1 % watermark is 0 blocks,
so "memory for two requests" is exact. Expected times are accumulated left to right, one
iteration at a time, as the engine does, so they must match to the last bit.
"""

from __future__ import annotations

import pytest

from hardware.gpus import get_gpu
from hardware.latency import activation_reserve_bytes, latency_model
from hardware.models import get_model, kv_bytes_per_token_per_gpu, weights_per_gpu_bytes
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.schedulers.pascal import PascalScheduler
from simulator.sequence import Residency, Sequence

GPU, MODEL = "A100-80GB", "Llama-2-7B"
BLOCK = 16
LAT = latency_model(GPU, MODEL, engine="vidur-2024")
SWAP_S_PER_TOKEN = get_model(MODEL).kv_bytes_per_token / (get_gpu(GPU).host_link_gbps * 1e9 * 1)


def utilization_for_blocks(blocks: int) -> float:
    """``memory_utilization`` leaving ``blocks`` KV blocks of 16 tokens on one A100 (half a block
    of slack against rounding; ``kv_capacity_tokens`` inverted)."""
    model = get_model(MODEL)
    tokens = blocks * BLOCK + BLOCK // 2
    needed_bytes = weights_per_gpu_bytes(model) + activation_reserve_bytes(model) + tokens * kv_bytes_per_token_per_gpu(model)
    return needed_bytes / get_gpu(GPU).memory_bytes


def one_instance(scheduler: str, blocks: int | None = None, **config) -> Cluster:
    cluster = Cluster({GPU: 1}, record_token_curves=True)
    if blocks is not None:
        config["memory_utilization"] = utilization_for_blocks(blocks)
    cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL, engine="vidur-2024", scheduler=scheduler, block_size=BLOCK, **config),
                   ready_now=True)
    if blocks is not None:
        kv = cluster.instances[0].kv
        assert (kv.total_blocks, kv.watermark_blocks) == (blocks, 0)
    return cluster


def prefill_s(*prompts: int) -> float:
    """A prefill-only iteration of whole prompts (no cached context)."""
    pairs = 0.0
    for tokens in prompts:
        pairs += tokens * (0 + (tokens + 1) / 2)
    return LAT.iteration_time_s(sum(prompts), pairs, 0, 0)


def decode_times(start_s: float, batch: int, contexts: range) -> list[float]:
    """End times of decode iterations whose per-sequence contexts run over ``contexts``."""
    times, t = [], start_s
    for context in contexts:
        t = t + LAT.decode_time_s(batch, batch * context)
        times.append(t)
    return times


def by_id(cluster: Cluster) -> dict:
    return {o.request_id: o for o in cluster.outcomes}


# ------------------------------------------------------------------------------ fcfs
# Two 400 + 400 requests in 64 blocks: both are admitted (25 blocks each), decode in lockstep
# and need a 33rd block each before decode iteration 113 (context 513): 66 > 64, so the newest
# (request 1) is preempted with 113 tokens generated and KV of 512 tokens.
PROMPT, OUTPUT, PREEMPT_AT = 400, 400, 113


def test_fcfs_preempts_the_newest_and_recomputes_it_keeping_its_ttft():
    cluster = one_instance("fcfs", blocks=64, preemption="recompute")
    cluster.run([Request(0, 0.0, PROMPT, OUTPUT), Request(1, 0.0, PROMPT, OUTPUT)])
    old, new = by_id(cluster)[0], by_id(cluster)[1]
    t1 = prefill_s(PROMPT, PROMPT)
    together = decode_times(t1, 2, range(PROMPT + 1, PROMPT + PREEMPT_AT))
    preempted_s = together[-1]
    old_finish = decode_times(preempted_s, 1, range(PROMPT + PREEMPT_AT, PROMPT + OUTPUT))[-1]
    assert (old.first_token_s, new.first_token_s) == (t1, t1)
    assert (old.num_preemptions, new.num_preemptions) == (0, 1)
    assert old.finish_s == old_finish
    # Request 1 waits for the memory, then re-prefills prompt + 113 generated tokens, which
    # emits token 114; 286 decode iterations follow.
    recomputed = PROMPT + PREEMPT_AT
    token_114_s = old_finish + LAT.iteration_time_s(recomputed, recomputed * (0 + (recomputed + 1) / 2), 0, 0)
    assert new.finish_s == decode_times(token_114_s, 1, range(recomputed + 1, PROMPT + OUTPUT))[-1]
    assert new.finish_s > old.finish_s
    assert new.preempted_s == old_finish - preempted_s
    assert new.max_tbt_s == token_114_s - preempted_s
    assert (preempted_s, PREEMPT_AT) in new.token_curve and (token_114_s, PREEMPT_AT + 1) in new.token_curve


def test_fcfs_with_swap_resumes_the_newest_without_recomputing_and_pays_the_copies():
    cluster = one_instance("fcfs", blocks=64, preemption="swap")
    cluster.run([Request(0, 0.0, PROMPT, OUTPUT), Request(1, 0.0, PROMPT, OUTPUT)])
    old, new = by_id(cluster)[0], by_id(cluster)[1]
    swapped_tokens = PROMPT + PREEMPT_AT - 1
    copy_s = swapped_tokens * SWAP_S_PER_TOKEN
    preempted_s = decode_times(prefill_s(PROMPT, PROMPT), 2, range(PROMPT + 1, PROMPT + PREEMPT_AT))[-1]
    # The swap-out copy delays the old request's next iteration; the swap-in copy delays the
    # new one's first iteration after the old one finished.
    after_swap_out_s = preempted_s + (LAT.decode_time_s(1, PROMPT + PREEMPT_AT) + copy_s)
    old_finish = decode_times(after_swap_out_s, 1, range(PROMPT + PREEMPT_AT + 1, PROMPT + OUTPUT))[-1]
    assert old.finish_s == old_finish
    token_114_s = old_finish + (LAT.decode_time_s(1, PROMPT + PREEMPT_AT) + copy_s)
    assert new.finish_s == decode_times(token_114_s, 1, range(PROMPT + PREEMPT_AT + 1, PROMPT + OUTPUT))[-1]
    assert new.num_preemptions == 1 and old.num_preemptions == 0
    assert new.max_tbt_s == token_114_s - preempted_s


def test_fcfs_admits_no_new_prompt_while_a_request_is_swapped_out():
    """vLLM v0 admits nothing from the waiting queue while a sequence is swapped out: a short
    request arriving just after request 1's swap-out (31 free blocks, it needs 2) waits until
    request 0 finished and request 1 is back in."""
    cluster = one_instance("fcfs", blocks=64, preemption="swap")
    preempted_s = decode_times(prefill_s(PROMPT, PROMPT), 2, range(PROMPT + 1, PROMPT + PREEMPT_AT))[-1]
    cluster.run([Request(0, 0.0, PROMPT, OUTPUT), Request(1, 0.0, PROMPT, OUTPUT), Request(2, preempted_s + 1e-3, 16, 4)])
    outcomes = by_id(cluster)
    assert outcomes[1].num_preemptions == 1
    assert outcomes[2].first_scheduled_s > outcomes[0].finish_s


def test_fcfs_fills_a_prefill_batch_up_to_its_token_budget_exactly():
    """Prompts that wait at an iteration boundary join one prefill iteration in order while their
    tokens fit ``max_batched_tokens``: with 1,000, prompts of 400, 400 and 300 that arrive during
    a 2,000-token prefill (longer than the budget, so it runs alone) give 400 + 400 (the 300 would
    pass 1,000), then the 300 alone; two of 500 fill 1,000 exactly, so they go together."""
    cluster = one_instance("fcfs", max_batched_tokens=1000)
    cluster.run([Request(0, 0.0, 2000, 1), Request(1, 1e-3, 400, 2), Request(2, 2e-3, 400, 2), Request(3, 3e-3, 300, 2)])
    outcomes = by_id(cluster)
    first_s = prefill_s(2000)
    second_s = first_s + prefill_s(400, 400)
    assert outcomes[0].first_token_s == first_s
    assert outcomes[1].first_token_s == outcomes[2].first_token_s == second_s
    assert outcomes[3].first_token_s == second_s + prefill_s(300)
    cluster = one_instance("fcfs", max_batched_tokens=1000)
    cluster.run([Request(0, 0.0, 2000, 1), Request(1, 1e-3, 500, 2), Request(2, 2e-3, 500, 2)])
    assert by_id(cluster)[1].first_token_s == by_id(cluster)[2].first_token_s == first_s + prefill_s(500, 500)


# ------------------------------------------------------------------------------ rr
def test_round_robin_swaps_out_the_request_that_used_its_quantum_for_a_waiting_one():
    """PASCAL Fig. 2(c): three requests, memory for two. A and B (100-token prompts, 7 blocks
    each) run; C's 7 blocks do not fit beside them (21 > 20). After their 20-token quantum, A and B
    go to the back of the order (A, then B), so the batch becomes C + A and B is swapped out."""
    quantum = 20
    cluster = one_instance("rr", blocks=20, scheduler_options={"quantum_tokens": quantum})
    cluster.submit([Request(i, 0.0, 100, 60) for i in range(3)])
    cluster.advance(0.0)
    instance = cluster.instances[0]
    a, b = sorted(instance.running, key=lambda s: s.request_id)
    [c] = instance.waiting
    assert (a.request_id, b.request_id, c.request_id) == (0, 1, 2)
    t1 = prefill_s(100, 100)
    quantum_end_s = decode_times(t1, 2, range(101, 100 + quantum))[-1]
    cluster.advance(quantum_end_s)
    assert a.generated_tokens == b.generated_tokens == quantum
    assert b.residency == Residency.SWAPPED and a.residency == Residency.RUNNING
    assert c.residency == Residency.RUNNING and c.generated_tokens == 0
    cluster.advance()
    outcomes = by_id(cluster)
    # C's prefill runs alone (vLLM prefill iteration) and carries the copy of B's 119 KV tokens.
    assert outcomes[2].ttft_s == quantum_end_s + (prefill_s(100) + 119 * SWAP_S_PER_TOKEN)
    # Time sharing: every request got its first token before any finished.
    assert outcomes[2].first_token_s < min(o.finish_s for o in outcomes.values())
    assert outcomes[1].num_preemptions >= 1
    # Swapped, not recomputed: B's 21st token follows its 20th without a new prefill token.
    curve = outcomes[1].token_curve
    counts = [tokens for _, tokens in curve]
    assert counts == sorted(set(counts)) and (quantum_end_s, quantum) in curve
    assert all(o.completed and o.output_tokens == 60 for o in outcomes.values())


def test_round_robin_admits_new_prompts_while_their_tokens_fit_the_budget_left():
    """The first new prompt of a batch is admitted whatever its length; each next one while its
    tokens fit what ``max_batched_tokens`` has left. With 1,000: the 2,000-token prompt runs
    alone; then 400 (1,000 left) and 600 (600 left: fits exactly) together, and the 1-token
    prompt (0 left) waits for the next batch, where it comes first."""
    cluster = one_instance("rr", max_batched_tokens=1000)
    cluster.run([Request(0, 0.0, 2000, 1), Request(1, 1e-3, 400, 2), Request(2, 2e-3, 600, 2), Request(3, 3e-3, 1, 2)])
    outcomes = by_id(cluster)
    first_s = prefill_s(2000)
    second_s = first_s + prefill_s(400, 600)
    assert outcomes[0].first_token_s == first_s
    assert outcomes[1].first_token_s == outcomes[2].first_token_s == second_s
    assert outcomes[3].first_token_s == second_s + prefill_s(1)


# ------------------------------------------------------------------------------ sarathi
def test_sarathi_splits_a_long_prompt_into_budget_chunks_beside_a_running_decode():
    """A 1,000-token prompt arrives while a request decodes; with a 256-token budget each
    iteration carries that decode plus 255 prompt tokens: chunks 255, 255, 255, 235."""
    cluster = one_instance("sarathi", scheduler_options={"chunk_tokens": 256})
    decode_prompt, long_prompt = 100, 1000
    t_decode_first = prefill_s(decode_prompt)
    arrival_s = t_decode_first / 2  # during the first request's prefill
    cluster.run([Request(0, 0.0, decode_prompt, 50), Request(1, arrival_s, long_prompt, 5)])
    first, long = by_id(cluster)[0], by_id(cluster)[1]
    ends_s, done = [t_decode_first], 0
    for k, chunk in enumerate([255, 255, 255, 235], start=1):
        ends_s.append(ends_s[-1] + LAT.iteration_time_s(chunk, chunk * (done + (chunk + 1) / 2), 1, decode_prompt + k))
        done += chunk
    assert done == long_prompt
    assert long.first_token_s == ends_s[-1]
    assert long.ttft_s == ends_s[-1] - arrival_s
    # Stall-free: the decoding request's tokens 2..5 come at the ends of those mixed iterations,
    # and its largest gap is one of them.
    curve = dict((tokens, time_s) for time_s, tokens in first.token_curve)
    assert [curve[n] for n in range(1, 6)] == ends_s
    assert first.max_tbt_s == max(b - a for a, b in zip(ends_s, ends_s[1:]))


def record_prefill_plans(cluster: Cluster) -> list[list[tuple[int, int]]]:
    """Spy on instance 0's batches: every batch with prefill chunks appends its
    [(request id, chunk tokens), ...] to the returned list (the scheduler runs unchanged)."""
    scheduler, plans = cluster.instances[0].scheduler, []
    form_batch = scheduler.form_batch

    def spy(instance, now):
        prefills, decode = form_batch(instance, now)
        if prefills:
            plans.append([(seq.request_id, tokens) for seq, tokens in prefills])
        return prefills, decode

    scheduler.form_batch = spy
    return plans


def test_sarathi_spends_exactly_the_budget_left_after_one_token_per_decode():
    """Budget 256 tokens; three prompts (257, 764, 300 tokens) wait at 0 s, 0 and 1 decode
    20 tokens. By hand (budget = 256 minus one token per decoding request; running chunks first,
    then waiting prompts in order while budget is left):
    1. no decode: request 0 takes 256 of 257 (no budget left, request 1 stays waiting);
    2. request 0 is one token short of its prompt but not decoding: budget 256, it takes 1, 255 to request 1;
    3. request 0 decodes: budget 255, all to request 1 (509 left);
    4. budget 255: request 1 takes its last 254, the 1 token left admits request 2;
    5. requests 0 and 1 decode: budget 254 to request 2 (299 left); 6. its last 45."""
    cluster = one_instance("sarathi", scheduler_options={"chunk_tokens": 256})
    plans = record_prefill_plans(cluster)
    cluster.run([Request(0, 0.0, 257, 20), Request(1, 0.0, 764, 20), Request(2, 0.0, 300, 2)])
    assert plans == [[(0, 256)], [(0, 1), (1, 255)], [(1, 255)], [(1, 254), (2, 1)], [(2, 254)], [(2, 45)]]
    assert all(o.completed for o in cluster.outcomes)


def test_sarathi_gives_a_running_prefill_the_last_token_of_budget():
    """Budget 2: request 0 (1-token prompt) and request 1 (5-token prompt) share the first
    iteration one token each; then request 0 decodes, leaving 1 token a batch, which request 1's
    prefill takes in each of the next four iterations (no stall until request 0 finishes)."""
    cluster = one_instance("sarathi", scheduler_options={"chunk_tokens": 2})
    plans = record_prefill_plans(cluster)
    cluster.run([Request(0, 0.0, 1, 20), Request(1, 0.0, 5, 20)])
    assert plans == [[(0, 1), (1, 1)]] + [[(1, 1)]] * 4
    outcomes = by_id(cluster)
    assert outcomes[1].first_token_s < outcomes[0].finish_s


def test_sarathi_stalls_a_running_prefill_while_decodes_take_the_whole_budget():
    """Budget 2 on instance 1: request 1 (1-token prompt) decodes beside request 2's 40-token
    prefill, which gets the 1 token left per iteration. Request 0, decoding on instance 0,
    migrates in (Llumnix-K §3.5): two decodes spend the budget, so request 2's prefill gets no
    chunk at all (not a 0-token one) until a decode finishes; every batch keeps its chunks plus
    one token per decode within 2."""
    cluster = Cluster({GPU: 2}, router=None)
    for _ in range(2):
        cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL, engine="vidur-2024", scheduler="sarathi",
                                      scheduler_options={"chunk_tokens": 2}), ready_now=True)
    cluster.submit([Request(0, 0.0, 1, 300), Request(1, 0.0, 1, 300), Request(2, 0.0, 40, 5)])
    for target in (0, 1, 1):
        cluster.dispatch(cluster.advance().seq, target)
    target = cluster.instances[1]
    moving, prefilling = cluster.arrived_sequences[0], cluster.arrived_sequences[2]
    batches = []
    form_batch = target.scheduler.form_batch

    def spy(instance, now):
        prefills, decode = form_batch(instance, now)
        stalled = prefilling in instance.running and not prefilling.in_decode and not prefills
        batches.append(([(seq.request_id, tokens) for seq, tokens in prefills], len(decode), stalled))
        return prefills, decode

    target.scheduler.form_batch = spy
    _advance_until(cluster, lambda: moving.in_decode and 1 < prefilling.kv_tokens < 40)
    assert cluster.migrate(moving, 1)
    assert cluster.advance() is None
    assert all(tokens >= 1 for chunks, _, _ in batches for _, tokens in chunks)
    assert all(sum(tokens for _, tokens in chunks) + decodes <= 2 for chunks, decodes, _ in batches)
    assert any(decodes == 2 and stalled for _, decodes, stalled in batches)  # the case is reached
    outcomes = by_id(cluster)
    assert all(o.completed for o in outcomes.values()) and outcomes[0].num_migrations == 1


def test_sarathi_admits_no_more_requests_than_its_batch_size():
    cluster = one_instance("sarathi", max_batch_size=1)
    plans = record_prefill_plans(cluster)
    cluster.run([Request(0, 0.0, 100, 5), Request(1, 0.0, 100, 5)])
    assert plans == [[(0, 100)], [(1, 100)]]  # budget 512 fits both prompts, the batch only one
    outcomes = by_id(cluster)
    assert outcomes[1].first_scheduled_s == outcomes[0].finish_s


def test_sarathi_admits_no_new_prompt_while_a_request_is_swapped_out():
    """vLLM v0's rule under chunked prefill too: two 400 + 400 requests overflow 64 blocks, so one
    is swapped out while the other decodes; short requests arriving meanwhile (2 blocks each, which
    fit) wait until nothing is swapped out."""
    cluster = one_instance("sarathi", blocks=64, preemption="swap")
    instance = cluster.instances[0]
    form_batch = instance.scheduler.form_batch
    waited_behind_swap = []

    def check(inst, now):
        waiting = set(inst.waiting)
        prefills, decode = form_batch(inst, now)
        admitted = [seq.request_id for seq, _ in prefills if seq in waiting]
        if inst.swapped:
            assert not admitted, (now, admitted)
            waited_behind_swap.extend(seq.request_id for seq in inst.waiting)
        return prefills, decode

    instance.scheduler.form_batch = check
    shorts = [Request(2 + k, 0.5 * (k + 1), 16, 4) for k in range(40)]  # one every 0.5 s for 20 s
    cluster.run([Request(0, 0.0, PROMPT, OUTPUT), Request(1, 0.0, PROMPT, OUTPUT), *shorts])
    assert by_id(cluster)[1].num_preemptions == 1 and waited_behind_swap  # the case is reached
    assert all(o.completed for o in cluster.outcomes)


def test_fcfs_without_chunks_stalls_the_decode_for_the_whole_prompt():
    cluster = one_instance("fcfs")
    t_decode_first = prefill_s(100)
    cluster.run([Request(0, 0.0, 100, 50), Request(1, t_decode_first / 2, 1000, 5)])
    long = by_id(cluster)[1]
    long_first_s = t_decode_first + prefill_s(1000)
    assert long.first_token_s == long_first_s
    # The decoding request's second token waits for the whole prefill, then one decode of both.
    second_token_s = long_first_s + LAT.decode_time_s(2, (100 + 1) + (1000 + 1))
    assert by_id(cluster)[0].max_tbt_s == second_token_s - t_decode_first


# ------------------------------------------------------------------------------ pascal
def test_scheduler_defaults_are_the_papers_and_the_bounds_are_exact():
    """PASCAL's quantum 500 tokens (§IV-C) and demotion threshold 5,000 KV tokens (§V-A), the RR
    baseline's quantum 500 (§V-A); the Sarathi-Serve token budget 512 (vLLM v0's chunked-prefill default). 1 is the smallest valid
    value of each; 0 is refused by name."""
    from simulator.schedulers.sarathi import SarathiScheduler

    pascal = PascalScheduler()
    assert (pascal.quantum_tokens, pascal.demotion_kv_tokens) == (500, 5000)
    assert SarathiScheduler().chunked_prefill_tokens == 512
    assert PascalScheduler(demotion_kv_tokens=1).demotion_kv_tokens == 1
    assert SarathiScheduler(chunk_tokens=1).chunked_prefill_tokens == 1
    with pytest.raises(ValueError, match=r"^demotion_kv_tokens must be positive, got 0$"):
        PascalScheduler(demotion_kv_tokens=0)
    with pytest.raises(ValueError, match=r"^chunk_tokens must be positive, got 0$"):
        SarathiScheduler(chunk_tokens=0)
    from simulator.schedulers.round_robin import RoundRobinScheduler

    assert RoundRobinScheduler().quantum_tokens == 500  # PASCAL §V-A's RR baseline
    assert RoundRobinScheduler(quantum_tokens=1).quantum_tokens == 1
    with pytest.raises(ValueError, match=r"^quantum_tokens must be positive, got 0$"):
        RoundRobinScheduler(quantum_tokens=0)


def test_pascal_queue_levels_are_0_for_reasoning_and_1_for_answering_or_demoted():
    reasoning, answering, demoted = (Sequence(Request(i, 0.0, 10, 20, reasoning_tokens=5), False) for i in range(3))
    answering.generated_tokens = 5  # every reasoning token generated: the next one answers
    demoted.demoted = True
    assert [PascalScheduler.queue_level(s) for s in (reasoning, answering, demoted)] == [0, 1, 1]


def _advance_until(cluster: Cluster, condition) -> None:
    events = cluster.events
    while not condition():
        events.pop_and_run()


def test_pascal_runs_reasoning_before_answering():
    """An answering request decodes alone; two reasoning requests arrive; memory holds two
    (7 + 7 + 7 > 20 blocks), so the answering request is swapped out until both finish reasoning."""
    cluster = one_instance("pascal", blocks=20)
    t_answer = [prefill_s(100)] + decode_times(prefill_s(100), 1, range(101, 150))
    arrival_s = (t_answer[10] + t_answer[11]) / 2  # between its 11th and 12th token
    cluster.run(
        [
            Request(0, 0.0, 100, 150),
            Request(1, arrival_s, 100, 60, reasoning_tokens=50),
            Request(2, arrival_s, 100, 60, reasoning_tokens=50),
        ]
    )
    answering, reasoning = by_id(cluster)[0], [by_id(cluster)[1], by_id(cluster)[2]]
    boundary_s = t_answer[11]  # the iteration in progress (token 12) finishes first
    swap_s = (100 + 12 - 1) * SWAP_S_PER_TOKEN
    for r in reasoning:
        assert r.first_token_s == boundary_s + (prefill_s(100, 100) + swap_s)
    assert answering.num_preemptions == 1
    resumed = [time_s for time_s, tokens in answering.token_curve if tokens == 13]
    assert resumed and resumed[0] > max(r.reasoning_end_s for r in reasoning)
    assert (boundary_s, 12) in answering.token_curve


def test_pascal_moves_a_request_that_ends_reasoning_to_the_back_of_the_answering_queue():
    """PASCAL §IV-C: a request whose reasoning ends joins the low-priority queue behind the
    requests already in it (a new round-robin order); a demoted one is in that queue already and
    keeps its place."""
    scheduler = PascalScheduler()
    plain, demoted = (Sequence(Request(i, 0.0, 10, 20, reasoning_tokens=5), False) for i in range(2))
    scheduler.on_enqueue(plain)
    scheduler.on_enqueue(demoted)
    demoted.demoted = True
    scheduler.on_phase_change(plain)
    scheduler.on_phase_change(demoted)
    assert (plain.queue_order, demoted.queue_order) == (3, 2)


@pytest.mark.parametrize("demotion_kv_tokens, demoted", [(150, True), (5000, False)])
def test_pascal_demotes_a_reasoning_request_whose_kv_exceeds_the_threshold(demotion_kv_tokens, demoted):
    """A long reasoning request (64-token prompt, 240 reasoning tokens) runs alone; two short
    reasoning requests arrive when its KV is ~214 tokens (14 blocks). Demoted (threshold 150) it
    ranks behind them and is swapped out (4 + 4 + 14 > 20 blocks); not demoted (threshold 5000)
    it keeps running and the second newcomer waits."""
    cluster = one_instance("pascal", blocks=20, scheduler_options={"demotion_kv_tokens": demotion_kv_tokens})
    t_long = [prefill_s(64)] + decode_times(prefill_s(64), 1, range(65, 64 + 250))
    arrival_s = (t_long[149] + t_long[150]) / 2
    cluster.submit(
        [
            Request(0, 0.0, 64, 250, reasoning_tokens=240),
            Request(1, arrival_s, 64, 40, reasoning_tokens=30),
            Request(2, arrival_s, 64, 40, reasoning_tokens=30),
        ]
    )
    instance = cluster.instances[0]
    _advance_until(cluster, lambda: bool(instance.running))
    [long] = instance.running
    if demoted:
        _advance_until(cluster, lambda: long.demoted)
        assert long.kv_tokens == demotion_kv_tokens + 1  # re-planned exactly when it crossed
        assert long.generated_tokens < long.reasoning_tokens
    _advance_until(cluster, lambda: len(instance.sequences()) == 3 and cluster.events.now_s > arrival_s)
    newcomers = sorted((s for s in instance.sequences() if s is not long), key=lambda s: s.request_id)
    boundary_s = t_long[150]
    assert cluster.events.now_s == boundary_s and long.kv_tokens == 64 + 150
    if demoted:
        assert long.residency == Residency.SWAPPED
        assert [s.residency for s in newcomers] == [Residency.RUNNING, Residency.RUNNING]
        expected_ttft_s = boundary_s + (prefill_s(64, 64) + (64 + 150) * SWAP_S_PER_TOKEN) - arrival_s
    else:
        assert long.residency == Residency.RUNNING
        assert [s.residency for s in newcomers] == [Residency.RUNNING, Residency.QUEUED]
        expected_ttft_s = boundary_s + prefill_s(64) - arrival_s
    cluster.advance()
    assert by_id(cluster)[1].ttft_s == expected_ttft_s
    assert all(o.completed for o in cluster.outcomes) and len(cluster.outcomes) == 3


# ------------------------------------------------------------------------------ priority
@pytest.mark.parametrize("scheduler, first_served", [("priority", 2), ("fcfs", 1)])
def test_priority_admits_tier_0_before_tier_2_when_both_wait(scheduler, first_served):
    """Batch size 1: request 0 (tier 1) runs; request 1 (tier 2) then request 2 (tier 0) wait.
    The priority scheduler serves tier 0 next; FCFS serves the earlier arrival."""
    cluster = one_instance(scheduler, max_batch_size=1)
    cluster.run(
        [Request(0, 0.0, 100, 20, tier=1), Request(1, 0.001, 200, 20, tier=2), Request(2, 0.002, 300, 20, tier=0)]
    )
    outcomes = by_id(cluster)
    first_finish = decode_times(prefill_s(100), 1, range(101, 120))[-1]
    assert outcomes[0].finish_s == first_finish
    second = outcomes[first_served]
    prompt = second.prompt_tokens
    assert second.first_scheduled_s == first_finish
    assert second.first_token_s == first_finish + prefill_s(prompt)
    assert second.finish_s == decode_times(first_finish + prefill_s(prompt), 1, range(prompt + 1, prompt + 20))[-1]
    last = outcomes[3 - first_served]
    assert last.first_scheduled_s == second.finish_s


@pytest.mark.parametrize("scheduler,preemption", [("rr", "swap"), ("rr", "recompute"), ("pascal", "swap")])
def test_round_robin_ends_its_batch_where_a_planned_prefix_hit_was_evicted(monkeypatch, scheduler, preemption):
    # Groups of 6 requests share a 512-token system prompt on a 120-block pool. A batch plan
    # reads a waiting request's hit while running requests hold that prefix; preempting them
    # makes it evictable, the decode slots evict it, and the request then needs more blocks
    # than planned. The batch must end there (it stays queued), not raise, and every request
    # must still complete with the pool never over-allocated.
    import numpy as np

    import simulator.schedulers.round_robin as round_robin
    from simulator.workloads import PoissonArrivals
    from simulator.workloads.prefix_sharing import SharedPromptSpec, shared_prompt_requests

    refused = []
    admit = round_robin.admit

    def counting_admit(instance, seq, now, watermark=True):
        fits = admit(instance, seq, now, watermark)
        if not fits:
            refused.append(seq.request_id)
        assert instance.kv.used_blocks <= instance.kv.total_blocks
        return fits

    monkeypatch.setattr(round_robin, "admit", counting_admit)
    spec = SharedPromptSpec(groups=8, prompts_per_group=6, prefix_tokens=512, question_tokens=64, output_tokens=1)
    rng = np.random.default_rng(1)
    requests = shared_prompt_requests(spec, PoissonArrivals(20.0), rng)
    outputs = rng.integers(16, 161, len(requests)).tolist()
    requests = [Request(r.request_id, r.arrival_s, r.prompt_tokens, o, block_hashes=r.block_hashes)
                for r, o in zip(requests, outputs)]
    cluster = Cluster({"A100-80GB": 2})
    options = {"quantum_tokens": 32} if scheduler == "rr" else {"quantum_tokens": 32, "demotion_kv_tokens": 600}
    for _ in range(2):
        cluster.deploy(InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", scheduler=scheduler,
                                      scheduler_options=options, preemption=preemption, kv_blocks=120,
                                      max_batch_size=16, prefix_caching=True), ready_now=True)
    outcomes = cluster.run(requests)
    assert refused, "no batch ended at an evicted hit: the case does not reach the branch"
    assert all(o.completed for o in outcomes) and len(outcomes) == len(requests)
    assert all(instance.kv.used_blocks <= instance.kv.total_blocks for instance in cluster.instances.values())
