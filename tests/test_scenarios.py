"""Paper scenario presets: each builds, fits its GPUs, samples its workload and serves a short run;
each reproduces the numbers of its paper."""

from __future__ import annotations

import numpy as np
import pytest

from envs.presets import make_scenario, scenario_names
from envs.scenario import Scenario, Workload
from envs.scenarios.cascadeserve import CASCADESERVE_MODELS
from envs.scenarios.cascadia import CASCADIA_MODELS
from envs.scenarios.cauchy import cauchy
from envs.scenarios.multitier import exponential_tier_weights, multitier
from envs.scenarios.pascal import PASCAL_RATES_RPS, pascal
from hardware.gpus import get_gpu
from hardware.models import check_fits, get_model
from simulator.instance import InstanceConfig, Lifecycle
from simulator.request import SLO

PAPER_PRESETS = {
    "multitier": "Llumnix-K",
    "pascal": "PASCAL",
    "cauchy": "Cauchy",
    "cauchy_dailymail": "Cauchy",
    "cauchy_longwriter": "Cauchy",
    "cascadia": "Cascadia",
    "cascadeserve": "CascadeServe",
}


def groups_of(scenario: Scenario) -> list[tuple[str, str, int, int, str, int]]:
    return [(g.config.gpu, g.config.model, g.config.tp, g.config.pp, g.config.dtype, g.count) for g in scenario.instances]


def first_model_round_robin(scenario: Scenario):
    """Round-robin over the instances of the request's model, or of the cascade's first model."""
    turn = [0]

    def route(cluster, seq) -> int:
        model = seq.request.model or (scenario.cascade[0] if scenario.cascade else None)
        ids = [i for i in cluster.routable_ids() if model is None or cluster.instances[i].model.name == model]
        turn[0] += 1
        return ids[turn[0] % len(ids)]

    return route


def test_every_paper_preset_is_registered():
    assert set(PAPER_PRESETS) <= set(scenario_names())


@pytest.mark.parametrize("name", sorted(PAPER_PRESETS))
def test_preset_cites_its_paper_and_its_models_fit(name):
    scenario = make_scenario(name)
    assert scenario.name == name
    assert PAPER_PRESETS[name] in scenario.reference
    for group in scenario.instances:
        cfg = group.config
        check_fits(get_model(cfg.model), get_gpu(cfg.gpu), cfg.tp, cfg.pp, cfg.dtype, cfg.memory_utilization)


@pytest.mark.parametrize("name", sorted(PAPER_PRESETS))
def test_cluster_deploys_every_instance_within_the_inventory(name):
    scenario = make_scenario(name)
    cluster = scenario.build_cluster()
    assert len(cluster.instances) == sum(g.count for g in scenario.instances)
    assert all(i.lifecycle == Lifecycle.SERVING for i in cluster.instances.values())
    for gpu, used in cluster.gpus_in_use.items():
        assert used == sum(g.count * g.config.num_gpus for g in scenario.instances if g.config.gpu == gpu)
        assert used <= scenario.gpu_inventory[gpu]
    assert scenario.max_instances >= len(cluster.instances)


@pytest.mark.parametrize("name", sorted(PAPER_PRESETS))
def test_requests_are_reproducible_sorted_and_carry_the_slo(name):
    scenario = make_scenario(name)
    first = scenario.requests(np.random.default_rng(0))
    second = scenario.requests(np.random.default_rng(0))
    assert len(first) == scenario.episode_requests
    key = [(r.arrival_s, r.prompt_tokens, r.output_tokens, r.reasoning_tokens, r.tier) for r in first]
    assert key == [(r.arrival_s, r.prompt_tokens, r.output_tokens, r.reasoning_tokens, r.tier) for r in second]
    arrivals = np.array([r.arrival_s for r in first])
    assert np.all(np.diff(arrivals) >= 0)
    for request in first:
        assert request.prompt_tokens >= 1 and request.output_tokens >= 1
        assert 0 <= request.reasoning_tokens < request.output_tokens
        assert 0 <= request.tier < scenario.num_tiers
        assert request.slo == scenario.workload.slo(request.tier)


@pytest.mark.parametrize("name", sorted(PAPER_PRESETS))
def test_fifty_request_run_ends_every_request_exactly_once(name):
    scenario = make_scenario(name, episode_requests=50)
    requests = scenario.requests(np.random.default_rng(1))
    cluster = scenario.build_cluster(router=first_model_round_robin(scenario))
    outcomes = cluster.run(requests)
    assert sorted(o.request_id for o in outcomes) == sorted(r.request_id for r in requests)
    assert all(o.completed or o.rejected_reason for o in outcomes)
    if scenario.cascade:
        assert {cluster.instances[o.instance_id].model.name for o in outcomes} == {scenario.cascade[0]}


# ----------------------------------------------------------------------------- multitier
def test_exponential_tier_weights_halve_per_tier():
    assert exponential_tier_weights(4) == (8.0, 4.0, 2.0, 1.0)
    assert exponential_tier_weights(1) == (1.0,)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="num_tiers"):
            exponential_tier_weights(bad)


def test_multitier_reproduces_the_four_replica_vidur_setup():
    scenario = make_scenario("multitier")
    assert groups_of(scenario) == [("A100-80GB", "Llama-2-7B", 1, 1, "fp16", 4)]
    config = scenario.instances[0].config
    assert (config.scheduler, config.max_batch_size) == ("priority", 64)
    workload = scenario.workload
    assert (workload.arrival, workload.rate_rps, workload.priorities, workload.num_tiers) == ("poisson", 1250.0, "uniform", 4)
    assert scenario.tier_weights == (8.0, 4.0, 2.0, 1.0)
    assert (scenario.episode_requests, scenario.control_interval_s) == (2000, 0.05)
    requests = scenario.requests(np.random.default_rng(0))
    # 2,000 Poisson arrivals at 1,250 req/s span 1.6 s (sd sqrt(2000) / 1250 = 0.036 s).
    assert requests[-1].arrival_s == pytest.approx(1.6, abs=0.15)
    # Uniform tiers: 1/4 each (sd sqrt(0.25 * 0.75 / 2000) = 0.0097).
    shares = np.bincount([r.tier for r in requests], minlength=4) / len(requests)
    np.testing.assert_allclose(shares, 0.25, atol=0.04)


def test_multitier_enterprise_priorities_follow_the_paper_shares():
    requests = multitier(priorities="enterprise").requests(np.random.default_rng(0))
    shares = np.bincount([r.tier for r in requests], minlength=4) / len(requests)
    # §4.2: 10% critical, 70% over the two mid tiers, 20% background (sd <= 0.011 each).
    np.testing.assert_allclose(shares, [0.10, 0.35, 0.35, 0.20], atol=0.045)


def test_multitier_tier_count_override_needs_matching_weights():
    five = make_scenario("multitier", num_tiers=5, tier_weights=exponential_tier_weights(5))
    assert five.num_tiers == 5 and five.tier_weights == (16.0, 8.0, 4.0, 2.0, 1.0)
    assert max(r.tier for r in five.requests(np.random.default_rng(0))) == 4
    assert multitier(num_tiers=2).tier_weights == (2.0, 1.0)
    with pytest.raises(ValueError, match="tier_weights has 4 entries for 5 tiers"):
        make_scenario("multitier", num_tiers=5)


def test_multitier_rejects_an_unknown_priority_distribution():
    with pytest.raises(ValueError, match="'zipf'.*enterprise"):
        multitier(priorities="zipf")


# ----------------------------------------------------------------------------- pascal
def test_pascal_reproduces_eight_h100_instances_with_its_scheduler():
    scenario = make_scenario("pascal")
    assert groups_of(scenario) == [("H100-96GB", "DeepSeek-R1-Distill-Qwen-32B", 1, 1, "fp16", 8)]
    cluster = scenario.build_cluster()
    for instance in cluster.instances.values():
        assert instance.scheduler.name == "pascal"
        assert (instance.scheduler.quantum_tokens, instance.scheduler.demotion_kv_tokens) == (500, 5000)
    assert scenario.reasoning and scenario.record_token_curves
    qoe = scenario.qoe
    assert (qoe.expected_ttfat_s, qoe.expected_tpot_s, qoe.anchor, qoe.violation_below) == (0.25, 0.1, "reasoning_end", 0.95)
    assert scenario.workload.slo(0) == SLO(tbt_s=0.1)


def test_pascal_rates_default_to_medium_and_increase():
    assert make_scenario("pascal").workload.rate_rps == PASCAL_RATES_RPS["medium"] == 2.0
    assert [pascal(rate).workload.rate_rps for rate in ("low", "medium", "high")] == [1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="'peak'.*'low', 'medium', 'high'"):
        pascal("peak")


def test_pascal_requests_reason_before_answering_and_record_token_curves():
    scenario = make_scenario("pascal", episode_requests=20)
    requests = scenario.requests(np.random.default_rng(2))
    assert sum(r.reasoning_tokens > 0 for r in requests) >= len(requests) // 2
    outcomes = scenario.build_cluster().run(requests)
    for outcome in outcomes:
        assert outcome.token_curve[-1] == (outcome.finish_s, outcome.output_tokens)
        if outcome.reasoning_tokens:
            assert outcome.first_answer_token_s >= outcome.reasoning_end_s


# ----------------------------------------------------------------------------- cauchy
@pytest.mark.parametrize(
    ("name", "lengths", "rate_rps", "ttft_s", "tbt_s"),
    [
        ("cauchy_dailymail", "cnn_dailymail", 54.0, 10.0, 0.05),
        ("cauchy", "sharegpt_cauchy", 50.0, 5.0, 0.03),
        ("cauchy_longwriter", "longwriter", 6.0, 1.0, 0.03),
    ],
)
def test_cauchy_workloads_carry_their_qps_and_slo(name, lengths, rate_rps, ttft_s, tbt_s):
    scenario = make_scenario(name)
    assert cauchy(lengths).name == name
    workload = scenario.workload
    assert (workload.arrival, workload.lengths, workload.rate_rps) == ("poisson", lengths, rate_rps)
    assert workload.slo(0) == SLO(ttft_s=ttft_s, tbt_s=tbt_s)
    assert scenario.episode_requests == round(rate_rps * 600)


def test_cauchy_deploys_half_of_its_24_gpus_and_can_scale_to_all():
    scenario = make_scenario("cauchy")
    gpus = ("H800-SXM", "A800-PCIe", "H20-NVL")
    assert scenario.gpu_inventory == {gpu: 8 for gpu in gpus}
    assert groups_of(scenario) == [(gpu, "Llama-3.1-8B", 2, 1, "fp16", 2) for gpu in gpus]
    assert (scenario.max_instances, scenario.provisioning_s, scenario.control_interval_s) == (24, 90.0, 120.0)
    cluster = scenario.build_cluster()
    for gpu in gpus:
        for _ in range(2):
            cluster.deploy(InstanceConfig(gpu=gpu, model="Llama-3.1-8B", tp=2))
        assert cluster.gpus_in_use[gpu] == 8
        with pytest.raises(ValueError, match="0 free of 8"):
            cluster.deploy(InstanceConfig(gpu=gpu, model="Llama-3.1-8B", tp=2))


def test_cauchy_rejects_an_unknown_workload():
    with pytest.raises(ValueError, match="'alpaca'.*longwriter"):
        cauchy("alpaca")


# ----------------------------------------------------------------------------- cascades
def test_cascadia_deploys_the_trace1_q85_plan_on_32_h100s():
    scenario = make_scenario("cascadia")
    small, medium, large = CASCADIA_MODELS
    assert scenario.cascade == CASCADIA_MODELS
    assert groups_of(scenario) == [
        ("H100-80GB", small, 2, 1, "fp16", 2),
        ("H100-80GB", medium, 2, 1, "fp16", 6),
        ("H100-80GB", large, 8, 1, "int4", 2),
    ]
    # Appendix E Table 2, (85, 1): f1, f2, f3 = 4, 12, 16 GPUs.
    assert [g.count * g.config.num_gpus for g in scenario.instances] == [4, 12, 16]
    assert scenario.gpu_inventory == {"H100-80GB": 32}
    assert scenario.workload.slo(0) == SLO(e2e_s=42.0)


def test_cascadeserve_serves_a_four_model_int4_cascade_on_16_v100s():
    scenario = make_scenario("cascadeserve")
    assert scenario.cascade == CASCADESERVE_MODELS
    assert [g.config.model for g in scenario.instances] == list(CASCADESERVE_MODELS)
    assert {g.config.dtype for g in scenario.instances} == {"int4"}
    assert scenario.gpu_inventory == {"V100-32GB": 16}
    assert scenario.workload.slo(0) == SLO(e2e_s=2.0)
    requests = scenario.requests(np.random.default_rng(0))
    assert {r.output_tokens for r in requests} == {1}
    gaps = np.diff([0.0] + [r.arrival_s for r in requests])
    # Gamma gaps, mean 1/20 s and CV 4 (sd of the 4,000-gap mean: 4 / 20 / sqrt(4000) = 0.0032 s).
    assert gaps.mean() == pytest.approx(0.05, rel=0.25)
    assert 3.0 < gaps.std() / gaps.mean() < 5.0


def test_azure_arrivals_with_dataset_lengths_keep_the_trace_timing():
    trace = Workload(arrival="azure_conv", rate_rps=50.0, lengths="trace").sample(500, np.random.default_rng(0))
    mixed = Workload(arrival="azure_conv", rate_rps=50.0, lengths="longwriter").sample(500, np.random.default_rng(0))
    assert [r.arrival_s for r in trace] == [r.arrival_s for r in mixed]
    assert np.mean([r.output_tokens for r in mixed]) > 3 * np.mean([r.output_tokens for r in trace])


def test_overrides_reach_a_subclass_field_and_the_workload():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Tagged(Scenario):
        tag_units: int = 1

    base = make_scenario("default")
    tagged = Tagged(**{f.name: getattr(base, f.name) for f in dataclasses.fields(Scenario)})
    tagged = tagged.with_overrides(tag_units=4, rate_rps=2.5)
    assert type(tagged) is Tagged
    assert (tagged.tag_units, tagged.workload.rate_rps) == (4, 2.5)
    with pytest.raises(ValueError, match=r"unknown scenario override\(s\) \['tag'\]"):
        tagged.with_overrides(tag=1)


def test_a_registered_arrival_process_drives_a_workload_and_bad_options_are_named():
    from simulator.workloads import ARRIVAL_PROCESSES, PiecewiseRateArrivals, register_arrival_process

    class EveryTenthSecond:
        def __init__(self, rate_rps: float, cv: float, *, offset_s: float = 0.0) -> None:
            self.offset_s = offset_s

        def sample_arrival_times(self, num_requests: int, rng: np.random.Generator) -> np.ndarray:
            return self.offset_s + 0.1 * np.arange(num_requests)

    register_arrival_process("every_tenth_second", EveryTenthSecond)
    try:
        scenario = make_scenario("default", arrival="every_tenth_second", arrival_options={"offset_s": 2.0},
                                 episode_requests=5)
        times = [r.arrival_s for r in scenario.requests(np.random.default_rng(0))]
        assert times == pytest.approx([2.0, 2.1, 2.2, 2.3, 2.4])
        with pytest.raises(ValueError, match=r"arrival process 'every_tenth_second' cannot take options \{'offset': 1\}"):
            make_scenario("default", arrival="every_tenth_second", arrival_options={"offset": 1})
        with pytest.raises(ValueError, match=r"'every_tenth_second' is already registered"):
            register_arrival_process("every_tenth_second", EveryTenthSecond)
    finally:
        del ARRIVAL_PROCESSES["every_tenth_second"]
    with pytest.raises(ValueError, match=r"unknown arrival 'every_tenth_second'; known: \['poisson', 'gamma'"):
        make_scenario("default", arrival="every_tenth_second")
    with pytest.raises(ValueError, match=r"arrival 'azure_conv' replays a trace and takes no arrival_options"):
        make_scenario("default", arrival="azure_conv", arrival_options={"rates_rps": (1.0,)})
    piecewise = make_scenario("default", arrival="piecewise", episode_requests=50,
                              arrival_options={"boundaries_s": (0.0, 2.0), "rates_rps": (5.0, 40.0)})
    drawn = [r.arrival_s for r in piecewise.requests(np.random.default_rng(3))]
    expected = PiecewiseRateArrivals((0.0, 2.0), (5.0, 40.0)).sample_arrival_times(50, np.random.default_rng(3))
    assert drawn == expected.tolist()  # the registry builds the same process, the same draws
