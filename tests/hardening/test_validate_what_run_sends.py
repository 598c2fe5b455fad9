"""``validate`` refuses what ``run`` could not send, and says so without quoting ``${VAR}`` values.

The property: for any header name and value, either the config check names
a problem, or the request the sender builds carries exactly that header
through a real HTTP parser (h11) — so a header ``validate`` passes never
fails every cycle as ``connect`` or exits 4. The CLI tests feed the hostile
class through the environment: a newline from ``${VAR}``, a 15 MB label, a
fixture path from ``${VAR}``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h11
import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.config.schema import MAX_LABEL_CHARS, headers_problem, label_problem
from benchd.http.sender import RequestSpec

NAMES = st.one_of(
    st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,20}", fullmatch=True),
    st.text(min_size=1, max_size=20),
)
VALUES = st.one_of(
    st.from_regex(r"[ -~]{0,40}", fullmatch=True),
    st.text(max_size=40),
    st.sampled_from(["a\nb", "a\r\nX-Injected: 1", "caf\u00e9", "\x00", " padded ", "tab\there"]),
)


def sent(name: str, value: str) -> list[tuple[bytes, bytes]]:
    """The headers a server parses from what benchd's sender writes for this header."""
    request = httpx.Request("GET", "http://127.0.0.1:9/memory/search", headers={name: value})
    wire = RequestSpec.from_httpx(request).wire
    server = h11.Connection(h11.SERVER)
    server.receive_data(wire)
    event = server.next_event()
    assert isinstance(event, h11.Request)
    return [(k, v) for k, v in event.headers if k not in (b"host",)]


@settings(max_examples=500, deadline=None)
@given(name=NAMES, value=VALUES)
def test_a_header_validate_passes_is_sent_exactly(name: str, value: str) -> None:
    if headers_problem({name: value}) is not None:
        return  # refused at validate: run never sees it
    assert sent(name, value) == [(name.lower().encode(), value.encode("ascii"))]


@settings(max_examples=300, deadline=None)
@given(value=st.text(max_size=400))
def test_a_label_validate_passes_fits_one_exported_line(value: str) -> None:
    if label_problem(value) is None:
        assert len(value) <= MAX_LABEL_CHARS and "\n" not in value and "\r" not in value


def test_problems_never_quote_a_value_from_the_environment(tmp_path: Path) -> None:
    folder = tmp_path / "private-folder-7f3a"
    config = tmp_path / "benchd.toml"
    config.write_text(
        """[server]
[[probe]]
name = "p"
fixture = "${FIXDIR}/missing.json"
[probe.target]
kind = "zengram"
url = "http://127.0.0.1:9"
api_key_env = "KEY"
model = "${MODEL}"
[probe.target.headers]
"X-Tenant" = "${TENANT}"
"""
    )
    secret_ish = "tenant-secret-41ab\r\nX-Injected: 1"
    env = {
        **os.environ,
        "FIXDIR": str(folder),
        "MODEL": "m" * 100_000,  # (the kernel caps one variable at 128 KiB)
        "TENANT": secret_ish,
        "KEY": "k",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert 'header "X-Tenant": its value holds a line break' in out
    assert "(the value comes from ${TENANT})" in out
    assert "probe[0].target.model: is 100000 characters" in out
    assert "(the value comes from ${MODEL})" in out
    assert "tenant-secret" not in out and "mmmmmmmm" not in out and len(out) < 2000
    # with the header and label fixed, the fixture's path is shown as written
    env.update(MODEL="minilm", TENANT="acme")
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "probe[0].fixture (${FIXDIR}/missing.json): no such file" in out
    assert "private-folder-7f3a" not in out
