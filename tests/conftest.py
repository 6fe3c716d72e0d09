"""Suite-wide set-up: nothing a test writes lands outside pytest's temporary directory."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, settings

SB3_LOGDIR = "SB3_LOGDIR"
# `make mutation` runs the tests through mutmut's trampolines, which Hypothesis takes for a
# test run by different executors; the profile lets its properties run there as they do here.
settings.register_profile("mutation", suppress_health_check=[HealthCheck.differing_executors])


@pytest.fixture(autouse=True, scope="session")
def sb3_default_logs_under_pytest_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A bare ``model.learn()`` makes SB3 create a log folder, ``$SB3_LOGDIR`` or else
    ``SB3-<timestamp>`` in the system temp directory: point it at pytest's own."""
    previous = os.environ.get(SB3_LOGDIR)
    os.environ[SB3_LOGDIR] = str(tmp_path_factory.mktemp("sb3_logs"))
    yield
    if previous is None:
        del os.environ[SB3_LOGDIR]
    else:
        os.environ[SB3_LOGDIR] = previous


@pytest.fixture
def refused(capsys: pytest.CaptureFixture[str]) -> Callable[[Callable[[Sequence[str]], int], Sequence[str], str], None]:
    """``refused(main, argv, pattern)``: the command exits with status 2 after one error line
    matching ``pattern`` (a regular expression), the style of every command (``simulator.cli``)."""

    def check(main: Callable[[Sequence[str]], int], argv: Sequence[str], pattern: str) -> None:
        assert main(list(argv)) == 2
        err = capsys.readouterr().err
        assert ": error: " in err and err.count("\n") == 1 and re.search(pattern, err), err

    return check
