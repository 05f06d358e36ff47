"""Small server-rendered SVG charts: nothing is fetched, nothing runs in the browser."""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

ROW = 18
LABEL_WIDTH = 150


def _n(value: float) -> str:
    """Numbers are formatted before format_html, which escapes its arguments to strings."""
    return f"{value:.1f}"


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _short(label: str, limit: int = 22) -> str:
    label = str(label)
    return label if len(label) <= limit else label[: limit - 1] + "…"


@register.simple_tag
def bar_chart(pairs, width: int = 340, css: str = "", label: str = "") -> SafeString:
    """Horizontal bars for ``[[label, count], ...]``, labelled with their counts; ``label``
    names the chart for screen readers."""
    pairs = list(pairs or [])
    if not pairs:
        return mark_safe('<p class="muted">No values.</p>')
    top = max(count for _, count in pairs) or 1
    plot = width - LABEL_WIDTH - 60
    height = ROW * len(pairs) + 4
    rows = format_html_join(
        "",
        '<g transform="translate(0,{})"><title>{}: {}</title>'
        '<text x="{}" y="13" text-anchor="end" class="label">{}</text>'
        '<rect x="{}" y="3" width="{}" height="12" class="bar"></rect>'
        '<text x="{}" y="13" class="count">{}</text></g>',
        (
            (
                i * ROW,
                label,
                count,
                LABEL_WIDTH - 6,
                _short(label),
                LABEL_WIDTH,
                max(1, round(plot * count / top)),
                LABEL_WIDTH + max(1, round(plot * count / top)) + 4,
                count,
            )
            for i, (label, count) in enumerate(pairs)
        ),
    )
    return format_html(
        '<svg class="chart bars {}" width="{}" height="{}" viewBox="0 0 {} {}" role="img" '
        'aria-label="{}">{}</svg>',
        css,
        width,
        height,
        width,
        height,
        label or f"Bar chart of {len(pairs)} values",
        rows,
    )


@register.simple_tag
def size_histogram(
    bins, k: int, width: int = 620, height: int = 180, label: str = "k"
) -> SafeString:
    """Equivalence class sizes ``[[low, high, classes], ...]`` with a line at k (``label``
    names it: the smallest class the privacy models allow)."""
    bins = [b for b in (bins or []) if b[2] > 0] or list(bins or [])
    if not bins:
        return mark_safe('<p class="muted">No classes.</p>')
    left, bottom, top_pad = 40, 24, 10
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    x_max = max(b[1] for b in bins) + 1
    x_min = min(0, k - 1)
    span = max(1, x_max - x_min)
    y_max = max(b[2] for b in bins) or 1

    def x(v: float) -> float:
        return left + plot_w * (v - x_min) / span

    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" class="bar">'
        "<title>sizes {}–{}: {} classes</title></rect>",
        (
            (
                _n(x(low)),
                _n(top_pad + plot_h * (1 - n / y_max)),
                _n(max(1.0, x(high + 1) - x(low) - 1)),
                _n(plot_h * n / y_max),
                low,
                high,
                n,
            )
            for low, high, n in bins
        ),
    )
    return format_html(
        '<svg class="chart histogram" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">'
        "<title>Equivalence class sizes</title>{bars}"
        '<line x1="{kx}" x2="{kx}" y1="{t}" y2="{b}" class="threshold"></line>'
        '<text x="{kx}" y="{t}" dx="4" dy="10" class="threshold-label">{label} = {k}</text>'
        '<line x1="{l}" x2="{r}" y1="{b}" y2="{b}" class="axis"></line>'
        '<text x="{l}" y="{h}" dy="-6" class="axis-label">{xmin}</text>'
        '<text x="{r}" y="{h}" dy="-6" text-anchor="end" class="axis-label">{xmax} rows</text>'
        '<text x="{l}" y="{t}" dx="-4" dy="8" text-anchor="end" class="axis-label">{ymax}</text>'
        "</svg>",
        w=width,
        h=height,
        bars=bars,
        kx=_n(x(k)),
        k=k,
        label=label,
        t=top_pad,
        b=top_pad + plot_h,
        l=left,
        r=left + plot_w,
        xmin=x_min,
        xmax=x_max - 1,
        ymax=y_max,
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
    row = 12
    total_height = row * len(bins)
    bars = format_html_join(
        "",
        '<g><rect x="0" y="{}" width="{}" height="{}"></rect><text x="{}" y="{}">{}</text>'
        "<title>{}: {}</title></g>",
        (
            (
                i * row,
                f"{max(b['count'] / peak * width * 0.55, 1):.1f}",
                row - 2,
                f"{b['count'] / peak * width * 0.55 + 3:.1f}",
                i * row + row - 3,
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
