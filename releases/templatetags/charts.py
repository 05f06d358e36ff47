"""Small server-rendered SVG charts: nothing is fetched, nothing runs in the browser."""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from releases.core.figures import size_chart_from_bins

register = template.Library()

#: Bars of a bar chart: row height and the label column (labels are 13 px, see app.css; the
#: charts are drawn at their own size, never scaled down: the figure scrolls instead).
ROW = 22
LABEL_WIDTH = 160


def _n(value: float) -> str:
    """Numbers are formatted before format_html, which escapes its arguments to strings."""
    return f"{value:.1f}"


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _short(label: str, limit: int = 22) -> str:
    label = str(label) if str(label) != "" else "(empty)"
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _bar_width(count: float, top: float, plot: float) -> float:
    return max(1.0, plot * count / top) if count else 0.0


def _x_axis(left: int, right: int, y: float, title: str) -> SafeString:
    return format_html(
        '<line x1="{l}" x2="{r}" y1="{y}" y2="{y}" class="axis"></line>'
        '<text x="{r}" y="{ty}" text-anchor="end" class="axis-title">{title}</text>',
        l=left,
        r=right,
        y=_n(y),
        ty=_n(y + 16),
        title=title,
    )


@register.simple_tag
def bar_chart(
    pairs, width: int = 340, css: str = "", name: str = "", unit: str = "rows"
) -> SafeString:
    """Horizontal bars for ``[[label, count], ...]`` in the order given, each labelled with
    its count; ``name`` is its accessible name, ``unit`` the counts' axis title."""
    pairs = list(pairs or [])
    if not pairs:
        return mark_safe('<p class="muted">No values.</p>')
    top = max(count for _, count in pairs) or 1
    plot = width - LABEL_WIDTH - 60
    height = ROW * len(pairs) + 26
    rows = format_html_join(
        "",
        '<g transform="translate(0,{})"><title>{}: {} {}</title>'
        '<text x="{}" y="15" text-anchor="end" class="label">{}</text>'
        '<rect x="{}" y="4" width="{}" height="14" class="bar"></rect>'
        '<text x="{}" y="15" class="count">{}</text></g>',
        (
            (
                i * ROW,
                label if label != "" else "(empty)",
                count,
                unit,
                LABEL_WIDTH - 6,
                _short(label),
                LABEL_WIDTH,
                _n(_bar_width(count, top, plot)),
                _n(LABEL_WIDTH + _bar_width(count, top, plot) + 4),
                count,
            )
            for i, (label, count) in enumerate(pairs)
        ),
    )
    return format_html(
        '<svg class="chart bars {}" width="{}" height="{}" viewBox="0 0 {} {}" role="img" '
        'aria-label="{}">{}{}</svg>',
        css,
        width,
        height,
        width,
        height,
        name or f"Bar chart of {len(pairs)} values",
        rows,
        _x_axis(LABEL_WIDTH, width - 10, ROW * len(pairs) + 4, unit),
    )


@register.simple_tag
def paired_bars(bins, name: str = "", width: int = 420) -> SafeString:
    """Original and released rows on the same bins, ``[[label, original, released], ...]``,
    as paired horizontal bars in the order given (a histogram lying on its side)."""
    bins = list(bins or [])
    if not bins:
        return mark_safe('<p class="muted">No values.</p>')
    row = 32
    top = max(max(o, r) for _, o, r in bins) or 1
    plot = width - LABEL_WIDTH - 60
    rows = []
    for i, (label, original, released) in enumerate(bins):
        shown = label if label != "" else "(empty)"
        wo, wr = _bar_width(original, top, plot), _bar_width(released, top, plot)
        rows.append(
            format_html(
                '<g transform="translate(0,{y})">'
                '<text x="{lx}" y="20" text-anchor="end" class="label">{short}<title>{label}</title></text>'
                '<rect x="{x}" y="3" width="{wo}" height="12" class="bar before">'
                "<title>{label}, original: {o} rows</title></rect>"
                '<text x="{co}" y="14" class="count">{o}</text>'
                '<rect x="{x}" y="16" width="{wr}" height="12" class="bar after">'
                "<title>{label}, released: {r} rows</title></rect>"
                '<text x="{cr}" y="27" class="count">{r}</text></g>',
                y=i * row,
                lx=LABEL_WIDTH - 6,
                short=_short(shown),
                label=shown,
                x=LABEL_WIDTH,
                wo=_n(wo),
                wr=_n(wr),
                o=original,
                r=released,
                co=_n(LABEL_WIDTH + wo + 4),
                cr=_n(LABEL_WIDTH + wr + 4),
            )
        )
    height = row * len(bins) + 26
    return format_html(
        '<svg class="chart paired" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="{name}">{rows}{axis}</svg>',
        w=width,
        h=height,
        name=name or "Original and released rows on the same bins",
        rows=mark_safe("".join(rows)),
        axis=_x_axis(LABEL_WIDTH, width - 10, row * len(bins) + 4, "rows"),
    )


#: The y axis of the class-size chart tops at the first of these shares above the tallest bar,
#: with a gridline at each multiple of its step.
_SHARE_TOPS = ((0.05, 0.01), (0.1, 0.02), (0.2, 0.05), (0.25, 0.05), (0.5, 0.1), (0.75, 0.25))


@register.simple_tag
def size_histogram(chart: dict, name: str = "") -> SafeString:
    """Class sizes on logarithmic bins (``figures.size_bins``): the share of rows in each bin,
    before (original) and after release side by side, with a dashed line at k."""
    bins = (chart or {}).get("bins") or []
    if not bins:
        return mark_safe('<p class="muted">No classes.</p>')
    before = chart.get("has_before")
    band: float = 40
    left, right, top, bottom, plot_h = 58, 16, 30, 46, 150
    width = max(480, left + right + band * len(bins))
    band = (width - left - right) / len(bins)
    height = top + plot_h + bottom
    sides = ["before", "after"] if before else ["after"]
    highest = max(b[side]["share"] for b in bins for side in sides)
    y_top, step = next(((t, s) for t, s in _SHARE_TOPS if t >= highest), (1.0, 0.25))

    def y(share: float) -> float:
        return top + plot_h * (1 - share / y_top)

    parts = []
    for tick in (step * i for i in range(round(y_top / step) + 1)):
        parts.append(
            format_html(
                '<line x1="{}" x2="{}" y1="{y}" y2="{y}" class="grid"></line>'
                '<text x="{}" y="{y}" dy="4" text-anchor="end" class="axis-label">{}</text>',
                left,
                width - right,
                left - 6,
                f"{tick:.0%}",
                y=_n(y(tick)),
            )
        )
    bar_w = (band - 8) / len(sides)
    for i, b in enumerate(bins):
        for j, side in enumerate(sides):
            figures = b[side]
            what = "original" if side == "before" else "released"
            parts.append(
                format_html(
                    '<rect x="{}" y="{}" width="{}" height="{}" class="bar {}">'
                    "<title>class size {}, {}: {} classes, {} rows ({} of rows)</title></rect>",
                    _n(left + i * band + 4 + j * bar_w),
                    _n(y(figures["share"])),
                    _n(max(bar_w - 1, 1)),
                    _n(plot_h * figures["share"] / y_top),
                    side,
                    b["label"],
                    what,
                    figures["classes"],
                    figures["rows"],
                    _pct(figures["share"]),
                )
            )
    ticks = [(i, b["tick"]) for i, b in enumerate(bins)] + [(len(bins), chart.get("end_tick", ""))]
    for i, label in ticks:
        parts.append(
            format_html(
                '<text x="{}" y="{}" text-anchor="middle" class="axis-label">{}</text>',
                _n(left + i * band),
                top + plot_h + 16,
                label,
            )
        )
    parts.append(
        format_html(
            '<line x1="{l}" x2="{r}" y1="{b}" y2="{b}" class="axis"></line>'
            '<text x="{cx}" y="{h}" dy="-6" text-anchor="middle" class="axis-title">'
            "class size (records)</text>"
            '<text transform="rotate(-90)" x="{cy}" y="14" text-anchor="middle" class="axis-title">'
            "% of rows</text>",
            l=left,
            r=width - right,
            b=top + plot_h,
            cx=_n(left + (width - left - right) / 2),
            h=height,
            cy=_n(-(top + plot_h / 2)),
        )
    )
    k_edge = chart.get("k_edge")
    if k_edge is not None:
        kx = left + k_edge * band
        anchor, dx = ("end", -4) if kx > width - 140 else ("start", 4)
        parts.append(
            format_html(
                '<line x1="{x}" x2="{x}" y1="{t}" y2="{b}" class="threshold"></line>'
                '<text x="{x}" y="{ty}" dx="{dx}" text-anchor="{anchor}" class="threshold-label">'
                "{label} = {k}</text>",
                x=_n(kx),
                t=top - 8,
                b=top + plot_h,
                ty=top - 12,
                dx=dx,
                anchor=anchor,
                label=chart.get("k_label", "k"),
                k=chart.get("k"),
            )
        )
    return format_html(
        '<svg class="chart histogram" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="{name}">{parts}</svg>',
        w=int(width),
        h=height,
        name=name or "Share of rows by equivalence class size",
        parts=mark_safe("".join(parts)),
    )


@register.simple_tag
def column_chart(profile: dict, width: int = 180, height: int = 48) -> str:
    """A column profile's small chart: a histogram (numbers, dates) or bars (categories)."""
    chart = profile.get("chart") or {}
    bins = chart.get("bins") or []
    if not bins:
        return ""
    peak = max(b["count"] for b in bins) or 1
    if chart.get("kind") == "histogram":
        step = width / len(bins)
        bars = format_html_join(
            "",
            '<rect x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>',
            (
                (
                    f"{i * step:.1f}",
                    f"{height - b['count'] / peak * height:.1f}",
                    f"{max(step - 1, 1):.1f}",
                    f"{b['count'] / peak * height:.1f}",
                    b["label"],
                    b["count"],
                )
                for i, b in enumerate(bins)
            ),
        )
        return format_html(
            '<svg class="chart histogram" role="img" viewBox="0 0 {} {}" width="{}" height="{}" '
            'aria-label="Histogram of {} bins">{}</svg>',
            width,
            height,
            width,
            height,
            len(bins),
            bars,
        )
    row, width = 18, max(width, 260)
    total_height = row * len(bins)
    bars = format_html_join(
        "",
        '<g><rect x="0" y="{}" width="{}" height="{}"></rect><text x="{}" y="{}">{}</text>'
        "<title>{}: {}</title></g>",
        (
            (
                i * row,
                f"{max(b['count'] / peak * width * 0.45, 1):.1f}",
                row - 3,
                f"{b['count'] / peak * width * 0.45 + 3:.1f}",
                i * row + row - 4,
                b["label"][:18],
                b["label"],
                b["count"],
            )
            for i, b in enumerate(bins)
        ),
    )
    return format_html(
        '<svg class="chart bars" role="img" viewBox="0 0 {} {}" width="{}" height="{}" '
        'aria-label="Most frequent values">{}</svg>',
        width,
        total_height,
        width,
        total_height,
        bars,
    )


RISK_LABELS = [
    ("highest", "highest"),
    ("average", "average"),
    ("records_at_risk", "records at risk"),
    ("sample_uniques", "sample uniques"),
]


@register.simple_tag
def risk_chart(before: dict, after: dict, width: int = 420) -> SafeString:
    """Prosecutor risk before and after release, as paired bars on a 0–100% scale."""
    before, after = before or {}, after or {}
    plot = width - LABEL_WIDTH - 60
    rows = []
    for i, (key, label) in enumerate(RISK_LABELS):
        b, a = float(before.get(key, 0.0)), float(after.get(key, 0.0))
        rows.append(
            format_html(
                '<g transform="translate(0,{})">'
                '<text x="{}" y="14" text-anchor="end" class="label">{}</text>'
                '<rect x="{}" y="2" width="{}" height="11" class="bar before"><title>before: {}</title></rect>'
                '<text x="{}" y="12" class="count">{}</text>'
                '<rect x="{}" y="15" width="{}" height="11" class="bar after"><title>after: {}</title></rect>'
                '<text x="{}" y="25" class="count">{}</text></g>',
                i * 32,
                LABEL_WIDTH - 6,
                label,
                LABEL_WIDTH,
                _n(max(1.0, plot * b)),
                _pct(b),
                _n(LABEL_WIDTH + max(1.0, plot * b) + 4),
                _pct(b),
                LABEL_WIDTH,
                _n(max(1.0, plot * a)),
                _pct(a),
                _n(LABEL_WIDTH + max(1.0, plot * a) + 4),
                _pct(a),
            )
        )
    height = 32 * len(RISK_LABELS)
    return format_html(
        '<svg class="chart risk" width="{}" height="{}" viewBox="0 0 {} {}" role="img">'
        "<title>Re-identification risk before and after</title>{}</svg>",
        width,
        height,
        width,
        height,
        mark_safe("".join(rows)),
    )


@register.filter
def percent(value, digits: int = 1) -> str:
    try:
        return f"{float(value) * 100:.{int(digits)}f}%"
    except (TypeError, ValueError):
        return "–"


@register.filter
def report_size_chart(class_sizes: dict) -> dict:
    """The release report's class sizes (after release only) as the size chart reads them."""
    class_sizes = class_sizes or {}
    return size_chart_from_bins(
        class_sizes.get("bins") or [], class_sizes.get("smallest_allowed", 1)
    )
