"""Prompt / output length samplers: ``sample(n, rng) -> (prompt_tokens, output_tokens)`` int64 arrays.

A sampler whose ``sample(a + b)`` draws exactly what ``sample(a)`` then ``sample(b)`` draw (one
draw per request, nothing drawn column by column) says so with ``chunkable = True``; lazy
generation (``simulator.workloads.generate.stream_requests``) then samples it a block at a time.

Length caps: ``max_prompt_tokens`` / ``max_output_tokens`` never drop requests silently. If
a length could exceed its cap the sampler raises ``ValueError`` (empirical data: when built,
against the dataset's largest value; parametric: when a sample exceeds it) unless
``clip=True``, which replaces longer lengths by the cap.
"""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar, Protocol

import numpy as np

from simulator.workloads._checks import count, positive_float
from simulator.workloads.data_files import AZURE_TRACE_FILES, VIDUR_LENGTH_FILES, vidur_lengths
from simulator.workloads.traces import read_azure_columns

EMPIRICAL_DATASETS = tuple(sorted([*VIDUR_LENGTH_FILES, *AZURE_TRACE_FILES]))

# Mean input/output tokens of Cauchy's workloads (Cauchy §4.1); only the means are published.
PARAMETRIC_PRESETS: dict[str, tuple[int, int]] = {
    "cnn_dailymail": (702, 42),
    "sharegpt_cauchy": (290, 207),
    "longwriter": (337, 1330),
}


class LengthSampler(Protocol):
    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]: ...


def check_cap(name: str, cap: int | None) -> int | None:
    """Validate an optional length cap (integer >= 1)."""
    return None if cap is None else count(name, cap, minimum=1)


def apply_cap(tokens: np.ndarray, cap: int | None, clip: bool, column: str, source: str) -> np.ndarray:
    """``tokens`` if none exceeds ``cap``; clipped to it if ``clip``; otherwise raise."""
    if not isinstance(clip, bool):
        raise ValueError(f"clip {clip!r}: must be True or False")
    if cap is None:
        return tokens
    over = tokens > cap
    if not over.any():
        return tokens
    if not clip:
        raise ValueError(
            f"{source}: {int(over.sum())} of {tokens.size} {column} exceed max_{column}={cap} "
            f"(largest {int(tokens.max())}); pass clip=True to clip them to {cap}"
        )
    return np.minimum(tokens, cap)


@lru_cache(maxsize=None)
def _empirical_rows(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    if dataset in VIDUR_LENGTH_FILES:
        return vidur_lengths(dataset)
    _, prompts, outputs = read_azure_columns(AZURE_TRACE_FILES[dataset])
    prompts.flags.writeable = False
    outputs.flags.writeable = False
    return prompts, outputs


class EmpiricalLengths:
    """Resample (prompt, output) rows of a real dataset uniformly with replacement, keeping
    each row's pair together.

    Datasets: ``sharegpt`` and ``arxiv_summarization`` (Vidur processed traces, Llama-2
    tokenizer), ``azure_code`` and ``azure_conv`` (Azure LLM inference trace 2023).
    """

    chunkable: ClassVar[bool] = True

    def __init__(
        self,
        dataset: str,
        *,
        max_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
        clip: bool = False,
    ) -> None:
        if dataset not in EMPIRICAL_DATASETS:
            raise ValueError(f"unknown length dataset {dataset!r}; known: {list(EMPIRICAL_DATASETS)}")
        prompts, outputs = _empirical_rows(dataset)
        self.dataset = dataset
        max_prompt_tokens = check_cap("max_prompt_tokens", max_prompt_tokens)
        max_output_tokens = check_cap("max_output_tokens", max_output_tokens)
        self.prompt_tokens = apply_cap(prompts, max_prompt_tokens, clip, "prompt_tokens", dataset)
        self.output_tokens = apply_cap(outputs, max_output_tokens, clip, "output_tokens", dataset)

    @property
    def mean_prompt_tokens(self) -> float:
        return float(self.prompt_tokens.mean())

    @property
    def mean_output_tokens(self) -> float:
        return float(self.output_tokens.mean())

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        rows = rng.integers(0, self.prompt_tokens.size, count("n", n))
        return self.prompt_tokens[rows], self.output_tokens[rows]


class FixedLengths:
    """Every request has the same prompt and output length."""

    chunkable: ClassVar[bool] = True

    def __init__(self, prompt_tokens: int, output_tokens: int) -> None:
        self.prompt_tokens = count("prompt_tokens", prompt_tokens, minimum=1)
        self.output_tokens = count("output_tokens", output_tokens, minimum=1)

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = count("n", n)
        return np.full(n, self.prompt_tokens, dtype=np.int64), np.full(n, self.output_tokens, dtype=np.int64)


def _sample_positive_integers(mean: float, dist: str, cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Integers >= 1 with mean ``mean``.

    ``exponential``: geometric on {1, 2, ...} with p = 1/mean, the discrete exponential,
    mean exactly ``mean``. ``lognormal``: ceil of a lognormal with mean ``mean - 1/2`` and
    CV ``cv`` (sigma^2 = ln(1 + cv^2)); the ceiling adds ~1/2, so the mean is ``mean`` up to
    O(1/mean).
    """
    if dist == "exponential":
        return rng.geometric(1.0 / mean, n).astype(np.int64)
    sigma_squared = np.log1p(cv**2)
    mu = np.log(mean - 0.5) - sigma_squared / 2
    return np.maximum(np.ceil(rng.lognormal(mu, np.sqrt(sigma_squared), n)), 1).astype(np.int64)


class ParametricLengths:
    """Independent prompt and output lengths from a fitted distribution with given means, for
    datasets known only by their means (e.g. Cauchy's, Cauchy §4.1).

    ``dist="lognormal"`` takes CVs ``cv_prompt`` / ``cv_output`` (default 1);
    ``dist="exponential"`` (geometric, CV ~1) takes none. Means must be >= 1.
    """

    DISTRIBUTIONS = ("exponential", "lognormal")

    def __init__(
        self,
        mean_prompt_tokens: float,
        mean_output_tokens: float,
        *,
        dist: str = "lognormal",
        cv_prompt: float | None = None,
        cv_output: float | None = None,
        max_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
        clip: bool = False,
    ) -> None:
        if dist not in self.DISTRIBUTIONS:
            raise ValueError(f"unknown length distribution {dist!r}; known: {list(self.DISTRIBUTIONS)}")
        for name, mean in (("mean_prompt_tokens", mean_prompt_tokens), ("mean_output_tokens", mean_output_tokens)):
            if positive_float(name, mean) < 1:
                raise ValueError(f"{name} must be >= 1, got {mean!r}")
        if dist == "exponential" and (cv_prompt is not None or cv_output is not None):
            raise ValueError(f"dist='exponential' has CV fixed at 1, got cv_prompt={cv_prompt!r}, cv_output={cv_output!r}")
        self.dist = dist
        self.mean_prompt_tokens = float(mean_prompt_tokens)
        self.mean_output_tokens = float(mean_output_tokens)
        self.cv_prompt = 1.0 if cv_prompt is None else positive_float("cv_prompt", cv_prompt)
        self.cv_output = 1.0 if cv_output is None else positive_float("cv_output", cv_output)
        self.max_prompt_tokens = check_cap("max_prompt_tokens", max_prompt_tokens)
        self.max_output_tokens = check_cap("max_output_tokens", max_output_tokens)
        self.clip = clip

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = count("n", n)
        prompts = _sample_positive_integers(self.mean_prompt_tokens, self.dist, self.cv_prompt, n, rng)
        outputs = _sample_positive_integers(self.mean_output_tokens, self.dist, self.cv_output, n, rng)
        source = f"ParametricLengths({self.dist})"
        return (
            apply_cap(prompts, self.max_prompt_tokens, self.clip, "prompt_tokens", source),
            apply_cap(outputs, self.max_output_tokens, self.clip, "output_tokens", source),
        )


def parametric_preset(name: str, **options) -> ParametricLengths:
    """Cauchy's workloads by their published means (Cauchy §4.1): ``cnn_dailymail``
    702/42, ``sharegpt_cauchy`` 290/207, ``longwriter`` 337/1330. Only the means are known, so
    the default distribution is the maximum-entropy one for a given mean, exponential
    (geometric); ``options`` go to ``ParametricLengths`` (e.g. ``dist="lognormal", cv_output=0.5``)."""
    if name not in PARAMETRIC_PRESETS:
        raise ValueError(f"unknown parametric length preset {name!r}; known: {sorted(PARAMETRIC_PRESETS)}")
    mean_prompt_tokens, mean_output_tokens = PARAMETRIC_PRESETS[name]
    options.setdefault("dist", "exponential")
    return ParametricLengths(mean_prompt_tokens, mean_output_tokens, **options)


class BucketLengths:
    """Total lengths drawn from buckets ``[low, high)`` with given probabilities (uniform inside
    a bucket), split into prompt and output by ``prompt_fraction``."""

    def __init__(self, buckets: tuple[tuple[int, int], ...], probabilities: tuple[float, ...], prompt_fraction: float) -> None:
        if len(buckets) != len(probabilities) or not buckets:
            raise ValueError(f"need one probability per bucket, got {len(buckets)} buckets and {len(probabilities)} probabilities")
        for low, high in buckets:
            if not 2 <= low < high:
                raise ValueError(f"bucket [{low}, {high}) must satisfy 2 <= low < high")
        weights = np.array(probabilities, dtype=np.float64)
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError(f"bucket probabilities must be non-negative with a positive sum, got {probabilities}")
        if not 0.0 < prompt_fraction < 1.0:
            raise ValueError(f"prompt_fraction must be in (0, 1), got {prompt_fraction}")
        self.buckets = buckets
        self.probabilities = weights / weights.sum()
        self.prompt_fraction = prompt_fraction

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        n = count("n", n)
        which = rng.choice(len(self.buckets), size=n, p=self.probabilities)
        lows = np.array([b[0] for b in self.buckets])[which]
        highs = np.array([b[1] for b in self.buckets])[which]
        total = rng.integers(lows, highs)
        prompt = np.maximum(1, np.rint(total * self.prompt_fraction).astype(np.int64))
        return prompt, np.maximum(1, total - prompt)


def multitier_table() -> BucketLengths:
    """Llumnix-K Table 1: total tokens 64–128 (~65%), 128–256 (~22%), 256–384
    (~10%), 384–512 (~2%), normalised to sum to one; split 2:1 prefill:decode as the authors'
    public simulator configuration sets it (andersvestrum/llumnix_sim)."""
    return BucketLengths(((64, 128), (128, 256), (256, 384), (384, 513)), (0.65, 0.22, 0.10, 0.02), 2.0 / 3.0)
