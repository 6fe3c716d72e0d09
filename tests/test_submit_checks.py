"""The compiled cluster checks a submitted workload column-wise (simulator.cluster.
requests_valid_in_order) and, when that says no, request by request: every kind of bad request is
caught by the column-wise pass, and the error names the first bad request as the one-by-one
checks (validate_request) name it."""

from __future__ import annotations

import math
from operator import attrgetter

import numpy as np
import pytest

from simulator.cluster import requests_valid_in_order, validate_request
from simulator.compiled import INTEGER_COLUMNS, CompiledCluster
from simulator.instance import InstanceConfig
from simulator.request import BlockHashes, Request

GPU, MODEL = "A100-80GB", "Llama-2-7B"


def _good(count: int = 6) -> list[Request]:
    return [Request(i, 0.5 * i, 100 + i, 10, tier=i % 2) for i in range(count)]


def _valid(requests: list[Request], latest_s: float = -1.0) -> bool:
    columns = {name: list(map(attrgetter(name), requests)) for name in INTEGER_COLUMNS}
    return requests_valid_in_order(requests, columns, list(map(attrgetter("arrival_s"), requests)), latest_s)


def _first_error(requests: list[Request]) -> str:
    latest_s = -1.0
    for request in requests:
        if request.arrival_s < latest_s:
            return f"requests must be sorted by arrival; request {request.request_id} arrives at"
        latest_s = request.arrival_s
        try:
            validate_request(request)
        except ValueError as error:
            return str(error)
    raise AssertionError("no bad request")


def _set(index: int, **fields: object):
    def spoil(requests: list[Request]) -> None:
        for name, value in fields.items():
            setattr(requests[index], name, value)
    return spoil


BAD = {
    "prompt 0": _set(3, prompt_tokens=0),
    "output negative": _set(2, output_tokens=-4),
    "prompt a bool": _set(1, prompt_tokens=True),
    "output a float": _set(4, output_tokens=10.0),
    "prompt a numpy integer": _set(2, prompt_tokens=np.int64(5)),
    "reasoning = output": _set(3, reasoning_tokens=10),
    "reasoning negative": _set(5, reasoning_tokens=-1),
    "tier negative": _set(1, tier=-1),
    "arrival NaN": _set(4, arrival_s=math.nan),
    "arrival negative": _set(0, arrival_s=-0.5),
    "out of order": _set(3, arrival_s=0.1),
    "session a bool": _set(2, session_id=True),
    "session a string": _set(2, session_id="a"),
    "hashes short of the prompt": _set(3, block_hashes=BlockHashes(16, (1,))),
    "two bad, the earlier named": lambda r: (_set(4, tier=-1)(r), _set(1, output_tokens=0)(r)),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_request_fails_the_column_pass_and_is_named(case: str) -> None:
    requests = _good()
    assert _valid(requests)
    BAD[case](requests)
    assert not _valid(requests)
    cluster = CompiledCluster({GPU: 1})
    cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL), ready_now=True)
    with pytest.raises(ValueError) as raised:
        cluster.submit(requests)
    assert str(raised.value).startswith(_first_error(requests))


def test_good_workloads_pass_the_column_pass() -> None:
    requests = _good()
    requests[2].arrival_s = 1  # an integer time
    requests[3].block_hashes = BlockHashes(16, tuple(range(7)))  # 103 tokens: 7 blocks
    requests[4].session_id = 12
    requests[5].reasoning_tokens = 9
    assert _valid(requests) and _valid([])
    assert not _valid(requests, latest_s=0.1)  # the first arrives before the latest so far


def test_an_integer_beyond_int64_is_named_by_the_engine_check() -> None:
    requests = _good()
    requests[3].prompt_tokens = 2**70
    assert not _valid(requests)
    validate_request(requests[3])  # a positive integer: the one-by-one check lets it by
    cluster = CompiledCluster({GPU: 1})
    cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL), ready_now=True)
    with pytest.raises(ValueError, match=r"request 3: prompt_tokens=1180591620717411303424 is not an integer the "
                                         r"compiled engine holds \(int64\)"):
        cluster.submit(requests)
