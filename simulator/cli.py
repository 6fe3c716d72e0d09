"""One error style for every command line: bad input prints one line
``<command>: error: <field> <value>: <why>`` on stderr and the command exits with status 2,
checked before any work starts (``command``); flags that name an output are checked to be
writable first (``check_writable_dir``, ``check_writable_file``)."""

from __future__ import annotations

import functools
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

BAD_INPUT_STATUS = 2
Main = Callable[[Sequence[str] | None], int]


def command(prog: str) -> Callable[[Main], Main]:
    """Decorate a command's ``main(argv)``: a ``ValueError`` or ``OSError`` it raises is printed as
    ``<prog>: error: <message>`` on one line and ``main`` returns ``BAD_INPUT_STATUS``."""

    def wrap(main: Main) -> Main:
        @functools.wraps(main)
        def run(argv: Sequence[str] | None = None) -> int:
            try:
                return main(argv)
            except (ValueError, OSError) as error:
                print(f"{prog}: error: {one_line(error)}", file=sys.stderr)
                return BAD_INPUT_STATUS

        return run

    return wrap


def one_line(error: BaseException) -> str:
    """The error's message on one line (a YAML or OS message may span several)."""
    return " ".join(str(error).split())


def check_writable_dir(flag: str, folder: Path) -> None:
    """Create ``folder`` and write (then remove) a probe file in it; ``ValueError`` naming the flag
    and the folder if that fails, so a command does not run its work for nothing."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write_probe_"):
            pass
    except OSError as error:
        raise ValueError(f"{flag} {folder}: not a writable folder: {error.strerror or error}") from None


def check_writable_file(flag: str, path: Path) -> None:
    """``path``'s folder exists and takes a new file (probed as ``check_writable_dir`` does, the
    file itself is not created); ``ValueError`` naming the flag and the path otherwise."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path}: is a folder, not a file")
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent if str(path.parent) else ".", prefix=".write_probe_"):
            pass
    except OSError as error:
        raise ValueError(f"{flag} {path}: cannot be written: {error.strerror or error}") from None
