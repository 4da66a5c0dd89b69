"""Server-rendered SVG bar charts: the geometry in Python, the markup in one method.

The operator dashboard draws its hourly series with these (``bar_chart``); no JavaScript and
no chart library: 48 bars with a tooltip each are a few kilobytes of inline SVG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


@dataclass
class BarChart:
    """The geometry of one SVG bar chart; the template only draws it."""

    title: str
    css_class: str
    width: int
    height: int
    total: int
    peak: int
    bars: list[dict] = field(default_factory=list)
    ticks: list[dict] = field(default_factory=list)
    gridlines: list[dict] = field(default_factory=list)
    plot_top: int = 0
    plot_bottom: int = 0
    plot_left: int = 0
    plot_right: int = 0

    def svg(self) -> SafeString:
        """The chart as inline SVG markup.

        Built here rather than in a template loop: 48 bars with a tooltip each cost a template
        engine milliseconds per chart, and the dashboard's budget is the whole page.
        """
        parts = [
            f'<svg viewBox="0 0 {self.width} {self.height}" role="img" '
            f'aria-label="{escape(self.title)}: {self.total} in the last {len(self.bars)} hours">'
        ]
        for g in self.gridlines:
            parts.append(
                f'<line class="grid" x1="{self.plot_left}" x2="{self.plot_right}" '
                f'y1="{g["y"]}" y2="{g["y"]}"/>'
                f'<text x="{self.plot_left - 4}" y="{g["y"]}" dy="3" text-anchor="end">'
                f"{escape(g['label'])}</text>"
            )
        for b in self.bars:
            label = b["hour"].strftime("%a %H:00")
            parts.append(
                f'<rect x="{b["x"]}" y="{b["y"]}" width="{b["w"]}" height="{b["h"]}">'
                f"<title>{label} UTC: {b['value']}</title></rect>"
            )
        parts.append(
            f'<line class="axis" x1="{self.plot_left}" x2="{self.plot_right}" '
            f'y1="{self.plot_bottom}" y2="{self.plot_bottom}"/>'
        )
        for t in self.ticks:
            parts.append(
                f'<text x="{t["x"]}" y="{self.height - 6}" text-anchor="middle">'
                f"{escape(t['label'])}</text>"
            )
        parts.append("</svg>")
        # Every interpolated value is a number, a formatted date, or escaped above.
        return mark_safe("".join(parts))


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 times 10^k at or above ``value`` (an axis maximum people can read)."""
    if value <= 0:
        return 1
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= value:
                return step * scale
        scale *= 10


def bar_chart(
    title: str,
    points: list[tuple[datetime, int]],
    *,
    css_class: str,
    width: int = 420,
    height: int = 140,
) -> BarChart:
    """Lay out ``points`` (hour, count) as bars with a readable y-axis and a tick every 6 hours."""
    left, right, top, bottom = 34, 18, 10, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((n for _, n in points), default=0)
    axis_max = _nice_ceiling(peak)
    slot = plot_w / max(len(points), 1)
    chart = BarChart(
        title=title,
        css_class=css_class,
        width=width,
        height=height,
        total=sum(n for _, n in points),
        peak=peak,
        plot_top=top,
        plot_bottom=top + plot_h,
        plot_left=left,
        plot_right=left + plot_w,
    )
    for i, (hour, n) in enumerate(points):
        h = plot_h * n / axis_max
        chart.bars.append(
            {
                "x": round(left + i * slot + slot * 0.1, 2),
                "y": round(top + plot_h - h, 2),
                "w": round(slot * 0.8, 2),
                "h": round(h, 2),
                "value": n,
                "hour": hour,
            }
        )
        if hour.hour % 6 == 0:
            chart.ticks.append(
                {"x": round(left + i * slot + slot / 2, 2), "label": hour.strftime("%H:00")}
            )
    for frac in (0, 0.5, 1):
        value = axis_max * frac
        if value != int(value):
            continue  # counts are whole: no "0.5" or "2.5" line
        chart.gridlines.append(
            {
                "y": round(top + plot_h - plot_h * frac, 2),
                "label": f"{value:g}",
            }
        )
    return chart
