"""Server-side SVG: the 7-day needs and money charts, the day-by-day strip, the town map.

Plain functions from data to SVG text (no CDN, no build step, nothing runs in the browser).
Every string that comes from data is escaped; sizes are in viewBox units, so the drawings
scale to the width of a phone.
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
    return f"{day.month}/{day.day} 周{WEEKDAYS[day.weekday()]}"


# -- the 7-day line charts --------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    time: datetime
    stats: Mapping[str, float]


def line_chart(
    points: Sequence[Point],
    start: datetime,
    end: datetime,
    series: Sequence[str],
    *,
    low: float | None = 0,
    high: float | None = 100,
    height: int = 150,
    title: str = "",
) -> str:
    """A line per series over [start, end) with a gridline and label per day."""
    width, left, right, top, bottom = 640, 34, 8, 22, 22
    plot_w, plot_h = width - left - right, height - top - bottom
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
        return left + plot_w * min(1.0, max(0.0, (t - start).total_seconds() / span))

    def y(v: float) -> float:
        return top + plot_h * (1 - (v - lo) / (hi - lo))

    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    for frac in (0, 0.5, 1):
        v = lo + (hi - lo) * frac
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
        )
        out.append(
            f'<text x="{left - 4}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{v:.0f}</text>'
        )
    day = start
    while day < end:
        out.append(
            f'<line x1="{x(day):.1f}" x2="{x(day):.1f}" y1="{top}" y2="{top + plot_h}" class="grid"/>'
        )
        mid = min(day + timedelta(hours=12), end)
        out.append(
            f'<text x="{x(mid):.1f}" y="{height - 6}" class="tick" text-anchor="middle">{_day_label(day)}</text>'
        )
        day += timedelta(days=1)
    legend_x = left
    for s in series:
        colour = SERIES_COLOURS.get(s, "#666")
        out.append(f'<rect x="{legend_x}" y="6" width="10" height="10" rx="2" fill="{colour}"/>')
        out.append(
            f'<text x="{legend_x + 14}" y="15" class="legend">{escape(SERIES_NAMES.get(s, s))}</text>'
        )
        legend_x += 62
    if not points:
        out.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" class="empty" text-anchor="middle">暂无数据</text>'
        )
    for s in series:
        coords = [
            (x(p.time), y(float(p.stats[s])))
            for p in points
            if isinstance(p.stats.get(s), int | float)
        ]
        if not coords:
            continue
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
        colour = SERIES_COLOURS.get(s, "#666")
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" '
            f'stroke-linejoin="round" class="series series-{escape(s)}"/>'
        )
        cx, cy = coords[-1]
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{colour}"/>')
    out.append("</svg>")
    return "".join(out)


# -- the day-by-day strip -----------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime
    category: Category
    label: str


def day_strip(spans: Sequence[Span], days: Sequence[datetime]) -> str:
    """One row per day (local midnight in ``days``), 0–24 h across, a block per action."""
    width, left, right, top, row_h, gap = 640, 74, 8, 18, 18, 6
    plot_w = width - left - right
    height = top + len(days) * (row_h + gap) + 34
    out = [
        f'<svg class="chart strip" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="最近七天每天做了什么" xmlns="http://www.w3.org/2000/svg">'
    ]
    for hour in range(0, 25, 6):
        hx = left + plot_w * hour / 24
        out.append(
            f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{top - 4}" y2="{top + len(days) * (row_h + gap) - gap}" class="grid"/>'
        )
        out.append(
            f'<text x="{hx:.1f}" y="{top - 6}" class="tick" text-anchor="middle">{hour}:00</text>'
        )
    for row, day in enumerate(days):
        ry = top + row * (row_h + gap)
        day_end = day + timedelta(days=1)
        out.append(
            f'<text x="{left - 6}" y="{ry + 13}" class="tick" text-anchor="end">{_day_label(day)}</text>'
        )
        out.append(f'<rect x="{left}" y="{ry}" width="{plot_w}" height="{row_h}" class="plot"/>')
        for span in spans:
            s, e = max(span.start, day), min(span.end, day_end)
            if e <= s:
                continue
            x0 = left + plot_w * (s - day).total_seconds() / 86400
            w = max(0.8, plot_w * (e - s).total_seconds() / 86400)
            tip = f"{span.start:%H:%M}–{span.end:%H:%M} {span.label}"
            out.append(
                f'<rect x="{x0:.1f}" y="{ry}" width="{w:.1f}" height="{row_h}" '
                f'fill="{span.category.colour}" class="cat-{span.category.id}"><title>{escape(tip)}</title></rect>'
            )
    ly = top + len(days) * (row_h + gap) + 12
    lx = left
    for cat in CATEGORIES:
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" rx="2" fill="{cat.colour}"/>')
        out.append(f'<text x="{lx + 13}" y="{ly + 9}" class="legend">{cat.name}</text>')
        lx += 58
    out.append("</svg>")
    return "".join(out)


# -- the town map ---------------------------------------------------------------------------------

AREA_ANCHORS: dict[str, tuple[float, float]] = {
    "家": (95, 215),
    "星见丘高校": (95, 70),
    "商业区": (300, 62),
    "公园周边": (300, 230),
    "海岸": (530, 200),
}
"""Where each district of 羽浦町 sits; unknown districts go along the right and bottom."""
_SPARE_ANCHORS = [(530, 70), (530, 320), (95, 330), (300, 340)]
_PLACE_W, _PLACE_H, _COL_GAP, _ROW_GAP = 82, 34, 12, 12


def _layout(town: Town) -> dict[str, tuple[float, float]]:
    areas: dict[str, list[str]] = {}
    for place in town.places.values():
        areas.setdefault(place.area, []).append(place.id)
    spare = iter(_SPARE_ANCHORS)
    pos: dict[str, tuple[float, float]] = {}
    for n, (area, ids) in enumerate(areas.items()):
        ax, ay = AREA_ANCHORS.get(area) or next(spare, (95 + 110 * n, 380))
        cols = 1 if len(ids) == 1 else 2 if len(ids) <= 4 else 3
        for i, pid in enumerate(ids):
            col, row = i % cols, i // cols
            px = ax + (col - (cols - 1) / 2) * (_PLACE_W + _COL_GAP)
            pos[pid] = (px, ay + row * (_PLACE_H + _ROW_GAP))
    return pos


def town_map(
    town: Town, here: str | None, open_state: Mapping[str, bool] | None = None, who: str = "她"
) -> str:
    """The town's districts with their places, the roads between districts, ``here`` highlighted.

    Places of one district are next door to each other, so only roads between districts are
    drawn, labelled with the walking minutes (a range when several places connect).
    """
    pos = _layout(town)
    open_state = open_state or {}
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    width = max(640, max(xs) + _PLACE_W / 2 + 20)
    height = max(ys) + _PLACE_H / 2 + 30
    out = [
        f'<svg class="map" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'aria-label="{escape(town.name)}地图" xmlns="http://www.w3.org/2000/svg">'
    ]
    members: dict[str, list[tuple[float, float]]] = {}
    area_of = {}
    for place in town.places.values():
        members.setdefault(place.area, []).append(pos[place.id])
        area_of[place.id] = place.area
    boxes = {}
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
        labels.append(
            f'<text x="{(ax + bx) / 2:.1f}" y="{(ay + by) / 2 + 4:.1f}" class="link-label" '
            f'text-anchor="middle">{text}</text>'
        )
    for area, (x0, y0, x1, y1) in boxes.items():
        out.append(
            f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" rx="12" class="area"/>'
        )
        out.append(
            f'<text x="{x0 + 10:.1f}" y="{y0 + 15:.1f}" class="area-name">{escape(area)}</text>'
        )
    out.extend(labels)
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
        out.append(
            f'<g class="marker"><circle cx="{px + _PLACE_W / 2 - 4:.1f}" cy="{py - _PLACE_H / 2 + 2:.1f}" r="9"/>'
            f'<text x="{px + _PLACE_W / 2 - 4:.1f}" y="{py - _PLACE_H / 2 + 6:.1f}" text-anchor="middle">★</text>'
            f"<title>{escape(who)}在这里</title></g>"
        )
    out.append("</svg>")
    return "".join(out)
