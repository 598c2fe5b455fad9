"""The decode worker: benchd's own process, started once, never re-running the user's main."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchd.errors import TargetProtocolError
from benchd.http import answers, decoder

pytestmark = pytest.mark.anyio

# A user's script with no `if __name__ == "__main__":` guard: every top-level line
# runs again in any worker that re-imports the main module (multiprocessing's spawn,
# anyio.to_process). It counts its own runs in a file and decodes two listing pages
# over the inline threshold (one as bytes, one spilled to a file, as the HTTP layer
# hands them), through the zengram kind's reduce.
SCRIPT = """
import json, sys
from functools import partial
import anyio
from benchd.http import answers, decoder
from benchd.kinds.zengram_wire import export_page as _export_page

with open(sys.argv[1], "a") as runs:
    runs.write("ran\\n")
records = [{"id": f"m{i}", "content": "x" * 200} for i in range(4000)]
body = json.dumps({"memories": records, "has_more": False}).encode()
assert len(body) > answers.INLINE_DECODE_BYTES
reduce = partial(_export_page, 4000, "GET /export")

async def main():
    page, more = await answers.decode(body, "GET /export", reduce)
    first = decoder.worker_pid()
    spill = answers.Spill()
    spill.write(body)
    spill.close()
    again, _ = await answers.decode(spill, "GET /export", reduce)
    print(json.dumps({"ids": [r["id"] for r in page], "more": more, "same": page == again,
                      "workers": [first, decoder.worker_pid()]}))

anyio.run(main)
"""


def test_a_script_without_a_main_guard_decodes_a_large_answer_in_one_worker(
    tmp_path: Path,
) -> None:
    script, runs = tmp_path / "user_script.py", tmp_path / "runs.txt"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(runs)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["ids"] == [f"m{i}" for i in range(4000)] and out["more"] is False
    assert out["same"] is True
    first, second = out["workers"]
    assert first is not None and first == second  # a worker, the same one for both
    assert runs.read_text() == "ran\n"  # the script ran once: the worker never ran it


def _big_body() -> bytes:
    body = json.dumps({"memories": [{"id": "x", "content": "y" * answers.INLINE_DECODE_BYTES}]})
    return body.encode()


async def test_an_error_in_the_worker_is_raised_in_the_caller() -> None:
    body = b"[" + _big_body()  # not JSON, and too large to decode inline
    with pytest.raises(TargetProtocolError, match="answer is not JSON"):
        await answers.decode(body, "GET /export")


async def test_a_killed_worker_is_a_decode_error_and_the_next_call_starts_another() -> None:
    body = _big_body()
    assert (await answers.decode(body, "GET /export"))["memories"][0]["id"] == "x"
    pid = decoder.worker_pid()
    assert pid is not None
    decoder.stop()
    assert decoder.worker_pid() is None
    value = await answers.decode(body, "GET /export")
    assert value["memories"][0]["id"] == "x"
    assert decoder.worker_pid() not in (None, pid)


def test_a_call_cancelled_before_it_is_sent_never_runs_and_spares_the_worker() -> None:
    assert decoder.call(decoder.Call(), len, b"abc") == 3
    pid = decoder.worker_pid()
    handle = decoder.Call()
    decoder.cancel(handle)  # another probe's worker keeps serving
    with pytest.raises(decoder.WorkerStopped):
        decoder.call(handle, len, b"abc")
    assert decoder.worker_pid() == pid is not None


def test_cancelling_the_call_the_worker_serves_ends_that_worker() -> None:
    handle, raised = decoder.Call(), threading.Event()

    def serve() -> None:
        try:
            decoder.call(handle, time.sleep, 600)
        except decoder.WorkerStopped:
            raised.set()

    thread = threading.Thread(target=serve)
    thread.start()
    for _ in range(6000):  # until the worker serves it (it starts one first)
        if decoder._WORKER._serving is handle:
            break
        time.sleep(0.01)
    pid = decoder.worker_pid()
    decoder.cancel(handle)
    thread.join(timeout=600)
    assert raised.is_set()
    assert decoder.worker_pid() is None and pid is not None
    assert decoder.call(decoder.Call(), len, b"ab") == 2  # the next call starts another
