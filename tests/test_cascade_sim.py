"""Cascade execution: difficulty model, stage routing, judge timing, one outcome per request."""

import numpy as np
import pytest

from hardware.latency import latency_model
from hardware.gpus import get_gpu
from simulator.cascade import assign_cascade_quality, expected_quality
from simulator.routers.cascade import JUDGE_LATENCY_S, CascadeRouter
from simulator.cascade_quality import stage_mean_scores
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.workloads import FixedLengths, PoissonArrivals, generate_requests

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

SMALL, LARGE = "Llama-3.1-8B", "Llama-3.1-70B"
SMALL_CONFIG = InstanceConfig(engine=ENGINE, gpu="H100-80GB", model=SMALL)
LARGE_CONFIG = InstanceConfig(engine=ENGINE, gpu="H100-80GB", model=LARGE, tp=4)


def cascade_cluster(thresholds, small=1, large=1):
    router = CascadeRouter([SMALL, LARGE], thresholds)
    cluster = Cluster({"H100-80GB": small + 4 * large}, **router.cluster_options())
    for _ in range(small):
        cluster.deploy(SMALL_CONFIG, ready_now=True)
    for _ in range(large):
        cluster.deploy(LARGE_CONFIG, ready_now=True)
    return router, cluster


def alone_stage_s(config: InstanceConfig, prompt: int, output: int) -> float:
    """One request alone on an instance: a prefill of the prompt, then output - 1 decode
    iterations of batch 1 whose context grows from prompt + 1."""
    model = latency_model(config.gpu, config.model, config.tp, engine=ENGINE)
    return model.prefill_time_s(prompt) + sum(model.decode_time_s(1, prompt + j) for j in range(1, output))


def request(arrival_s, small_score, large_score, prompt=300, output=40, request_id=0):
    return Request(request_id, arrival_s, prompt, output, quality_by_model={SMALL: small_score, LARGE: large_score})


class TestStageTiming:
    def test_forwarded_request_takes_both_stages_plus_one_judge(self):
        router, cluster = cascade_cluster([75.0])
        (outcome,) = cluster.run([request(2.0, small_score=60.0, large_score=88.0)])
        small_s = alone_stage_s(SMALL_CONFIG, 300, 40)
        large_s = alone_stage_s(LARGE_CONFIG, 300, 40)
        assert outcome.e2e_s == pytest.approx(small_s + JUDGE_LATENCY_S + large_s, rel=1e-12)
        assert outcome.arrival_s == 2.0
        # The delivered answer is the large model's: its first token follows a fresh prefill.
        large_prefill_s = latency_model("H100-80GB", LARGE, 4, engine=ENGINE).prefill_time_s(300)
        assert outcome.ttft_s == pytest.approx(small_s + JUDGE_LATENCY_S + large_prefill_s, rel=1e-12)
        assert outcome.quality == 88.0
        assert outcome.instance_id == 1
        assert outcome.first_scheduled_s == 2.0  # first stage's admission

    def test_accepted_at_first_stage_pays_the_judge_once(self):
        router, cluster = cascade_cluster([75.0])
        (outcome,) = cluster.run([request(0.5, small_score=75.0, large_score=99.0)])
        assert outcome.e2e_s == pytest.approx(alone_stage_s(SMALL_CONFIG, 300, 40) + JUDGE_LATENCY_S, rel=1e-12)
        assert outcome.quality == 75.0  # score == threshold accepts
        assert outcome.instance_id == 0

    def test_last_stage_accepts_any_score_without_a_judge(self):
        router, cluster = cascade_cluster([100.0])
        (outcome,) = cluster.run([request(0.0, small_score=99.9, large_score=3.0)])
        expected = alone_stage_s(SMALL_CONFIG, 300, 40) + JUDGE_LATENCY_S + alone_stage_s(LARGE_CONFIG, 300, 40)
        assert outcome.e2e_s == pytest.approx(expected, rel=1e-12)
        assert outcome.quality == 3.0

    def test_judge_latency_is_configurable(self):
        router = CascadeRouter([SMALL, LARGE], [50.0], judge_latency_s=0.0)
        cluster = Cluster({"H100-80GB": 1}, **router.cluster_options())
        cluster.deploy(SMALL_CONFIG, ready_now=True)
        (outcome,) = cluster.run([request(0.0, small_score=60.0, large_score=70.0)])
        assert outcome.e2e_s == pytest.approx(alone_stage_s(SMALL_CONFIG, 300, 40), rel=1e-12)


class TestManyRequests:
    def test_every_request_ends_once_at_the_stage_its_scores_choose(self):
        rng = np.random.default_rng(3)
        requests = generate_requests(PoissonArrivals(6.0), FixedLengths(200, 30), 300, rng)
        assign_cascade_quality(requests, [SMALL, LARGE], rng)
        router, cluster = cascade_cluster([70.0], small=2, large=1)
        outcomes = cluster.run(requests)
        assert sorted(o.request_id for o in outcomes) == list(range(300))
        by_id = {r.request_id: r for r in requests}
        forwarded = 0
        for outcome in outcomes:
            scores = by_id[outcome.request_id].quality_by_model
            model = cluster.instances[outcome.instance_id].model.name
            assert model == (SMALL if scores[SMALL] >= 70.0 else LARGE)
            assert outcome.quality == scores[model]
            forwarded += model == LARGE
        assert 0 < forwarded < 300

    def test_thresholds_change_mid_run(self):
        router, cluster = cascade_cluster([0.0])
        cluster.submit([request(0.0, 10.0, 90.0, request_id=0), request(5.0, 10.0, 90.0, request_id=1)])
        cluster.advance(1.0)
        router.set_thresholds([50.0])
        cluster.advance()
        first, second = sorted(cluster.outcomes, key=lambda o: o.request_id)
        assert (first.instance_id, first.quality) == (0, 10.0)
        assert (second.instance_id, second.quality) == (1, 90.0)


class TestStageAccounting:
    def test_forwarded_request_costs_both_stages_work_and_gpu_time(self):
        """Every stage does its full work: the small instance prefills and decodes, then the large
        one prefills the prompt again (earlier output discarded) and decodes all 40 tokens."""
        router, cluster = cascade_cluster([75.0])
        (outcome,) = cluster.run([request(0.0, small_score=60.0, large_score=88.0)])
        small, large = cluster.instances[0], cluster.instances[1]
        assert small.busy_time_s == pytest.approx(alone_stage_s(SMALL_CONFIG, 300, 40), rel=1e-12)
        assert large.busy_time_s == pytest.approx(alone_stage_s(LARGE_CONFIG, 300, 40), rel=1e-12)
        assert small.iterations == large.iterations == 40  # 1 prefill + 39 decode iterations each
        price_per_s = get_gpu("H100-80GB").price_per_second_usd
        assert cluster.events.now_s == pytest.approx(outcome.finish_s)
        assert cluster.cost_usd() == pytest.approx(5 * price_per_s * outcome.e2e_s, rel=1e-12)  # 1 + 4 GPUs held

    def test_system_quality_is_the_mean_accepted_score(self):
        router, cluster = cascade_cluster([50.0])
        scores = [(60.0, 90.0), (40.0, 70.0), (50.0, 10.0), (10.0, 20.0)]
        requests = [request(2.0 * i, s, l, request_id=i) for i, (s, l) in enumerate(scores)]
        outcomes = cluster.run(requests)
        accepted = {o.request_id: o.quality for o in outcomes}
        assert accepted == {0: 60.0, 1: 70.0, 2: 50.0, 3: 20.0}
        assert np.mean([o.quality for o in outcomes]) == pytest.approx((60 + 70 + 50 + 20) / 4)

    def test_judge_signals_route_while_quality_is_scored(self):
        """Correct/incorrect quality: the judge compares the model's certainty, the accepted
        answer scores its correctness (100 or 0)."""
        router, cluster = cascade_cluster([70.0])
        requests = [request(0.0, 0.0, 100.0, request_id=0), request(3.0, 100.0, 100.0, request_id=1)]
        router.set_judge_signals({0: {SMALL: 90.0, LARGE: 95.0}, 1: {SMALL: 20.0, LARGE: 95.0}})
        outcomes = {o.request_id: o for o in cluster.run(requests)}
        assert (outcomes[0].instance_id, outcomes[0].quality) == (0, 0.0)  # confident but wrong: kept
        assert (outcomes[1].instance_id, outcomes[1].quality) == (1, 100.0)  # unsure: forwarded

    def test_missing_judge_signal_raises(self):
        router, cluster = cascade_cluster([70.0])
        router.set_judge_signals({5: {SMALL: 1.0}})
        with pytest.raises(ValueError, match="no judge signal for Llama-3.1-8B"):
            cluster.run([request(0.0, 10.0, 20.0)])


class TestAssignQuality:
    def test_sets_difficulty_and_scores_and_returns_signals(self):
        requests = [Request(i, 0.0, 10, 10) for i in range(500)]
        signals = assign_cascade_quality(requests, [SMALL, LARGE], np.random.default_rng(0), kind="correct")
        for r in requests:
            assert np.isfinite(r.difficulty)
            assert set(r.quality_by_model.values()) <= {0.0, 100.0}
            assert 0.0 < signals[r.request_id][SMALL] < signals[r.request_id][LARGE] < 100.0  # bigger is surer
        judged = [Request(i, 0.0, 10, 10) for i in range(50)]
        signals = assign_cascade_quality(judged, [SMALL, LARGE], np.random.default_rng(0))
        assert all(signals[r.request_id] == r.quality_by_model for r in judged)

    def test_same_seed_same_scores(self):
        def scores(seed):
            requests = [Request(i, 0.0, 10, 10) for i in range(200)]
            assign_cascade_quality(requests, [SMALL, LARGE], np.random.default_rng(seed))
            return [(r.difficulty, r.quality_by_model[SMALL], r.quality_by_model[LARGE]) for r in requests]

        assert scores(7) == scores(7) != scores(8)

    def test_expected_quality_is_the_fitted_mean(self):
        assert expected_quality(SMALL) == pytest.approx(stage_mean_scores([SMALL])[0])
        assert expected_quality("DeepSeek-R1-671B") > expected_quality(LARGE) > expected_quality(SMALL)

    def test_bad_kind_raises(self):
        with pytest.raises(ValueError, match="unknown quality kind 'elo'"):
            assign_cascade_quality([Request(0, 0.0, 10, 10)], [SMALL], np.random.default_rng(0), kind="elo")


class TestValidation:
    def test_threshold_count_and_range(self):
        with pytest.raises(ValueError, match="need 1 thresholds"):
            CascadeRouter([SMALL, LARGE], [])
        with pytest.raises(ValueError, match="101"):
            CascadeRouter([SMALL, LARGE], [101.0])
        with pytest.raises(ValueError, match="nan"):
            CascadeRouter([SMALL, LARGE], [float("nan")])

    def test_unknown_or_repeated_model(self):
        with pytest.raises(ValueError, match="Llama-9"):
            CascadeRouter([SMALL, "Llama-9"], [50.0])
        with pytest.raises(ValueError, match="distinct"):
            CascadeRouter([SMALL, SMALL], [50.0])

    def test_request_without_score_raises(self):
        router, cluster = cascade_cluster([50.0])
        with pytest.raises(ValueError, match="no quality score for Llama-3.1-8B"):
            cluster.run([Request(0, 0.0, 10, 5)])


def test_completion_hook_returning_true_records_the_outcome():
    calls = []

    def hook(cluster, instance, seq):
        calls.append(seq.request_id)
        return True

    cluster = Cluster({"H100-80GB": 1}, completion_hook=hook)
    cluster.deploy(SMALL_CONFIG, ready_now=True)
    outcomes = cluster.run([Request(0, 0.0, 10, 5), Request(1, 0.1, 10, 5)])
    assert calls == [0, 1]
    assert [o.request_id for o in outcomes] == [0, 1]
