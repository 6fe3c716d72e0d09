"""Reasoning-model lengths: prompt, output and how many output tokens are reasoning.

Real data: Alibaba ServeGen's DeepSeek-R1 production traffic (73 clients, one day), pooled
into one request-weighted distribution per field (see ``servegen_pooling``); the kind of
reasoning/answer split PASCAL evaluates on (PASCAL §V-A, Fig. 8).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from simulator.workloads._checks import count
from simulator.workloads.data_files import servegen_reasoning_pmf
from simulator.workloads.lengths import apply_cap, check_cap


class ReasoningLengthSampler(Protocol):
    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


class _DiscreteDistribution:
    """Inverse-CDF sampling from ``(values, probabilities)``."""

    def __init__(self, values: np.ndarray, probabilities: np.ndarray) -> None:
        self.values = values
        self.cumulative = np.cumsum(probabilities)
        self.mean = float(values @ probabilities)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        index = np.searchsorted(self.cumulative, rng.random(n) * self.cumulative[-1], side="right")
        return self.values[np.minimum(index, self.values.size - 1)]


class ServeGenReasoning:
    """``sample(n, rng) -> (prompt_tokens, output_tokens, reasoning_tokens)`` from ServeGen
    DeepSeek-R1 data.

    ServeGen publishes per-field marginals only, so prompt, output and reasoning ratio are
    drawn independently. ``reasoning_tokens = min(floor(ratio * output + 1/2), output - 1)``:
    the ratio rounded half up, leaving at least one answer token. Caps as in ``lengths``;
    the reasoning share is applied to the (clipped) output.
    """

    def __init__(
        self,
        *,
        max_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
        clip: bool = False,
    ) -> None:
        prompt_values, prompt_probabilities = servegen_reasoning_pmf("input_tokens")
        output_values, output_probabilities = servegen_reasoning_pmf("output_tokens")
        max_prompt_tokens = check_cap("max_prompt_tokens", max_prompt_tokens)
        max_output_tokens = check_cap("max_output_tokens", max_output_tokens)
        source = "ServeGen DeepSeek-R1"
        prompt_values = apply_cap(prompt_values.astype(np.int64), max_prompt_tokens, clip, "prompt_tokens", source)
        output_values = apply_cap(output_values.astype(np.int64), max_output_tokens, clip, "output_tokens", source)
        self.prompt_tokens = _DiscreteDistribution(prompt_values, prompt_probabilities)
        self.output_tokens = _DiscreteDistribution(output_values, output_probabilities)
        self.reason_ratio = _DiscreteDistribution(*servegen_reasoning_pmf("reason_ratio"))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = count("n", n)
        prompts = self.prompt_tokens.sample(n, rng)
        outputs = self.output_tokens.sample(n, rng)
        ratios = self.reason_ratio.sample(n, rng)
        reasoning = np.minimum(np.floor(ratios * outputs + 0.5).astype(np.int64), outputs - 1)
        return prompts, outputs, reasoning
