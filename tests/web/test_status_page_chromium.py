"""The status page in a real headless Chromium (Debian's ``chromium``), loaded from a
running ``benchd run``: the probes' states and the three charts are in the DOM
and visibly painted (their colours are in the screenshot). The screenshot is
kept under ``$BENCHD_ARTIFACTS`` (default ``tests/artifacts/``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from support import BenchdProcess

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config
from benchd.web.page import LATENCY_COLORS, OUTCOME_COLORS, SERIES_COLORS, STATE_COLORS

KEY = "page-test-key-71d0a4"
REPO = Path(__file__).resolve().parents[2]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "needs Debian's chromium (scripts/test.sh installs it: apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # never skipped in CI
        pytest.skip(message)
    return path


def artifacts() -> Path:
    folder = Path(os.environ.get("BENCHD_ARTIFACTS") or REPO / "tests" / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def store() -> Iterator[RefStoreThread]:
    with RefStoreThread(make_config(api_key=KEY, retriever="bm25")) as thread:
        yield thread


def probe(name: str, url: str, interval: float) -> str:
    return f"""
[[probe]]
name = "{name}"
fixture = "packaged:smoke"
interval_s = {interval}
jitter_s = 0.0
timeout_s = 20.0
[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "PAGE_KEY"
namespace = "benchd-{name}"
cleanup = "never"
searchable_timeout_s = 5.0
max_retries = 0
"""


class Dom(HTMLParser):
    """The parts of the dumped DOM the test looks at."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: dict[str, dict[str, str]] = {}
        self.charts: dict[str, list[str]] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.external: list[str] = []
        self._card = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section" and "data-probe" in a:
            self._card = a["data-probe"]
            self.cards[self._card] = a
            self.charts[self._card] = []
        if tag == "svg" and "data-chart" in a:
            self.charts[self._card].append(a["data-chart"])
        if tag in ("polyline", "circle", "rect") and self._card:
            self.counts[self._card, tag] = self.counts.get((self._card, tag), 0) + 1
        if tag in ("script", "link", "img", "iframe") or "src" in a:
            self.external.append(tag)
        href = a.get("href", "")
        if href.startswith(("http:", "https:", "//")):
            self.external.append(href)


def color_pixels(image: Image.Image, hex_color: str, tolerance: int = 6) -> int:
    """How many pixels of the screenshot have this colour (within a small tolerance)."""
    target = tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    count = 0
    for (r, g, b), n in _histogram(image).items():
        if all(abs(c - t) <= tolerance for c, t in zip((r, g, b), target, strict=True)):
            count += n
    return count


_HISTOGRAMS: dict[int, dict[tuple[int, int, int], int]] = {}


def _histogram(image: Image.Image) -> dict[tuple[int, int, int], int]:
    key = id(image)
    if key not in _HISTOGRAMS:
        colors = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
        _HISTOGRAMS[key] = {rgb: n for n, rgb in colors}
    return _HISTOGRAMS[key]


def test_status_page_renders_states_and_charts_in_chromium(
    store: RefStoreThread, tmp_path: Path
) -> None:
    browser = chromium()
    config = tmp_path / "benchd.toml"
    config.write_text(
        "[server]\nhistory = 10\n"
        + probe("steady", store.url, interval=1.0)
        + probe("broken", "http://127.0.0.1:9", interval=1.0)
    )
    with BenchdProcess(["--config", str(config)], env={"PAGE_KEY": KEY}) as benchd:
        benchd.wait_cycles("steady", 3, timeout=120)
        benchd.wait_cycles("broken", 2, timeout=120)
        shot = artifacts() / "status-page.png"
        shot.unlink(missing_ok=True)
        profile = tmp_path / "chromium-profile"
        proc = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--hide-scrollbars", "--window-size=1280,1500", f"--screenshot={shot}",
             "--dump-dom", benchd.url + "/"],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert benchd.stop() == 0

    dom = Dom()
    dom.feed(proc.stdout)
    assert dom.cards["steady"]["data-state"] == "up"
    assert dom.cards["broken"]["data-state"] == "failing"
    assert "connect" in proc.stdout  # the failing probe's reason names its error kind
    for name in ("steady", "broken"):
        assert dom.charts[name] == ["quality", "latency", "outcome"], name
    assert dom.counts["steady", "polyline"] >= 2  # quality and latency lines over 3+ cycles
    assert dom.counts["broken", "rect"] >= 2  # one outcome bar per failed cycle (+ legend)
    assert dom.external == []  # nothing loaded from anywhere: no script, no link, no src

    assert shot.is_file() and shot.stat().st_size > 0
    with Image.open(shot) as image:
        image.load()
        pixels = {
            "up badge": color_pixels(image, STATE_COLORS["up"]),
            "failing badge": color_pixels(image, STATE_COLORS["failing"]),
            "success bars": color_pixels(image, OUTCOME_COLORS["success"]),
            "failed bars": color_pixels(image, OUTCOME_COLORS["failed"]),
            "quality lines": sum(color_pixels(image, c) for c in SERIES_COLORS[:4]),
            "p50 line": color_pixels(image, LATENCY_COLORS["p50"]),
        }
    # Painted on screen, not only present in the markup. A legend swatch is a
    # 10x10 square of the same colour: what a chart draws must come on top of
    # its swatches (4 quality and 2 latency swatches on each of the 2 cards).
    swatches = {"success bars": 100, "failed bars": 100, "quality lines": 800, "p50 line": 200}
    drawn = {name: n - swatches.get(name, 0) for name, n in pixels.items()}
    assert all(n >= 200 for n in drawn.values()), pixels
