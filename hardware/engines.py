"""Serving-engine profiles: what one engine version does in an iteration, as data.

An engine profile (``hardware/data/engines/<name>.yaml``) names

* ``kernels``: the kernel-efficiency set its iterations run at (``hardware.kernel_sets``):
  ``vidur-2024`` (Vidur's 2024 operator profiles) or ``measured-2026`` (servegym's own 2026
  H100/H200 profiles, ``hardware/data/kernels``);
* ``cpu``: the CPU time of an iteration, ``fixed_ms + per_sequence_ms * sequences``, charged
  serially with the GPU time (the engine's scheduler, input preparation, sampling and output
  processing that the GPU waits for); ``fixed_ms: vidur-profile`` takes Vidur's measurement
  (``hardware.profiles.cpu_overhead_s``);
* ``batching``: the engine's defaults: local scheduler (``fcfs``: whole prefills in
  prefill-only iterations, vLLM v0; ``sarathi``: chunked prefill, every iteration carries the
  running decodes plus prompt chunks up to the token budget, vLLM V1), ``max_num_seqs``,
  ``max_num_batched_tokens`` and preemption, each either one value or ``{default: ...,
  large_gpu: ...}`` (vLLM's defaults depend on the GPU, ``large_gpu``);
* ``prefix_caching``: whether the engine reuses the KV blocks of a cached prompt prefix;
* ``frontend_ms``: the time a request spends in the engine's front end (HTTP server,
  tokenization, the first token's way back), added to its time to first token;
* ``all_reduce_latency_us``: the fixed cost of one tensor-parallel all-reduce on NVLink GPUs,
  where the engine runs its own all-reduce kernels (vLLM's custom and fused all-reduces) instead
  of NCCL; ``null`` keeps the kernel set's NCCL fit, as do GPUs linked by PCIe only. The
  bandwidth term stays the kernel set's;
* ``sources``: where every number comes from, and ``calibration``: how the fitted ones were fitted.

``python -m hardware --engines`` lists them. Which engine a deployment runs is a field of the
simulator's instance config and of every scenario; ``DEFAULT_ENGINE`` is a current vLLM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from hardware.gpus import GPUSpec
from hardware.profiles import cpu_overhead_s

ENGINE_DIR = Path(__file__).parent / "data" / "engines"

DEFAULT_ENGINE = "vllm-v1"
"""The engine wherever a user does not choose one: vLLM's V1 engine with its defaults."""

KERNEL_SETS = ("vidur-2024", "measured-2026")
SCHEDULERS = ("fcfs", "sarathi")
PREEMPTIONS = ("recompute", "swap")

LARGE_GPU_MIN_GIB = 70.0
"""vLLM V1 picks its larger batching defaults on GPUs with at least 70 GiB that are not A100s
(``EngineArgs._set_default_args_v1``: "For GPUs like H100 and MI300x, use larger default values")."""

_TOP_KEYS = {"name", "summary", "kernels", "cpu", "batching", "prefix_caching", "frontend_ms", "all_reduce_latency_us",
             "sources", "calibration"}
_CPU_KEYS = {"fixed_ms", "per_sequence_ms"}
_BATCHING_KEYS = {"scheduler", "max_num_seqs", "max_num_batched_tokens", "preemption"}


def is_large_gpu(gpu: GPUSpec) -> bool:
    """vLLM V1's test for its larger defaults: >= 70 GiB of memory and not an A100."""
    return gpu.memory_gib >= LARGE_GPU_MIN_GIB and not gpu.name.startswith(("A100", "A800"))


@dataclass(frozen=True)
class GpuDependent:
    """A setting with one value, or one for vLLM's large GPUs and one for the rest."""

    default: Any
    large_gpu: Any

    def for_gpu(self, gpu: GPUSpec) -> Any:
        return self.large_gpu if is_large_gpu(gpu) else self.default


@dataclass(frozen=True)
class Batching:
    """An engine's batching defaults, resolved for one GPU."""

    scheduler: str
    max_num_seqs: int
    max_num_batched_tokens: int
    preemption: str | None


@dataclass(frozen=True)
class EngineProfile:
    """One serving engine version (see the module docstring for the fields)."""

    name: str
    summary: str
    kernels: str
    cpu_fixed_s: float
    cpu_per_sequence_s: float
    scheduler: str
    max_num_seqs: GpuDependent
    max_num_batched_tokens: GpuDependent
    preemption: str | None
    prefix_caching: bool
    frontend_s: float
    all_reduce_latency_s: float | None
    sources: tuple[str, ...]
    calibration: str

    def cpu_s(self, sequences: int) -> float:
        """CPU time of an iteration over ``sequences`` sequences."""
        return self.cpu_fixed_s + self.cpu_per_sequence_s * sequences

    def batching(self, gpu: GPUSpec) -> Batching:
        """The batching defaults on ``gpu``."""
        return Batching(
            scheduler=self.scheduler,
            max_num_seqs=self.max_num_seqs.for_gpu(gpu),
            max_num_batched_tokens=self.max_num_batched_tokens.for_gpu(gpu),
            preemption=self.preemption,
        )


def _positive_int(where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{where}={value!r} must be a positive integer")
    return value


def _gpu_dependent(where: str, value: object) -> GpuDependent:
    if isinstance(value, dict):
        if set(value) != {"default", "large_gpu"}:
            raise ValueError(f"{where}: expected keys default and large_gpu, got {sorted(value)}")
        return GpuDependent(_positive_int(f"{where}.default", value["default"]),
                            _positive_int(f"{where}.large_gpu", value["large_gpu"]))
    number = _positive_int(where, value)
    return GpuDependent(number, number)


VIDUR_CPU_PROFILE = "vidur-profile"


def _ms_to_s(where: str, value: object) -> float:
    if value == VIDUR_CPU_PROFILE:
        return cpu_overhead_s()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}={value!r} must be a finite number >= 0 (milliseconds)")
    return float(value) * 1e-3


def _check_keys(where: str, found: Mapping[str, object], expected: set[str]) -> None:
    if set(found) != expected:
        missing, extra = sorted(expected - set(found)), sorted(set(found) - expected)
        raise ValueError(f"{where}: missing keys {missing}, unknown keys {extra}")


def parse_engine(data: object, where: str) -> EngineProfile:
    """Validate one engine file's content; errors name the file and the field."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    _check_keys(where, data, _TOP_KEYS)
    cpu, batching = data["cpu"], data["batching"]
    if not isinstance(cpu, dict) or not isinstance(batching, dict):
        raise ValueError(f"{where}: cpu and batching must be mappings")
    _check_keys(f"{where} cpu", cpu, _CPU_KEYS)
    _check_keys(f"{where} batching", batching, _BATCHING_KEYS)
    if data["kernels"] not in KERNEL_SETS:
        raise ValueError(f"{where}: kernels={data['kernels']!r}; known: {', '.join(KERNEL_SETS)}")
    if batching["scheduler"] not in SCHEDULERS:
        raise ValueError(f"{where}: batching.scheduler={batching['scheduler']!r}; known: {', '.join(SCHEDULERS)}")
    if batching["preemption"] is not None and batching["preemption"] not in PREEMPTIONS:
        raise ValueError(f"{where}: batching.preemption={batching['preemption']!r}; known: {', '.join(PREEMPTIONS)}")
    if not isinstance(data["prefix_caching"], bool):
        raise ValueError(f"{where}: prefix_caching={data['prefix_caching']!r} must be true or false")
    sources = data["sources"]
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise ValueError(f"{where}: sources must be a non-empty list of citations")
    for key in ("name", "summary", "calibration"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise ValueError(f"{where}: {key} must be a non-empty string")
    return EngineProfile(
        name=data["name"],
        summary=data["summary"].strip(),
        kernels=data["kernels"],
        cpu_fixed_s=_ms_to_s(f"{where} cpu.fixed_ms", cpu["fixed_ms"]),
        cpu_per_sequence_s=_ms_to_s(f"{where} cpu.per_sequence_ms", cpu["per_sequence_ms"]),
        scheduler=batching["scheduler"],
        max_num_seqs=_gpu_dependent(f"{where} batching.max_num_seqs", batching["max_num_seqs"]),
        max_num_batched_tokens=_gpu_dependent(
            f"{where} batching.max_num_batched_tokens", batching["max_num_batched_tokens"]
        ),
        preemption=batching["preemption"],
        prefix_caching=data["prefix_caching"],
        frontend_s=_ms_to_s(f"{where} frontend_ms", data["frontend_ms"]),
        all_reduce_latency_s=(
            None if data["all_reduce_latency_us"] is None
            else _ms_to_s(f"{where} all_reduce_latency_us", data["all_reduce_latency_us"]) * 1e-3
        ),
        sources=tuple(s.strip() for s in sources),
        calibration=data["calibration"].strip(),
    )


def load_engines(directory: Path) -> dict[str, EngineProfile]:
    """Every ``*.yaml`` engine profile in ``directory``, by name (the file's stem)."""
    engines: dict[str, EngineProfile] = {}
    for path in sorted(directory.glob("*.yaml")):
        with open(path, encoding="utf-8") as handle:
            try:
                data = yaml.safe_load(handle)
            except yaml.YAMLError as error:
                raise ValueError(f"{path}: not valid YAML ({error})") from None
        engine = parse_engine(data, str(path))
        if engine.name != path.stem:
            raise ValueError(f"{path}: name {engine.name!r} differs from the file name {path.stem!r}")
        engines[engine.name] = engine
    if DEFAULT_ENGINE not in engines:
        raise ValueError(f"{directory}: the default engine {DEFAULT_ENGINE!r} has no profile")
    return engines


@cache
def _catalog() -> Mapping[str, EngineProfile]:
    return MappingProxyType(load_engines(ENGINE_DIR))


def reload_engines() -> None:
    """Read the engine files again (after a calibration rewrote one)."""
    _catalog.cache_clear()


def engine_names() -> list[str]:
    """The shipped engine profiles, sorted by name."""
    return sorted(_catalog())


def get_engine(engine: EngineProfile | str) -> EngineProfile:
    """The profile named ``engine`` (a profile passes through); ``ValueError`` listing the known ones."""
    if isinstance(engine, EngineProfile):
        return engine
    try:
        return _catalog()[engine]
    except (KeyError, TypeError):
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(engine_names())}") from None
