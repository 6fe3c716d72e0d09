"""Refuse a deployment the simulator cannot hold in this machine's memory, before building it.

An instance costs the simulator about ``INSTANCE_BYTES`` of Python objects and arrays at the
peak of building a cluster (measured with ``tracemalloc``: 1,000 Llama-2-7B instances on
A100-80GB took 5.5 KB each once built and 21 KB each at the peak while the cluster's arrays grew).
"""

from __future__ import annotations

import os

INSTANCE_BYTES = 24 * 1024
# What the rest of a simulation (interpreter, libraries, requests in flight) is left at least.
RESERVED_BYTES = 512 * 1024**2


def available_bytes() -> int:
    """Memory this machine can still give (``MemAvailable`` of ``/proc/meminfo``; else free pages)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_instances_fit(field: str, instances: int, available: int | None = None) -> None:
    """Raise ``ValueError`` naming ``field`` when ``instances`` would need more memory than is
    available (``available`` bytes, default: this machine's), with the estimate."""
    available = available_bytes() if available is None else available
    needed = instances * INSTANCE_BYTES + RESERVED_BYTES
    if needed > available:
        raise ValueError(f"{field} {instances:,}: the simulator would need about {needed / 1024**3:,.1f} GiB "
                         f"({INSTANCE_BYTES // 1024} KiB per instance) and this machine has "
                         f"{available / 1024**3:,.1f} GiB available")
