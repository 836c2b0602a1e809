"""Server-side drawings: the 7-day needs and money charts, the day-by-day strip, the town map.

Plain functions from data to SVG and HTML text (no CDN, no build step, nothing runs in the
browser). Every string that comes from data is escaped. Text keeps its size from phone to
laptop: the charts and the strip are HTML labels around SVG that stretches to the width, and the
map comes in two drawings, `WIDE` and `NARROW`, the page showing the one that fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import escape

from yuiju.world.town import Town

WEEKDAYS = "一二三四五六日"

SERIES_COLOURS = {"stamina": "#e0793a", "satiety": "#3f9d5b", "mood": "#d0457a", "money": "#c9a227"}
SERIES_NAMES = {"stamina": "体力", "satiety": "饱腹", "mood": "心情", "money": "金币"}


@dataclass(frozen=True)
class Category:
    id: str
    name: str
    colour: str


CATEGORIES: tuple[Category, ...] = (
    Category("sleep", "睡眠", "#4b5b9c"),
    Category("school", "上学", "#3a8fd0"),
    Category("work", "打工", "#8a5a2b"),
    Category("meal", "吃饭", "#f0a43a"),
    Category("study", "学习", "#6cb4e8"),
    Category("leisure", "休闲", "#e56b8f"),
    Category("move", "路上", "#a7a7a7"),
    Category("rest", "休息", "#9ccf9f"),
    Category("other", "其他", "#cfc6d8"),
)
"""Strip colours, in priority order: an action tagged both school and study counts as school."""
_CATEGORY = {c.id: c for c in CATEGORIES}
_TAG_ALIASES = {"sleep_more": "sleep", "idle": "rest", "wake": "rest"}


def category_of(tags: Iterable[str]) -> Category:
    """The strip category of an action with these catalogue tags."""
    found = {_TAG_ALIASES.get(t, t) for t in tags}
    for cat in CATEGORIES:
        if cat.id in found:
            return cat
    return _CATEGORY["other"]


def _day_label(day: datetime) -> str:
    """``9/1 周二``: the date part in its own span, so a narrow chart can put it over the weekday."""
    return f'<span class="d">{day.month}/{day.day}</span> 周{WEEKDAYS[day.weekday()]}'


def _legend(keys: Iterable[tuple[str, str]]) -> str:
    return (
        '<div class="legend">'
        + "".join(
            f'<span class="key"><i style="background: {colour}"></i>{escape(name)}</span>'
            for name, colour in keys
        )
        + "</div>"
    )


def _pct(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") + "%"


# -- the 7-day line charts --------------------------------------------------------------------
# The plot is an SVG stretched to its box (preserveAspectRatio="none"; strokes keep their width);
# axes and legend are HTML around it. Text then keeps its CSS size at any width: a drawing that
# scales as a whole shrinks its labels to a few pixels on a phone and blows them up on a laptop.


@dataclass(frozen=True)
class Point:
    time: datetime
    stats: Mapping[str, float]


PLOT_W, PLOT_H = 1000, 100
"""The plot's own units: x in thousandths of the time span, y in hundredths of the value range."""


def line_chart(
    points: Sequence[Point],
    start: datetime,
    end: datetime,
    series: Sequence[str],
    *,
    low: float | None = 0,
    high: float | None = 100,
    height: int = 140,
    title: str = "",
) -> str:
    """A line per series over [start, end), ``height`` px tall, with a gridline and label per
    day and the value at the bottom, middle and top."""
    values = [
        float(p.stats[s]) for p in points for s in series if isinstance(p.stats.get(s), int | float)
    ]
    lo = low if low is not None else min(values, default=0)
    hi = high if high is not None else max(values, default=1)
    if hi - lo < 1:
        hi = lo + 1
    if low is None:  # a little air under and over a free scale
        pad = (hi - lo) * 0.1
        lo, hi = max(0.0, lo - pad), hi + pad
    span = (end - start).total_seconds() or 1.0

    def x(t: datetime) -> float:
        return PLOT_W * min(1.0, max(0.0, (t - start).total_seconds() / span))

    def y(v: float) -> float:
        return PLOT_H * (1 - (v - lo) / (hi - lo))

    plot = [
        f'<svg class="chart" viewBox="0 0 {PLOT_W} {PLOT_H}" preserveAspectRatio="none" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    y_ticks, x_ticks, dots = [], [], []
    for frac in (0, 0.5, 1):
        v = lo + (hi - lo) * frac
        plot.append(f'<line x1="0" x2="{PLOT_W}" y1="{y(v):.2f}" y2="{y(v):.2f}" class="grid"/>')
        y_ticks.append(f'<span class="tick" style="top: {_pct(y(v))}">{v:.0f}</span>')
    day = start
    while day < end:
        plot.append(
            f'<line x1="{x(day):.1f}" x2="{x(day):.1f}" y1="0" y2="{PLOT_H}" class="grid"/>'
        )
        mid = min(day + timedelta(hours=12), end)
        x_ticks.append(
            f'<span class="tick" style="left: {_pct(x(mid) / 10)}">{_day_label(day)}</span>'
        )
        day += timedelta(days=1)
    for s in series:
        coords = [
            (x(p.time), y(float(p.stats[s])))
            for p in points
            if isinstance(p.stats.get(s), int | float)
        ]
        if not coords:
            continue
        path = " ".join(f"{cx:.1f},{cy:.2f}" for cx, cy in coords)
        colour = SERIES_COLOURS.get(s, "#666")
        plot.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" '
            f'stroke-linejoin="round" vector-effect="non-scaling-stroke" '
            f'class="series series-{escape(s)}"/>'
        )
        cx, cy = coords[-1]
        dots.append(
            f'<i class="dot" style="left: {_pct(cx / 10)}; top: {_pct(cy)}; background: {colour}"></i>'
        )
    plot.append("</svg>")
    empty = "" if points else '<span class="empty">暂无数据</span>'
    legend = _legend((SERIES_NAMES.get(s, s), SERIES_COLOURS.get(s, "#666")) for s in series)
    return (
        f'<div class="linechart" role="img" aria-label="{escape(title)}">{legend}'
        f'<div class="y-axis">{"".join(y_ticks)}</div>'
        f'<div class="plot" style="height: {height}px">{"".join(plot)}{"".join(dots)}{empty}</div>'
        f'<div class="x-axis">{"".join(x_ticks)}</div></div>'
    )


# -- the day-by-day strip -----------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime
    category: Category
    label: str


DAY_MINUTES = 24 * 60


def day_strip(spans: Sequence[Span], days: Sequence[datetime]) -> str:
    """One row per day (local midnight in ``days``), 0–24 h across, a block per action; the
    day labels and hours are HTML beside and above bars that stretch to the width."""
    hours = "".join(
        f'<span class="tick" style="left: {_pct(100 * hour / 24)}">{hour}:00</span>'
        for hour in range(0, 25, 6)
    )
    rows = []
    for day in days:
        day_end = day + timedelta(days=1)
        bar = [
            f'<svg class="bar" viewBox="0 0 {DAY_MINUTES} 1" preserveAspectRatio="none" '
            'xmlns="http://www.w3.org/2000/svg">'
        ]
        for span in spans:
            s, e = max(span.start, day), min(span.end, day_end)
            if e <= s:
                continue
            x0 = (s - day).total_seconds() / 60
            w = max(1.0, (e - s).total_seconds() / 60)
            tip = f"{span.start:%H:%M}–{span.end:%H:%M} {span.label}"
            bar.append(
                f'<rect x="{x0:.1f}" y="0" width="{w:.1f}" height="1" '
                f'fill="{span.category.colour}" class="cat-{span.category.id}"><title>{escape(tip)}</title></rect>'
            )
        bar += [
            f'<line x1="{m}" x2="{m}" y1="0" y2="1" class="hour"/>'
            for m in range(360, DAY_MINUTES, 360)
        ]
        bar.append("</svg>")
        rows.append(f'<span class="tick day">{_day_label(day)}</span>{"".join(bar)}')
    legend = _legend((cat.name, cat.colour) for cat in CATEGORIES)
    return (
        '<div class="strip" role="img" aria-label="最近七天每天做了什么">'
        f'<span></span><div class="hours">{hours}</div>{"".join(rows)}{legend}</div>'
    )


# -- the town map ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MapLayout:
    """Where each district of the town sits in one drawing of the map."""

    anchors: Mapping[str, tuple[float, float]]
    """The centre of a district's first row of places; unknown districts go to ``spare``."""
    spare: Sequence[tuple[float, float]]
    columns: int
    """Places per row in a district, at most."""
    width: float
    """The drawing's width (its text then shows at its CSS size × the width it gets / this)."""


WIDE = MapLayout(
    anchors={
        "家": (95, 215),
        "星见丘高校": (95, 70),
        "商业区": (330, 70),
        "公园周边": (330, 250),
        "海岸": (575, 215),
    },
    spare=[(575, 70), (575, 330), (95, 330), (330, 360)],
    columns=3,
    width=670,
)
"""A laptop's map: 羽浦町 as it lies, school and home on the left, the coast on the right."""
NARROW = MapLayout(
    anchors={
        "星见丘高校": (68, 62),
        "商业区": (258, 62),
        "家": (68, 228),
        "公园周边": (112, 330),
        "海岸": (292, 330),
    },
    spare=[(292, 450), (68, 450), (200, 560)],
    columns=2,
    width=360,
)
"""A phone's map: the same districts stacked, two places to a row, so its text is not shrunk."""
_PLACE_W, _PLACE_H, _COL_GAP, _ROW_GAP = 82, 34, 12, 12


def _layout(town: Town, layout: MapLayout) -> dict[str, tuple[float, float]]:
    areas: dict[str, list[str]] = {}
    for place in town.places.values():
        areas.setdefault(place.area, []).append(place.id)
    spare = iter(layout.spare)
    pos: dict[str, tuple[float, float]] = {}
    for n, (area, ids) in enumerate(areas.items()):
        ax, ay = layout.anchors.get(area) or next(spare, (95 + 110 * n, 480))
        cols = min(layout.columns, 1 if len(ids) == 1 else 2 if len(ids) <= 4 else 3)
        for i, pid in enumerate(ids):
            col, row = i % cols, i // cols
            px = ax + (col - (cols - 1) / 2) * (_PLACE_W + _COL_GAP)
            pos[pid] = (px, ay + row * (_PLACE_H + _ROW_GAP))
    return pos


Box = tuple[float, float, float, float]


def _leave(box: Box, toward: tuple[float, float]) -> float:
    """How far along the way from ``box``'s centre to ``toward`` (0–1) the way leaves the box."""
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    dx, dy = toward[0] - cx, toward[1] - cy
    limits = [(x1 - x0) / 2 / abs(dx) if dx else float("inf")]
    limits.append((y1 - y0) / 2 / abs(dy) if dy else float("inf"))
    return min(1.0, *limits)


def town_map(
    town: Town,
    here: str | None,
    open_state: Mapping[str, bool] | None = None,
    who: str = "她",
    *,
    layout: MapLayout = WIDE,
) -> str:
    """The town's districts with their places, the roads between districts, ``here`` highlighted.

    Places of one district are next door to each other, so only roads between districts are
    drawn, labelled with the walking minutes (a range when several places connect) halfway along
    the stretch between the two districts, on top of everything.
    """
    pos = _layout(town, layout)
    open_state = open_state or {}
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    width = max(layout.width, max(xs) + _PLACE_W / 2 + 20)
    height = max(ys) + _PLACE_H / 2 + 20
    narrow = " narrow" if layout is not WIDE else ""
    out = [
        f'<svg class="map{narrow}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'aria-label="{escape(town.name)}地图" xmlns="http://www.w3.org/2000/svg">'
    ]
    members: dict[str, list[tuple[float, float]]] = {}
    area_of = {}
    for place in town.places.values():
        members.setdefault(place.area, []).append(pos[place.id])
        area_of[place.id] = place.area
    boxes: dict[str, Box] = {}
    for area, points in members.items():
        x0 = min(p[0] for p in points) - _PLACE_W / 2 - 8
        x1 = max(p[0] for p in points) + _PLACE_W / 2 + 8
        y0 = min(p[1] for p in points) - _PLACE_H / 2 - 22
        y1 = max(p[1] for p in points) + _PLACE_H / 2 + 8
        boxes[area] = (x0, y0, x1, y1)
    roads: dict[tuple[str, str], list[int]] = {}
    for link in town.links:
        a, b = area_of.get(link.a), area_of.get(link.b)
        if a is None or b is None or a == b:
            continue
        roads.setdefault((min(a, b), max(a, b)), []).append(link.minutes)
    labels = []
    for (a, b), minutes in roads.items():
        (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = boxes[a], boxes[b]
        ax, ay, bx, by = (ax0 + ax1) / 2, (ay0 + ay1) / 2, (bx0 + bx1) / 2, (by0 + by1) / 2
        lo, hi = min(minutes), max(minutes)
        text = f"{lo}分" if lo == hi else f"{lo}–{hi}分"
        out.append(
            f'<line x1="{ax:.1f}" y1="{ay:.1f}" x2="{bx:.1f}" y2="{by:.1f}" class="link">'
            f"<title>{escape(a)} ↔ {escape(b)}：步行{text}</title></line>"
        )
        # halfway along the stretch outside both districts, not under a place
        t0, t1 = _leave(boxes[a], (bx, by)), 1 - _leave(boxes[b], (ax, ay))
        t = (t0 + t1) / 2 if t0 < t1 else 0.5
        labels.append(
            f'<text x="{ax + (bx - ax) * t:.1f}" y="{ay + (by - ay) * t + 4:.1f}" '
            f'class="link-label" text-anchor="middle">{text}</text>'
        )
    for area, (x0, y0, x1, y1) in boxes.items():
        out.append(
            f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" rx="12" class="area"/>'
        )
        out.append(
            f'<text x="{x0 + 10:.1f}" y="{y0 + 15:.1f}" class="area-name">{escape(area)}</text>'
        )
    for place in town.places.values():
        px, py = pos[place.id]
        classes = ["place"]
        if place.id == here:
            classes.append("here")
        if open_state.get(place.id) is False:
            classes.append("closed")
        out.append(
            f'<g class="{" ".join(classes)}" data-place="{escape(place.id)}">'
            f'<rect x="{px - _PLACE_W / 2:.1f}" y="{py - _PLACE_H / 2:.1f}" width="{_PLACE_W}" height="{_PLACE_H}" rx="8"/>'
            f'<text x="{px:.1f}" y="{py + 5:.1f}" text-anchor="middle">{escape(place.name)}</text>'
            + (
                f"<title>{escape(place.name)}（已关门）</title>"
                if open_state.get(place.id) is False
                else ""
            )
            + "</g>"
        )
    if here in pos:
        px, py = pos[here]
        mx, my = px + _PLACE_W / 2 - 3, py - _PLACE_H / 2 - 1  # on the corner, clear of the name
        out.append(
            f'<g class="marker"><circle cx="{mx:.1f}" cy="{my:.1f}" r="10"/>'
            f'<text x="{mx:.1f}" y="{my + 4.5:.1f}" text-anchor="middle">★</text>'
            f"<title>{escape(who)}在这里</title></g>"
        )
    out.extend(labels)
    out.append("</svg>")
    return "".join(out)
