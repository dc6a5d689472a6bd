"""The HTML summary: one self-contained page, charts as inline SVG.

Opened from a laptop, a CI artifact or an air-gapped host alike, so the page
loads nothing: no scripts, no fonts, no stylesheets from a CDN.  Charts are
for what a person would rather look at than read -- commit rate over time
per group, lag per group and partition, group generations over time -- and
every data point carries an SVG ``<title>``, which browsers show as a
tooltip without any JavaScript.  Tables hold the rest.

Input is plain Python data (the CLI collects small aggregates from the
reports), so this module needs no Spark and is unit-testable on its own.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
WIDTH, HEIGHT = 760, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 64, 180, 16, 40

Point = tuple[float, float]


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt_time(ms: float) -> str:
    """UTC, to the second (record timestamps are epoch milliseconds)."""
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_num(v: float) -> str:
    if v is None:
        return ""
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}"


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1/2/5 × 10^k steps)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        if v >= lo - step * 1e-9:
            ticks.append(v)
        v += step
    return ticks


@dataclass
class _Frame:
    """Maps data coordinates onto the plot area."""

    x0: float
    x1: float
    y0: float
    y1: float
    width: int = WIDTH
    height: int = HEIGHT

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1
        return MARGIN_L + (v - self.x0) / span * (self.width - MARGIN_L - MARGIN_R)

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1
        return self.height - MARGIN_B - (v - self.y0) / span * (self.height - MARGIN_T - MARGIN_B)


def _axes(f: _Frame, x_time: bool, y_label: str) -> list[str]:
    parts = [f'<line x1="{MARGIN_L}" y1="{f.height - MARGIN_B}" x2="{f.width - MARGIN_R}" '
             f'y2="{f.height - MARGIN_B}" stroke="#444"/>',
             f'<line x1="{MARGIN_L}" y1="{MARGIN_T}" x2="{MARGIN_L}" y2="{f.height - MARGIN_B}" stroke="#444"/>']
    for t in _nice_ticks(f.y0, f.y1):
        y = f.y(t)
        parts.append(f'<line x1="{MARGIN_L - 4}" y1="{y:.1f}" x2="{f.width - MARGIN_R}" y2="{y:.1f}" '
                     f'stroke="#ddd"/><text x="{MARGIN_L - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f'{_e(fmt_num(t))}</text>')
    if x_time:
        span = f.x1 - f.x0
        for i in range(5):
            v = f.x0 + span * i / 4
            label = fmt_time(v)
            label = label[11:] if span < 86_400_000 else label[:10]
            parts.append(f'<text x="{f.x(v):.1f}" y="{f.height - MARGIN_B + 16}" text-anchor="middle">'
                         f'{_e(label)}</text>')
        parts.append(f'<text x="{MARGIN_L}" y="{f.height - 6}">{_e(fmt_time(f.x0))} … '
                     f'{_e(fmt_time(f.x1))} UTC</text>')
    parts.append(f'<text x="12" y="{MARGIN_T + 10}" transform="rotate(-90 12 {MARGIN_T + 10})" '
                 f'text-anchor="end">{_e(y_label)}</text>')
    return parts


def _legend(names: Sequence[str], f: _Frame) -> list[str]:
    parts = []
    for i, name in enumerate(names):
        y = MARGIN_T + 14 * i + 8
        x = f.width - MARGIN_R + 10
        color = PALETTE[i % len(PALETTE)]
        short = name if len(name) <= 24 else name[:23] + "…"
        parts.append(f'<rect x="{x}" y="{y - 8}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{x + 14}" y="{y + 1}"><title>{_e(name)}</title>{_e(short)}</text>')
    return parts


def _svg(body: list[str], f: _Frame, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{f.width}" height="{f.height}" '
            f'viewBox="0 0 {f.width} {f.height}" role="img" aria-label="{_e(title)}" '
            f'font-family="sans-serif" font-size="11">' + "".join(body) + "</svg>")


def line_chart(series: Mapping[str, Sequence[Point]], *, title: str, y_label: str, step: bool = False,
               x_time: bool = True) -> str:
    """One polyline per series (``step``: hold each value until the next point, for generations)."""
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<p class=empty>{_e(title)}: no data.</p>"
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    lo, hi = min(ys), max(ys)
    f = _Frame(min(xs), max(xs), min(0.0, lo), hi if hi > lo else lo + 1)
    body = _axes(f, x_time, y_label)
    for i, (name, pts) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(pts)
        coords: list[str] = []
        prev_y = None
        for x, y in pts:
            if step and prev_y is not None:
                coords.append(f"{f.x(x):.1f},{f.y(prev_y):.1f}")
            coords.append(f"{f.x(x):.1f},{f.y(y):.1f}")
            prev_y = y
        body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(coords)}"/>')
        for x, y in pts:
            tip = f"{name}: {fmt_num(y)} at {fmt_time(x) if x_time else fmt_num(x)}"
            body.append(f'<circle cx="{f.x(x):.1f}" cy="{f.y(y):.1f}" r="2.5" fill="{color}">'
                        f'<title>{_e(tip)}</title></circle>')
    body += _legend(list(series), f)
    return _svg(body, f, title)


def bar_chart(items: Sequence[tuple[str, float]], *, title: str, value_label: str) -> str:
    """Horizontal bars, largest first (lag per group/partition)."""
    if not items:
        return f"<p class=empty>{_e(title)}: no data.</p>"
    row = 18
    height = MARGIN_T + MARGIN_B + row * len(items)
    label_w = 260
    width = WIDTH
    top = max(max(v for _, v in items), 1)
    scale = (width - label_w - 90) / top
    body = []
    for i, (label, v) in enumerate(items):
        y = MARGIN_T + i * row
        w = max(v, 0) * scale
        color = PALETTE[0] if v >= 0 else PALETTE[3]
        short = label if len(label) <= 40 else label[:39] + "…"
        body.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end"><title>{_e(label)}</title>'
                    f'{_e(short)}</text>'
                    f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" fill="{color}">'
                    f'<title>{_e(label)}: {_e(fmt_num(v))} {_e(value_label)}</title></rect>'
                    f'<text x="{label_w + w + 4:.1f}" y="{y + 12}">{_e(fmt_num(v))}</text>')
    body.append(f'<text x="{label_w}" y="{height - 10}">{_e(value_label)}</text>')
    f = _Frame(0, 1, 0, 1, width=width, height=height)
    return _svg(body, f, title)


def table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], *, time_columns: Iterable[str] = (),
          limit: int = 200) -> str:
    """An HTML table; epoch-ms ``time_columns`` shown as UTC times; at most ``limit`` rows."""
    times = set(time_columns)
    out = ["<table><thead><tr>", *(f"<th>{_e(c)}</th>" for c in columns), "</tr></thead><tbody>"]
    n = 0
    for row in rows:
        if n >= limit:
            out.append(f'<tr><td colspan="{len(columns)}">… more rows in the CSV/Parquet output</td></tr>')
            break
        cells = []
        for c in columns:
            v = row.get(c)
            if c in times and isinstance(v, int | float) and v >= 0:
                v = fmt_time(v)
            elif isinstance(v, list):
                v = ", ".join(str(x) for x in v)
            elif isinstance(v, int | float) and not isinstance(v, bool):
                v = fmt_num(v)
            cells.append(f"<td>{_e(v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
        n += 1
    out.append("</tbody></table>")
    return "".join(out)


@dataclass
class Section:
    title: str
    html: str
    note: str = ""


@dataclass
class Summary:
    """What the page shows; the CLI fills it from the reports."""

    title: str
    generated_ms: int
    inputs: list[str]
    sections: list[Section] = field(default_factory=list)

    def add(self, title: str, body: str, note: str = "") -> None:
        self.sections.append(Section(title, body, note))


_CSS = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}th{background:#f4f4f4}
.note{color:#555;font-size:12px}.empty{color:#888}
"""


def render(summary: Summary) -> str:
    """The whole page as a string (UTF-8, no external references)."""
    parts = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
             f"<title>{_e(summary.title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{_e(summary.title)}</h1>",
             f"<p class=note>Generated {_e(fmt_time(summary.generated_ms))} UTC from "
             f"{_e(', '.join(summary.inputs))}.</p>"]
    for s in summary.sections:
        parts.append(f"<h2>{_e(s.title)}</h2>")
        if s.note:
            parts.append(f"<p class=note>{_e(s.note)}</p>")
        parts.append(s.html)
    parts.append("</body></html>")
    return "\n".join(parts)
