"""``python -m experiments.validation``: the sim-to-real report (docs/validation.md and its figure).

Every real serving point of ``hardware/data/measurements`` is simulated under its engine's
profile and under ``vidur-2024``, and compared on the metrics its source measured; the kernel
fits, a held-out GPU, whole forward passes, Cascadia's Table 1 ranking and the MoE cost check
follow. ``--fit`` first refits ``vllm-v1``'s free parameters on the training points
(``experiments.validation.split``) and writes them into ``hardware/data/engines/vllm-v1.yaml``;
``--point ID`` simulates one point and prints it (the command behind each row of the report).
Takes about 5 minutes (``--fit``: 15-30 more) on two cores.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from experiments.validation.cases import case_for
from experiments.validation.fit import fit
from experiments.validation.page import write_page
from experiments.validation.simulate import METRICS, simulate
from experiments.validation.split import TRAIN, role
from hardware.engines import ENGINE_DIR, get_engine, reload_engines
from hardware.latency import latency_model
from hardware.measurements import serving_points

PROG = "python -m experiments.validation"
DOCS = Path(__file__).resolve().parents[2] / "docs"
FITTED_ENGINE = "vllm-v1"


def _write_fitted(values: dict[str, float]) -> Path:
    """Replace the fitted numbers in the engine's YAML file, keeping everything else as written."""
    path = ENGINE_DIR / f"{FITTED_ENGINE}.yaml"
    text = path.read_text(encoding="utf-8")
    for key, pattern in (("cpu_fixed_ms", r"(\n  fixed_ms: )[^\n]*"), ("frontend_ms", r"(\nfrontend_ms: )[^\n]*"),
                         ("all_reduce_latency_us", r"(\nall_reduce_latency_us: )[^\n]*")):
        text, count = re.subn(pattern, lambda m, k=key: f"{m.group(1)}{values[k]}", text)
        if count != 1:
            raise ValueError(f"{path}: expected one {key} line to replace, found {count}")
    path.write_text(text, encoding="utf-8")
    return path


def _print_point(point_id: str) -> None:
    points = {p.point_id: p for p in serving_points()}
    if point_id not in points:
        raise ValueError(f"--point {point_id}: unknown point; see hardware/data/measurements/serving_points.csv")
    case = case_for(points[point_id])
    if case is None:
        raise ValueError(f"--point {point_id}: the simulator cannot replay this point (GPU or model outside the "
                         "catalog, or no workload)")
    simulated = simulate(case)
    print(f"{point_id}: {case.engine} ({role(case)}), {case.replicas} x {case.config}")
    for metric in METRICS:
        measured = getattr(case.point, metric)
        value = getattr(simulated, metric)
        error = "" if measured is None else f"  error {value / measured - 1:+.1%}"
        print(f"  {metric}: measured {measured}, simulated {value:.4g}{error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=DOCS, help="where validation.md and validation.png go")
    parser.add_argument("--fit", action="store_true", help=f"refit {FITTED_ENGINE}'s free parameters first")
    parser.add_argument("--point", help="simulate one point and print it")
    args = parser.parse_args(argv)
    try:
        if args.point:
            _print_point(args.point)
            return 0
        if not args.out_dir.is_dir():
            raise ValueError(f"--out-dir {args.out_dir}: not a directory")
        if args.fit:
            cases = [c for c in (case_for(p) for p in serving_points()) if c is not None and role(c) == TRAIN]
            result = fit(get_engine(FITTED_ENGINE), cases,
                         progress=lambda n, x, v: print(f"  fit step {n}: loss {v:.5f}", file=sys.stderr))
            reload_engines()
            latency_model.cache_clear()
            print(f"fitted {result.parameters} (train loss {result.train_loss:.5f}) -> {_write_fitted(result.parameters)}")
        page = write_page(args.out_dir)
        print(f"wrote {page}")
    except ValueError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
