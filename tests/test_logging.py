"""Store libraries' own log records and Python's warnings land in benchd's log, one line each."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

import pytest

from benchd.logging import LIBRARY_LINE_CHARS, configure_logging, route_library_logs
from benchd.redact import register_secret


def events(err: str) -> list[dict[str, object]]:
    """Every stderr line as a JSON event (a line that is not one fails the test)."""
    return [json.loads(line) for line in err.splitlines()]


def test_a_library_record_with_a_traceback_is_one_event_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", json=True)
    try:
        raise ConnectionError("server closed the connection unexpectedly\nDETAIL: s3cret-dsn")
    except ConnectionError:
        logging.getLogger("psycopg.pool").error(
            "connection lost\nTraceback (most recent call last):\n  File x", exc_info=True
        )
    logging.getLogger("psycopg").info("below warning: not logged")
    (event,) = events(capsys.readouterr().err)
    assert event["event"] == "connection lost"
    assert event["logger"] == "psycopg.pool"
    assert event["level"] == "warning" and event["library_level"] == "error"
    assert event["error"] == "ConnectionError: server closed the connection unexpectedly"
    assert "Traceback" not in json.dumps(event)


def test_a_long_message_is_cut_and_a_secret_in_it_masked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", json=True)
    register_secret("s3cret-token-value")
    logging.getLogger("grpc").warning("token s3cret-token-value " + "x" * 2000)
    (event,) = events(capsys.readouterr().err)
    text = str(event["event"])
    assert len(text) <= LIBRARY_LINE_CHARS and text.endswith("...")
    assert "s3cret-token-value" not in text


def test_a_library_with_handlers_of_its_own_logs_through_benchds_once_routed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", json=True)
    own = logging.getLogger("fakelib.decorators")
    own.addHandler(logging.StreamHandler(sys.stderr))
    own.propagate = False
    route_library_logs("fakelib")
    own.error("RPC error: [query], <Exception: code=2>\nTraceback:\n  File y")
    (event,) = events(capsys.readouterr().err)
    assert event["event"] == "RPC error: [query], <Exception: code=2>"
    assert event["logger"] == "fakelib.decorators"
    assert own.handlers == [] and own.propagate


def test_pymilvus_psycopg_warnings_and_asyncio_write_only_json_lines_to_stderr() -> None:
    """In a process of its own, as ``benchd run`` is: stderr is nothing but JSON events."""
    pytest.importorskip("pymilvus")
    script = textwrap.dedent("""
        import asyncio, logging, warnings
        from benchd.logging import configure_logging, route_library_logs
        configure_logging("info", json=True)
        import pymilvus  # installs its own stderr handlers
        route_library_logs("pymilvus")
        logging.getLogger("pymilvus.decorators").error(
            "RPC error: [query], <MilvusException: (code=2)>\\nTraceback:\\n  File z")
        logging.getLogger("psycopg").warning("error ignored in rollback")
        warnings.warn("a library's deprecation\\nsecond line", DeprecationWarning, stacklevel=1)
        async def fail():
            raise OSError("connection reset")
        async def main():
            asyncio.get_running_loop().create_task(fail())
            await asyncio.sleep(0.01)
        asyncio.run(main())
        import gc; gc.collect()
    """)
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", script],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = events(proc.stderr)
    by_logger = {str(e["logger"]): e for e in got}
    assert set(by_logger) == {"pymilvus.decorators", "psycopg", "py.warnings", "asyncio"}, got
    assert by_logger["pymilvus.decorators"]["event"] == (
        "RPC error: [query], <MilvusException: (code=2)>"
    )
    assert "DeprecationWarning: a library's deprecation" in str(by_logger["py.warnings"]["event"])
    assert by_logger["asyncio"]["error"] == "OSError: connection reset"
