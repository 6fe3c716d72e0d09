"""Engine profiles: the shipped files, their validation, the batching defaults they give an
instance, and the CPU time and front end they add to an iteration and a request."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import yaml

from hardware.engines import DEFAULT_ENGINE, ENGINE_DIR, engine_names, get_engine, is_large_gpu, parse_engine
from hardware.gpus import get_gpu
from hardware.profiles import cpu_overhead_s
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request


def _data(name: str) -> dict:
    with open(ENGINE_DIR / f"{name}.yaml", encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_shipped_engines_and_the_default():
    assert {"vidur-2024", "vllm-0.6", "vllm-v1"} <= set(engine_names())
    assert DEFAULT_ENGINE == "vllm-v1"
    vidur = get_engine("vidur-2024")
    assert vidur.cpu_s(1) == vidur.cpu_s(256) == cpu_overhead_s()
    assert (vidur.kernels, vidur.scheduler, vidur.prefix_caching, vidur.frontend_s) == ("vidur-2024", "fcfs", False, 0.0)
    current = get_engine("vllm-v1")
    assert (current.kernels, current.scheduler, current.prefix_caching) == ("measured-2026", "sarathi", True)


@pytest.mark.parametrize("gpu, large", [("H100-80GB", True), ("H200", True), ("H100-96GB", True), ("A100-80GB", False),
                                        ("A800-PCIe", False), ("L40S", False), ("H20-NVL", True)])
def test_vllm_v1_takes_its_larger_defaults_on_70_gib_gpus_that_are_not_a100s(gpu, large):
    assert is_large_gpu(get_gpu(gpu)) is large
    batching = get_engine("vllm-v1").batching(get_gpu(gpu))
    assert (batching.max_num_seqs, batching.max_num_batched_tokens) == ((1024, 8192) if large else (256, 2048))


def test_an_instance_takes_the_engines_batching_where_its_config_leaves_it_open():
    resolved = InstanceConfig(gpu="H100-80GB", model="Llama-3.1-8B").resolved()
    assert (resolved.scheduler, resolved.max_batch_size, resolved.max_batched_tokens) == ("sarathi", 1024, 8192)
    assert resolved.scheduler_options == {"chunk_tokens": 8192} and resolved.prefix_caching is True
    chosen = InstanceConfig(gpu="H100-80GB", model="Llama-3.1-8B", max_batch_size=128, max_batched_tokens=2048,
                            prefix_caching=False).resolved()
    assert (chosen.max_batch_size, chosen.max_batched_tokens, chosen.scheduler_options) == (128, 2048, {"chunk_tokens": 2048})
    assert chosen.prefix_caching is False
    own = InstanceConfig(gpu="H100-80GB", model="Llama-3.1-8B", scheduler="sarathi").resolved()
    assert own.scheduler_options == {}  # a scheduler the user names keeps its own chunk default
    vidur = InstanceConfig(gpu="A100-80GB", model="Llama-2-7B", engine="vidur-2024").resolved()
    assert (vidur.scheduler, vidur.max_batch_size, vidur.max_batched_tokens, vidur.prefix_caching) == ("fcfs", 256, 4096, False)


def test_the_front_end_delays_a_request_before_it_joins_the_queue():
    engine = get_engine("vllm-v1")
    first_token_s = {}
    for name, profile in (("with", engine), ("without", replace(engine, frontend_s=0.0))):
        cluster = Cluster({"H100-80GB": 1})
        cluster.deploy(InstanceConfig(gpu="H100-80GB", model="Llama-3.1-8B", engine=profile), ready_now=True)
        first_token_s[name] = cluster.run([Request(0, 1.0, 100, 4)])[0].first_token_s
    assert first_token_s["with"] - first_token_s["without"] == pytest.approx(engine.frontend_s, rel=1e-9)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("kernels"), "missing keys \\['kernels'\\]"),
    (lambda d: d.update(kernels="triton-2027"), "kernels='triton-2027'"),
    (lambda d: d["cpu"].update(fixed_ms=-1), "cpu.fixed_ms=-1 must be a finite number >= 0"),
    (lambda d: d["cpu"].update(fixed_ms=float("nan")), "cpu.fixed_ms=nan"),
    (lambda d: d["batching"].update(scheduler="lifo"), "batching.scheduler='lifo'"),
    (lambda d: d["batching"].update(max_num_seqs={"default": 256}), "expected keys default and large_gpu"),
    (lambda d: d["batching"].update(max_num_seqs=0), "max_num_seqs=0 must be a positive integer"),
    (lambda d: d.update(prefix_caching="yes"), "prefix_caching='yes' must be true or false"),
    (lambda d: d.update(sources=[]), "sources must be a non-empty list"),
    (lambda d: d.update(frontend_ms=True), "frontend_ms=True"),
    (lambda d: d.update(extra=1), "unknown keys \\['extra'\\]"),
])
def test_a_malformed_engine_file_is_refused_naming_the_field(edit, message):
    data = copy.deepcopy(_data("vllm-v1"))
    edit(data)
    with pytest.raises(ValueError, match=message):
        parse_engine(data, "engines/broken.yaml")


def test_unknown_engine_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown engine 'sglang'; known: vidur-2024, vllm-0.6, vllm-0.6-chunked, vllm-v1"):
        get_engine("sglang")
    with pytest.raises(ValueError, match="unknown engine 'sglang'"):
        InstanceConfig(gpu="H100-80GB", model="Llama-3.1-8B", engine="sglang").validate()
