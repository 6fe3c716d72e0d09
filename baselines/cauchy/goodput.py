"""The profiled goodput table (Cauchy §3.3.1 "profiling goodput under given SLA"): every
GPU Combo's goodput per workload, and Mélange's per (bucket, GPU type) goodputs, measured
with the simulator (``baselines.cauchy.search``) and cached in
``baselines/data/cauchy_goodput.json`` so planning never re-simulates.

Regenerate (20 minutes on 2 cores shared with another engineer's jobs; 16 with ``--engine vllm-0.6-chunked``)::

    python -m baselines.cauchy.goodput --workers 2 [--address auto|HOST:PORT]

Combos are profiled with Cauchy's own opportunistic instance scheduler (§3.4.2), every
instance batching as vLLM v0 without chunked prefill; ``--engine vllm-0.6-chunked`` profiles
the table of the other engine (``baselines.cauchy.workloads.ENGINES``), which only the
reproductions' labelled engine variants read (``cauchy_goodput_vllm-0.6-chunked.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from baselines.cauchy.combos import enumerate_combos
from baselines.cauchy.melange import bucket_goodput_rps, bucket_shares
from baselines.cauchy.search import GoodputSearch, max_goodput_rps, run_poisson
from baselines.cauchy.workloads import (DEFAULT_ENGINE, ENGINES, INVENTORY, MODEL, WORKLOADS, CauchyWorkload,
                                        engine_options, get_workload)
from simulator.cli import command
from simulator.backends import make_combo_cluster
from simulator.combo_cluster import ComboCluster
from simulator.combos import Combo, parse_combo
from simulator.fanout import add_arguments, iter_fan_out
from simulator.metrics import MetricsSummary
from simulator.workloads import length_sampler

TABLE_PATH = Path(__file__).resolve().parent.parent / "data" / "cauchy_goodput.json"
ENGINE_TABLE_PATHS = {engine: TABLE_PATH if engine == DEFAULT_ENGINE else TABLE_PATH.with_name(f"cauchy_goodput_{engine}.json")
                      for engine in ENGINES}
INSTANCE_SCHEDULER = "opportunistic"


def combo_poisson_run(
    combo: Combo, workload: CauchyWorkload, rate_rps: float, search: GoodputSearch,
    instance_scheduler: str = INSTANCE_SCHEDULER, model: str = MODEL, engine: str = DEFAULT_ENGINE,
) -> MetricsSummary:
    """One combo alone serving Poisson arrivals at ``rate_rps`` with the workload's lengths, its
    instances batching as ``engine`` does (``baselines.cauchy.workloads.ENGINES``)."""
    instance_options = engine_options(engine)

    def build() -> ComboCluster:
        cluster = make_combo_cluster(combo.gpu_counts(), instance_scheduler=instance_scheduler,
                               instance_options=instance_options)
        cluster.deploy_combo(combo, model, ready_now=True)
        return cluster

    return run_poisson(build, length_sampler(workload.lengths), workload.slo(), rate_rps, search)


def combo_slo_attainment(
    combo: Combo, workload: CauchyWorkload, rate_rps: float, search: GoodputSearch,
    instance_scheduler: str = INSTANCE_SCHEDULER, model: str = MODEL, engine: str = DEFAULT_ENGINE,
) -> float:
    """SLO attainment of ``combo_poisson_run``."""
    return combo_poisson_run(combo, workload, rate_rps, search, instance_scheduler, model, engine).slo_attainment


def combo_goodput_rps(
    combo: Combo, workload: CauchyWorkload, search: GoodputSearch,
    instance_scheduler: str = INSTANCE_SCHEDULER, model: str = MODEL, engine: str = DEFAULT_ENGINE,
) -> float:
    """Max goodput of one combo (``search``'s attainment level and bisection)."""
    return max_goodput_rps(
        lambda rate: combo_slo_attainment(combo, workload, rate, search, instance_scheduler, model, engine), search
    )


@dataclass(frozen=True)
class GoodputTable:
    """``combos[workload][combo name]`` and ``melange[workload][gpu][bucket]`` in req/s."""

    settings: dict[str, Any]
    combos: dict[str, dict[str, float]]
    melange: dict[str, dict[str, dict[str, float]]]

    def combo_goodputs(self, workload: str) -> dict[str, float]:
        if workload not in self.combos:
            raise ValueError(f"no combo goodputs for workload {workload!r}; known: {sorted(self.combos)}")
        return dict(self.combos[workload])

    def melange_goodputs(self, workload: str) -> dict[str, dict[str, float]]:
        if workload not in self.melange:
            raise ValueError(f"no Mélange goodputs for workload {workload!r}; known: {sorted(self.melange)}")
        return {gpu: dict(by_bucket) for gpu, by_bucket in self.melange[workload].items()}

    def combos_of(self, workload: str) -> list[Combo]:
        return [parse_combo(name) for name in self.combo_goodputs(workload)]

    def write(self, path: Path) -> None:
        path.write_text(json.dumps({"settings": self.settings, "combos": self.combos, "melange": self.melange}, indent=1) + "\n")


@lru_cache(maxsize=4)
def load_goodput_table(path: Path = TABLE_PATH) -> GoodputTable:
    """The cached table (read once per path)."""
    if not Path(path).is_file():
        raise ValueError(f"no goodput table at {path}; generate it with `python -m baselines.cauchy.goodput`")
    data = json.loads(Path(path).read_text())
    for key in ("settings", "combos", "melange"):
        if key not in data:
            raise ValueError(f"{path}: missing {key!r}")
    return GoodputTable(data["settings"], data["combos"], data["melange"])


def engine_goodput_table(engine: str) -> GoodputTable:
    """The shipped table profiled with ``engine`` (``ENGINE_TABLE_PATHS``); the planners' is
    the default engine's, ``load_goodput_table()``."""
    engine_options(engine)
    table = load_goodput_table(ENGINE_TABLE_PATHS[engine])
    if table.settings.get("engine") != engine:
        raise ValueError(f"{ENGINE_TABLE_PATHS[engine]} was profiled with engine {table.settings.get('engine')!r}, not {engine!r}")
    return table


def _measure(task: tuple) -> float:
    kind, workload_name, search_fields, engine, *rest = task
    workload, search = get_workload(workload_name), GoodputSearch(**search_fields)
    if kind == "combo":
        return combo_goodput_rps(parse_combo(rest[0]), workload, search, engine=engine)
    gpu, bucket = rest
    return bucket_goodput_rps(gpu, bucket, workload, search, engine=engine)


def measure_goodput_table(
    workloads: Iterable[str], combos: Sequence[Combo], search: GoodputSearch, workers: int = 1,
    address: str | None = None, engine: str = DEFAULT_ENGINE,
) -> GoodputTable:
    """Profile every combo and every Mélange (bucket, GPU type) for each workload, instances
    batching as ``engine`` does, ``workers`` measurements at a time (``simulator.fanout``)."""
    engine_options(engine)
    tasks: list[tuple] = []
    for name in workloads:
        workload = get_workload(name)
        tasks += [("combo", name, search.as_dict(), engine, combo.name) for combo in combos]
        tasks += [("melange", name, search.as_dict(), engine, gpu, b) for gpu in INVENTORY for b in bucket_shares(workload)]
    values = []
    started = time.perf_counter()
    for value in iter_fan_out(_measure, [(task,) for task in tasks], workers, address):
        values.append(value)
        if len(values) % 25 == 0 or len(values) == len(tasks):
            print(f"{len(values)} / {len(tasks)} goodputs measured ({time.perf_counter() - started:.0f} s)", flush=True)
    table: dict[str, dict] = {"combos": {}, "melange": {}}
    for task, value in zip(tasks, values):
        if task[0] == "combo":
            table["combos"].setdefault(task[1], {})[task[4]] = round(value, 4)
        else:
            table["melange"].setdefault(task[1], {}).setdefault(task[4], {})[task[5]] = round(value, 4)
    settings = {
        **search.as_dict(), "model": MODEL, "instance_scheduler": INSTANCE_SCHEDULER, "engine": engine,
        "arrivals": "poisson",
        "command": "python -m baselines.cauchy.goodput" + (f" --engine {engine}" if engine != DEFAULT_ENGINE else ""),
    }
    return GoodputTable(settings, table["combos"], table["melange"])


@command("baselines.cauchy.goodput")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    add_arguments(parser, default_workers=1)
    parser.add_argument("--engine", default=DEFAULT_ENGINE, choices=list(ENGINES),
                        help=f"how instances batch (baselines.cauchy.workloads.ENGINES; default {DEFAULT_ENGINE})")
    parser.add_argument("--out", type=Path, default=None,
                        help="the table to write (default: the engine's shipped table, ENGINE_TABLE_PATHS)")
    args = parser.parse_args(argv)
    out = args.out or ENGINE_TABLE_PATHS[args.engine]
    started = time.perf_counter()
    table = measure_goodput_table(args.workloads, enumerate_combos(INVENTORY), GoodputSearch(), args.workers,
                                  args.address, args.engine)
    table.write(out)
    print(f"wrote {out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
