"""The one experiment runner: fan independent jobs out over Ray tasks, or run them in order here.

The reproductions and planners that run many independent episodes or table builds call
``fan_out(fn, jobs, workers, address)``: ``fn(*job)`` for every job, the results in job order.
With ``workers == 1`` and no ``address`` the jobs run one after another in this process and Ray
is never imported (quick runs and tests stay fast). Otherwise each job is a Ray task of one CPU,
at most ``workers`` in flight: on a local Ray started with ``workers`` CPUs (and stopped after),
or, with ``address`` (``auto`` or ``HOST:PORT``), on an existing cluster whose nodes have this
repository installed. A job's result depends only on its arguments, so every setting gives the
serial run's results bit for bit. Every command that fans out takes the same flags
(``add_arguments``): ``--workers N`` and ``--address``.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
WORKERS_FLAG = "--workers"
ADDRESS_FLAG = "--address"
# How long a cluster address may take to answer before the command gives up, naming it (Ray
# itself retries a silent address for minutes).
CONNECT_TIMEOUT_S = 10.0


def add_arguments(parser: argparse.ArgumentParser, default_workers: int = 2) -> None:
    """The runner's flags: ``--workers`` (jobs at a time; 1 runs them here, without Ray) and
    ``--address`` (join a Ray cluster instead of starting a local one)."""
    parser.add_argument(WORKERS_FLAG, type=int, default=default_workers,
                        help=f"jobs run at a time, each a Ray task of one CPU; 1: one after another in this "
                             f"process, without Ray (default {default_workers})")
    parser.add_argument(ADDRESS_FLAG, default=None, metavar="auto|HOST:PORT",
                        help="run the jobs on an existing Ray cluster (default: a local Ray with --workers CPUs)")


def check_workers(workers: Any) -> int:
    """``workers`` as a positive int; anything else raises naming the flag and the value."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"{WORKERS_FLAG} must be a positive integer, got {workers!r}")
    return workers


def fan_out(fn: Callable[..., T], jobs: Sequence[tuple[Any, ...]], workers: int = 1,
            address: str | None = None) -> list[T]:
    """``[fn(*job) for job in jobs]``, ``workers`` jobs at a time (see the module docstring)."""
    return list(iter_fan_out(fn, jobs, workers, address))


def iter_fan_out(fn: Callable[..., T], jobs: Sequence[tuple[Any, ...]], workers: int = 1,
                 address: str | None = None) -> Iterator[T]:
    """``fan_out``'s results one at a time, in job order, each as soon as it and those before it
    are done (``workers`` is checked at once, before any job runs)."""
    check_workers(workers)
    jobs = [tuple(job) for job in jobs]
    if workers == 1 and address is None:
        return (fn(*job) for job in jobs)
    return _ray_results(fn, jobs, workers, address)


def _ray_results(fn: Callable[..., T], jobs: list[tuple[Any, ...]], workers: int, address: str | None) -> Iterator[T]:
    """Ray tasks of ``fn``, at most ``workers`` in flight; results in job order."""
    with ray_session(workers, address) as ray:
        remote = ray.remote(num_cpus=1)(fn)
        pending: dict[Any, int] = {}
        done: dict[int, Any] = {}
        submitted, next_out = 0, 0
        while next_out < len(jobs):
            while submitted < len(jobs) and len(pending) < workers:
                pending[remote.remote(*jobs[submitted])] = submitted
                submitted += 1
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                done[pending.pop(ref)] = ref
            while next_out in done:
                yield ray.get(done.pop(next_out))
                next_out += 1


def check_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """``address`` (``auto``, or ``HOST:PORT`` of a running Ray cluster's head) answers a TCP
    connection within ``timeout_s``; else ``ValueError`` naming it. ``auto`` is left to Ray,
    which reads the address of a cluster started on this machine and fails at once without one."""
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{ADDRESS_FLAG} {address}: expected auto or HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ValueError(f"{ADDRESS_FLAG} {address}: no Ray cluster answers there within {timeout_s:g} s "
                         f"({error.strerror or error}); start one with `ray start --head` or leave {ADDRESS_FLAG} out") from None


@contextmanager
def ray_session(cpus: int, address: str | None = None) -> Iterator[Any]:
    """The ``ray`` module, connected: to ``address`` when given, else to a new local Ray with
    ``cpus`` CPUs, no dashboard and no usage reporting (stopped on exit), whose workers run at
    this process's priority (Ray renices its workers to 15 by default, which on a shared machine
    starves the jobs behind every other process). A Ray this process already runs is used as it
    is and left running."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_worker_niceness", "0")
    import ray

    if ray.is_initialized():
        yield ray
        return
    if address is None:
        ray.init(address="local", num_cpus=check_workers(cpus), include_dashboard=False, logging_level=logging.WARNING)
    else:
        check_address(address)
        try:
            ray.init(address=address, logging_level=logging.WARNING)
        except ConnectionError as error:
            raise ValueError(f"{ADDRESS_FLAG} {address}: {' '.join(str(error).split())}") from None
    try:
        yield ray
    finally:
        ray.shutdown()
