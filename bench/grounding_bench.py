"""Benchmark her words against her life (issue 30): how many invented claims reach users, and how
many true answers are held back.

    python bench/grounding_bench.py [--seeds 1 2] [--questions 120] [--rates 0 0.5 1]

For each seed: the three classmates live two days (`world.simulate.simulate`, the offline utility
policy, seeded, 2026-08-31 14:00 → 2026-09-02 14:00, with a piece of news told to 悠酱), kept on
disk. Then 悠酱 is asked ``--questions`` questions in a group, each a conversation of its own,
through the real chat pipeline (`message.bot.build_service`, with memory on a hashing embedder so
the grounding check reads her episodes). The questions are drawn from templates of seven kinds
(doing, place, food, purchase, weather, person, news) with random wording around them.

Her answers come from a scripted model (`FunctionChatModel`): one claim on the question's kind,
sometimes a second of another kind, each invented with probability ``rate``:

- a true claim is phrased from the bench's own reading of her record (episodes of today and
  yesterday, what she is doing now, the weather, her meetings and news), in varied wording
  (with and without 在, a time of day or a clock hour, 了 or 过, 正在 / …呢);
- an invented claim comes from a broad random generator of everyday Chinese (activities, places,
  dishes, purchases, weather, people and news, each from pools of words and sentence frames with
  random times and fillers); the pools are the bench's own, written apart from the check's
  lexicon, and an invented claim that happens to be true of her record is drawn again.

When the check sends an answer back, the model writes a new one at the same rate. A claim is
"sent" when the answer that reached the group is the draft that made it. Reported per rate: claims
sent and how many of them were invented, answers sent unchanged (the first draft as it was),
true answers held back (all their claims true, not sent), fallback lines, and per kind; and the
latency of a whole turn (the scripted model answers at once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chatkit import RecordingSender
from yuiju.config import load_config
from yuiju.llm import FunctionChatModel
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.memory.service import build_memory, open_semantic
from yuiju.message.bot import build_service
from yuiju.message.model import Conversation, Entry
from yuiju.storage.keys import Keys
from yuiju.world.clock import SimClock
from yuiju.world.runtime import open_stores
from yuiju.world.simulate import simulate
from yuiju.world.store import StateStore
from yuiju.world.town import HAURA

CHARACTERS = ["yuiju", "kaede", "chika"]
ME = "yuiju"
START = "2026-08-31T14:00"
DAYS = 2
GROUP = 100
ASKER, ASKER_NAME = "qq:456", "小明"
XIAOLIN = {"kind": "person", "id": "qq:123", "name": "小林"}
NEWS = {
    "type": "tell_news",
    "character_id": ME,
    "by": XIAOLIN,
    "text": "小林下周要搬家",
    "about": XIAOLIN,
}
TZ = ZoneInfo("Asia/Shanghai")
KINDS = ("doing", "place", "food", "purchase", "weather", "person", "news")

# -- her record, as the bench reads it ------------------------------------------------------------


@dataclass(frozen=True)
class Doing:
    action: str
    name: str
    place: str
    """A place id."""
    start: datetime


@dataclass
class Life:
    now: datetime
    days: dict[int, list[Doing]]
    """0 today, 1 yesterday: her behavior episodes, oldest first."""
    running: Doing | None
    weather: tuple[str, str] | None
    met: dict[int, set[str]]
    """Day → the names of the characters she talked with."""
    news: list[tuple[str, str]]
    """(who told her, what)."""
    texts: dict[int, str] = field(default_factory=dict)
    """Day → what her episodes say happened (summaries and results)."""

    def says(self, word: str) -> bool:
        """Whether her record of today or yesterday says ``word`` (看了会儿小说: an invented claim
        about a novel would be true)."""
        return any(word in t for t in self.texts.values())

    def did(self, day: int, word: str) -> bool:
        return any(word in d.name for d in self.days.get(day, []))

    def visited(self, day: int) -> set[str]:
        return {d.place for d in self.days.get(day, [])}


def local(at: datetime) -> datetime:
    return at.astimezone(TZ)


async def read_life(history: Any, redis: Any, now: datetime) -> Life:
    repo = EpisodeRepo(history)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days: dict[int, list[Doing]] = {0: [], 1: []}
    texts = {0: "", 1: ""}
    met: dict[int, set[str]] = {0: set(), 1: set()}
    found: list[Episode] = await repo.between(ME, midnight - timedelta(days=1), now)
    for e in found:
        day = 0 if e.time >= midnight else 1
        b = e.behavior()
        texts[day] += e.summary + (b.result if b else "")
        if b is not None and e.status == "completed":
            days[day].append(Doing(b.action, b.name, b.place, local(e.time)))
        elif (talk := e.conversation()) is not None and talk.partners:
            met[day] |= {w.name for w in talk.partners}
    store = StateStore(redis, Keys())
    char = await store.load_character(ME)
    world = await store.load_world()
    running = None
    if char is not None and char.running is not None:
        r = char.running
        running = Doing(r.action_id, r.name, r.place, local(r.started_at))
    weather = (world.weather.type, world.weather.temperature) if world and world.weather else None
    news = [(n.source.name, n.text) for n in char.social.news] if char is not None else []
    return Life(now, days, running, weather, met, news, texts)


# -- phrasing ---------------------------------------------------------------------------------------

_PLACE_END = "家店园池社边校馆堂室市站岸厅场"


def split_name(name: str) -> tuple[str, str]:
    """'在公园散步' → ('公园', '散步'); '打招呼' → ('', '打招呼')."""
    if name.startswith("在"):
        for i in range(min(7, len(name) - 1), 1, -1):
            if name[i - 1] in _PLACE_END:
                return name[1:i], name[i:]
    if name.startswith("一起在"):
        place, act = split_name(name[2:])
        return place, "一起" + act
    return "", name


def period(at: datetime) -> str:
    h = at.hour
    return (
        "凌晨"
        if h < 5
        else "早上"
        if h < 9
        else "上午"
        if h < 11
        else "中午"
        if h < 13
        else "下午"
        if h < 17
        else "傍晚"
        if h < 19
        else "晚上"
    )


def done_form(act: str, rng: random.Random) -> str:
    """'散步' → '散了步' / '散步了'; two-character verb-object words take 了 inside sometimes."""
    if len(act) == 2 and act[1] not in "了" and rng.random() < 0.4:
        return act[0] + "了" + act[1]
    return act + rng.choice(["了", "了", "过了"])


def meal_of(at: datetime) -> str:
    return "早饭" if at.hour < 10 else "午饭" if at.hour < 15 else "晚饭"


WEATHER_TRUE = {
    "晴": ["今天是晴天", "外面天气很好", "阳光挺好的"],
    "多云": ["今天多云", "云有点多"],
    "阴": ["今天阴天", "天阴阴的"],
    "小雨": ["外面在下小雨", "今天下雨了"],
    "雨": ["外面在下雨", "今天下雨了", "雨一直下"],
    "雷雨": ["外面在下雷雨", "今天下雨了"],
    "雪": ["外面在下雪", "今天下雪了"],
    "雾": ["今天起雾了", "外面雾好大"],
}
TEMP_TRUE = {
    "严寒": ["冷死了", "好冷啊"],
    "寒冷": ["好冷", "有点冷"],
    "清凉": ["凉凉的", "有点凉快"],
    "舒适": ["挺舒服的", ""],
    "温暖": ["挺暖和的", ""],
    "炎热": ["好热啊", "热死了"],
}


def true_claim(kind: str, life: Life, rng: random.Random, names: list[str]) -> str | None:
    """A true claim of ``kind`` from her record, in one of several phrasings."""
    today, yesterday = life.days.get(0, []), life.days.get(1, [])
    moves = ("go_", "从")
    if kind == "doing":
        options: list[str] = []
        if life.running is not None:
            place, act = split_name(life.running.name)
            where = HAURA.place_name(life.running.place)
            options += [
                # 在学校上课 → 现在在学校上课 (not 现在正在在…)
                f"现在{life.running.name}"
                if life.running.name.startswith("在")
                else f"现在正在{life.running.name}",
                f"在{place or where}{act}呢" if place else f"正在{act}呢",
                f"这会儿在{act}呢",
            ]
        for word, doings in (("今天", today), ("昨天", yesterday)):
            real = [
                d
                for d in doings
                if not d.action.startswith(moves) and d.action not in ("sleep", "idle")
            ]
            if real:
                d = rng.choice(real)
                place, act = split_name(d.name)
                options += [
                    f"{word}{period(d.start)}{d.name}了",
                    f"{word}{d.start.hour}点多的时候{d.name}",
                    f"{word}{period(d.start)}{place + done_form(act, rng) if place else done_form(act, rng)}",
                ]
        return rng.choice(options) if options else None
    if kind == "place":
        options = []
        if life.running is not None:
            where = HAURA.place_name(life.running.place)
            options += ["现在在家呢" if life.running.place == "home" else f"现在在{where}呢"]
        visited = sorted(life.visited(0) - {"home", ""})
        if visited:
            p = HAURA.place_name(rng.choice(visited))
            options += [f"今天去过{p}", f"今天去了{p}"]
        not_visited = sorted(set(HAURA.places) - life.visited(0) - {"home"})
        if not_visited:
            options.append(f"今天没去{HAURA.place_name(rng.choice(not_visited))}哦")
        return rng.choice(options) if options else None
    if kind == "food":
        meals = [d for d in today if re.search("吃|喝", d.name)]
        if not meals:
            return "今天还没吃东西呢"
        d = rng.choice(meals)
        place, act = split_name(d.name)
        return rng.choice(
            [
                f"{period(d.start)}{d.name}了",
                f"{meal_of(d.start)}吃过了",
                f"今天{d.start.hour}点{place + done_form(act, rng) if place else done_form(act, rng)}",
            ]
        )
    if kind == "purchase":
        bought = [d for d in today if "买" in d.name]
        if not bought:
            return rng.choice(["今天什么都没买", "今天没买东西哦"])
        d = rng.choice(bought)
        return f"今天{period(d.start)}{d.name.replace('买', '买了', 1)}"
    if kind == "weather":
        if life.weather is None:
            return None
        kind_, temp = life.weather
        words = rng.choice(WEATHER_TRUE[kind_])
        feel = rng.choice(TEMP_TRUE[temp])
        return words + ("，" + feel if feel else "")
    if kind == "person":
        for day, word in ((0, "今天"), (1, "昨天")):
            if life.met.get(day):
                who = rng.choice(sorted(life.met[day]))
                return rng.choice(
                    [f"{word}见到{who}了", f"{word}和{who}见面了", f"{word}遇到了{who}"]
                )
        who = rng.choice(names)
        return f"最近没见到{who}呢"
    if kind == "news":
        if life.news:
            src, text = rng.choice(life.news)
            return rng.choice([f"听{src}说{text}", f"{src}跟我说{text}"])
        return "最近没听说什么新鲜事"
    return None


# -- the inventing model: a broad generator of plausible everyday Chinese ----------------------

ACTS = [
    "写数学作业",
    "复习英语单词",
    "准备期中考试",
    "做物理习题",
    "背古诗",
    "学日语",
    "上网课",
    "喂流浪猫",
    "撸猫",
    "遛狗",
    "给金鱼换水",
    "听周杰伦的歌",
    "戴着耳机听歌",
    "练钢琴",
    "弹吉他",
    "唱K",
    "看电影",
    "追新出的剧",
    "看动漫",
    "刷短视频",
    "看直播",
    "读推理小说",
    "看漫画",
    "画水彩",
    "做手账",
    "拼乐高",
    "玩switch",
    "打游戏",
    "下象棋",
    "跑步",
    "做瑜伽",
    "打羽毛球",
    "骑车兜风",
    "放风筝",
    "游泳",
    "逛商场",
    "买衣服",
    "做蛋糕",
    "烤曲奇",
    "煮泡面",
    "包饺子",
    "收拾房间",
    "洗衣服",
    "给花浇水",
    "养多肉",
    "写小说",
    "拍照片",
    "和朋友视频",
    "泡温泉",
    "睡午觉",
    "写日记",
    "织围巾",
    "学做菜",
    "参加社团活动",
    "去补习班",
    "排练话剧",
    "练字",
    "在咖啡店打工",
    "在海边散步",
    "在水音池钓鱼",
    "去神社参拜",
    "在家做饭",
    "在图书馆自习",
    "在公园散步",
    "在家写作业",
    "在家看书",
]
"""Everyday doings; the last ones are of her world (drawn only when her record lacks them)."""
IN_WORLD = {
    "在咖啡店打工": "打工",
    "在海边散步": "海边",
    "在水音池钓鱼": "钓鱼",
    "去神社参拜": "参拜",
    "在家做饭": "做饭",
    "在图书馆自习": "自习",
    "在公园散步": "公园",
    "在家写作业": "作业",
    "在家看书": "看书",
}
PLACES = [
    "图书馆",
    "奶茶店",
    "商场",
    "书店",
    "河边",
    "游乐园",
    "电影院",
    "学校天台",
    "车站前的面包店",
    "便利店",
    "朋友家",
    "花店",
    "甜品店",
    "体育馆",
    "海边",
    "结灯神社",
    "超市",
    "南风公园",
    "薄暮咖啡",
    "日和食堂",
    "小町商店",
    "美术馆",
    "水族馆",
    "外婆家",
]
IN_TOWN = {
    "海边": "coast",
    "结灯神社": "shrine",
    "超市": "supermarket",
    "南风公园": "park",
    "薄暮咖啡": "cafe",
    "日和食堂": "diner",
    "小町商店": "shop",
}
FOODS = [
    "草莓蛋糕",
    "拉面",
    "寿司",
    "炸鸡",
    "汉堡",
    "饺子",
    "麻辣烫",
    "冰淇淋",
    "关东煮",
    "章鱼烧",
    "三明治",
    "水果沙拉",
    "烤红薯",
    "糖葫芦",
    "牛肉面",
    "蛋包饭",
    "鳗鱼饭",
    "炒饭",
    "披萨",
    "可丽饼",
    "抹茶拿铁",
    "热可可",
    "豆浆油条",
    "小笼包",
    "烤串",
    "酸辣粉",
    "奶油泡芙",
    "布朗尼",
    "西瓜",
    "芒果",
    "葡萄",
    "一碗粥",
    "珍珠奶茶",
    "柠檬茶",
    "咖喱饭",
    "乌冬面",
]
THINGS = [
    "一本漫画",
    "新的笔记本",
    "一支口红",
    "一个发卡",
    "一袋苹果",
    "一盒草莓",
    "新耳机",
    "一件毛衣",
    "一套文具",
    "一束花",
    "一盆多肉",
    "一双运动鞋",
    "一本杂志",
    "明信片",
    "一个玩偶",
    "彩色铅笔",
    "一条围巾",
    "电影票",
    "新的手机壳",
    "一瓶香水",
]
NAMES = ["小美", "阿杰", "同桌", "班长", "凯", "小李", "妈妈", "隔壁的奶奶", "学姐", "表妹", "美咲"]
EVENTS = [
    "学校要放假了",
    "她要转学了",
    "下周有烟花大会",
    "商店街新开了一家奶茶店",
    "他考了满分",
    "她养了一只猫",
    "明天要停电",
    "班里要组织春游",
    "车站那边在修路",
    "他要去东京了",
]
WEATHER_FALSE = {
    "wet": ["今天阳光超好", "天气晴朗，万里无云", "今天天气不错", "太阳好大"],
    "dry": ["外面在下雨", "今天下大雨了", "下雪了", "雨下个不停"],
    "hot": ["今天好冷", "冷得发抖"],
    "cold": ["今天好热", "热得出汗", "今天暖洋洋的"],
}
HELD_OUT = {
    "doing": [
        "整理了书架",
        "去上了钢琴课",
        "在阳台晒太阳",
        "和闺蜜煲电话粥",
        "做了一下午的数独",
        "学着做寿司",
        "在楼下打篮球",
        "去医院看牙",
        "帮邻居搬东西",
        "练了会儿毛笔字",
        "在背化学方程式",
        "改了作文",
        "把旧衣服捐了",
        "在网上上了节美术课",
        "去参加了志愿活动",
        "剪了头发",
        "在宿舍追番",
        "在看综艺笑得停不下来",
        "和表姐逛夜市",
        "在玩猫咪咖啡馆的小游戏",
    ],
    "place": [
        "体育场",
        "夜市",
        "牙科诊所",
        "市图书馆",
        "表姐家",
        "步行街",
        "游泳馆",
        "江边",
        "天文馆",
        "美甲店",
        "文具店",
        "少年宫",
    ],
    "food": [
        "酸菜鱼",
        "螺蛳粉",
        "烤冷面",
        "芝士焗饭",
        "杨枝甘露",
        "手抓饼",
        "肉夹馍",
        "卤肉饭",
        "草莓大福",
        "提拉米苏",
        "绿豆汤",
        "炸酱面",
    ],
    "purchase": ["一顶渔夫帽", "两本练习册", "一副耳环", "一个保温杯", "一盏台灯", "一只毛绒兔"],
    "weather": ["今天晴空万里", "外面风和日丽", "今天闷得要命", "外头飘着雪花", "今天雾蒙蒙的"],
    "person": ["小雨", "佳佳", "王老师", "邻居阿姨", "前桌", "堂哥"],
    "news": ["食堂要涨价了", "她下个月出国", "学校下周运动会", "他谈恋爱了", "图书馆要装修"],
}
"""A second inventing model, written once for a held-out run and never tuned against: other
doings, places, dishes, purchases, weather, people and news, in other frames."""
HELD_OUT_WEATHER = {
    "今天晴空万里": {"晴"},
    "外面风和日丽": {"晴"},
    "今天闷得要命": {"炎热"},
    "外头飘着雪花": {"雪"},
    "今天雾蒙蒙的": {"雾"},
}
"""The weather that would make each held-out weather claim true (it is drawn again then)."""

TODAY_WORDS = ["今天", "刚才", "刚刚", "早上", "上午", "中午", "下午", "", "今天下午", "一大早"]
FILLERS = ["", "", "嘿嘿，", "嗯……", "诶，", "哈哈，", "跟你说，"]
ENDS = ["", "", "～", "！", "，超开心", "，好累", "，还挺有意思的", "呢"]


@dataclass
class Claim:
    kind: str
    text: str
    invented: bool


def held_out_claim(kind: str, life: Life, rng: random.Random, names: list[str]) -> str:
    """A false claim of ``kind`` from `HELD_OUT`, in frames the main generator does not use."""
    pool = HELD_OUT[kind]
    when = rng.choice(
        ["今儿", "今天上午", "中午那会儿", "刚才", "", "下午三点多", "昨儿个", "昨天傍晚"]
    )
    item = rng.choice(pool)
    if kind == "doing":
        return rng.choice([f"{when}{item}", f"我{when}{item}，好充实", f"其实{when}{item}啦"])
    if kind == "place":
        return rng.choice([f"{when}跑了一趟{item}", f"{when}在{item}转了转", f"我这会儿在{item}"])
    if kind == "food":
        return rng.choice([f"{when}吃到了{item}", f"{when}点了一份{item}", f"我{when}喝了碗{item}"])
    if kind == "purchase":
        return rng.choice(
            [f"{when}入手了{item}", f"{when}给自己买了{item}", f"我{when}买下了{item}"]
        )
    if kind == "weather":
        true_of = HELD_OUT_WEATHER[item]
        if life.weather is not None and true_of & set(life.weather):
            others = [w for w in pool if not HELD_OUT_WEATHER[w] & set(life.weather)]
            return rng.choice(others)
        return item
    if kind == "person":
        return rng.choice(
            [f"{when}{item}约我出去玩了", f"{when}碰见{item}了", f"我{when}跟{item}一块儿吃了饭"]
        )
    who = rng.choice(HELD_OUT["person"])
    return rng.choice([f"{who}说{item}", f"{who}刚告诉我{item}", f"我听{who}讲{item}"])


def invented_claim(kind: str, life: Life, rng: random.Random, names: list[str]) -> str:
    """A false claim of ``kind``: random wording over the bench's pools, redrawn while it happens
    to be true of her record."""
    for _ in range(50):
        when = rng.choice(TODAY_WORDS)
        if kind == "doing":
            act = rng.choice(ACTS)
            if act in IN_WORLD and (life.did(0, IN_WORLD[act]) or life.did(1, IN_WORLD[act])):
                continue
            if life.says(act[-2:]):
                continue
            text = rng.choice(
                [
                    f"{when}{act}了",
                    f"{when}一直在{act}",
                    f"现在正在{act}",
                    f"在{act}呢" if not act.startswith("在") else f"{act}呢",
                    f"昨天{act}了",
                    f"{when}{act}了好久",
                ]
            )
        elif kind == "place":
            place = rng.choice(PLACES)
            if place in IN_TOWN and IN_TOWN[place] in life.visited(0) | life.visited(1):
                continue
            if place == "图书馆" and (life.did(0, place) or life.did(1, place)):
                continue  # her school's library
            if place == "海边" and life.running is not None and life.running.place == "coast":
                continue
            text = rng.choice(
                [
                    f"{when}去了{place}",
                    f"{when}在{place}待了好久",
                    f"现在在{place}呢",
                    f"刚从{place}回来",
                    f"昨天去{place}了",
                ]
            )
        elif kind == "food":
            food = rng.choice(FOODS)
            if life.says(food[:2]) or life.says(food[-2:]):
                continue
            text = rng.choice(
                [
                    f"{rng.choice(['早饭', '午饭', '中午', '刚才', '今天'])}吃了{food}",
                    f"{when}和朋友去吃了{food}",
                    f"刚喝了一杯{food}" if "茶" in food or "可可" in food else f"{when}尝了{food}",
                    f"昨天晚上吃的{food}",
                    f"在吃{food}呢",
                ]
            )
        elif kind == "purchase":
            thing = rng.choice(THINGS)
            if life.says(thing[-2:]):
                continue
            shop = rng.choice(["商场", "便利店", "车站前的小店", "网上", "文具店"])
            text = rng.choice(
                [f"{when}买了{thing}", f"{when}去{shop}买了{thing}", f"昨天买了{thing}"]
            )
        elif kind == "weather":
            if life.weather is None:
                return "今天天气不错"
            kind_, temp = life.weather
            wet = kind_ in ("小雨", "雨", "雷雨", "雪", "阴", "雾")
            pool = WEATHER_FALSE["wet" if wet else "dry"]
            if temp in ("炎热", "温暖"):
                pool = pool + WEATHER_FALSE["hot"]
            elif temp in ("严寒", "寒冷", "清凉"):
                pool = pool + WEATHER_FALSE["cold"]
            text = rng.choice(pool)
        elif kind == "person":
            pool = NAMES + [n for n in names if n not in life.met[0] | life.met[1]]
            who = rng.choice(pool)
            act = rng.choice(["逛街", "吃饭", "看电影", "写作业", "散步", "打游戏"])
            text = rng.choice(
                [
                    f"{when}和{who}一起{act}了",
                    f"{who}{when}来找我了",
                    f"{when}遇到了{who}",
                    f"昨天和{who}一起{act}",
                ]
            )
        else:  # news
            who = rng.choice(NAMES + names)
            event = rng.choice(EVENTS)
            text = rng.choice([f"听{who}说{event}", f"{who}跟我说{event}", f"{who}告诉我{event}"])
        return text
    return "今天去游乐园玩了"


# -- questions --------------------------------------------------------------------------------------

QUESTIONS = {
    "doing": [
        "你今天干嘛了",
        "在干嘛呢",
        "刚才在做什么",
        "昨天做了什么",
        "今天过得怎么样",
        "现在忙吗",
        "下午做了啥",
        "今天有什么好玩的事吗",
        "昨天过得怎么样",
        "早上干嘛去了",
    ],
    "place": [
        "你现在在哪",
        "今天去过超市吗",
        "昨天去公园了吗",
        "今天出门了吗",
        "去海边了吗",
        "现在在家吗",
        "今天去哪玩了",
        "在学校吗",
    ],
    "food": ["今天吃了什么", "早饭吃的啥", "午饭吃了吗", "昨天晚上吃了什么", "吃饭了没", "饿不饿"],
    "purchase": ["今天买了什么", "最近买过什么吗", "去商店买东西了吗", "有没有买零食"],
    "weather": ["今天天气怎么样", "外面下雨了吗", "冷不冷", "你那边天气好吗"],
    "person": [
        "最近见到枫了吗",
        "今天遇到谁了",
        "昨天和谁一起玩了",
        "千夏最近怎么样",
        "有朋友来找你吗",
    ],
    "news": ["最近有什么新鲜事", "听说什么八卦了吗", "有人跟你说什么了吗", "学校有什么消息吗"],
}
HELD_OUT_QUESTIONS = {
    "doing": ["今儿都忙啥了", "这会儿干嘛呢", "上午过得咋样", "昨儿干了些啥"],
    "place": ["你人在哪儿", "今天跑哪儿去了", "昨天出门没"],
    "food": ["中饭吃的啥", "今天吃好吃的了吗", "喝过什么没"],
    "purchase": ["今天有没有剁手", "买啥好东西了"],
    "weather": ["外头天咋样", "今天热吗"],
    "person": ["今天见着谁了", "最近跟谁玩得多"],
    "news": ["有啥新闻没", "最近听到啥事了"],
}
"""The held-out run's questions: other wording."""
OPENERS = ["", "", "悠酱，", "诶悠酱，", "悠酱悠酱，", "问你个事，"]
CLOSERS = ["", "？", "？", "呀？", "～", "?"]


def questions(n: int, rng: random.Random, *, held_out: bool = False) -> list[tuple[str, str]]:
    asked = HELD_OUT_QUESTIONS if held_out else QUESTIONS
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        text = rng.choice(OPENERS) + rng.choice(asked[kind]) + rng.choice(CLOSERS)
        out.append((text, kind))
    return out


# -- the scripted model ----------------------------------------------------------------------------


@dataclass
class Draft:
    claims: list[Claim]
    text: str
    feedback: str = ""
    """What the check sent back, when it did."""


@dataclass
class Script:
    life: Life
    rate: float
    rng: random.Random
    names: list[str]
    held_out: bool = False
    kind: str = "doing"
    drafts: list[Draft] = field(default_factory=list)

    def draft(self) -> Draft:
        kinds = [self.kind] + ([self.rng.choice(KINDS)] if self.rng.random() < 0.4 else [])
        claims = []
        for kind in kinds:
            invent = self.rng.random() < self.rate
            text = None if invent else true_claim(kind, self.life, self.rng, self.names)
            if text is None:
                invent_ = held_out_claim if self.held_out else invented_claim
                text, invent = invent_(kind, self.life, self.rng, self.names), True
            claims.append(Claim(kind, text, invent))
        body = self.rng.choice(["，", "。"]).join(c.text for c in claims)
        return Draft(claims, self.rng.choice(FILLERS) + body + self.rng.choice(ENDS))

    def __call__(self, messages: list[dict[str, Any]], schema: Any) -> str:
        if messages[0]["role"] != "system":  # the recorder summing up a chat window
            return f"{ASKER_NAME}问了她最近的事。"
        if self.drafts and messages[-1]["role"] == "system":
            self.drafts[-1].feedback = str(messages[-1]["content"])
        draft = self.draft()
        self.drafts.append(draft)
        return draft.text


def bare(text: str) -> str:
    return re.sub(r"[\s，。！？!?,.~～…]", "", text)


@dataclass
class Tally:
    questions: int = 0
    unchanged: int = 0
    claims_sent: Counter[str] = field(default_factory=Counter)
    invented_sent: Counter[str] = field(default_factory=Counter)
    invented_drafted: Counter[str] = field(default_factory=Counter)
    true_blocked: Counter[str] = field(default_factory=Counter)
    fallbacks: int = 0
    slipped: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    turn_ms: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        sent = sum(self.claims_sent.values())
        invented = sum(self.invented_sent.values())
        ms = sorted(self.turn_ms)
        return {
            "questions": self.questions,
            "answers unchanged": self.unchanged,
            "claims sent": sent,
            "invented claims sent": invented,
            "share of sent claims unsupported": invented / sent if sent else 0.0,
            "invented claims drafted": sum(self.invented_drafted.values()),
            "true answers blocked": sum(self.true_blocked.values()),
            "fallback lines": self.fallbacks,
            "by kind": {
                k: {
                    "sent": self.claims_sent[k],
                    "invented sent": self.invented_sent[k],
                    "invented drafted": self.invented_drafted[k],
                    "true blocked": self.true_blocked[k],
                }
                for k in KINDS
            },
            "turn p50 ms": round(statistics.median(ms), 1) if ms else None,
            "turn p95 ms": round(ms[int(0.95 * (len(ms) - 1))], 1) if ms else None,
            "slipped": self.slipped[:15],
            "blocked": self.blocked[:15],
        }


async def ask_all(
    cfg: Any,
    redis: Any,
    history: Any,
    life: Life,
    rate: float,
    seed: int,
    n: int,
    held_out: bool = False,
) -> Tally:
    names = ["枫", "千夏"]
    script = Script(life, rate, random.Random(f"model:{seed}:{rate}:{held_out}"), names, held_out)
    semantic = await open_semantic(cfg, in_memory=True)
    memory = await build_memory(cfg, history, semantic, character_id=ME)
    on_stop: list[Any] = []
    service = await build_service(
        cfg,
        sender=RecordingSender(),
        on_stop=on_stop,
        redis=redis,
        history=history,
        memory=memory,
        model=FunctionChatModel(script),
        clock=SimClock(life.now),
    )
    tally = Tally()
    fallbacks = {
        "那会儿做了什么我一下子说不清了，等我想想再告诉你～",
        "这个我记不太清了，不乱说啦～",
    }
    try:
        asked = questions(n, random.Random(f"q:{seed}:{held_out}"), held_out=held_out)
        for i, (text, kind) in enumerate(asked):
            script.kind, script.drafts = kind, []
            entry = Entry(
                id=f"q-{rate}-{i}",
                conversation=Conversation.group("qq", GROUP),
                user_id=ASKER,
                sender_name=ASKER_NAME,
                time=life.now,
                text=f"@悠酱 {text}",
                mentions_me=True,
            )
            await service.sessions.clear(entry.session_id)
            began = time.perf_counter()
            out = await service.handle(entry, stateless=True)
            tally.turn_ms.append((time.perf_counter() - began) * 1000)
            if not out.answered:
                raise RuntimeError(f"she did not answer {text!r}: {out.reason}")
            tally.questions += 1
            sent = bare("".join(out.replies))
            if "".join(out.replies) in fallbacks or not any(
                bare(d.text) == sent for d in script.drafts
            ):
                tally.fallbacks += 1
            for j, d in enumerate(script.drafts):
                went = bare(d.text) == sent
                if went and j == 0:
                    tally.unchanged += 1
                for c in d.claims:
                    if c.invented:
                        tally.invented_drafted[c.kind] += 1
                    if went:
                        tally.claims_sent[c.kind] += 1
                        if c.invented:
                            tally.invented_sent[c.kind] += 1
                            tally.slipped.append(f"[{c.kind}] {c.text} (asked: {text})")
                if not went and all(not c.invented for c in d.claims):
                    for c in d.claims:
                        tally.true_blocked[c.kind] += 1
                    why = d.feedback.replace("\n", " / ")[:160]
                    tally.blocked.append(f"{d.text} (asked: {text}; sent back: {why})")
    finally:
        for close in reversed(on_stop):
            await close()
        await semantic.store.close()
    return tally


def config(data_dir: Path) -> Any:
    return load_config(
        environ={},
        overrides={
            "app": {"data_dir": str(data_dir), "log_level": "WARNING"},
            "world": {"characters": CHARACTERS},
            "memory": {"enabled": True},
            "embeddings": {"provider": "hashing"},
            "chat": {
                "character_id": ME,
                "groups": {str(GROUP): {"reply": "mention"}},
                "max_pause_seconds": 0,
                "user_messages_per_minute": 100_000,
                "group_replies_per_minute": 100_000,
                "group_messages_per_minute": 100_000,
            },
        },
    )


async def one_seed(
    seed: int, n: int, rates: list[float], tmp: Path, *, held_out: bool = False
) -> dict[str, Any]:
    data_dir = tmp / f"s{seed}"
    cfg = config(data_dir)
    await simulate(
        cfg, days=DAYS, seed=seed, start=START, progress=False, data_dir=data_dir, commands=[NEWS]
    )
    tz = ZoneInfo(cfg.app.timezone)
    now = datetime.fromisoformat(START).replace(tzinfo=tz) + timedelta(days=DAYS)
    handle, history = await open_stores(cfg)
    out: dict[str, Any] = {}
    try:
        await EpisodeRepo(history).ensure()
        life = await read_life(history, handle.client, now)
        out["life"] = {
            "today": [f"{d.start.astimezone(tz):%H:%M} {d.name}" for d in life.days[0]],
            "yesterday": len(life.days[1]),
            "now": life.running.name if life.running else None,
            "weather": life.weather,
            "met": {k: sorted(v) for k, v in life.met.items()},
            "news": life.news,
        }
        for rate in rates:
            out[f"{rate:.0%}"] = (
                await ask_all(cfg, handle.client, history, life, rate, seed, n)
            ).row()
        if held_out:
            for rate in (0.5, 1.0):
                out[f"held-out {rate:.0%}"] = (
                    await ask_all(cfg, handle.client, history, life, rate, seed, n, held_out=True)
                ).row()
    finally:
        await handle.aclose()
        await history.close()
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    parser.add_argument(
        "--held-out", action="store_true", help="also run the second inventing model (50%%, 100%%)"
    )
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="grounding-bench-") as tmp:
        for seed in args.seeds:
            results[seed] = await one_seed(
                seed, args.questions, args.rates, Path(tmp), held_out=args.held_out
            )
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1, default=str))
        return 0
    print(
        "| seed | invention rate | answers unchanged | claims sent | invented sent (share) "
        "| invented drafted | true answers blocked | fallback lines | turn p95 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    labels = [f"{rate:.0%}" for rate in args.rates]
    labels += ["held-out 50%", "held-out 100%"] if args.held_out else []
    for seed, by in results.items():
        for label in labels:
            r = by[label]
            print(
                f"| {seed} | {label} | {r['answers unchanged']}/{r['questions']} "
                f"| {r['claims sent']} | {r['invented claims sent']} "
                f"({r['share of sent claims unsupported']:.1%}) | {r['invented claims drafted']} "
                f"| {r['true answers blocked']} | {r['fallback lines']} | {r['turn p95 ms']} |"
            )
    print()
    print("| seed | rate | " + " | ".join(KINDS) + " |")
    print("|---|---|" + "---|" * len(KINDS))
    for seed, by in results.items():
        for label in labels:
            r = by[label]["by kind"]
            cells = [
                f"{r[k]['invented sent']}/{r[k]['invented drafted']} inv, {r[k]['true blocked']} tb"
                for k in KINDS
            ]
            print(f"| {seed} | {label} | " + " | ".join(cells) + " |")
    for seed, by in results.items():
        print(f"\nseed {seed}: {json.dumps(by['life'], ensure_ascii=False, default=str)}")
        for label in labels:
            r = by[label]
            for line in r["slipped"]:
                print(f"  slipped at {label}: {line}")
            for line in r["blocked"]:
                print(f"  blocked at {label}: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
