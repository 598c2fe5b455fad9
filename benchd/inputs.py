"""Opening the files a user names (config, key file, fixture), safely and bounded.

A path may name anything: a directory, a named pipe that never gets a writer
(``open`` would block forever), ``/dev/zero`` (reading never ends), or a huge
file. Every input benchd reads goes through :func:`open_input` or
:func:`read_input`, which accept regular files only and at most ``limit``
bytes, checked against the size before reading and again while reading (a
file may grow). Problems are ``ValueError``s whose text reads "what is wrong;
how to fix", for the caller to prefix with the file and wrap in its own error.
``OSError`` (no such file, permission denied) passes through unchanged.

:func:`packaged_fixture` names the fixtures shipped inside the package
(``fixture = "packaged:smoke"`` in a config), here so that config resolves
them without importing :mod:`benchd.fixtures`.
"""

from __future__ import annotations

import os
import stat
from importlib import resources
from pathlib import Path
from typing import BinaryIO

from benchd.errors import FixtureError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_JSONL_FIXTURE_BYTES",
    "MAX_JSON_FIXTURE_BYTES",
    "MAX_SECRET_FILE_BYTES",
    "PACKAGED_FIXTURES",
    "open_input",
    "packaged_fixture",
    "read_input",
    "too_large",
]

MAX_CONFIG_BYTES = 16 * 2**20
MAX_SECRET_FILE_BYTES = 64 * 2**10
MAX_JSON_FIXTURE_BYTES = 256 * 2**20
MAX_JSONL_FIXTURE_BYTES = 2 * 2**30

_KINDS = (
    (stat.S_ISDIR, "is a directory; name a file"),
    (stat.S_ISFIFO, "is a named pipe (FIFO), not a regular file; write it to a file first"),
    (stat.S_ISCHR, "is a character device (like /dev/zero), not a regular file; name a file"),
    (stat.S_ISBLK, "is a block device, not a regular file; name a file"),
    (stat.S_ISSOCK, "is a socket, not a regular file; name a file"),
)


def too_large(limit: int) -> str:
    """The problem text for an input past ``limit`` bytes."""
    return f"larger than the {_size(limit)} limit for this kind of file; use a smaller file"


def open_input(path: str | os.PathLike[str], *, limit: int) -> BinaryIO:
    """Open a regular file of at most ``limit`` bytes for binary reading.

    ``O_NONBLOCK`` makes opening a FIFO return at once (it is then refused)
    instead of waiting for a writer; it changes nothing for a regular file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise ValueError(_KINDS[0][1]) from None
    try:
        mode = os.fstat(fd)
        for test, problem in _KINDS:
            if test(mode.st_mode):
                raise ValueError(problem)
        if not stat.S_ISREG(mode.st_mode):
            raise ValueError("is not a regular file; name a file")
        if mode.st_size > limit:
            raise ValueError(too_large(limit))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: str | os.PathLike[str], *, limit: int) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes."""
    with open_input(path, limit=limit) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:  # it grew after the size check
        raise ValueError(too_large(limit))
    return data


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


PACKAGED_FIXTURES: tuple[str, ...] = (
    "smoke",
    "knowledge-update",
    "temporal",
    "multi-session",
    "preference",
)
"""Names accepted by :func:`packaged_fixture`; ``smoke`` is the embedded default."""


def packaged_fixture(name: str = "smoke") -> Path:
    """The path of a fixture shipped inside the installed package."""
    if name not in PACKAGED_FIXTURES:
        raise FixtureError(
            [
                f"{name}: no packaged fixture by that name; choose one of "
                + ", ".join(PACKAGED_FIXTURES)
            ]
        )
    return Path(str(resources.files("benchd").joinpath("data", f"{name}.json")))
