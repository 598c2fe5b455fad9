"""A daemon's lease token, kept in its state directory so a restart finds it.

One file per lease (instance, kind, store, namespace), named by their hash,
holding a random token, mode 0600, in ``$BENCHD_STATE_DIR``, else
``$XDG_STATE_HOME/benchd``, else ``~/.local/state/benchd`` (``leases/``;
where that cannot be written and ``$BENCHD_STATE_DIR`` is unset, the temp
directory's ``benchd-state-<uid>``).
The daemon holds an exclusive ``flock`` on the file while it runs: a second
daemon on the same state directory gets no token from it (it is another
holder, refused beside the first), and probes of one process that share a
lease (the old and new runner of a reload) share the token. Where the state
directory cannot be written (a read-only file system), the daemon holds a
token of its own process: a restart then waits out its lease.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from benchd.logging import get_logger
from benchd.store.lease import new_token

__all__ = ["held_token", "let_go", "state_dir", "token_key"]

log = get_logger("benchd.targets")

_TOKEN = re.compile(r"[0-9a-f]{16}")


@dataclass(slots=True)
class _Held:
    fd: int
    token: str
    users: int


_held: dict[str, _Held] = {}
_lock = threading.Lock()


def state_dir() -> Path:
    """``$BENCHD_STATE_DIR``, else ``$XDG_STATE_HOME/benchd``, else ``~/.local/state/benchd``."""
    explicit = os.environ.get("BENCHD_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "benchd"


def token_key(instance: str, kind: str, store: str, namespace: str) -> str:
    """The path of one lease's token file in the state directory (named by a hash: the
    parts may hold any character)."""
    text = "\0".join((instance, kind, store, namespace))
    name = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return str(state_dir() / "leases" / f"{name}.token")


def held_token(key: str) -> str | None:
    """The token of lease ``key`` from the state directory, held by this process until
    :func:`let_go`; None where another process holds it or it cannot be kept."""
    with _lock:
        held = _held.get(key)
        if held is not None:
            held.users += 1
            return held.token
        path = Path(key)
        try:
            try:
                found = _open_locked(path)
            except OSError:
                if os.environ.get("BENCHD_STATE_DIR"):
                    raise
                path = _fallback_dir() / path.name  # a read-only home: the temp directory
                found = _open_locked(path)
        except OSError as exc:
            log.warning(
                "lease token not kept",
                path=str(path),
                error=exc.strerror or str(exc),
                note="a restart waits out this daemon's lease; set BENCHD_STATE_DIR to a "
                "writable directory that outlives the process",
            )
            return None
        if found is None:
            log.info("lease token held by another benchd process", path=str(path))
            return None
        _held[key] = found
        return found.token


def let_go(key: str) -> None:
    """This user of lease ``key``'s token is done; the last one unlocks the file."""
    with _lock:
        held = _held.get(key)
        if held is None:
            return
        held.users -= 1
        if held.users <= 0:
            del _held[key]
            os.close(held.fd)  # closing the file releases its lock


def _fallback_dir() -> Path:
    """Where tokens go when the home directory is read-only (a container's root file
    system): the temp directory, which a pod's ``emptyDir`` keeps across container
    restarts."""
    return Path(tempfile.gettempdir()) / f"benchd-state-{os.getuid()}" / "leases"


def _open_locked(path: Path) -> _Held | None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                return None
            raise
        os.fchmod(fd, 0o600)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        if not _TOKEN.fullmatch(text):
            text = new_token()
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode("ascii") + b"\n", 0)
            os.fsync(fd)
        return _Held(fd, text, 1)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
