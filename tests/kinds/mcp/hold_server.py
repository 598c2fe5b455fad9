"""A stdio MCP server behind a relay that holds back one request until the test lets it go.

    python hold_server.py --held FIFO --release FIFO --match TEXT [--match TEXT]... -- ARGV...

Runs ``ARGV`` (the real server) and relays stdin and stdout line by line. The
first request line holding every ``--match`` text is kept from the server:
the relay writes ``held`` to the ``--held`` FIFO and forwards every other line
meanwhile, and sends the kept one only once a line arrives on the
``--release`` FIFO — as a server that carries out a call late, after calls
sent later, would. Both FIFOs are opened read-write, so neither side blocks
on the other being there.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from typing import IO


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--held", required=True)
    parser.add_argument("--release", required=True)
    parser.add_argument("--match", action="append", required=True)
    parser.add_argument("argv", nargs="+")
    args = parser.parse_args()
    marks = [m.encode() for m in args.match]
    child = subprocess.Popen(args.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()

    def to_child(line: bytes) -> None:
        with lock:
            assert child.stdin is not None
            child.stdin.write(line)
            child.stdin.flush()

    def later(line: bytes, release: int) -> None:
        os.read(release, 1)  # the test's go
        to_child(line)

    threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer), daemon=True).start()
    held = False
    for line in sys.stdin.buffer:
        if not held and all(m in line for m in marks):
            held = True
            release = os.open(args.release, os.O_RDWR)  # open before the test hears "held"
            threading.Thread(target=later, args=(line, release), daemon=True).start()
            fd = os.open(args.held, os.O_RDWR)
            os.write(fd, b"held\n")
            os.close(fd)
            continue
        to_child(line)
    with lock:
        child.stdin.close()
    return child.wait()


def pump(source: IO[bytes], sink: IO[bytes]) -> None:
    for line in source:
        sink.write(line)
        sink.flush()


if __name__ == "__main__":
    sys.exit(main())
