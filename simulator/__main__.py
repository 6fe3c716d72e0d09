"""Command line: simulate a deployment on a workload and print its metrics.

Example (Vidur's reference run, in Vidur's 2024 world)::

    python -m simulator --gpu A100-80GB --model Llama-2-7B --instances 4 --engine vidur-2024 \\
        --max-batch-size 128 --rate 16 --prompt-tokens 512 --output-tokens 128 --requests 10000 --seed 42

``--engine`` picks the serving engine (``python -m hardware --engines``; default: a current
vLLM), which sets the iteration latency and the batching defaults; ``--scheduler``,
``--max-batch-size`` and ``--cpu-overhead-ms`` override them.

``--backend`` picks the simulation engine: the compiled core (default) or the Python reference
engine, with the same outcomes bit for bit (``simulator.backends``). Synthetic requests are
generated lazily (``stream_requests``); the Python engine takes them as a stream, so its memory
holds the requests in flight and the outcomes, while the compiled one reads the workload whole
before it starts and keeps a row per request in its table; it drops the ``Request`` objects
for the run (about 1.3 KB per request at its peak at 100,000 requests, against 1.0 KB). Requests
longer than the model's context follow ``simulator.context`` (vLLM's rule, applied by the
simulator): a prompt over it is rejected (``rejected_by_reason[exceeds_context]``), a longer
output stops at it (counted as ``context_truncated``, printed under the table and written to
the JSON file). Bad input prints one line ``python -m simulator: error: <flag> <value>: <why>``
and exits with status 2, before anything is built or simulated: every number is checked, ``--json``
must be writable and the instances must fit in this machine's memory (``simulator.memory_bound``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from hardware.engines import DEFAULT_ENGINE, engine_names
from hardware.models import get_model
from simulator.backends import CLUSTERS, DEFAULT_BACKEND, make_cluster
from simulator.cli import check_writable_file, command
from simulator.headroom import default_headroom_fractions
from simulator.instance import InstanceConfig
from simulator.memory_bound import check_instances_fit
from simulator.metrics import format_table, summarize, to_json_dict
from simulator.metrics.prefix_cache import PREFIX_CACHE_METRICS, prefix_cache_metrics
from simulator.request import SLO, Request
from simulator.routers import make_router, router_names
from simulator.schedulers import SCHEDULERS
from simulator.workloads import (
    FixedLengths,
    GammaArrivals,
    PoissonArrivals,
    length_sampler,
    load_azure_trace,
    load_trace_csv,
    stream_requests,
)
from simulator.workloads.data_files import MOONCAKE_TRACE_FILES
from simulator.workloads.hash_traces import load_hash_trace


def _instances(text: str, default_gpu: str | None) -> list[tuple[str, int]]:
    """``"4"`` (with --gpu) or ``"A100-80GB:2,H100-80GB:2"``."""
    if text.isdigit():
        if default_gpu is None:
            raise ValueError(f"--instances {text}: a count needs --gpu; or write --instances GPU:N,GPU:N")
        if int(text) <= 0:
            raise ValueError(f"--instances {text}: must be > 0")
        return [(default_gpu, int(text))]
    pools = []
    for part in text.split(","):
        gpu, _, count = part.partition(":")
        if not count.isdigit() or int(count) <= 0:
            raise ValueError(f"--instances {part!r}: expected GPU:COUNT with COUNT > 0")
        pools.append((gpu, int(count)))
    return pools


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", help="GPU type for --instances N (see python -m hardware)")
    parser.add_argument("--model", required=True, help="model name, e.g. Llama-2-7B")
    parser.add_argument("--instances", default="1", help="N (with --gpu) or GPU:N,GPU:N for mixed GPUs")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel degree per instance")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree per instance")
    parser.add_argument("--engine", default=DEFAULT_ENGINE, choices=engine_names(),
                        help=f"serving engine (default {DEFAULT_ENGINE}; python -m hardware --engines lists them)")
    parser.add_argument("--scheduler", choices=sorted(SCHEDULERS), help="local scheduler (default: the engine's)")
    parser.add_argument("--max-batch-size", type=int, help="sequences per batch (default: the engine's max_num_seqs)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--memory-utilization", type=float, default=0.9)
    parser.add_argument("--cpu-overhead-ms", type=float,
                        help="fixed CPU time per engine iteration, ms, in place of the engine's (0 to match "
                             "Vidur, which leaves it out)")
    parser.add_argument("--microbatches-in-flight", type=int,
                        help="with --pp > 1: microbatches in the pipeline at once (default: pp; 1 = one batch "
                             "through all stages at a time)")
    parser.add_argument("--prefix-caching", action=argparse.BooleanOptionalAction,
                        help="automatic prefix caching on or off (requests that carry block hashes share cached "
                             "prefixes; default: the engine's)")
    parser.add_argument("--host-cache-gb", type=float, default=0.0,
                        help="with --prefix-caching: GB of host memory per instance keeping evicted prefixes")
    parser.add_argument("--router", default="round_robin", choices=router_names(),
                        help="global router (llumnix: Llumnix dispatch by freeness, with no priority headroom, for "
                             "requests of tier 0)")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=tuple(CLUSTERS),
                        help="simulation engine: the compiled core (default) or the Python reference engine; the "
                             "outcomes are the same bit for bit")
    workload = parser.add_mutually_exclusive_group(required=True)
    workload.add_argument("--rate", type=float, help="arrival rate, requests per second")
    workload.add_argument("--trace", help="trace CSV (arrival_s,prompt_tokens,output_tokens[,reasoning_tokens,tier]), "
                                          "azure_code / azure_conv, mooncake_conversation / mooncake_synthetic, "
                                          "or a Mooncake-format JSONL (.jsonl, .jsonl.gz) with block hashes")
    parser.add_argument("--cv", type=float, help="Gamma arrivals with this inter-arrival CV (default Poisson)")
    parser.add_argument("--lengths", help="length dataset (default sharegpt; see simulator.workloads.LENGTH_SAMPLER_NAMES)")
    parser.add_argument("--prompt-tokens", type=int, help="fixed prompt length (with --output-tokens)")
    parser.add_argument("--output-tokens", type=int, help="fixed output length (with --prompt-tokens)")
    parser.add_argument("--requests", type=int,
                        help="number of requests (default: 1000 synthetic ones, or the whole trace)")
    parser.add_argument("--ttft-slo", type=float, help="TTFT target, seconds")
    parser.add_argument("--tbt-slo", type=float, help="TBT / TPOT target, seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the metrics to this JSON file")
    return parser


@command("python -m simulator")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; bad input prints one line ``python -m simulator: error: ...`` to stderr and
    returns 2, as argparse's own usage errors exit."""
    args = build_parser().parse_args(argv)
    _check_flags(args)
    return _simulate(args)


# Flags that take an integer, with their smallest value.
_MINIMUM = {"tp": 1, "pp": 1, "max_batch_size": 1, "block_size": 1, "prompt_tokens": 1, "output_tokens": 1,
            "microbatches_in_flight": 1, "requests": 1, "seed": 0}


def _check_flags(args: argparse.Namespace) -> None:
    """Every number in its range, the JSON file writable, the instances within memory; then the
    flags that cannot combine (a trace brings its own arrivals and lengths)."""
    for name, minimum in _MINIMUM.items():
        value = getattr(args, name)
        if value is not None and value < minimum:
            raise ValueError(f"--{name.replace('_', '-')} {value}: must be an integer >= {minimum}")
    for name in ("rate", "cv", "ttft_slo", "tbt_slo"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"--{name.replace('_', '-')} {value}: must be a finite number > 0")
    if not 0.0 < args.memory_utilization <= 1.0:
        raise ValueError(f"--memory-utilization {args.memory_utilization}: must be in (0, 1]")
    for name in ("cpu_overhead_ms", "host_cache_gb"):
        value = getattr(args, name)
        if value is not None and not 0.0 <= value < math.inf:
            raise ValueError(f"--{name.replace('_', '-')} {value}: must be a finite number >= 0")
    if args.json:
        check_writable_file("--json", Path(args.json))
    count = sum(n for _, n in _instances(args.instances, args.gpu))
    check_instances_fit("--instances", count)
    if (args.prompt_tokens is None) != (args.output_tokens is None):
        raise ValueError("--prompt-tokens and --output-tokens go together")
    if args.trace:
        given = [flag for flag, value in (("--cv", args.cv), ("--lengths", args.lengths),
                                          ("--prompt-tokens", args.prompt_tokens)) if value is not None]
        if given:
            raise ValueError(f"--trace {args.trace} sets arrival times and lengths; {', '.join(given)} cannot be "
                             "combined with it")
    if args.lengths is not None and args.prompt_tokens is not None:
        raise ValueError(f"--lengths {args.lengths} and --prompt-tokens / --output-tokens both set the lengths; give one")
    if args.lengths == "fixed":
        raise ValueError("--lengths fixed takes its lengths from --prompt-tokens and --output-tokens; give those instead")
    if args.host_cache_gb and args.prefix_caching is False:
        raise ValueError(f"--host-cache-gb {args.host_cache_gb:g} needs prefix caching (it keeps evicted prefixes), "
                         "not --no-prefix-caching")


def _simulate(args: argparse.Namespace) -> int:
    context_tokens = get_model(args.model).context_tokens
    if args.prompt_tokens is not None and args.prompt_tokens > context_tokens:
        raise ValueError(f"--prompt-tokens {args.prompt_tokens} exceeds the {context_tokens:,}-token context of "
                         f"{args.model} (hardware/data/models.csv)")
    rng = np.random.default_rng(args.seed)
    slo = SLO(ttft_s=args.ttft_slo, tbt_s=args.tbt_slo)
    requests: Iterable[Request]
    if args.trace:
        if args.trace in ("azure_code", "azure_conv"):
            requests = load_azure_trace(args.trace, max_requests=args.requests)
        elif args.trace in MOONCAKE_TRACE_FILES or args.trace.endswith((".jsonl", ".jsonl.gz")):
            requests = load_hash_trace(args.trace, max_requests=args.requests)
        else:
            requests = load_trace_csv(args.trace, max_requests=args.requests)
        for request in requests:
            request.slo = SLO(ttft_s=slo.ttft_s, tbt_s=slo.tbt_s)
    else:
        arrivals = PoissonArrivals(args.rate) if args.cv is None else GammaArrivals(args.rate, args.cv)
        if args.prompt_tokens is not None:
            lengths = FixedLengths(args.prompt_tokens, args.output_tokens)
        else:
            lengths = length_sampler(args.lengths or "sharegpt")
        num_requests = 1000 if args.requests is None else args.requests
        requests = stream_requests(arrivals, lengths, num_requests, rng, slo=slo)
    overhead = {}
    if args.cpu_overhead_ms is not None:
        overhead["cpu_overhead_s"] = args.cpu_overhead_ms * 1e-3
    pools = _instances(args.instances, args.gpu)
    inventory: dict[str, int] = {}
    for gpu, count in pools:
        inventory[gpu] = inventory.get(gpu, 0) + count * args.tp * args.pp
    router = make_router("llumnix", headroom_fractions=default_headroom_fractions(1)) if args.router == "llumnix" else args.router
    cluster = make_cluster(inventory, backend=args.backend, router=router, keep_sequences=False)
    for gpu, count in pools:
        for _ in range(count):
            cluster.deploy(
                InstanceConfig(
                    gpu=gpu, model=args.model, tp=args.tp, pp=args.pp, engine=args.engine, scheduler=args.scheduler,
                    block_size=args.block_size, memory_utilization=args.memory_utilization,
                    max_batch_size=args.max_batch_size, microbatches_in_flight=args.microbatches_in_flight,
                    prefix_caching=args.prefix_caching, host_cache_gb=args.host_cache_gb, **overhead,
                ),
                ready_now=True,
            )
    started = time.perf_counter()
    outcomes = cluster.run(requests)
    wall_s = time.perf_counter() - started
    summary = summarize(outcomes, duration_s=cluster.events.now_s, cost_usd=cluster.cost_usd())
    counts: dict[str, float] = {"context_truncated": cluster.context_truncated}
    counts |= {name: value for name, value in prefix_cache_metrics(cluster.instances.values()).items()
               if name in PREFIX_CACHE_METRICS}
    print(format_table(summary, counts))
    if summary.no_slo_target:
        print("no SLO target set (--ttft-slo, --tbt-slo): slo_attainment and the goodput metrics do not apply (-)")
    print(f"\nsimulated {cluster.arrived} requests ({cluster.events.now_s:.1f} simulated s) in {wall_s:.2f} wall s "
          f"= {cluster.arrived / wall_s:,.0f} requests per wall-second")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({**to_json_dict(summary), **{k: None if v != v else v for k, v in counts.items()}}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
