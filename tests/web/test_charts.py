"""The status page's SVG charts: a UTC time axis, y scaled to the data, an honest legend."""

from __future__ import annotations

import re
from itertools import pairwise

from benchd.web.charts import Marker, Series, line_chart, nice_step, outcome_chart
from benchd.web.page import _charted_ks, _ms_tick

T0 = 1_700_000_000.0  # 22:13:20 UTC


def _ticks(svg: str, axis: str) -> list[str]:
    return re.findall(rf'<text class="tick-{axis}"[^>]*>([^<]+)</text>', svg)


def test_a_small_drop_fills_the_plot_instead_of_a_fixed_zero_to_one_axis() -> None:
    values = [0.94, 0.94, 0.94, 0.88, 0.88]
    points = [(T0 + 30 * i, v) for i, v in enumerate(values)]
    svg = line_chart(
        "quality", "Quality", [Series("recall@10", "#0969da", points, baseline=0.94)],
        unit=lambda v, step: f"{v:.2f}", floor=0.0, ceil=1.0, min_span=0.05,
    )  # fmt: skip
    ticks = [float(t) for t in _ticks(svg, "y")]
    assert min(ticks) >= 0.8 and max(ticks) <= 1.0 and len(ticks) >= 2  # not 0..1
    ys = [float(y) for y in re.findall(r'<circle cx="[^"]+" cy="([^"]+)"', svg)]
    assert max(ys) - min(ys) > 60  # the 0.06 drop spans a good part of the plot's height
    assert _ticks(svg, "x") == ["22:14", "22:15"]  # two minutes of cycles: a tick a minute
    assert "time (UTC)" in svg and 'class="baseline"' in svg


def test_the_legend_names_only_what_is_drawn_and_every_marker_kind_once() -> None:
    points = [(T0 + 30 * i, 0.01 * (i + 1)) for i in range(3)]
    withheld = [(t, None) for t, _ in points]
    markers = [
        Marker("reload", T0 + 40, "configuration reloaded"),
        Marker("failed cycle", T0 + 60, "cycle #3 failed"),
        Marker("failed cycle", T0 + 61, "cycle #4 failed"),
    ]
    svg = line_chart(
        "latency", "Latency",
        [Series("p50", "#54aeff", points), Series("p99", "#fb8f44", withheld)],
        markers, unit=_ms_tick, floor=0.0,
    )  # fmt: skip
    legend = re.findall(r'data-legend="([^"]+)"', svg)
    assert legend == ["p50", "reload", "failed cycle"]  # no p99: it has no reading
    assert svg.count('data-marker="failed cycle"') == 2 and svg.count('data-marker="reload"') == 1


def test_a_chart_of_only_failed_cycles_still_has_its_axis_and_markers() -> None:
    markers = [Marker("failed cycle", T0 + 30 * i, f"cycle #{i}") for i in range(3)]
    svg = line_chart("quality", "Quality", [Series("recall@10", "#0969da", [])], markers,
                     unit=lambda v, step: f"{v:.2f}", floor=0.0, ceil=1.0)  # fmt: skip
    assert "no readings in the kept history" in svg and svg.count('data-marker="failed cycle"') == 3
    assert _ticks(svg, "y")[0] == "0.00"


def test_outcome_bars_do_not_overlap_when_cycles_come_closer() -> None:
    cycles = [(T0 + t, T0 + t + 1.0, "success", "") for t in (0, 30, 60, 62, 64)]
    svg = outcome_chart("Outcome", cycles, {"success": "#2da44e"})
    found = re.findall(r'<rect class="outcome"[^>]* x="([^"]+)" y="[^"]+" width="([^"]+)"', svg)
    bars = [(float(x), float(w)) for x, w in found]
    assert len(bars) == 5
    assert all(a + w <= b + 0.05 for (a, w), (b, _) in pairwise(bars))


def test_tick_labels_keep_the_decimals_their_step_needs() -> None:
    assert nice_step(0.6) == 0.2 and nice_step(0.0) == 1.0
    assert [_ms_tick(v, 0.0002) for v in (0.0198, 0.02)] == ["19.8 ms", "20.0 ms"]
    assert _ms_tick(0.0025, 0.0025) == "2.5 ms" and _ms_tick(1.5, 0.25) == "1.5 s"


def test_many_cut_offs_chart_10_the_smallest_and_the_largest() -> None:
    assert _charted_ks([1, 3, 5, 10, 20, 50, 100]) == [1, 10, 100]
    assert _charted_ks([5, 10]) == [5, 10] and _charted_ks([1, 2, 3, 4]) == [1, 4]
