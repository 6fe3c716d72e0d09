"""Latency-model speed benchmark: microseconds per call of ``IterationLatencyModel``, cold and warm.

For a dense model (Llama-3.1-8B on H100-80GB) and an MoE one (DeepSeek-R1-671B, int4, tp 8 on
H200), each round builds a new model (its memo tables empty) and times:

* ``build``: the constructor (kernel fits are cached per process, so this is the model's own set-up);
* ``cold iteration``: 10,000 ``iteration_time_s`` calls, each with a prefill token count not seen
  before (every call evaluates the layers), plus a decode part of 8 sequences;
* ``cold decode``: ``decode_coefficients(1..1024)`` once each;
* ``warm iteration`` / ``warm decode``: the same calls again (memo hits: what the simulator mostly does).

The figure is the minimum over rounds, in microseconds per call (per model for ``build``).

    python -m experiments.benchmarks.latency_speed [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from hardware.latency import IterationLatencyModel
from simulator.cli import command

MODELS = (("H100-80GB", "Llama-3.1-8B", 1, "fp16"), ("H200", "DeepSeek-R1-671B", 8, "int4"))
ITERATIONS = 10_000
BATCHES = 1024


def _per_call_us(run: Callable[[], None], calls: int) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) / calls * 1e6


def _round(gpu: str, model: str, tp: int, dtype: str) -> dict[str, float]:
    started = time.perf_counter()
    latency = IterationLatencyModel(gpu, model, tp=tp, dtype=dtype)
    build_us = (time.perf_counter() - started) * 1e6

    def iterations() -> None:
        for tokens in range(1, ITERATIONS + 1):
            latency.iteration_time_s(tokens, tokens * (tokens + 1) / 2, 8, 8000)

    def decodes() -> None:
        for batch in range(1, BATCHES + 1):
            latency.decode_coefficients(batch)

    return {
        "build": build_us,
        "cold iteration": _per_call_us(iterations, ITERATIONS),
        "cold decode": _per_call_us(decodes, BATCHES),
        "warm iteration": _per_call_us(iterations, ITERATIONS),
        "warm decode": _per_call_us(decodes, BATCHES),
    }


@command("experiments.benchmarks.latency_speed")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments.benchmarks.latency_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        raise ValueError(f"--rounds {args.rounds}: must be an integer >= 1")
    for gpu, model, tp, dtype in MODELS:
        IterationLatencyModel(gpu, model, tp=tp, dtype=dtype)  # fit the kernel sets once, outside the timing
    print(f"{'model':<32}{'build us':>10}{'cold iter us':>14}{'cold decode us':>16}{'warm iter us':>14}"
          f"{'warm decode us':>16}")
    for gpu, model, tp, dtype in MODELS:
        rounds = [_round(gpu, model, tp, dtype) for _ in range(args.rounds)]
        best = {key: min(r[key] for r in rounds) for key in rounds[0]}
        print(f"{f'{model} {dtype} tp{tp} {gpu}':<32}{best['build']:>10.1f}{best['cold iteration']:>14.2f}"
              f"{best['cold decode']:>16.2f}{best['warm iteration']:>14.2f}{best['warm decode']:>16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
