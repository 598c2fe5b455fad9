#!/usr/bin/env python3
"""A webhook receiver for Alertmanager that prints each page: the last hop, made visible.

deploy/prometheus/alertmanager.yml sends every benchd alert to
http://127.0.0.1:5001/ (its `webhook` receiver). Run this beside it to see
the pages arrive, one line per alert, before wiring a real receiver (Slack,
PagerDuty, email: commented examples in alertmanager.yml):

    python3 deploy/prometheus/webhook_receiver.py                 # 127.0.0.1:5001
    python3 deploy/prometheus/webhook_receiver.py --listen 127.0.0.1:5002 --json

Each line reads ``STATUS ALERTNAME probe=... metric=... k=... severity=...:
SUMMARY (RUNBOOK_URL)``; ``--json`` prints each Alertmanager payload as one
JSON line instead (what tests read). Python's standard library only, so it
runs wherever Alertmanager runs. Answers 200 to a JSON POST, 400 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DEFAULT_LISTEN", "describe", "main"]

DEFAULT_LISTEN = "127.0.0.1:5001"  # alertmanager.yml's webhook URL

MAX_BODY = 1 << 20  # Alertmanager's payloads are a few KB; refuse anything absurd
LABELS = ("probe", "metric", "k", "severity")
# Pages arrive on parallel connections (Alertmanager flushes groups that fired
# together at the same instant); print() writes the text and its newline
# separately, so two threads could print two pages onto one line.
_OUTPUT = threading.Lock()


def describe(payload: dict[str, Any]) -> list[str]:
    """One line per alert of an Alertmanager webhook payload (version 4)."""
    lines = []
    for alert in payload.get("alerts", []):
        labels = alert.get("labels", {})
        annotations = alert.get("annotations", {})
        shown = " ".join(f"{k}={labels[k]}" for k in LABELS if k in labels)
        runbook = annotations.get("runbook_url", "")
        lines.append(
            f"{alert.get('status', '?').upper()} {labels.get('alertname', '?')} {shown}: "
            f"{annotations.get('summary', '')}" + (f" ({runbook})" if runbook else "")
        )
    return lines


def _emit(lines: list[str]) -> None:
    """Write a page's lines whole: one write, one page at a time."""
    with _OUTPUT:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()


def handler(as_json: bool) -> type[BaseHTTPRequestHandler]:
    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                if not 0 < length <= MAX_BODY:
                    raise ValueError(f"body of {length} bytes")
                payload = json.loads(self.rfile.read(length))
                lines = [json.dumps(payload)] if as_json else describe(payload)
            except ValueError as exc:
                self.send_error(400, f"not an Alertmanager payload: {exc}")
                return
            _emit(lines)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the pages are the output; no access log

    return Receiver


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--listen", default=DEFAULT_LISTEN, help="HOST:PORT (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print each payload as a JSON line")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), handler(args.json))
    print(f"webhook receiver on http://{args.listen}/", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
