"""A page from another origin, open in the operator's headless Chromium, cannot make benchd act.

The page (served by a second loopback server: another site, ``localhost``,
and the same site on another port, ``127.0.0.1:<other port>``) sends both
``POST /-/reload`` and ``POST /api/probes/NAME/run`` as ``fetch`` calls
(plain, and with credentials and a body) and as form submissions. The
browser really sends them (each ``fetch`` resolves, and benchd counts each
one in ``benchd_web_requests_refused_total{reason="origin"}``), yet the
server-side effects stay at zero: no reload, no cycle beyond the first.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from drill_support import KEY_ENV, probe_toml, write_config, write_tiny_fixture
from support import BenchdProcess

PAGE = """<!doctype html>
<html><body>
<p id="result">running</p>
<iframe name="sink0"></iframe><iframe name="sink1"></iframe>
<form id="f0" method="POST" target="sink0" action="BENCHD/-/reload">
  <input name="x" value="1"></form>
<form id="f1" method="POST" target="sink1" action="BENCHD/api/probes/idle/run">
  <input name="x" value="1"></form>
<script>
const target = "BENCHD";
async function go() {
  const out = [];
  for (const path of ["/-/reload", "/api/probes/idle/run"]) {
    for (const init of [
      {method: "POST", mode: "no-cors"},
      {method: "POST", mode: "no-cors", credentials: "include",
       headers: {"Content-Type": "text/plain"}, body: "x"},
    ]) {
      try { await fetch(target + path, init); out.push("sent"); }
      catch (e) { out.push("failed"); }
    }
  }
  document.getElementById("f0").submit();
  document.getElementById("f1").submit();
  document.getElementById("result").textContent = "done " + out.join(",");
}
go();
</script>
</body></html>
"""


def chromium() -> str:
    from web.test_status_page_chromium import chromium as find  # one place says how

    return find()


@contextmanager
def attacker(benchd_url: str) -> Iterator[int]:
    """Serve the attacking page on another loopback port; yield the port."""
    body = PAGE.replace("BENCHD", benchd_url).encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def total(benchd: BenchdProcess, name: str, **labels: str) -> float:
    return sum(
        value
        for got, value in benchd.samples(name)
        if all(got.get(k) == v for k, v in labels.items())
    )


@pytest.mark.parametrize("page_host", ["localhost", "127.0.0.1"], ids=["cross-site", "same-site"])
def test_a_foreign_page_posts_both_routes_and_nothing_happens(
    tmp_path: Path, page_host: str
) -> None:
    browser = chromium()
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    probe = probe_toml("idle", "http://127.0.0.1:9", fixture, interval=3600, retries=0)
    config = write_config(tmp_path, probe)
    with BenchdProcess(["--config", str(config)], env={KEY_ENV: "k"}) as benchd:
        benchd.wait_cycles("idle", 1, timeout=60)
        cycles_before = total(benchd, "benchd_cycles_total", probe="idle")
        assert cycles_before == 1
        with attacker(benchd.url) as port:
            proc = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                 "--virtual-time-budget=20000", "--dump-dom", f"http://{page_host}:{port}/"],
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "done sent,sent,sent,sent" in proc.stdout, proc.stdout[-2000:]
        # every POST reached benchd and was refused there (4 fetches and 2 forms)
        refused = total(benchd, "benchd_web_requests_refused_total", reason="origin")
        assert refused == 6
        assert total(benchd, "benchd_config_reloads_total") == 0
        assert total(benchd, "benchd_cycles_total", probe="idle") == cycles_before
        assert len(benchd.cycles("idle")) == 1
        # and the same POST from a client that is not a browser still works
        assert benchd.post("/-/reload").status_code == 200
        assert total(benchd, "benchd_config_reloads_total") == 1
        assert benchd.stop() == 0
