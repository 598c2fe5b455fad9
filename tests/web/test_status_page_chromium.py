"""The status pages in a real headless Chromium (Debian's ``chromium``), loaded from a
running ``benchd run`` probing the reference store, before and after an embedding-model
switch judged against a pinned baseline.

What is asserted is the DOM Chromium rendered (``--dump-dom``) at 1280 and 390 px
wide: the health words, each drifted metric's baseline and current value, both
model labels, the regressed queries' texts, a model-change marker in the quality
chart, and that every legend entry names something the chart drew; the
screenshots (the paths are printed) must show the charts' colours painted. They
are kept under ``$BENCHD_ARTIFACTS`` (default ``tests/artifacts/``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from support import BenchdProcess

from benchd.fixtures import load_fixture, packaged_fixture
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config
from benchd.surfacers.status import HEALTH_WORDS
from benchd.web.charts import MARKER_COLORS
from benchd.web.page import HEALTH_COLORS, LATENCY_COLORS

KEY = "page-test-key-71d0a4"
REPO = Path(__file__).resolve().parents[2]
BEFORE, AFTER = "hash:1024", "hash:16"  # the same store, a much worse embedding model
WIDTHS = (1280, 390)
CYCLE_TIMEOUT_S = 180.0


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
    config = make_config(api_key=KEY, retriever="dense", embedder=BEFORE)
    with RefStoreThread(config) as thread:
        yield thread


def probe(name: str, url: str, interval: float, *, load: str = 'mode = "serial"') -> str:
    return f"""
[[probe]]
name = "{name}"
fixture = "packaged:smoke"
interval_s = {interval}
jitter_s = 0.0
timeout_s = 30.0
[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "PAGE_KEY"
namespace = "benchd-{name}"
cleanup = "never"
searchable_timeout_s = 5.0
max_retries = 0
[probe.load]
{load}
[probe.budget]                 # the reference store here has no rate limits
reads_per_min = 100000
writes_per_min = 100000
"""


# A load pass of 120 requests a cycle: enough samples for a published p99.
LOAD = 'mode = "closed"\nconcurrency = 4\nrequests = 120'


# --------------------------------------------------------------------------- the DOM


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def all(self, tag: str | None = None, **attrs: str | None) -> list[Node]:
        """Every descendant with ``tag`` whose attributes match (None: present at all)."""
        found = []
        for child in self.children:
            if (tag is None or child.tag == tag) and all(
                (_name(k) in child.attrs) if v is None else child.attrs.get(_name(k)) == v
                for k, v in attrs.items()
            ):
                found.append(child)
            found.extend(child.all(tag, **attrs))
        return found

    def one(self, tag: str | None = None, **attrs: str | None) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]

    def words(self) -> str:
        return " ".join((self.text + " " + " ".join(c.words() for c in self.children)).split())

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


def _name(keyword: str) -> str:
    """``class_`` -> ``class``, ``data_legend`` -> ``data-legend``."""
    return keyword.rstrip("_").replace("_", "-")


class TreeBuilder(HTMLParser):
    """The dumped DOM as a tree of :class:`Node` (enough for these assertions)."""

    VOID = frozenset({"meta", "br", "link", "img", "input", "hr", "col", "source"})

    def __init__(self) -> None:
        super().__init__()
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag in ("script", "link", "img", "iframe") or "src" in node.attrs:
            self.external.append(tag)
        if node.attrs.get("href", "").startswith(("http:", "https:", "//")):
            self.external.append(node.attrs["href"])
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text += data


def parse(dom: str) -> tuple[Node, list[str]]:
    builder = TreeBuilder()
    builder.feed(dom)
    return builder.root, builder.external


def render(browser: str, url: str, width: int, shot: Path, profile: Path) -> str:
    """Chromium's DOM after loading ``url`` at ``width`` px, and its screenshot at ``shot``."""
    shot.unlink(missing_ok=True)
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--hide-scrollbars", f"--window-size={width},{6000 if width < 600 else 2600}",
         f"--screenshot={shot}", "--dump-dom", url],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 0
    print(f"screenshot: {shot}", file=sys.stderr)
    return proc.stdout


def color_pixels(image: Image.Image, hex_color: str, tolerance: int = 8) -> int:
    """How many pixels of the screenshot have this colour (within a small tolerance)."""
    target = tuple(int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    colors = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    return sum(
        n
        for n, rgb in colors
        if all(abs(c - t) <= tolerance for c, t in zip(rgb, target, strict=True))
    )


# --------------------------------------------------------------------------- checks


def legend_is_drawn(chart: Node) -> list[str]:
    """The chart's legend entries, after checking that each names something drawn."""
    names = [g.attrs["data-legend"] for g in chart.all("g", data_legend=None)]
    assert names, "a chart without a legend"
    for name in names:
        series = [g for g in chart.all("g", data_series=name) if "series" in g.classes()]
        if series:
            assert series[0].all("circle"), f"{name}: in the legend, no reading drawn"
        elif name.startswith("baseline"):
            assert chart.all("line", data_series=None), f"{name}: no baseline line drawn"
        elif name in MARKER_COLORS:
            assert chart.all("g", data_marker=name), f"{name}: no marker drawn"
        else:
            assert chart.all("rect", data_outcome=name), f"{name}: nothing drawn"
    return names


def marker_at_the_drop(quality: Node, marker: Node) -> bool:
    """The marker stands on recall@10's first lower reading, or the next one.

    The store's label is read when a cycle starts, so a switch landing during a
    cycle lowers that cycle's reading while the marker goes on the next cycle.
    """
    series = next(g for g in quality.all("g", data_series="recall@10") if "series" in g.classes())
    dots = sorted((float(c.attrs["cx"]), float(c.attrs["cy"])) for c in series.all("circle"))
    first_low = next(i for i, (_, y) in enumerate(dots) if y > dots[0][1] + 0.5)  # y grows down
    x = float(marker.one("line").attrs["x1"])
    return any(abs(x - cx) < 0.5 for cx, _ in dots[first_low : first_low + 2])


def card(root: Node, name: str) -> Node:
    return root.one("section", data_probe=name)


def chart(section: Node, kind: str) -> Node:
    return section.one("svg", data_chart=kind)


def facts(section: Node) -> dict[str, str]:
    return {dd.attrs["data-fact"]: dd.words() for dd in section.all("dd", data_fact=None)}


def status(benchd: BenchdProcess) -> dict[str, Any]:
    reply = benchd.get("/api/status")
    assert reply.status_code == 200, reply.text
    document: dict[str, Any] = reply.json()
    return document


def check_before(root: Node, api: dict[str, Any]) -> None:
    memory = card(root, "memory")
    assert memory.attrs["data-health"] == "healthy", memory.attrs
    assert HEALTH_WORDS["healthy"] in memory.one("span", class_="health").words()
    assert not memory.all("li", class_="change")  # nothing changed yet
    told = facts(memory)
    assert told["Model now"] == BEFORE and told["Model at the baseline"] == BEFORE
    assert told["Baseline"].startswith("pinned")
    assert not memory.all("tr", class_="drifted") and not memory.all("tr", class_="regressed")
    assert "p99" in told["Latency"] and "withheld" not in told["Latency"]
    assert api["probes"]["memory"]["last"]["drift"]["baseline"] == "pinned"
    broken = card(root, "broken")
    assert broken.attrs["data-health"] == "not-measuring"
    assert "connect" in broken.one("p", class_="reason").words()
    assert chart(broken, "quality").all("g", data_marker="failed cycle")
    for outcome in (a.attrs["data-health"] for a in root.all("section", data_probe=None)):
        assert outcome not in ("success", "degraded", "failed", "timeout")


HISTORY = 20  # [server] history: every cycle of the test's memory probe is kept


def check_changes(
    memory: Node, probe: dict[str, Any], told: dict[str, str], onset_noise: str
) -> None:
    """One line per change, with its values and onset; the cycle's quality beside its outcome."""
    lines = {li.attrs["data-change"]: li for li in memory.all("li", class_="change")}
    changes = {c["what"]: c for c in probe["changes"]}
    assert "recall@10" in changes and set(lines) <= set(changes)
    onset = probe["drift_onset_at_iso"]
    assert onset and onset <= probe["last"]["started_at_iso"]
    for what, li in lines.items():
        change = changes[what]
        assert li.one("span", data_value="before").words() == f"{change['before']:.3f}"
        assert li.one("span", data_value="now").words() == f"{change['now']:.3f}"
        assert change["verdict"] in li.words()
    assert lines["recall@10"].one("span", class_="since").attrs["data-since"] == onset
    assert f"{probe['last']['outcome']}, quality dropped; started" in told["Last cycle"]
    assert f"noise {onset_noise} over" in told["Baseline"]  # as the onset's log line said


def check_after(
    root: Node, api: dict[str, Any], queries: dict[str, str], before: float, limit: int = 10,
    onset_noise: str = "",
) -> None:
    memory = card(root, "memory")
    assert memory.attrs["data-health"] == "quality-dropped"
    assert memory.one("span", class_="health").words() == HEALTH_WORDS["quality-dropped"]
    told = facts(memory)
    assert told["Model now"] == AFTER and told["Model at the baseline"] == BEFORE
    check_changes(memory, api["probes"]["memory"], told, onset_noise)
    drift = api["probes"]["memory"]["last"]["drift"]
    flagged = {k: m for k, m in drift["metrics"].items() if m["detected"]}
    assert "recall@10" in flagged
    rows = {tr.attrs["data-metric"]: tr for tr in memory.all("tr", class_="drifted")}
    assert set(rows) == set(flagged)
    for key, metric in flagged.items():
        cells = {td.attrs["data-value"]: td.words() for td in rows[key].all("td", data_value=None)}
        assert cells["baseline"] == f"{metric['before']:.3f}", key
        assert cells["now"] == f"{metric['after']:.3f}", key
        assert cells["delta"] == f"{metric['delta']:+.3f}", key
    # the baseline shown is the quality measured before the switch
    assert rows["recall@10"].one("td", data_value="baseline").words() == f"{before:.3f}"
    every = drift["regressed_queries"]
    regressed = [r["id"] for r in every][:limit]
    shown = memory.all("tr", class_="regressed")
    if len(every) > limit:  # the overview: the rest are a link away
        assert memory.one("a", class_="more").attrs["href"] == "probe/memory#regressed"
    assert [tr.attrs["data-query"] for tr in shown] == regressed and regressed
    for tr, qid in zip(shown, regressed, strict=True):
        assert tr.all("td")[0].words() == " ".join(queries[qid].split())
    quality = chart(memory, "quality")
    switch = [g for g in quality.all("g", data_marker="model change") if AFTER in g.words()]
    assert len(switch) == 1 and f"{BEFORE} → {AFTER}" in switch[0].words()
    assert marker_at_the_drop(quality, switch[0])
    assert quality.all("g", data_marker="reload")
    assert quality.all("line", class_="baseline")
    assert {"p50", "p99"} <= set(legend_is_drawn(chart(memory, "latency")))
    for kind in ("quality", "outcome"):
        legend_is_drawn(chart(memory, kind))
    assert {"recall@10", "model change", "reload"} <= set(legend_is_drawn(quality))


def check_pixels(shot: Path, width: int) -> None:
    with Image.open(shot) as image:
        image.load()
        painted = {
            "quality-dropped badge": color_pixels(image, HEALTH_COLORS["quality-dropped"]),
            "not-measuring badge": color_pixels(image, HEALTH_COLORS["not-measuring"]),
            "model change marker": color_pixels(image, MARKER_COLORS["model change"]),
            "p50 line": color_pixels(image, LATENCY_COLORS["p50"]),
            "p99 line": color_pixels(image, LATENCY_COLORS["p99"]),
        }
    # A legend swatch alone is ~14x10 px: each colour must be painted well beyond it. The
    # marker's swatch is a dashed 2 px line (under 30 px in the marker's exact colour); the
    # marker itself a 10 px square over a dashed 3 px line (~110 px at 390 px wide).
    floors = {"model change marker": 60}
    assert all(n >= floors.get(k, 250) for k, n in painted.items()), (width, painted)


def test_status_pages_show_what_changed_after_a_model_switch_in_chromium(
    store: RefStoreThread, tmp_path: Path
) -> None:
    browser = chromium()
    shots = artifacts()
    profile = tmp_path / "chromium-profile"
    queries = {q.id: q.q for q in load_fixture(packaged_fixture("smoke")).queries}
    env = {"PAGE_KEY": KEY}
    config = tmp_path / "benchd.toml"
    body = probe("memory", store.url, 3.0, load=LOAD) + probe(
        "broken", "http://127.0.0.1:9", 3.0
    )
    config.write_text(f"[server]\nhistory = {HISTORY}\n" + body)
    pin = subprocess.run(
        [sys.executable, "-m", "benchd", "baseline", "save", "--config", str(config),
         "--probe", "memory", "--out", str(tmp_path / "baseline.toml"), "--repeats", "3"],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert pin.returncode == 0, pin.stderr[-2000:]
    pinned = body.replace(
        'name = "memory"\n', f'name = "memory"\nbaseline = "{tmp_path / "baseline.toml"}"\n'
    )
    config.write_text(f"[server]\nhistory = {HISTORY}\n" + pinned)
    with BenchdProcess(["--config", str(config)], env=env) as benchd:
        benchd.wait_cycles("memory", 2, timeout=CYCLE_TIMEOUT_S)
        benchd.wait_cycles("broken", 2, timeout=CYCLE_TIMEOUT_S)
        before_api = status(benchd)
        before = before_api["probes"]["memory"]["last"]["aggregate"]["recall@10"]
        for width in WIDTHS:
            shot = shots / f"status-before-{width}.png"
            root, external = parse(render(browser, benchd.url + "/", width, shot, profile))
            assert external == []  # nothing loaded from anywhere: no script, link or src
            check_before(root, before_api)

        # A reload that changes the probe: its cycle numbers must go on, not restart at #1.
        numbered = max(e["cycle"] for e in benchd.cycles("memory"))
        config.write_text(config.read_text().replace("interval_s = 3.0", "interval_s = 2.5", 1))
        assert benchd.post("/-/reload").status_code == 200
        benchd.wait_for(lambda e: e.get("event") == "reloaded", timeout=60)
        seen = len(benchd.cycles("memory"))
        after_reload = benchd.wait_cycles("memory", seen + 1, timeout=CYCLE_TIMEOUT_S)[-1]
        assert after_reload["cycle"] > numbered

        reply = httpx.post(
            f"{store.url}/admin/config", json={"embedder": AFTER},
            headers={"x-api-key": KEY}, timeout=60,
        )  # fmt: skip
        assert reply.status_code == 200, reply.text
        onset = benchd.wait_for(
            lambda e: e.get("event") == "drift_onset" and e.get("probe") == "memory",
            timeout=CYCLE_TIMEOUT_S,
        )
        # A cycle that ran wholly after the switch; then freeze the probe (a reload to an
        # interval of an hour: one cycle at once, then none), so every page shows one state.
        count = len(benchd.cycles("memory"))
        benchd.wait_cycles("memory", count + 2, timeout=CYCLE_TIMEOUT_S)
        config.write_text(config.read_text().replace("interval_s = 2.5", "interval_s = 3600.0"))
        reloads = sum(e.get("event") == "reloaded" for e in list(benchd.events))
        assert benchd.post("/-/reload").status_code == 200
        benchd.wait_for(
            lambda e: e.get("event") == "reloaded"
            and sum(x.get("event") == "reloaded" for x in list(benchd.events)) > reloads,
            timeout=60,
        )
        count = len(benchd.cycles("memory"))
        benchd.wait_cycles("memory", count + 1, timeout=CYCLE_TIMEOUT_S)
        # Frozen now: the count covers every cycle logged since the start, reloads included,
        # and the numbers never restarted (a cycle a reload cancelled leaves a gap).
        memory = status(benchd)["probes"]["memory"]
        logged = [e["cycle"] for e in benchd.cycles("memory")]
        assert memory["cycles_total"] == len(logged) and logged == sorted(set(logged))
        assert memory["last"]["cycle"] == logged[-1]
        for width in WIDTHS:
            shot = shots / f"status-after-{width}.png"
            root, external = parse(render(browser, benchd.url + "/", width, shot, profile))
            assert external == []
            check_after(root, status(benchd), queries, before, onset_noise=onset["noise"])
            check_pixels(shot, width)
        shot = shots / "status-probe-memory-1280.png"
        root, _ = parse(render(browser, benchd.url + "/probe/memory", 1280, shot, profile))
        rows = root.one("table", class_="history").all("tr", data_cycle=None)
        numbers = [int(tr.attrs["data-cycle"]) for tr in rows]
        assert numbers == logged[::-1][:HISTORY]  # every kept cycle, newest first
        assert len(root.one("table", class_="queries").all("tr", data_query=None)) == 16
        check_after(
            root, status(benchd), queries, before, limit=len(queries), onset_noise=onset["noise"]
        )
        assert benchd.stop() == 0
