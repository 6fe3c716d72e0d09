"""Workloads with prefix identity: the Mooncake trace reader refuses malformed rows by file and
line; the synthetic generators share exactly the prefixes they state."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.workloads.arrivals import PoissonArrivals
from simulator.workloads.hash_traces import hash_trace_path, load_hash_trace, read_hash_trace
from simulator.workloads.prefix_sharing import (
    FEW_SHOT_GSM8K,
    SGLANG_SHARED_PREFIX,
    VLLM_MULTI_TURN,
    SharedPromptSpec,
    session_requests,
    shared_prompt_requests,
)

GOOD = {"timestamp": 10, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}


def write_rows(path, rows: list) -> None:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))


@pytest.mark.parametrize("row, problem", [
    ("{not json", "not a JSON object"),
    ([1, 2], "not a JSON object but list"),
    ({k: v for k, v in GOOD.items() if k != "hash_ids"}, "missing key(s) ['hash_ids']"),
    ({**GOOD, "session": 3}, "unknown key(s) ['session']"),
    ({**GOOD, "timestamp": -1}, "timestamp -1 is not a finite number >= 0"),
    ({**GOOD, "timestamp": 5}, "timestamp 5 is before the previous row's 10.0"),
    ({**GOOD, "input_length": 0}, "input_length 0 is below 1"),
    ({**GOOD, "output_length": 2.5}, "output_length 2.5 is not an integer"),
    ({**GOOD, "hash_ids": "0,1"}, "hash_ids is not a list but str"),
    ({**GOOD, "hash_ids": [0, 1, 2]}, "3 hash_ids for input_length 1000: expected ceil(1000 / 512) = 2"),
    ({**GOOD, "hash_ids": [0, -4]}, "hash_ids[1] -4 is not an integer >= 0"),
    ({**GOOD, "hash_ids": [0, True]}, "hash_ids[1] True is not an integer >= 0"),
    ({**GOOD, "hash_ids": [7, 1]}, "hash_ids[1] 1 follows id 7 here but id 0 on an earlier line"),
    ({**GOOD, "hash_ids": [1, 2]}, "hash_ids[0] 1 follows the start here but id 0 on an earlier line"),
    ({**GOOD, "input_length": 1500, "hash_ids": [0, 1, 1]}, "hash_ids[2] 1 follows id 1 here but id 0"),
])
def test_a_malformed_row_is_refused_with_its_file_and_line(tmp_path, row, problem):
    path = tmp_path / "trace.jsonl"
    write_rows(path, [{**GOOD, "timestamp": 10}, row])
    with pytest.raises(ValueError) as error:
        read_hash_trace(path)
    assert str(error.value).startswith(f"{path}, line 2: ") and problem in str(error.value)


def test_empty_lines_and_files_are_refused(tmp_path):
    empty, blank = tmp_path / "empty.jsonl", tmp_path / "blank.jsonl"
    empty.write_text("")
    write_rows(blank, [GOOD, ""])
    with pytest.raises(ValueError, match="empty.jsonl: no request rows"):
        read_hash_trace(empty)
    with pytest.raises(ValueError, match="blank.jsonl, line 2: empty line"):
        read_hash_trace(blank)


def test_a_gzipped_trace_reads_as_the_plain_one_and_rescales_its_arrivals(tmp_path):
    rows = [{**GOOD, "timestamp": 1000 * i, "hash_ids": [0, 10 + i]} for i in range(5)]
    plain, packed = tmp_path / "t.jsonl", tmp_path / "t.jsonl.gz"
    write_rows(plain, rows)
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert [r.block_hashes for r in load_hash_trace(plain)] == [r.block_hashes for r in load_hash_trace(packed)]
    window = load_hash_trace(packed, first_request=1, max_requests=3, target_rate_rps=2.0)
    assert [r.arrival_s for r in window] == [0.0, 0.5, 1.0]
    assert [r.block_hashes.hashes for r in window] == [(0, 11), (0, 12), (0, 13)]
    with pytest.raises(ValueError, match="has 5 rows; rows 3 to 5 asked"):
        load_hash_trace(packed, first_request=3, max_requests=3)


def test_the_shipped_mooncake_traces_have_the_papers_sizes():
    conversation, synthetic = load_hash_trace("mooncake_conversation"), load_hash_trace("mooncake_synthetic")
    assert (len(conversation), len(synthetic)) == (12031, 3993)
    assert np.mean([r.prompt_tokens for r in conversation]) == pytest.approx(12035, abs=1)
    assert np.mean([r.output_tokens for r in conversation]) == pytest.approx(343, abs=1)
    assert conversation[-1].arrival_s / 60 == pytest.approx(58.95, abs=0.01)


def hits_one_at_a_time(requests) -> tuple[int, int]:
    """(hit tokens, query tokens) of an unlimited cache that serves ``requests`` one after another."""
    for position, request in enumerate(requests):
        request.arrival_s = 1000.0 * position
    cluster = Cluster({"H100-80GB": 1})
    cluster.deploy(InstanceConfig(gpu="H100-80GB", model="Llama-3.1-8B", prefix_caching=True, kv_blocks=1_000_000),
                   ready_now=True)
    cluster.run(requests)
    cache = cluster.instances[0].prefix_cache
    return cache.hit_tokens, cache.query_tokens


def test_requests_of_a_shared_prompt_find_exactly_its_full_blocks_cached():
    spec = SharedPromptSpec(groups=3, prompts_per_group=4, prefix_tokens=2040, question_tokens=128, output_tokens=8)
    requests = shared_prompt_requests(spec, PoissonArrivals(1.0), np.random.default_rng(0))
    assert len(requests) == 12 and all(r.prompt_tokens == 2168 for r in requests)
    hits, queried = hits_one_at_a_time(requests)
    assert (hits, queried) == (3 * 3 * (2040 // 16) * 16, 12 * 2168)  # all but each group's first: 127 blocks


def test_the_benchmark_presets_state_their_sources_numbers():
    assert (SGLANG_SHARED_PREFIX.groups, SGLANG_SHARED_PREFIX.prompts_per_group, SGLANG_SHARED_PREFIX.prefix_tokens,
            SGLANG_SHARED_PREFIX.question_tokens, SGLANG_SHARED_PREFIX.output_tokens) == (64, 16, 2048, 128, 256)
    assert FEW_SHOT_GSM8K.prefix_tokens == 8 * (62 + 115)
    assert (VLLM_MULTI_TURN.min_turns, VLLM_MULTI_TURN.max_turns, VLLM_MULTI_TURN.common_prefix_tokens) == (6, 9, 500)


def test_each_session_turn_finds_the_history_before_it_cached():
    requests = session_requests(VLLM_MULTI_TURN, 2, np.random.default_rng(1))
    by_conversation: dict[int, list] = {}
    for request in requests:
        by_conversation.setdefault(request.block_hashes.hashes[31], []).append(request)  # block 31: past the common 496 tokens
    assert len(by_conversation) == 2 and all(6 <= len(turns) <= 9 for turns in by_conversation.values())
    expected = 0
    for turns in by_conversation.values():
        turns.sort(key=lambda r: r.arrival_s)
        for before, after in zip(turns, turns[1:]):
            history = before.prompt_tokens + before.output_tokens
            assert after.prompt_tokens - history in range(120, 161)
            assert after.block_hashes.hashes[:history // 16] == before.block_hashes.hashes[:history // 16]
            # the answer's last token never had its KV computed: (history - 1) tokens are cached
            expected += min((history - 1) // 16, (after.prompt_tokens - 1) // 16) * 16
    expected += (500 // 16) * 16  # the later conversation's first turn finds the common prefix
    hits, _ = hits_one_at_a_time(sorted(requests, key=lambda r: r.arrival_s))
    assert hits == expected


def test_generators_refuse_bad_specs():
    with pytest.raises(ValueError, match="SharedPromptSpec.groups must be an integer >= 1, got 0"):
        SharedPromptSpec(groups=0, prompts_per_group=1, prefix_tokens=1, question_tokens=1, output_tokens=1)
    with pytest.raises(ValueError, match="SessionSpec.max_turns 2 is below min_turns 3"):
        VLLM_MULTI_TURN.__class__(**{**VLLM_MULTI_TURN.__dict__, "min_turns": 3, "max_turns": 2})


def test_a_mooncake_workload_draws_a_window_per_seed_at_the_stated_rate():
    from envs.scenario import Workload

    workload = Workload(arrival="mooncake_conversation", rate_rps=2.0, lengths="trace")
    first, again = (workload.sample(300, np.random.default_rng(5)) for _ in range(2))
    other = workload.sample(300, np.random.default_rng(6))
    assert [r.block_hashes for r in first] == [r.block_hashes for r in again]
    assert [r.block_hashes for r in first] != [r.block_hashes for r in other]
    assert (len(first) - 1) / first[-1].arrival_s == pytest.approx(2.0, rel=1e-12)
    with pytest.raises(ValueError, match="brings its lengths with its block hashes: lengths must be 'trace'"):
        Workload(arrival="mooncake_conversation", lengths="sharegpt")
    with pytest.raises(ValueError, match="mooncake_synthetic has only 3993 requests, 5000 asked"):
        Workload(arrival="mooncake_synthetic", lengths="trace").sample(5000, np.random.default_rng(0))


def test_the_capacity_replay_reaches_the_reusable_share_and_grows_with_capacity():
    from experiments.prefix_cache_capacity import hit_rate
    from prefix_cache_checks import reusable_share_tokens

    hits, queried = reusable_share_tokens(hash_trace_path("mooncake_synthetic"), 10**9)  # every prompt counted
    rates = [hit_rate("mooncake_synthetic", capacity) for capacity in (1e5, 1e6, 1e7, 1e9)]
    assert rates == sorted(rates) and rates[-1] == hits / queried
