"""Setting a compiled engine up from what Python deployed and submitted (``simulator.compiled``):
each instance's settings as its ``InstanceConfig`` resolved them, the checks before a run, and
the request that an int64 column cannot hold."""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf
from typing import Any

from servegym_core import _core

from simulator.compiled_views import not_ported as not_compiled
from simulator.instance import Instance, Lifecycle
from simulator.instance_arrays import ROLE_CODES
from simulator.request import Request

INT64_LIMIT = 2**63


def name_bad_integer(columns: dict[str, list[Any]], requests: SequenceOf[Request]) -> None:
    """Raise a ValueError naming the first request whose integer field the engine's int64 columns
    cannot hold (the engine's own conversion error names no request)."""
    for name, values in columns.items():
        for request, value in zip(requests, values):
            if not (isinstance(value, int) and -INT64_LIMIT <= value < INT64_LIMIT):
                raise ValueError(f"request {request.request_id}: {name}={value!r} is not an integer the compiled engine "
                                 "holds (int64)")


def check_instances(instances: list[Instance]) -> None:
    """Every instance serves now, or starts up (``deploy(ready_now=False)``), and holds nothing yet."""
    for instance in instances:
        if instance.lifecycle not in (Lifecycle.SERVING, Lifecycle.STARTING):
            raise not_compiled(f"instance {instance.instance_id} in lifecycle {instance.lifecycle.value!r}")
        if instance.num_requests:
            raise not_compiled(f"instance {instance.instance_id} holding requests before run()")


def instance_settings(instance: Instance, model_index: int) -> _core.InstanceSettings:
    settings = _core.InstanceSettings()
    kv = instance.kv
    settings.total_blocks, settings.block_size, settings.watermark_blocks = (
        kv.total_blocks, kv.block_size, kv.watermark_blocks)
    settings.max_batch_size = instance.settings.max_batch_size  # a pipelined instance's share is taken in C++
    settings.pp, settings.pipeline_depth = instance.settings.pp, instance.settings.pipeline_depth
    settings.max_batched_tokens = instance.max_batched_tokens
    settings.context_tokens = instance.model.context_tokens
    settings.swap_s_per_token = instance.swap_s_per_token
    settings.frontend_s = instance.latency.engine.frontend_s
    settings.intra_node_link_gbps = instance.gpu.intra_node_link_gbps
    settings.host_link_gbps = instance.gpu.host_link_gbps
    settings.kv_bytes_per_token = instance.model.kv_bytes_per_token
    settings.preempt_by_swap = instance.preemption == "swap"
    cache = instance.prefix_cache
    settings.prefix_caching = cache is not None
    settings.host_capacity_blocks = 0 if cache is None else cache.host_capacity_blocks
    settings.model_index = model_index
    settings.role = ROLE_CODES[instance.role.value]
    settings.max_segment_iterations = instance.planner.max_iterations
    scheduler = instance.scheduler
    options = _core.SchedulerOptions()
    options.name = type(scheduler).name
    options.chunk_tokens = scheduler.chunked_prefill_tokens or 0
    options.quantum_tokens = getattr(scheduler, "quantum_tokens", 0)
    options.demotion_kv_tokens = getattr(scheduler, "demotion_kv_tokens", 0)
    settings.scheduler = options
    return settings
