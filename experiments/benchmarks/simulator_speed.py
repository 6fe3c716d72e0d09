"""Simulator speed benchmark: simulated requests and tokens per wall-second, peak memory.

Cases (each runs in its own process so peak RSS is its own):
  a  Vidur's reference run: 4 x Llama-2-7B on A100-80GB, TP 1, fcfs, batch <= 128, block 16,
     memory utilisation 0.8, prompt 512 / output 128, Poisson 16 req/s, 10,000 requests, seed 42
  b  the Azure 2023 conv trace (19,366 requests) on 8 mixed-GPU instances of Llama-3.1-8B
  c  100,000 ShareGPT requests on 64 instances (A100-80GB / H100-80GB) of Llama-3.1-8B
  d  the Mooncake conversation trace (12,031 requests with 512-token block hashes, rescaled to
     2.5 req/s) on the ``mooncake`` scenario's 8 instances (4 A100-80GB + 4 L40S, Sarathi chunks
     of 8,192 / 2,048), least-loaded routing, prefix caching with a 128 GB host tier
  e  case d without prefix caching (the hashes are carried and ignored)
  f  overload: case a at 64 req/s, four times its rate and beyond what its instances serve (about
     53 req/s), so the queues grow until the last arrival

Every case runs the ``vidur-2024`` engine unless ``--engine`` names another (the cases' dynamics
then change too, so compare speeds within one engine).

``--backends python,compiled`` runs each case on the Python engine (``simulator.cluster.Cluster``)
and on the compiled one (``simulator.compiled.CompiledCluster``, which gives the same outcomes bit
for bit), each ``--rounds`` times in its own process, and prints the fastest round of each and the
ratio of the Python wall time to the compiled one.

    python -m experiments.benchmarks.simulator_speed [--cases a,b,c,d,e,f] [--engine vllm-v1]
        [--backends python,compiled] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from hardware.engines import engine_names
from simulator.cli import command
from simulator.cluster import Cluster
from simulator.compiled import CompiledCluster
from simulator.instance import InstanceConfig
from simulator.workloads import FixedLengths, PoissonArrivals, generate_requests, length_sampler, load_azure_trace
from simulator.workloads.hash_traces import load_hash_trace


BENCHMARK_ENGINE = "vidur-2024"
BACKENDS: dict[str, type[Cluster]] = {"python": Cluster, "compiled": CompiledCluster}


def _cluster(pools: list[tuple[str, int]], model: str, memory_utilization: float, engine: str,
             backend: type[Cluster]) -> Cluster:
    cluster = backend({gpu: count for gpu, count in pools})
    for gpu, count in pools:
        for _ in range(count):
            cluster.deploy(
                InstanceConfig(gpu=gpu, model=model, engine=engine, scheduler="fcfs", max_batch_size=128,
                               block_size=16, memory_utilization=memory_utilization),
                ready_now=True,
            )
    return cluster


def _mooncake_cluster(prefix_caching: bool, engine: str, backend: type[Cluster]) -> Cluster:
    cluster = backend({"A100-80GB": 4, "L40S": 4}, router="least_loaded")
    for gpu, chunk_tokens in (("A100-80GB", 8192), ("L40S", 2048)):
        for _ in range(4):
            cluster.deploy(
                InstanceConfig(gpu=gpu, model="Llama-3.1-8B", engine=engine, scheduler="sarathi",
                               scheduler_options={"chunk_tokens": chunk_tokens},
                               prefix_caching=prefix_caching, host_cache_gb=128.0 if prefix_caching else 0.0),
                ready_now=True,
            )
    return cluster


CASES = ("a", "b", "c", "d", "e", "f")


def run_case(case: str, engine: str = BENCHMARK_ENGINE, backend: str = "python") -> dict:
    rng = np.random.default_rng(42)
    kind = BACKENDS[backend]
    if case in ("a", "f"):
        requests = generate_requests(PoissonArrivals(16.0 if case == "a" else 64.0), FixedLengths(512, 128), 10_000, rng)
        cluster = _cluster([("A100-80GB", 4)], "Llama-2-7B", 0.8, engine, kind)
    elif case == "b":
        requests = load_azure_trace("azure_conv")
        cluster = _cluster([("A100-80GB", 2), ("H100-80GB", 2), ("L40S", 2), ("A10", 2)], "Llama-3.1-8B", 0.9, engine,
                           kind)
    elif case == "c":
        requests = generate_requests(PoissonArrivals(150.0), length_sampler("sharegpt"), 100_000, rng)
        cluster = _cluster([("A100-80GB", 32), ("H100-80GB", 32)], "Llama-3.1-8B", 0.9, engine, kind)
    elif case in ("d", "e"):
        requests = load_hash_trace("mooncake_conversation", target_rate_rps=2.5)
        cluster = _mooncake_cluster(prefix_caching=case == "d", engine=engine, backend=kind)
    else:
        raise ValueError(f"case {case!r}: unknown; known: {', '.join(CASES)}")
    started = time.perf_counter()
    outcomes = cluster.run(requests)
    wall_s = time.perf_counter() - started
    tokens = sum(o.output_tokens for o in outcomes if o.completed)
    return {
        "case": case,
        "backend": backend,
        "requests": len(requests),
        "completed": sum(o.completed for o in outcomes),
        "simulated_s": cluster.events.now_s,
        "wall_s": wall_s,
        "requests_per_wall_s": len(requests) / wall_s,
        "output_tokens_per_wall_s": tokens / wall_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


@command("experiments.benchmarks.simulator_speed")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments.benchmarks.simulator_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="a,b,c")
    parser.add_argument("--engine", default=BENCHMARK_ENGINE, choices=engine_names(),
                        help=f"serving engine of every case (default {BENCHMARK_ENGINE})")
    parser.add_argument("--backends", default="python",
                        help="comma-separated engines to time: python, compiled (default python)")
    parser.add_argument("--rounds", default="1", help="runs of each case per backend; the fastest counts (default 1)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="python", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_case(args.one, args.engine, args.backend)))
        return 0
    cases = args.cases.split(",")
    unknown = [case for case in cases if case not in CASES]
    if unknown:
        raise ValueError(f"--cases {','.join(unknown)}: unknown case; known: {', '.join(CASES)}")
    backends = args.backends.split(",")
    if not backends or any(b not in BACKENDS for b in backends) or len(set(backends)) != len(backends):
        raise ValueError(f"--backends {args.backends}: takes distinct names among {', '.join(BACKENDS)}")
    if not args.rounds.isdigit() or int(args.rounds) < 1:
        raise ValueError(f"--rounds {args.rounds}: must be an integer >= 1")
    print(f"{'case':<5}{'backend':>9}{'requests':>10}{'sim s':>10}{'wall s':>9}{'req/wall-s':>12}{'tok/wall-s':>13}"
          f"{'peak RSS MB':>13}{'speed-up':>10}")
    for case in cases:
        walls: dict[str, float] = {}
        for backend in backends:
            runs = [_one_run(case, args.engine, backend) for _ in range(int(args.rounds))]
            r = min(runs, key=lambda run: run["wall_s"])
            walls[backend] = r["wall_s"]
            ratio = f"{walls['python'] / r['wall_s']:.1f}x" if backend != "python" and "python" in walls else ""
            print(f"{case:<5}{backend:>9}{r['requests']:>10,}{r['simulated_s']:>10.0f}{r['wall_s']:>9.3f}"
                  f"{r['requests_per_wall_s']:>12,.0f}{r['output_tokens_per_wall_s']:>13,.0f}{r['peak_rss_mb']:>13.0f}"
                  f"{ratio:>10}")
    return 0


def _one_run(case: str, engine: str, backend: str) -> dict:
    """``run_case`` in a process of its own (its own peak RSS)."""
    out = subprocess.run([sys.executable, "-m", "experiments.benchmarks.simulator_speed", "--one", case,
                          "--engine", engine, "--backend", backend], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
