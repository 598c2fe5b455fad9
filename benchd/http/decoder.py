"""benchd's decode worker: one process per benchd process, fed over pipes.

:func:`benchd.http.answers.decode` hands an answer too large to decode on
the event loop to this worker. It is benchd's own program, started as
``python -m benchd.http._decode_main`` with the parent's ``sys.path``, and it
never imports the parent's ``__main__``: a user's script without an
``if __name__ == "__main__":`` guard is not run again (``multiprocessing``'s
spawn and ``anyio.to_process`` both re-run it as ``__mp_main__``).

The protocol is one request at a time, each frame an 8-byte big-endian length
and a pickle: the parent sends ``sys.path`` once, then ``(function, args)``
per call (the function must be importable by name from a benchd module); the
worker answers ``(True, value)`` or ``(False, exception)``. The worker starts
at the first call and stays until the process exits; cancelling the call it
serves, or its death, ends it, and the next call starts another (a call
cancelled while it waits is simply never sent).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, TypeVar

__all__ = ["Call", "WorkerStopped", "call", "cancel", "main", "stop", "worker_pid"]

T = TypeVar("T")

_HEAD = struct.Struct(">Q")


class WorkerStopped(Exception):
    """The worker process ended before answering (killed, out of memory, crashed)."""


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEAD.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(_HEAD.size)
    if len(head) < _HEAD.size:
        raise EOFError
    size = _HEAD.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class Call:
    """One call's handle, so that cancelling it ends only the worker serving it."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False


class _Worker:
    """The parent's handle on the worker process; calls are serialised by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._serving: Call | None = None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchd.http._decode_main"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
            assert proc.stdin is not None
            _send(proc.stdin, list(sys.path))
            self._proc = proc
        return self._proc

    def call(self, handle: Call, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in the worker (blocking: run it in a thread)."""
        with self._lock:
            if handle.cancelled:  # given up while it waited for the worker: never sent
                raise WorkerStopped
            proc = self._started()
            assert proc.stdin is not None and proc.stdout is not None
            self._serving = handle
            try:
                _send(proc.stdin, (function, args))
                ok, value = _receive(proc.stdout)
            except (OSError, EOFError, pickle.UnpicklingError):
                self._end(proc)
                raise WorkerStopped from None
            finally:
                self._serving = None
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        proc.wait()
        if self._proc is proc:
            self._proc = None

    def cancel(self, handle: Call) -> None:
        """Give up ``handle``: never sent if it still waits, the worker killed if it serves it."""
        handle.cancelled = True
        proc = self._proc
        if proc is not None and self._serving is handle:
            with contextlib.suppress(OSError):
                proc.kill()  # the serving thread reads EOF and ends the process

    def stop(self) -> None:
        """End the worker now (a call in flight raises :class:`WorkerStopped`)."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
            if self._lock.acquire(blocking=False):
                try:
                    self._end(proc)
                finally:
                    self._lock.release()

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None


_WORKER = _Worker()
atexit.register(_WORKER.stop)


def call(handle: Call, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in this process's decode worker, started on first use.

    Blocking; raises what the function raised, or :class:`WorkerStopped`
    (also when ``handle`` was cancelled before the call reached the worker).
    """
    return _WORKER.call(handle, function, *args)


def cancel(handle: Call) -> None:
    """Give up a call: it is never sent, or the worker serving it is killed (not another's)."""
    _WORKER.cancel(handle)


def stop() -> None:
    """Kill the decode worker (a cancelled call; the next call starts a new one)."""
    _WORKER.stop()


def worker_pid() -> int | None:
    """The decode worker's process id while it runs, else None."""
    return _WORKER.pid()


def main() -> None:
    """The worker: answer calls read from stdin on stdout until stdin closes."""
    requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    sys.stdout = sys.stderr  # nothing a reduce function prints may corrupt a frame
    sys.path[:] = _receive(requests)
    while True:
        try:
            function, args = _receive(requests)
        except EOFError:
            return
        try:
            answer: tuple[bool, Any] = (True, function(*args))
        except Exception as exc:  # handed back to the caller, raised there
            answer = (False, exc)
        try:
            _send(answers, answer)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            _send(answers, (False, RuntimeError(f"unpicklable answer: {exc!r}")))
