"""Prefix caching (``simulator.prefix_cache``): hits, reference counts, LRU eviction against a
brute-force reference, exact accounting through preemption, swap, migration and PD transfer,
the latency of a hit and of a host-tier load, and the Mooncake trace's reusable share."""

from __future__ import annotations

import numpy as np
import pytest

from null_host import NullHost
from prefix_cache_checks import accounting_errors, reusable_share_tokens
from simulator.admission import admit, preempt
from simulator.cluster import Cluster
from simulator.events import EventQueue
from simulator.instance import Instance, InstanceConfig, Role
from simulator.prefix_keys import PrefixKeys
from simulator.request import BlockHashes, Request
from simulator.sequence import Sequence
from simulator.workloads.hash_traces import hash_trace_path, load_hash_trace

ENGINE = "vidur-2024"  # prefix caching off unless a test turns it on
GPU, MODEL = "A100-80GB", "Llama-2-7B"


def test_chained_keys_name_whole_prefixes():
    keys = PrefixKeys()
    first = keys.chain(BlockHashes(512, (7, 8, 9)))
    same = keys.chain(BlockHashes(512, (7, 8, 5)))
    other_parent = keys.chain(BlockHashes(512, (6, 8, 9)))
    other_size = keys.chain(BlockHashes(16, (7, 8, 9)))
    assert same[:2] == first[:2] and same[2] != first[2]
    assert not set(other_parent) & set(first)  # block 8 after 6 is not block 8 after 7
    assert not set(other_size) & set(first)
    assert len(keys) == 3 + 1 + 3 + 3


@pytest.mark.parametrize("name", ["mooncake_conversation", "mooncake_synthetic"])
def test_an_unlimited_cache_finds_exactly_the_traces_reusable_share(name):
    requests = load_hash_trace(name)
    for position, request in enumerate(requests):
        request.arrival_s = 1000.0 * position  # one at a time: each finishes before the next arrives
    cluster = Cluster({"H100-80GB": 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu="H100-80GB", model="Llama-3.1-8B", prefix_caching=True, kv_blocks=20_000_000),
                   ready_now=True)
    cluster.run(requests)
    cache = cluster.instances[0].prefix_cache
    hits, queried = reusable_share_tokens(hash_trace_path(name), 131072)
    assert (cache.hit_tokens, cache.query_tokens, cache.evicted_blocks) == (hits, queried, 0)
    if name == "mooncake_conversation":  # every prompt fits the context; the figure: 37.4 %
        assert queried == 144_793_823 and cache.hit_tokens / cache.query_tokens == pytest.approx(0.3734, abs=5e-5)


def random_requests(rng: np.random.Generator, count: int, block_tokens: int, max_tokens: int,
                    spacing_s: float) -> list[Request]:
    """Requests whose prompts branch off earlier ones (shared prefixes of random length); some
    carry hashes over their output as well (a session's next turn repeats it)."""
    paths: list[list[int]] = [[]]
    next_hash = 0
    requests = []
    for request_id in range(count):
        base = paths[int(rng.integers(len(paths)))]
        keep = int(rng.integers(len(base) + 1))
        total_blocks = keep + int(rng.integers(1, 6))
        hashes = base[:keep]
        while len(hashes) < total_blocks:
            hashes.append(next_hash)
            next_hash += 1
        output = int(rng.integers(1, 3 * block_tokens))
        prompt_blocks = max(1, total_blocks - int(rng.integers(0, 2)))
        prompt = min(prompt_blocks * block_tokens - int(rng.integers(0, block_tokens)), max_tokens - output)
        prompt = max(prompt, 1)
        prompt_hashes = -(-prompt // block_tokens)
        extended = -(-(prompt + output) // block_tokens)
        covered = prompt_hashes if rng.random() < 0.5 else extended
        while len(hashes) < covered:
            hashes.append(next_hash)
            next_hash += 1
        hashes = hashes[:covered]
        paths.append(hashes)
        requests.append(Request(request_id, spacing_s * request_id, prompt, output,
                                block_hashes=BlockHashes(block_tokens, tuple(hashes))))
    return requests


class ReferenceLRU:
    """The cache of one instance serving requests one at a time, by brute force: a list of
    cached prefixes (tuples of hashes), first evicted first."""

    def __init__(self, total_blocks: int, block_size: int, block_tokens: int) -> None:
        self.total, self.block_size, self.block_tokens = total_blocks, block_size, block_tokens
        self.unit = block_tokens // block_size
        self.order: list[tuple[int, ...]] = []

    def serve(self, request: Request) -> int:
        """Serve ``request`` alone; return the prompt tokens it found cached."""
        size, unit = self.block_tokens, self.unit
        hashes = request.block_hashes.hashes
        prompt, output = request.prompt_tokens, request.output_tokens
        described = prompt if len(hashes) <= -(-prompt // size) else prompt + output
        prefixes = [tuple(hashes[:i + 1]) for i in range(min(len(hashes), described // size))]
        limit = min(len(prefixes), (prompt - 1) // size)
        hit = 0
        while hit < limit and prefixes[hit] in self.order:
            hit += 1
        for prefix in prefixes[:hit]:
            self.order.remove(prefix)
        full = -(-prompt // self.block_size)
        self._fit(full)
        for prefix in prefixes[hit:prompt // size]:  # the prefill's blocks; an equal cached one is shared
            if prefix in self.order:
                self.order.remove(prefix)
        peak = max(full, -(-(prompt + output - 1) // self.block_size))
        self._fit(peak)
        done = min(len(prefixes), (prompt + output - 1) // size)
        for prefix in prefixes[prompt // size:done]:
            if prefix in self.order:
                self.order.remove(prefix)
        self.order += list(reversed(prefixes[:done]))
        return hit * size

    def _fit(self, used_blocks: int) -> None:
        while used_blocks + self.unit * len(self.order) > self.total:
            self.order.pop(0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eviction_is_lru_as_a_brute_force_reference_computes_it(seed):
    rng = np.random.default_rng(seed)
    total_blocks, block_tokens = 200, 32
    requests = random_requests(rng, 150, block_tokens, (total_blocks - 2) * 16, spacing_s=1000.0)
    snapshots: list[tuple[int, list[int]]] = []

    def snapshot(cluster: Cluster, instance: Instance, seq: Sequence) -> bool:
        snapshots.append((instance.prefix_cache.hit_tokens, list(instance.prefix_cache.evictable)))
        return True

    cluster = Cluster({GPU: 1}, completion_hook=snapshot)
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=True, kv_blocks=total_blocks), ready_now=True)
    cluster.run(requests)
    prefix_of = {}
    for seq in cluster.arrived_sequences:
        for position, key in enumerate(seq.block_keys):
            prefix_of[key] = seq.request.block_hashes.hashes[:position + 1]
    reference = ReferenceLRU(total_blocks, 16, block_tokens)
    before = 0
    for request, (hit_tokens, order) in zip(requests, snapshots):
        expected_hit = reference.serve(request)
        assert hit_tokens - before == expected_hit, f"request {request.request_id}"
        assert [prefix_of[key] for key in order] == reference.order, f"after request {request.request_id}"
        before = hit_tokens
    assert len(snapshots) == len(requests)
    evictions = cluster.instances[0].prefix_cache.evicted_blocks
    assert evictions > 0 and before > 0  # the reference was put to work


def test_a_hit_skips_the_cached_prompt_but_attention_reads_the_whole_context():
    first = Request(0, 0.0, 1024, 1, block_hashes=BlockHashes(512, (1, 2)))
    second = Request(1, 100.0, 1500, 1, block_hashes=BlockHashes(512, (1, 2, 3)))
    cold = Request(2, 200.0, 1500, 1, block_hashes=BlockHashes(512, (4, 5, 6)))
    cluster = Cluster({GPU: 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=True), ready_now=True)
    outcomes = {o.request_id: o for o in cluster.run([first, second, cold])}
    latency = cluster.instances[0].latency
    new = 1500 - 1024
    assert outcomes[1].first_token_s == 100.0 + latency.iteration_time_s(new, new * (1024 + (new + 1) / 2), 0, 0)
    assert outcomes[2].first_token_s == 200.0 + latency.iteration_time_s(1500, 1500 * (0 + 1501 / 2), 0, 0)
    cache = cluster.instances[0].prefix_cache
    assert (cache.hit_tokens, cache.query_tokens) == (1024, 1024 + 1500 + 1500)


def test_a_prefill_batch_counts_only_the_tokens_a_hit_leaves_to_compute():
    """vLLM's token budget counts the prompt tokens to compute: with 1,600, a cold 1,000-token
    prompt leaves 600, enough for a 1,500-token prompt whose first 1,024 tokens hit (476 to compute),
    so both prefill in the same iteration."""
    cluster = Cluster({GPU: 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=True, max_batched_tokens=1600),
                   ready_now=True)
    warm = Request(0, 0.0, 1024, 1, block_hashes=BlockHashes(512, (1, 2)))
    cold = Request(1, 100.0, 1000, 1, block_hashes=BlockHashes(512, (7, 8)))
    hit = Request(2, 100.0, 1500, 1, block_hashes=BlockHashes(512, (1, 2, 3)))
    outcomes = {o.request_id: o for o in cluster.run([warm, cold, hit])}
    assert outcomes[1].first_token_s == outcomes[2].first_token_s
    assert cluster.instances[0].prefix_cache.hit_tokens == 1024


def test_a_fully_cached_prompt_still_computes_its_last_block():
    """vLLM keeps at least one prompt token to compute (its logits): a prompt of two full cached
    blocks hits one."""
    cluster = Cluster({GPU: 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=True), ready_now=True)
    same = [Request(i, 100.0 * i, 1024, 1, block_hashes=BlockHashes(512, (1, 2))) for i in range(2)]
    cluster.run(same)
    assert cluster.instances[0].prefix_cache.hit_tokens == 512


def test_a_host_tier_hit_is_loaded_over_the_host_link_not_recomputed():
    """64 blocks of a 1,024-token prefix, evicted to host memory by a 1,500-token request on a
    100-block pool, come back over PCIe for the next request sharing the prefix."""
    first = Request(0, 0.0, 1024, 1, block_hashes=BlockHashes(512, (1, 2)))
    filler = Request(1, 100.0, 1500, 1, block_hashes=BlockHashes(512, (7, 8, 9)))
    second = Request(2, 200.0, 1500, 1, block_hashes=BlockHashes(512, (1, 2, 3)))
    cluster = Cluster({GPU: 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=True, host_cache_gb=1.0, kv_blocks=100),
                   ready_now=True)
    outcomes = {o.request_id: o for o in cluster.run([first, filler, second])}
    instance = cluster.instances[0]
    cache = instance.prefix_cache
    assert (cache.hit_tokens, cache.host_hit_tokens) == (0, 1024)
    assert cache.host_capacity_blocks == int(1e9 / instance.model.kv_bytes_per_token) // 16
    new = 1500 - 1024
    load_s = 1024 * instance.model.kv_bytes_per_token / (instance.gpu.host_link_gbps * 1e9)
    compute_s = instance.latency.iteration_time_s(new, new * (1024 + (new + 1) / 2), 0, 0)
    assert outcomes[2].first_token_s - 200.0 == pytest.approx(compute_s + load_s, rel=1e-12)
    assert not accounting_errors(instance)


def test_preemption_by_recompute_leaves_the_blocks_cached_for_the_readmission():
    instance = Instance(0, InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, kv_blocks=100, prefix_caching=True), EventQueue(),
                        NullHost())
    keys = PrefixKeys()
    seq = Sequence(Request(0, 0.0, 800, 10, block_hashes=BlockHashes(32, tuple(range(25)))), False)
    seq.block_keys, seq.block_tokens = keys.chain(seq.request.block_hashes), 32
    instance.enqueue(seq)
    assert admit(instance, seq, 0.0)
    seq.kv_tokens = 800
    instance.prefix_cache.register(seq)
    seq.generated_tokens = 1
    assert (instance.kv.used_blocks, len(seq.cached_keys)) == (50, 25)
    preempt(instance, seq)
    assert (instance.kv.used_blocks, instance.kv.cached_blocks, seq.kv_tokens) == (0, 50, 0)
    assert admit(instance, seq, 1.0)  # target 801 tokens: 25 blocks of 32 found (at most 800)
    assert (seq.kv_tokens, seq.blocks, instance.kv.used_blocks, instance.kv.cached_blocks) == (800, 51, 51, 0)
    cache = instance.prefix_cache
    assert (cache.query_tokens, cache.hit_tokens) == (800 + 801, 800)
    assert not accounting_errors(instance)


def stress_cluster(scheduler: str, preemption: str | None, roles: bool) -> Cluster:
    """Two (or, with ``roles``, a prefill and two decode) small-memory instances under shared
    prefixes, checked every 20 simulated ms."""
    cluster = Cluster({GPU: 3}, decode_router=(lambda c, s, i: 1 + s.request_id % 2) if roles else None)
    config = dict(engine=ENGINE, gpu=GPU, model=MODEL, scheduler=scheduler, preemption=preemption, prefix_caching=True,
                  kv_blocks=400, host_cache_gb=0.05)
    if roles:
        cluster.deploy(InstanceConfig(**config, role=Role.PREFILL), ready_now=True)
        for _ in range(2):
            cluster.deploy(InstanceConfig(**config, role=Role.DECODE), ready_now=True)
    else:
        for _ in range(2):
            cluster.deploy(InstanceConfig(**config), ready_now=True)
    problems: list[str] = []

    def check(c: Cluster) -> None:
        for instance in c.instances.values():
            instance.sync()
            problems.extend(f"t={c.events.now_s:.3f} instance {instance.instance_id}: {e}"
                            for e in accounting_errors(instance))

    cluster.every(0.02, check)
    cluster.problems = problems  # type: ignore[attr-defined]
    return cluster


@pytest.mark.parametrize("scheduler, preemption, roles", [
    ("fcfs", "recompute", False), ("fcfs", "swap", False), ("rr", None, False), ("sarathi", "recompute", False),
    ("fcfs", "recompute", True),
])
def test_accounting_stays_exact_through_preemption_swap_migration_and_pd_transfer(scheduler, preemption, roles):
    rng = np.random.default_rng(3)
    requests = random_requests(rng, 160, 32, 2000, spacing_s=0.01)
    cluster = stress_cluster(scheduler, preemption, roles)
    if not roles:
        def migrate(c: Cluster) -> None:
            source = c.instances[int(rng.integers(2))]
            movable = [s for s in source.running if s.in_decode and not s.pd_handoff] + source.waiting
            if movable:
                c.migrate(movable[int(rng.integers(len(movable)))], 1 - source.instance_id)
        cluster.every(0.05, migrate)
    outcomes = cluster.run(requests)
    assert len(outcomes) == len(requests) and all(o.completed for o in outcomes)
    assert cluster.problems == []
    preemptions = sum(o.num_preemptions for o in outcomes)
    migrations = sum(o.num_migrations for o in outcomes)
    assert preemptions > 0 and migrations > 0
    for instance in cluster.instances.values():
        cache = instance.prefix_cache
        assert instance.kv.used_blocks == 0 and not accounting_errors(instance)
        assert all(count == 0 for count, _ in cache.entries.values())
    if not roles:
        assert sum(i.prefix_cache.hit_tokens for i in cluster.instances.values()) > 0


def test_with_the_cache_off_block_hashes_change_nothing():
    rng = np.random.default_rng(4)
    requests = random_requests(rng, 120, 32, 2000, spacing_s=0.01)
    bare = [Request(r.request_id, r.arrival_s, r.prompt_tokens, r.output_tokens) for r in requests]
    results = []
    for batch in (requests, bare):
        cluster = Cluster({GPU: 2})
        for _ in range(2):
            cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, kv_blocks=400), ready_now=True)
        results.append([(o.request_id, o.first_token_s, o.finish_s, o.num_preemptions) for o in cluster.run(batch)])
    assert results[0] == results[1]


def test_hash_blocks_that_are_not_whole_kv_blocks_are_refused():
    cluster = Cluster({GPU: 1})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=True), ready_now=True)
    with pytest.raises(ValueError, match="100-token hash blocks, not a multiple of the instance's 16-token"):
        cluster.run([Request(0, 0.0, 300, 5, block_hashes=BlockHashes(100, (1, 2, 3)))])


@pytest.mark.parametrize("hashes, problem", [
    ((1, 2), "2 block hashes for a 1500-token prompt and 10-token output in 512-token blocks (expected 3 to 3)"),
    ((1, 2, 3, 4), "expected 3 to 3"),
])
def test_a_request_with_the_wrong_number_of_hashes_is_refused(hashes, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        Request(0, 0.0, 1500, 10, block_hashes=BlockHashes(512, hashes))


def test_config_refuses_a_host_tier_without_prefix_caching():
    with pytest.raises(ValueError, match="host_cache_gb=2.0 needs prefix_caching=True"):
        InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=False, host_cache_gb=2.0).validate()
    with pytest.raises(ValueError, match="host_cache_gb=2.0 needs prefix_caching=True"):
        InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, host_cache_gb=2.0).resolved()  # the engine's: off
    InstanceConfig(engine="vllm-v1", gpu=GPU, model=MODEL, host_cache_gb=2.0).resolved()  # the engine's: on
    with pytest.raises(ValueError, match="prefix_caching must be True, False or None, got 1"):
        InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=1).validate()


def test_prefix_cache_metrics_per_instance_and_over_the_cluster():
    from simulator.metrics.prefix_cache import prefix_cache_metrics

    cluster = Cluster({GPU: 2})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, prefix_caching=True), ready_now=True)
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL), ready_now=True)
    assert prefix_cache_metrics([cluster.instances[1]]) == {}
    same = [Request(i, 100.0 * i, 1500, 1, block_hashes=BlockHashes(512, (1, 2, 3 + i))) for i in range(2)]
    cluster.router = lambda c, s: 0
    cluster.run(same)
    metrics = prefix_cache_metrics(cluster.instances.values())
    assert metrics["prefix_cache_hit_rate"] == 1024 / 3000 == metrics["prefix_hit_rate_i0"]
    assert metrics["prefix_cache_miss_tokens"] == 3000 - 1024
    assert metrics["prefix_cache_cached_blocks"] == 2 * 32  # two 512-token blocks cached: (1), (1, 2)
    assert "prefix_hit_rate_i1" not in metrics
