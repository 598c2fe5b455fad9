"""Where the decode worker pays: an ``/export`` page decoded inline vs in the worker.

For listing pages of growing size (records shaped like ``benchd synth``'s, as
the reference store lists them) it prints the median time to decode and
reduce the page on the event loop, and the median round trip through the
decode worker (:mod:`benchd.http.decoder`, body spilled to a file as the
HTTP layer does) with the loop time that round trip still costs. The inline
time is what every other probe's scheduled send waits; the worker's is what
the call waits. ``INLINE_DECODE_BYTES`` belongs where the inline time reaches
about half the load pass's default late tolerance (10 ms). Run::

    .venv/bin/python bench/decode_line.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial

import anyio

from benchd.http import answers, decoder
from benchd.kinds.zengram_wire import export_page as _export_page


def page(records: int) -> bytes:
    memories = [
        {
            "id": f"syn-{i:06d}",
            "client_id": "bench-scale",
            "content": "The mirror fidufu region stands at 79689 as of 2025-09-16; "
            "tracked in the budget forecast and the quarterly review.",
            "type": "status",
            "content_hash": f"{i:064x}",
            "created_at": "2025-09-16T23:53:00.000Z",
            "metadata": {"benchd": {"fixture": "0123456789abcdef"}},
            "tags": [],
            "active": True,
        }
        for i in range(records)
    ]
    return json.dumps({"memories": memories, "total": records, "has_more": False}).encode()


def spilled(body: bytes) -> answers.Spill:
    spill = answers.Spill()
    spill.write(body)
    spill.close()
    return spill


async def main(repeat: int) -> None:
    print(f"{'records':>8}{'KiB':>8}{'inline ms':>11}{'worker ms':>11}{'loop ms':>9}")
    for records in (50, 100, 250, 500, 1000, 2000, 5000):
        body = page(records)
        reduce = partial(_export_page, records, "GET /export")
        inline = []
        for _ in range(repeat):
            start = time.perf_counter()
            answers.reduced(body, "GET /export", reduce)
            inline.append(time.perf_counter() - start)
        worker, loop = [], []
        await answers.decode(spilled(body), "GET /export", reduce)  # the worker started
        for _ in range(repeat):
            spill = spilled(body)
            start, cpu = time.perf_counter(), time.thread_time()
            await answers.decode(spill, "GET /export", reduce)
            worker.append(time.perf_counter() - start)
            loop.append(time.thread_time() - cpu)
        print(
            f"{records:8d}{len(body) / 1024:8.0f}{1000 * statistics.median(inline):11.2f}"
            f"{1000 * statistics.median(worker):11.2f}{1000 * statistics.median(loop):9.2f}"
        )
    decoder.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    anyio.run(main, parser.parse_args().repeat)
