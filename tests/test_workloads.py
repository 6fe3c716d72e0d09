"""Arrival processes, length / reasoning / priority samplers and request generation."""

import csv
import dataclasses
import math

import numpy as np
import pytest

from simulator.request import SLO
from simulator.workloads import (
    EmpiricalLengths,
    FixedLengths,
    GammaArrivals,
    ParametricLengths,
    PiecewiseRateArrivals,
    PoissonArrivals,
    ServeGenRateArrivals,
    ServeGenReasoning,
    generate_requests,
    length_sampler,
    parametric_preset,
    sample_tiers,
    servegen_rate_series,
    tier_probabilities,
)
from simulator.workloads.data_files import DATA_DIR


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def gap_stats(times: np.ndarray) -> tuple[float, float]:
    gaps = np.diff(np.concatenate([[0.0], times]))
    return gaps.mean(), gaps.std() / gaps.mean()


# ---------------------------------------------------------------- arrivals


def test_poisson_mean_gap_within_2_percent_and_sorted():
    times = PoissonArrivals(8.0).sample_arrival_times(100_000, rng())
    mean_gap, cv = gap_stats(times)
    assert times.dtype == np.float64 and times.shape == (100_000,)
    assert np.all(np.diff(times) >= 0) and times[0] > 0
    assert mean_gap == pytest.approx(1 / 8.0, rel=0.02)
    assert cv == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_cv_within_5_percent(cv):
    times = GammaArrivals(20.0, cv).sample_arrival_times(100_000, rng(1))
    mean_gap, measured_cv = gap_stats(times)
    assert mean_gap == pytest.approx(1 / 20.0, rel=0.02)
    assert measured_cv == pytest.approx(cv, rel=0.05)


def test_piecewise_rates_per_segment():
    # 50 req/s for 1000 s, idle for 500 s, then 200 req/s forever.
    process = PiecewiseRateArrivals([0.0, 1000.0, 1500.0], [50.0, 0.0, 200.0])
    times = process.sample_arrival_times(150_000, rng(2))
    in_first = np.count_nonzero(times < 1000.0)
    in_idle = np.count_nonzero((times >= 1000.0) & (times < 1500.0))
    in_third = np.count_nonzero((times >= 1500.0) & (times < 1500.0 + 400.0))
    assert in_first / 1000.0 == pytest.approx(50.0, rel=0.02)
    assert in_idle == 0
    assert in_third / 400.0 == pytest.approx(200.0, rel=0.02)
    assert np.all(np.diff(times) >= 0)


def test_piecewise_cycle_repeats_and_expected_arrivals():
    process = PiecewiseRateArrivals([0.0, 10.0, 20.0], [100.0, 0.0, 300.0], cycle_s=30.0)
    # Lambda per cycle = 100*10 + 0 + 300*10 = 4000.
    assert process.expected_arrivals(25.0) == pytest.approx(1000 + 1500)
    assert process.expected_arrivals(65.0) == pytest.approx(2 * 4000 + 500)
    times = process.sample_arrival_times(200_000, rng(3))
    phase = np.mod(times, 30.0)
    assert np.count_nonzero((phase >= 10.0) & (phase < 20.0)) == 0
    cycles = times[-1] // 30.0
    first_segment_per_cycle = np.count_nonzero((phase < 10.0) & (times < cycles * 30.0)) / cycles
    assert first_segment_per_cycle == pytest.approx(1000, rel=0.02)


def test_piecewise_with_cv_matches_gamma_at_constant_rate():
    times = PiecewiseRateArrivals([0.0], [20.0], cv=2.0).sample_arrival_times(100_000, rng(4))
    mean_gap, cv = gap_stats(times)
    assert mean_gap == pytest.approx(1 / 20.0, rel=0.02)
    assert cv == pytest.approx(2.0, rel=0.05)


def test_servegen_series_matches_published_figures():
    series = servegen_rate_series()
    assert series.rate_rps.size == 14 * 24 * 6
    assert np.array_equal(series.window_start_s, np.arange(2016) * 600.0)
    assert series.rate_rps.mean() == pytest.approx(196, abs=0.5)  # README: 196 req/s total
    assert np.all(series.dispersion_cv > 0)


def test_servegen_arrivals_follow_the_scaled_curve():
    process = ServeGenRateArrivals(window_s=1.0, mean_rate_rps=100.0)
    times = process.sample_arrival_times(250_000, rng(5))
    assert process.expected_arrivals(2016.0) == pytest.approx(201_600)
    assert np.count_nonzero(times < 2016.0) == pytest.approx(201_600, rel=0.01)
    per_window = np.bincount(times[times < 2016.0].astype(np.int64), minlength=2016)
    expected = servegen_rate_series().rate_rps * (100.0 / servegen_rate_series().rate_rps.mean())
    assert np.corrcoef(per_window, expected)[0, 1] > 0.95


def test_servegen_start_window_rolls_the_series():
    process = ServeGenRateArrivals(start_window=10)
    assert process.rates_rps[0] == servegen_rate_series().rate_rps[10]
    assert process.rates_rps[-1] == servegen_rate_series().rate_rps[9]


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, True])
def test_bad_rates_and_cvs_raise(bad):
    with pytest.raises(ValueError, match="rate_rps"):
        PoissonArrivals(bad)
    with pytest.raises(ValueError, match="cv"):
        GammaArrivals(1.0, bad)


@pytest.mark.parametrize(
    "boundaries, rates, kwargs, message",
    [
        ([0.0, 1.0], [1.0, -2.0], {}, "-2.0"),
        ([0.0, 1.0], [1.0, math.nan], {}, "nan"),
        ([1.0, 2.0], [1.0, 1.0], {}, "start at 0"),
        ([0.0, 2.0, 1.0], [1.0, 1.0, 1.0], {}, "strictly increasing"),
        ([0.0, 1.0], [1.0], {}, "equal length"),
        ([0.0, 1.0], [0.0, 0.0], {}, "rate > 0"),
        ([0.0, 1.0], [1.0, 0.0], {}, "last rate"),
        ([0.0, 1.0], [1.0, 0.0], {"cycle_s": 1.0}, "cycle_s"),
    ],
)
def test_bad_piecewise_schedules_raise(boundaries, rates, kwargs, message):
    with pytest.raises(ValueError, match=message):
        PiecewiseRateArrivals(boundaries, rates, **kwargs)


@pytest.mark.parametrize("bad", [-1, 2.5, "10", True])
def test_bad_request_counts_raise(bad):
    with pytest.raises(ValueError, match="num_requests"):
        PoissonArrivals(1.0).sample_arrival_times(bad, rng())


@pytest.mark.parametrize(
    "process",
    [
        PoissonArrivals(3.0),
        GammaArrivals(3.0, 4.0),
        PiecewiseRateArrivals([0.0, 5.0], [1.0, 9.0]),
        ServeGenRateArrivals(window_s=2.0, mean_rate_rps=30.0),
    ],
)
def test_same_seed_same_arrivals(process):
    assert np.array_equal(process.sample_arrival_times(5000, rng(7)), process.sample_arrival_times(5000, rng(7)))
    assert not np.array_equal(process.sample_arrival_times(5000, rng(7)), process.sample_arrival_times(5000, rng(8)))


# ---------------------------------------------------------------- lengths


def csv_column_means(path) -> tuple[float, float]:
    with open(path, newline="") as file:
        rows = list(csv.reader(file))[1:]
    return float(np.mean([int(r[0]) for r in rows])), float(np.mean([int(r[1]) for r in rows]))


@pytest.mark.parametrize(
    "dataset, mean_prompt, mean_output",
    [
        # Means published in shared/data/README.md (azure) or computed from the shipped CSV.
        ("azure_code", 2048, 27.9),
        ("azure_conv", 1155, 211.1),
        ("arxiv_summarization", 2588, 291.4),
        ("sharegpt", *csv_column_means(DATA_DIR / "lengths" / "sharegpt_llama2.csv")),
    ],
)
def test_empirical_sampler_mean_matches_dataset(dataset, mean_prompt, mean_output):
    sampler = EmpiricalLengths(dataset)
    assert sampler.mean_prompt_tokens == pytest.approx(mean_prompt, rel=0.001)
    assert sampler.mean_output_tokens == pytest.approx(mean_output, rel=0.002)
    prompts, outputs = sampler.sample(200_000, rng(9))
    assert prompts.dtype == np.int64 and outputs.dtype == np.int64
    assert prompts.mean() == pytest.approx(mean_prompt, rel=0.02)
    assert outputs.mean() == pytest.approx(mean_output, rel=0.03)


def test_empirical_sampler_keeps_rows_together():
    sampler = EmpiricalLengths("azure_conv")
    rows = set(zip(sampler.prompt_tokens.tolist(), sampler.output_tokens.tolist()))
    prompts, outputs = sampler.sample(2000, rng(10))
    assert set(zip(prompts.tolist(), outputs.tolist())) <= rows


def test_empirical_cap_raises_unless_clip():
    prompts = EmpiricalLengths("azure_code").prompt_tokens
    over = int(np.count_nonzero(prompts > 4096))
    with pytest.raises(ValueError, match=rf"azure_code: {over} of 8819 prompt_tokens exceed max_prompt_tokens=4096.*clip=True"):
        EmpiricalLengths("azure_code", max_prompt_tokens=4096)
    clipped = EmpiricalLengths("azure_code", max_prompt_tokens=4096, clip=True).prompt_tokens
    assert clipped.max() == 4096
    assert np.count_nonzero(clipped == 4096) == over + np.count_nonzero(prompts == 4096)
    assert np.array_equal(clipped[prompts < 4096], prompts[prompts < 4096])
    # A cap above every length changes nothing and needs no clip.
    assert np.array_equal(EmpiricalLengths("azure_code", max_prompt_tokens=8000).prompt_tokens, prompts)


@pytest.mark.parametrize("name, mean_prompt, mean_output", [("cnn_dailymail", 702, 42), ("sharegpt_cauchy", 290, 207), ("longwriter", 337, 1330)])
@pytest.mark.parametrize("dist", ["exponential", "lognormal"])
def test_parametric_presets_hit_cauchy_means(name, mean_prompt, mean_output, dist):
    prompts, outputs = parametric_preset(name, dist=dist).sample(200_000, rng(11))
    assert prompts.min() >= 1 and outputs.min() >= 1
    assert prompts.mean() == pytest.approx(mean_prompt, rel=0.03)
    assert outputs.mean() == pytest.approx(mean_output, rel=0.03)


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_lognormal_lengths_have_requested_cv(cv):
    prompts, outputs = ParametricLengths(1000, 300, cv_prompt=cv, cv_output=cv).sample(200_000, rng(12))
    for tokens, mean in ((prompts, 1000), (outputs, 300)):
        assert tokens.mean() == pytest.approx(mean, rel=0.03)
        assert tokens.std() / tokens.mean() == pytest.approx(cv, rel=0.1)


def test_parametric_cap_raises_at_sample_unless_clip():
    with pytest.raises(ValueError, match="output_tokens exceed max_output_tokens=100"):
        ParametricLengths(50, 50, dist="exponential", max_output_tokens=100).sample(10_000, rng(13))
    _, outputs = ParametricLengths(50, 50, dist="exponential", max_output_tokens=100, clip=True).sample(10_000, rng(13))
    assert outputs.max() == 100


def test_fixed_lengths():
    prompts, outputs = FixedLengths(128, 64).sample(7, rng())
    assert prompts.tolist() == [128] * 7 and outputs.tolist() == [64] * 7
    with pytest.raises(ValueError, match="output_tokens"):
        FixedLengths(128, 0)


def test_bad_length_arguments_raise():
    with pytest.raises(ValueError, match=r"'nope'.*arxiv_summarization.*azure_code.*longwriter.*servegen_deepseek_r1"):
        length_sampler("nope")
    with pytest.raises(ValueError, match=r"'gauss'.*exponential.*lognormal"):
        ParametricLengths(10, 10, dist="gauss")
    with pytest.raises(ValueError, match="CV fixed at 1"):
        ParametricLengths(10, 10, dist="exponential", cv_output=2.0)
    with pytest.raises(ValueError, match="mean_output_tokens"):
        ParametricLengths(10, math.nan)
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        EmpiricalLengths("sharegpt", max_prompt_tokens=0)


@pytest.mark.parametrize("name", ["sharegpt", "cnn_dailymail", "servegen_deepseek_r1"])
def test_same_seed_same_lengths(name):
    sampler = length_sampler(name)
    for first, second in zip(sampler.sample(3000, rng(14)), sampler.sample(3000, rng(14))):
        assert np.array_equal(first, second)


# ---------------------------------------------------------------- reasoning


def test_servegen_reasoning_split_matches_data():
    sampler = ServeGenReasoning()
    prompts, outputs, reasoning = sampler.sample(200_000, rng(15))
    answers = outputs - reasoning
    assert answers.min() >= 1 and reasoning.min() >= 0
    # shared/data/README.md: reasoning share mean 0.70, median 0.76.
    assert sampler.reason_ratio.mean == pytest.approx(0.70, abs=0.005)
    assert (reasoning / outputs).mean() == pytest.approx(0.70, abs=0.01)
    assert np.median(reasoning / outputs) == pytest.approx(0.76, abs=0.02)
    assert prompts.mean() == pytest.approx(sampler.prompt_tokens.mean, rel=0.03)
    assert outputs.mean() == pytest.approx(sampler.output_tokens.mean, rel=0.03)


def test_servegen_reasoning_clip_keeps_answer_token():
    _, outputs, reasoning = ServeGenReasoning(max_output_tokens=2000, clip=True).sample(50_000, rng(16))
    assert outputs.max() == 2000
    assert np.all(outputs - reasoning >= 1)
    with pytest.raises(ValueError, match="max_output_tokens=2000"):
        ServeGenReasoning(max_output_tokens=2000)


# ---------------------------------------------------------------- priorities


def test_tier_probabilities_follow_paper_definitions():
    assert tier_probabilities("uniform", 4).tolist() == [0.25] * 4
    # gaussian, K=4: centre floor(4/2)=2, sigma=K/4=1 -> weights e^-2, e^-1/2, 1, e^-1/2.
    weights = np.array([math.exp(-2), math.exp(-0.5), 1.0, math.exp(-0.5)])
    assert tier_probabilities("gaussian", 4) == pytest.approx(weights / weights.sum())
    # enterprise: 10% tier 0, 70% over the mid tiers, 20% background.
    assert tier_probabilities("enterprise", 4) == pytest.approx([0.10, 0.35, 0.35, 0.20])
    assert tier_probabilities("enterprise", 6) == pytest.approx([0.10, 0.175, 0.175, 0.175, 0.175, 0.20])
    assert tier_probabilities("enterprise", 2) == pytest.approx([0.10, 0.90])
    for name in ("uniform", "gaussian", "enterprise"):
        assert tier_probabilities(name, 1).tolist() == [1.0]
        for k in range(1, 11):
            assert tier_probabilities(name, k).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["uniform", "gaussian", "enterprise"])
def test_sampled_tier_frequencies_match(name):
    tiers = sample_tiers(name, 5, 200_000, rng(17))
    assert tiers.dtype == np.int64 and tiers.min() >= 0 and tiers.max() <= 4
    frequencies = np.bincount(tiers, minlength=5) / tiers.size
    assert frequencies == pytest.approx(tier_probabilities(name, 5), abs=0.005)


def test_bad_priority_arguments_raise():
    with pytest.raises(ValueError, match=r"'zipf'.*enterprise.*gaussian.*uniform"):
        sample_tiers("zipf", 3, 10, rng())
    with pytest.raises(ValueError, match="num_tiers"):
        tier_probabilities("uniform", 0)


# ---------------------------------------------------------------- generate_requests


def test_generate_requests_assembles_everything():
    slo_by_tier = {0: SLO(ttft_s=0.5), 1: SLO(ttft_s=2.0), 2: SLO(ttft_s=10.0)}
    requests = generate_requests(
        PoissonArrivals(5.0), ServeGenReasoning(), 20_000, rng(18),
        priorities="enterprise", num_tiers=3, slo=lambda tier: slo_by_tier[tier],
    )
    assert [r.request_id for r in requests] == list(range(20_000))
    arrivals = np.array([r.arrival_s for r in requests])
    assert np.all(np.diff(arrivals) >= 0)
    assert all(r.answer_tokens >= 1 and r.slo.ttft_s == slo_by_tier[r.tier].ttft_s for r in requests)
    frequencies = np.bincount([r.tier for r in requests], minlength=3) / 20_000
    assert frequencies == pytest.approx([0.10, 0.70, 0.20], abs=0.01)


def test_generate_requests_share_one_immutable_slo_and_is_deterministic():
    slo = SLO(ttft_s=1.0, tbt_s=0.1)
    first = generate_requests(GammaArrivals(2.0, 3.0), length_sampler("azure_conv"), 500, rng(19), slo=slo)
    second = generate_requests(GammaArrivals(2.0, 3.0), length_sampler("azure_conv"), 500, rng(19), slo=slo)
    assert first == second
    assert all(r.slo is slo for r in first)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first[0].slo.ttft_s = 2.0  # type: ignore[misc]
    assert all(r.tier == 0 and r.reasoning_tokens == 0 for r in first)


def test_generate_requests_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_tiers=3 needs a priority distribution"):
        generate_requests(PoissonArrivals(1.0), FixedLengths(1, 1), 10, rng(), num_tiers=3)
    with pytest.raises(ValueError, match="not an SLO"):
        generate_requests(PoissonArrivals(1.0), FixedLengths(1, 1), 10, rng(), slo=lambda tier: 3.0)
    with pytest.raises(ValueError, match="num_requests"):
        generate_requests(PoissonArrivals(1.0), FixedLengths(1, 1), -5, rng())


def test_multitier_table_matches_the_papers_bucket_shares_and_split():
    from simulator.workloads import length_sampler

    prompt, output = length_sampler("multitier_table").sample(200_000, np.random.default_rng(0))
    total = prompt + output
    shares = [np.mean((total >= a) & (total < b)) for a, b in ((64, 128), (128, 256), (256, 384), (384, 513))]
    expected = np.array([0.65, 0.22, 0.10, 0.02]) / 0.99
    np.testing.assert_allclose(shares, expected, atol=0.005)
    assert np.all(np.abs(prompt - 2 * total / 3) <= 0.5)


def test_fixed_sampler_by_name_and_bad_buckets():
    from simulator.workloads import length_sampler
    from simulator.workloads.lengths import BucketLengths

    prompt, output = length_sampler("fixed", prompt_tokens=40, output_tokens=1).sample(5, np.random.default_rng(0))
    assert prompt.tolist() == [40] * 5 and output.tolist() == [1] * 5
    with pytest.raises(ValueError, match="prompt_fraction"):
        BucketLengths(((64, 128),), (1.0,), 1.5)
    with pytest.raises(ValueError, match="one probability per bucket"):
        BucketLengths(((64, 128), (128, 256)), (1.0,), 0.5)

