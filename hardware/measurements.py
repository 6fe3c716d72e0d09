"""Real end-to-end serving measurements: one typed, validated record per operating point.

``hardware/data/measurements/serving_points.csv`` holds one row per measured operating point
of a real serving engine (engine, version, GPU, parallelism, model, workload, measured
latencies and throughputs); ``hardware/data/measurements/README.md`` says, per ``source``,
where each row comes from, its licence and how the figures were converted. An empty cell
means the source does not state the value; nothing is filled in by guess.

Metric conventions (milliseconds, requests/s, tokens/s):

* ``tpot_mean_ms`` is vLLM ``benchmark_serving``'s TPOT: per request
  ``(e2e - ttft) / (output_tokens - 1)``, then averaged over requests.
* ``itl_mean_ms`` is the mean inter-token gap as the source reports it (vLLM weights every gap
  equally; AIPerf/NIM label their per-request figure ITL). Each row's ``notes`` says which.
* ``request_rate_rps`` empty means no rate (all-at-once, closed-loop or not stated).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hardware.csv_rows import checked_rows
from hardware.gpus import GPU_CATALOG
from hardware.models import MODEL_CATALOG

REPO_ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS_DIR = Path(__file__).parent / "data" / "measurements"
SERVING_POINTS_CSV = MEASUREMENTS_DIR / "serving_points.csv"

ENGINES = ("vllm", "sglang", "trtllm", "nim", "unspecified")
DTYPES = ("fp16", "bf16", "fp8", "int4-awq", "int4-gptq")
ARRIVALS = ("poisson", "gamma", "constant", "all-at-once", "closed-loop")
_RATED_ARRIVALS = ("poisson", "gamma", "constant")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

_TEXT_REQUIRED = ("point_id", "source", "engine", "gpu", "model", "notes")
_TEXT_OPTIONAL = ("engine_version", "gpu_catalog", "model_catalog", "dtype", "dataset", "arrival", "per_request_file")
_POSITIVE_INT = ("num_gpus", "tp", "pp", "dp", "max_num_seqs", "max_num_batched_tokens", "max_concurrency", "num_requests")
_BOOL = ("chunked_prefill", "prefix_caching", "prompt_tokens_fixed", "output_tokens_fixed")
_POSITIVE_FLOAT = (
    "prompt_tokens_mean",
    "output_tokens_mean",
    "request_rate_rps",
    "ttft_mean_ms",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_mean_ms",
    "itl_mean_ms",
    "e2e_mean_ms",
    "e2e_p50_ms",
    "request_throughput_rps",
    "output_throughput_tps",
    "total_throughput_tps",
)
COLUMNS = (
    "point_id", "source", "engine", "engine_version", "gpu", "gpu_catalog", "num_gpus", "tp", "pp", "dp",
    "model", "model_catalog", "dtype", "max_num_seqs", "max_num_batched_tokens", "chunked_prefill",
    "prefix_caching", "dataset", "prompt_tokens_mean", "output_tokens_mean", "prompt_tokens_fixed",
    "output_tokens_fixed", "arrival", "request_rate_rps", "max_concurrency", "num_requests", "ttft_mean_ms",
    "ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "itl_mean_ms", "e2e_mean_ms", "e2e_p50_ms",
    "request_throughput_rps", "output_throughput_tps", "total_throughput_tps", "per_request_file", "notes",
)
_METRICS = ("ttft_mean_ms", "tpot_mean_ms", "itl_mean_ms", "e2e_mean_ms", "request_throughput_rps",
            "output_throughput_tps", "total_throughput_tps")


@dataclass(frozen=True)
class ServingPoint:
    """One measured operating point; ``None`` where the source does not state the value.

    ``gpu``/``model`` name the hardware and model as the source does (a Hugging Face id where
    it gives one); ``gpu_catalog``/``model_catalog`` are the catalog keys of exactly that part
    and architecture, ``None`` where the catalog has none. ``per_request_file`` is a path
    relative to the repository root.
    """

    point_id: str
    source: str
    engine: str
    engine_version: str | None
    gpu: str
    gpu_catalog: str | None
    num_gpus: int | None
    tp: int | None
    pp: int | None
    dp: int | None
    model: str
    model_catalog: str | None
    dtype: str | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    chunked_prefill: bool | None
    prefix_caching: bool | None
    dataset: str | None
    prompt_tokens_mean: float | None
    output_tokens_mean: float | None
    prompt_tokens_fixed: bool | None
    output_tokens_fixed: bool | None
    arrival: str | None
    request_rate_rps: float | None
    max_concurrency: int | None
    num_requests: int | None
    ttft_mean_ms: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_mean_ms: float | None
    itl_mean_ms: float | None
    e2e_mean_ms: float | None
    e2e_p50_ms: float | None
    request_throughput_rps: float | None
    output_throughput_tps: float | None
    total_throughput_tps: float | None
    per_request_file: str | None
    notes: str


def _parse_field(name: str, text: str) -> object:
    """The typed value of one cell; ``ValueError`` saying why it is bad."""
    if name in _TEXT_REQUIRED:
        if not text.strip():
            raise ValueError("must not be empty")
        return text
    if text == "":
        return None
    if name in _TEXT_OPTIONAL:
        return text
    if name in _BOOL:
        if text not in ("true", "false"):
            raise ValueError("must be true, false or empty")
        return text == "true"
    if name in _POSITIVE_INT:
        if not re.fullmatch(r"[0-9]+", text) or int(text) <= 0:
            raise ValueError("must be a positive integer")
        return int(text)
    try:
        value = float(text)
    except ValueError:
        raise ValueError("is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a positive finite number")
    return value


def _check_point(point: ServingPoint) -> tuple[str, object, str] | None:
    """The first cross-field inconsistency as ``(field, value, why)``, or ``None``."""
    checks: list[tuple[bool, str, object, str]] = [
        (_SLUG.match(point.point_id) is None, "point_id", point.point_id, "must be a lowercase slug"),
        (_SLUG.match(point.source) is None, "source", point.source, "must be a lowercase slug"),
        (point.engine not in ENGINES, "engine", point.engine, f"not one of {', '.join(ENGINES)}"),
        (point.dtype is not None and point.dtype not in DTYPES, "dtype", point.dtype, f"not one of {', '.join(DTYPES)}"),
        (point.arrival is not None and point.arrival not in ARRIVALS, "arrival", point.arrival,
         f"not one of {', '.join(ARRIVALS)}"),
        (point.gpu_catalog is not None and point.gpu_catalog not in GPU_CATALOG, "gpu_catalog", point.gpu_catalog,
         "not a GPU catalog key"),
        (point.model_catalog is not None and point.model_catalog not in MODEL_CATALOG, "model_catalog",
         point.model_catalog, "not a model catalog key"),
        (point.request_rate_rps is not None and point.arrival not in _RATED_ARRIVALS, "request_rate_rps",
         point.request_rate_rps, f"needs arrival {', '.join(_RATED_ARRIVALS)}, got {point.arrival!r}"),
        (point.arrival == "closed-loop" and point.max_concurrency is None, "max_concurrency", None,
         "a closed-loop point needs its concurrency"),
        (point.per_request_file is not None and not (REPO_ROOT / point.per_request_file).is_file(),
         "per_request_file", point.per_request_file, "no such file under the repository root"),
        (all(getattr(point, f) is None for f in _METRICS), "ttft_mean_ms", None, "a point needs at least one metric"),
    ]
    degrees = (point.tp, point.pp, point.dp)
    if point.num_gpus is not None and None not in degrees:
        product = point.tp * point.pp * point.dp  # type: ignore[operator]
        checks.append((point.num_gpus != product, "num_gpus", point.num_gpus, f"must equal tp*pp*dp = {product}"))
    if point.output_tokens_mean is not None:
        checks.append((point.output_tokens_mean < 1, "output_tokens_mean", point.output_tokens_mean, "must be >= 1"))
    for low, high in (("ttft_p50_ms", "ttft_p99_ms"), ("ttft_mean_ms", "e2e_mean_ms"), ("ttft_p50_ms", "e2e_p50_ms")):
        a, b = getattr(point, low), getattr(point, high)
        if a is not None and b is not None:
            checks.append((a > b, high, b, f"is below {low}={a}"))
    for failed, field_name, value, why in checks:
        if failed:
            return field_name, value, why
    return None


def load_serving_points(csv_path: Path = SERVING_POINTS_CSV) -> list[ServingPoint]:
    """Parse and validate a serving-points CSV; errors name the file, line and field."""
    points: list[ServingPoint] = []
    seen: set[str] = set()
    for where, row in checked_rows(csv_path, COLUMNS):
        values: dict[str, object] = {}
        for name in COLUMNS:
            try:
                values[name] = _parse_field(name, row[name])
            except ValueError as error:
                raise ValueError(f"{where}: {name} {row[name]!r}: {error}") from None
        point = ServingPoint(**values)  # type: ignore[arg-type]
        problem = _check_point(point)
        if problem is not None:
            field_name, value, why = problem
            raise ValueError(f"{where}: {field_name} {value!r}: {why}")
        if point.point_id in seen:
            raise ValueError(f"{where}: point_id {point.point_id!r}: duplicate")
        seen.add(point.point_id)
        points.append(point)
    if not points:
        raise ValueError(f"{csv_path}: no serving points")
    return points


@cache
def serving_points() -> tuple[ServingPoint, ...]:
    """The shipped serving points, loaded once."""
    return tuple(load_serving_points())
