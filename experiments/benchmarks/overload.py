"""Overload benchmark: wall time and peak memory of ``python -m simulator`` as load and length grow.

8 x A100-80GB serving Llama-3.1-8B (fcfs, ShareGPT lengths, Poisson arrivals, seed 0), the
run of issue #23: at 16 req/s the cluster keeps up, at 30 req/s its queues grow without bound,
so the time per request must not grow with the queue. Each case runs in its own process (the
CLI's code path: requests generated lazily and streamed), so its peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is its own. ``rss/request`` is the peak RSS
less the RSS before the run, divided by the requests finished: what each request costs.

    python -m experiments.benchmarks.overload            # 10k requests at 16 and 30 req/s (< 1 min)
    python -m experiments.benchmarks.overload --full     # 100k at 16 and 30 req/s (the issue's goal)
    python -m experiments.benchmarks.overload --full --million   # and 1M at 16 req/s

``--backend python`` runs the Python engine instead of the compiled one (the default). The Python
engine takes the requests as a stream; the compiled one reads them whole first and keeps a row
of its request table per request (about 250 bytes), so its memory per request is higher.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from simulator.backends import CLUSTERS, DEFAULT_BACKEND
from simulator.cli import command

SMALL, FULL, MILLION = 10_000, 100_000, 1_000_000
RATES_RPS = (16.0, 30.0)


def _peak_rss_bytes() -> int:
    """This process's peak resident set size (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_case(requests: int, rate_rps: float, backend: str = DEFAULT_BACKEND) -> dict[str, float]:
    """One CLI run in this process: its wall seconds, peak RSS and RSS per finished request."""
    from simulator.__main__ import main as simulator_main

    before = _peak_rss_bytes()
    with tempfile.TemporaryDirectory() as folder:
        metrics_path = Path(folder) / "metrics.json"
        argv = ["--gpu", "A100-80GB", "--model", "Llama-3.1-8B", "--instances", "8", "--rate", str(rate_rps),
                "--requests", str(requests), "--seed", "0", "--json", str(metrics_path), "--backend", backend]
        started = time.perf_counter()
        status = simulator_main(argv)
        wall_s = time.perf_counter() - started
        if status != 0:
            raise RuntimeError(f"python -m simulator {' '.join(argv)} exited with {status}")
        metrics = json.loads(metrics_path.read_text())
    peak = _peak_rss_bytes()
    finished = metrics["completed"] + metrics["rejected"]
    return {"requests": requests, "rate_rps": rate_rps, "wall_s": wall_s, "peak_rss_mb": peak / 2**20,
            "rss_per_request_kb": (peak - before) / finished / 1024, "finished": finished,
            "throughput_rps": metrics["throughput_rps"]}


@command("experiments.benchmarks.overload")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experiments.benchmarks.overload", description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help=f"{FULL:,} requests per rate instead of {SMALL:,}")
    parser.add_argument("--million", action="store_true", help=f"also {MILLION:,} requests at 16 req/s")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=tuple(CLUSTERS), help="the simulation engine")
    parser.add_argument("--one", nargs=3, metavar=("REQUESTS", "RATE", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_case(int(args.one[0]), float(args.one[1]), args.one[2])))
        return 0
    size = FULL if args.full else SMALL
    cases = [(size, rate) for rate in RATES_RPS] + ([(MILLION, RATES_RPS[0])] if args.million else [])
    print(f"{'requests':>10}{'req/s':>7}{'wall s':>9}{'peak RSS MB':>13}{'rss/request KB':>16}")
    wall_by_rate: dict[float, float] = {}
    for requests, rate in cases:
        out = subprocess.run([sys.executable, "-m", "experiments.benchmarks.overload", "--one", str(requests), str(rate),
                              args.backend],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if requests == size:
            wall_by_rate[rate] = row["wall_s"]
        print(f"{requests:>10,}{rate:>7g}{row['wall_s']:>9.1f}{row['peak_rss_mb']:>13.0f}{row['rss_per_request_kb']:>16.2f}")
    print(f"\nwall time at {RATES_RPS[1]:g} req/s / at {RATES_RPS[0]:g} req/s ({size:,} requests): "
          f"{wall_by_rate[RATES_RPS[1]] / wall_by_rate[RATES_RPS[0]]:.2f}x (goal <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
