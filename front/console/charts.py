"""Charts drawn on the server: the geometry of an SVG line chart (drawn by
templates/console/chart.html), each series a step line of a count over time, with a text
equivalent (the chart's description and the table beside it)."""

from __future__ import annotations

import dataclasses
import datetime as dt

WIDTH, HEIGHT = 720, 280
LEFT, RIGHT, TOP, BOTTOM = 64, 40, 14, 44
# Told apart by colour and by dash (for those who cannot tell the colours apart); each
# colour has at least 3:1 contrast on white (WCAG 1.4.11).
STYLES = {
    "sent": ("#1e3a8a", ""), "delivered": ("#047857", ""), "deferred": ("#b45309", "6 3"),
    "bounced": ("#b91c1c", "2 3"), "complained": ("#7e22ce", "8 3 2 3"), "opened": ("#0e7490", "4 2"),
    "clicked": ("#be185d", "1 2"),
    "bounce_rate": ("#b91c1c", ""), "complaint_rate": ("#7e22ce", "8 3 2 3"), "deferral_rate": ("#b45309", "6 3"),
}


@dataclasses.dataclass(frozen=True)
class Line:
    name: str
    colour: str
    dash: str
    points: str  # the polyline's "x,y x,y …"
    last: int


@dataclasses.dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclasses.dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    lines: list[Line]
    y_ticks: list[Tick]
    x_ticks: list[Tick]


def _clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M:%S")


def step_chart(series: dict[str, list[tuple[int, int]]], start_ms: int, end_ms: int, top_value: int) -> Chart:
    """Counts over time, each series a step line from 0 at `start_ms` to its last value at `end_ms`."""
    span = max(1, end_ms - start_ms)
    top_value = max(1, top_value, *(points[-1][1] for points in series.values() if points))
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(ms: int) -> float:
        return round(LEFT + inner_w * (ms - start_ms) / span, 1)

    def y(value: float) -> float:
        return round(TOP + inner_h * (1 - value / top_value), 1)
    lines = []
    for name, points in series.items():
        path, value = [(x(start_ms), y(0))], 0
        for at, count in points:
            path += [(x(at), y(value)), (x(at), y(count))]
            value = count
        path.append((x(end_ms), y(value)))
        colour, dash = STYLES[name]
        lines.append(Line(name, colour, dash, " ".join(f"{a},{b}" for a, b in path), value))
    y_ticks = [Tick(y(top_value * i / 4), f"{top_value * i / 4:g}") for i in range(5)]
    x_ticks = [Tick(x(start_ms + span * i // 2), _clock(start_ms + span * i // 2)) for i in range(3)]
    return Chart(WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM, lines, y_ticks, x_ticks)
