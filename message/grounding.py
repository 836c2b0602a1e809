"""The grounding check: what she says about her days must be in her record of them.

The claims an answer makes about today, yesterday or the day before — actions (散步、钓鱼),
places (南风公园、神社), items (野莓、铜锣烧), meals, the weather and times (早上、下午三点) — are
read clause by clause and matched against that day's episodes; a claim about a wider time
(上周, 周末, 最近, 以前…: `SPANS`) against the episodes of that span. A negated claim
("今天没去公园") is checked the other way round: it is false when the record shows she did go.
Plans, wishes, questions, times her record does not reach (小时候, 明天) and other people's
doings are not claims about her day; a doing at a time still ahead is a plan only when its
clause says so (`Claim.plan`), and 啦/咯/喽 carry 了. Whatever was asked, what she says she is
doing or has just done is about today ("我在公园散步" in answer to a question about colours),
and what she is doing right now ("正在…", "…呢") must be what the record shows now; likings and
habits are not claims. The words come from the content itself (action names, the town, the
items), so a new action module is checked without touching this file.

The check is closed-world (issue 30): besides the words of her world, `OUTSIDE` lists everyday
doings a model likes to invent that her world has no action for (homework, a cat, music, films,
shopping, games, …), and any place or food said as visited, eaten or bought is a claim whether
or not her world names it; the weather she speaks of is checked against the world's weather.
Beyond any list, a clause saying she did something (…了, 把…, a named day or time of day with a
verb) that names nothing of her world is a claim by its own words, and whatever she says she is
doing now must be her running action. Such claims pass only when her record of that day says
them. `read_days` is the one place her record is read; `grounded_tool` keeps news and gifts to what
the speaker said.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, tzinfo
from typing import Any, Literal, Protocol, TypeGuard, cast

from yuiju.memory.diary import Diary
from yuiju.memory.episode_data import BehaviorData, ConversationData
from yuiju.memory.episodes import DOINGS, MEETING_PREFIX, Episode, EpisodeType
from yuiju.memory.service import MemoryService
from yuiju.message.agent import Refusal, RunContext, Tool, ToolResult
from yuiju.message.deps import ChatDeps, WorldView
from yuiju.message.people_grounding import backs
from yuiju.world.action import Action
from yuiju.world.clock import Clock
from yuiju.world.items import ALL as ALL_ITEMS
from yuiju.world.state import RunningAction
from yuiju.world.town import HAURA, Town

log = logging.getLogger(__name__)

Kind = Literal["action", "place", "item", "outside", "weather", "deed", "late"]

ROUTINE = frozenset(
    {
        "睡觉",
        "起床",
        "再睡一会",
        "发呆",
        "休息",
        "吃饭",
        "吃早饭",
        "吃午饭",
        "玩手机",
        "给手机充电",
        "吃背包里的东西",
        "等上课",
        "放学回家",
    }
)
"""Everyday routines: said loosely ("吃了饭" for any meal) and never the invention this check is for."""

_PLACE_NOUN = re.compile(r"^在(.{0,6}[家店园池社边校馆堂室市站岸厅场])")
"""'在公园散步' → '公园' (the longest noun ending like a place), the rest is the activity."""
_INFIX = r"(?:了|过|着|完|到)?(?:一会儿?|会儿|一下|一?[条次点杯碗个本趟])?"
"""What may stand inside a verb phrase: 散了步, 看了会儿书, 喝了杯咖啡."""
_TO_PLACE = r"(?:去|在|到|逛|从)(?:了|过)?(?:一趟|一下)?"
"""A place is claimed as somewhere she went or was."""

_SENTENCES = re.compile(r"[^。！？!?\n]+[。！？!?\n]*")
_CLAUSES = re.compile(r"[^，,；;、~～…]+")
_TODAY = re.compile(r"今天|今早|今晚|今儿|刚才|刚刚|现在|正在|早上|早晨|上午|中午|下午|傍晚|晚上")
"""Words that set the day to today (a time of day too, unless another day was named first)."""
_OTHER_DAY = re.compile(r"去年|前年|小时候|明天|后天|下周|下个?星期|下礼拜|下次|改天|以后|将来")
"""Times the check does not read: ahead, or beyond what her history store reaches."""
_SPAN = re.compile(
    r"(?P<last_month>上个?月)"
    r"|(?P<last_weekend>上个?(?:周末|礼拜末))"
    r"|(?P<last_week>上个?(?:周|星期|礼拜)(?!末))"
    r"|(?P<weekend>(?:这个?)?周末)"
    r"|(?P<recent>最近|近来|前几天|这几天|前些天|前些日子|这些天|这阵子|前阵子|这段时间|这两天|前两天)"
    r"|(?P<before>上次|上回|那天|那次|以前|之前|从前)"
)
"""Wider times she may speak of (`SPANS`): a claim about one is checked against that span."""
_RELATIVE_BEFORE = re.compile(r"[\u4e00-\u9fff\d](?<![我咱久早其实])(?:以前|之前)")
"""以前/之前 after a doing or a time (吃饭之前, 三点以前): before that, not a time of its own —
unless after 我, 很久/好久/很早/不久 or 其实."""
SpanKey = Literal["last_month", "last_week", "weekend", "last_weekend", "recent", "before"]
SPANS: dict[SpanKey, str] = {
    "last_month": "上个月",
    "last_week": "上周",
    "last_weekend": "上周末",
    "weekend": "周末",
    "recent": "最近",
    "before": "以前",
}
"""The wider times a claim may be about, and how the feedback names them: 上个月 is the calendar
month before this one (as far as `SPAN_READ_LIMIT` episodes reach), 上周 is Monday to
Sunday of last week, 上周末 its Saturday and Sunday, 周末 the latest Saturday and Sunday (this one
on a Saturday or a Sunday), 最近 the last `RECENT_DAYS` days, 以前 (之前, 上次, 那天) anything
before today, as far as `BEFORE_DAYS` of episodes and her diaries reach."""
DayKey = int | SpanKey
"""Which part of her record a claim speaks of: a day (0 today, 1 yesterday, 2 the day before) or
a wider span."""
RECENT_DAYS = 7
BEFORE_DAYS = 30
"""How far back 以前 reads her episodes (her diaries are read besides, the latest `DIARIES_READ`)."""
DIARIES_READ = 60
SPAN_LINES = 12
"""The feedback shows at most this many of a span's episodes (the latest)."""
SPAN_LINE_CHARS = 60
SPAN_READ_LIMIT = 1000
"""At most this many episodes (the newest) are read for one span."""
_PLAN = re.compile(
    r"(?<![约聚开学机社宴舞庙晚集体])会(?![儿话议员场])|马上|即将|待会|等会|等下|稍后|一会儿?(?=去|再|就)"
)
"""Said as ahead of her (会去, 马上, 待会…): with a time still ahead, or none, a plan — unless
said as done (了/过)."""
_SOON = re.compile(r"(?<!应)该(?=[去回来做上])|快要|就要|可以")
"""About to happen or only possible, 了/啦 or not (该去上课了, 终于可以休息一下啦)."""
_GOING = re.compile(r"(?:去|来|回)(?!了|过|完)[\u4e00-\u9fff]")
"""去 + a doing (下午去打工): at a time still ahead, going to do it, unless said as done (去了)."""
_LEAVING = re.compile(r"先(?:去|走|回)|该(?:去|走|回)")
"""Leaving for it now (我先去上课啦): a plan with no time said. Without 先, 去钓鱼啦 is done (啦 is
了 + 啊)."""
_NOT_A_CLAIM = re.compile(
    r"想|要(?!命|紧)|打算|准备(?=[去要开出回做睡吃买])|计划|如果|要是|万一|的话|希望|但愿|将来|以后|待会|等会|等下"
)
"""Wishes, plans and what-ifs: not claims about what happened."""
_NOW_OR_JUST = re.compile(r"刚|在|着|呢|了|啦|咯|喽")
"""Without a day word, what she is doing (在公园散步, 散着步呢) or has just done (刚去了, 散步了)
is about today, whatever was asked; what she has ever done (去过) is not."""
_HABIT = re.compile(
    r"喜欢(?!的)|[最超好很]爱|爱[吃喝去看]|经常|常常|常去|总是|每天|每次|平时|平常|一般|有时|偶尔|通常|习惯"
    r"|好像|像是"
)
"""Likings, habits and likenesses: without a day word, not a claim about today."""
_LIKING = re.compile(r"喜欢(?!的)|[最超好很]爱|爱[吃喝去看]|平时|平常|一般|通常|习惯|好像|像是")
"""Likings and likenesses: not claims even about a span (最近喜欢…); a habit said of 上周 or
最近 (最近每天都去图书馆) is a claim about that span."""
_WHILE = re.compile(r"时候")
"""A doing that frames another (跑步的时候…): a claim about her when its sentence says something
happened (了/过/完), is going on now or names a time; otherwise a habit (散步的时候心情会变好)."""
_HAPPENED = re.compile(r"了|过|完|正在|现在|呢|啦|咯|喽")
_FINISHED = re.compile(r"(?<=[\u4e00-\u9fff])完(?![成全美整善蛋毕了])(?=[\u4e00-\u9fff])")
"""完 inside a verb phrase (跑完步, 写完作业): read as the phrase itself (跑步, 写作业)."""
_JUST_NOW = re.compile(r"刚|现在|正在|此刻|这会儿?")
"""A clause about just now: an earlier clause's time of day (早上…，刚…) no longer holds."""
_PRESENT = re.compile(r"正在|现在|此刻|这会儿?|呢$")
"""What she is doing right now: true only of what the record shows now."""
_OWN_WORDS = (
    r"我|咱|刚才|刚刚|刚|正在|正|在|从|去|到|回|跑去|跑到|一个人|自己|一直|才|已经|先|然后|现在|这会儿?"
    r"|此刻|其实|所以|对了|嗯|诶|欸|哎|啊|呀|哈哈|嘿嘿|也|还|就|又|都|今天|昨天|前天|今早|今晚|昨晚"
    r"|今儿|昨儿个?|那会儿|这会儿"
    r"|一大早|一早|早上|早晨|上午|中午|下午|傍晚|晚上|凌晨|[\d零一二两三四五六七八九十]{1,3}点(?:多|半|钟)?"
    r"|的时候|左右|之后|以后|后来|好好|偷偷|悄悄|认真|专心|了|过|着|一下|会儿|准备|开始|继续|\s"
    r"|忍不住|禁不住|不由得|不禁|不小心|随便|随手|顺便|顺手"
)
_OWN_TOKENS = re.compile(
    _OWN_WORDS + r"|一趟|[做搞玩看听练打弄吃喝买尝逛写画学读刷追喂撸遛唱弹拍泡煮烤待呆跑搬帮整剪捐]"
)
"""What may stand before her doing when she is its subject: adverbs and times (and one verb
character, 在下象棋); anything else (小明在公园散步呢) names someone else doing it."""


_COMPANY = re.compile(r"^(?:我|今天|刚才|刚刚|刚)*(?:和|跟|与|同)[^，,；;]{1,8}?(?:一起|一块儿?)")
"""With someone, at the opening of her clause (和千夏一起去海边…): still her doing."""


def _own(clause: str, before: str) -> bool:
    """Whether she is the one doing what follows ``before`` in ``clause``: only her words stand
    before it (one verb character aside; 和某人一起 too), or the clause opens with them
    (在喂流浪猫呢)."""
    if len(_OWN_TOKENS.sub("", _COMPANY.sub("", before))) <= 1:
        return True
    opening = _OWN_TOKENS.match(clause.lstrip("，, 嗯诶欸哎啊呀哈嘿…"))
    return opening is not None and opening.group(0).strip() != ""


_DONE = re.compile(r"了|过|啦|咯|喽")
"""Said as done: 啦 (了+啊), 咯 and 喽 carry 了."""
_CONSUMED = re.compile(
    r"(?:吃|喝|啃|买|尝|捡|钓|收到|拿到)(?:了|过|完|到|着|的)|在(?:吃|喝)|[买带拿]回|饭是"
)
"""An item said as eaten, bought or found (not only named)."""
_OTHERS = re.compile(r"你|他|她|大家|别人")
_NEGATION = re.compile(r"没|不|未|别")
_NOT_NEGATION = re.compile(
    r"不错|不少|不过|不知|不得|不好意思|差不多|没想到|忍不住|禁不住|止不住|不由得|不禁|不小心"
    r"|不一会儿?|不久"
)
"""Words with 不/没 in them that deny nothing."""
_NUM = "零一二两三四五六七八九十"
_CLOCK = re.compile(
    rf"(早上|早晨|上午|中午|下午|傍晚|晚上)?\s*(\d{{1,2}}|[{_NUM}]{{1,3}})\s*(?:点|:|：)\s*(半|\d{{1,2}}|[一二三]刻)?"
)
_PERIODS = {
    "凌晨": (0, 5),
    "清晨": (5, 8),
    "早上": (5, 10),
    "早晨": (5, 10),
    "一早": (5, 10),
    "上午": (8, 12),
    "中午": (11, 14),
    "下午": (12, 18),
    "傍晚": (16, 20),
    "晚上": (18, 24),
    "今晚": (18, 24),
}
_PERIOD = re.compile("|".join(_PERIODS))
UNSURE_LINE = "那会儿做了什么我一下子说不清了，等我想想再告诉你～"
"""Said when a revised answer still claims what her record of that day does not show."""
CLOCK_SLACK = timedelta(minutes=60)
"""A claimed clock time matches an episode within this of its start or end."""
NOW_SLACK = timedelta(minutes=15)
"""What she says she is doing now matches an episode that ended at most this long ago."""


@dataclass(frozen=True)
class Term:
    """A word that makes a claim, and what in the record makes it true."""

    word: str
    kind: Kind
    keys: frozenset[str]
    """Action ids (actions), place ids (places) or the item name (items) that satisfy it."""
    pattern: str
    """How it is said (a regex)."""
    span: tuple[float, float] | None = None
    """The time of day it speaks of by itself (早饭: the morning), when the sentence names none."""
    backed_by: str = ""
    """For words outside her world's catalogue: a regex that, found in a record, backs it."""


@dataclass(frozen=True)
class Claim:
    term: Term
    said: str
    """The words as they stand in the answer."""
    negated: bool
    span: tuple[float, float] | None = None
    """The claimed time of day in hours (from, to), when the sentence gives one."""
    clock: str = ""
    """How that time reads (e.g. '15:00'), for the feedback."""
    past: bool = False
    """Said as done (了/过/啦/咯/喽)."""
    present: bool = False
    """Said as going on right now (正在, 现在, …呢) without another time."""
    day: DayKey = 0
    """Which day it speaks of: 0 today, 1 yesterday, 2 the day before, or a span of `SPANS`."""
    plan: bool = False
    """Said as ahead of her (会, 马上, 待会, 去 + a doing not said as done): at a time still ahead,
    or with none (我先去上课啦), a plan rather than a claim. At a time still ahead without it, a
    doing is a claim (下午三点多在帮邻居搬东西 at 14:00), and nothing can be recorded there yet."""


OUTSIDE: dict[str, str] = {
    "作业": r"作业|功课|复习|预习|考试|测验|小测|月考|期中|期末|单词|刷题|习题|练习册|试卷|卷子|补习|补课|网课"
    r"|日语|英语|外语|韩语|法语|数学|物理|化学|语文|历史|地理|生物|课文|古诗|背书|笔记",
    "猫": r"猫|狗|喵|汪星|宠物|仓鼠|兔子|金鱼|鹦鹉|小鸟|鸽子",
    "听歌": r"听.{0,6}?(?:歌|音乐|曲子|专辑|广播|播客)|唱.{0,3}?歌|[Kk]歌|唱[Kk]|KTV|卡拉OK|演唱会|弹.{0,3}?(?:琴|吉他)|练琴|钢琴|吉他|小提琴|乐器",
    "电影": r"电影|影院|电视剧|追.{0,4}?(?:剧|番)|看.{0,3}?剧|综艺|动漫|动画|番剧|新番|短?视频|直播|纪录片|看电视",
    "读书": r"小说|漫画|杂志|绘本|读书|书店",
    "水果": r"水果|(?<!青)苹果|香蕉|橘子|橙子|葡萄|西瓜|(?<!南风)桃子|樱桃|蓝莓|柠檬|菠萝|荔枝|芒果|哈密瓜|猕猴桃|柿子|(?<!草莓)草莓(?!牛奶)",
    "点心": r"曲奇|司康|玛芬|泡芙|甜甜圈|蛋挞|布丁|马卡龙|蛋糕|甜点|甜品|冰淇淋|冰激凌|雪糕|奶茶|果汁|可乐|汉堡|披萨|薯条|炸鸡|火锅|烧烤|拉面|寿司|饺子|包子|馒头|粥|三明治|沙拉|便当|饼干|巧克力|糖果|薯片|酸奶|豆浆|油条|煎饼|麻辣烫|外卖|关东煮|章鱼烧|饭团|红茶|绿茶|果冻",
    "逛街": r"逛街|逛了逛|购物|商场|百货|买(?:了|过)?.{0,3}?(?:衣服|裙子|鞋|帽子|文具|笔记本|发卡|饰品|礼物|书)|网购|快递|便利店|花店|面包店|甜品店|奶茶店|药店|理发",
    "做饭": r"烤(?:了|过)?.{0,3}?(?:饼干|蛋糕|面包|红薯)|烘焙|下厨|炒菜|做菜|包饺子|做(?:了|过)?.{0,3}?(?:蛋糕|饼干|便当|甜点|料理|点心)|煮(?:了|过)?.{0,3}?(?:面|汤|粥)",
    "游戏": r"游戏|手游|[Ss]witch|桌游|下棋|象棋|围棋|扑克|拼图|抓娃娃|电玩|打牌|乐高|积木|模型|手账|手帐"
    r"|排练|话剧|戏剧|表演|演出|合唱|比赛|社团",
    "画画": r"画画|画(?:了|过)?.{0,3}?(?:画|图|素描|水彩)|素描|水彩|涂鸦|写生|手工|折纸|编织|织.{0,2}?围巾|练字|书法|拍照|摄影|写(?:了|过)?日记|写(?:了|过)?信|写(?:了|过)?诗",
    "运动": r"跑步|晨跑|慢跑|夜跑|健身|锻炼|运动|瑜伽|游泳|打球|篮球|足球|羽毛球|乒乓球|网球|排球|骑(?:了|过)?.{0,2}?车|爬山|登山|滑冰|跳舞|舞蹈|社团|部活|练习",
    "家务": r"打扫|扫地|拖地|收拾.{0,2}?房间|整理.{0,2}?房间|洗衣服|晾衣服|洗碗|大扫除|浇花|浇水|种花|养花|园艺|泡澡|洗澡|温泉|午睡|午觉"
    r"|养(?:了|过)?.{0,3}?(?:花|多肉|植物|绿植|鱼|猫|狗|仓鼠)|多肉|盆栽|绿植",
    "出门": r"游乐园|动物园|水族馆|博物馆|美术馆|电影院|体育馆|健身房|游泳池|医院|银行|邮局|公司|城里|市中心|奶奶家|外婆家|爷爷家|朋友家|同学家|聚会|约会|生日会|派对|露营|野餐|旅行|旅游|逛庙会|烟花",
}
"""Everyday doings outside her world's catalogue that a model likes to invent, by kind (the key
is how the feedback names the kind). Her record backs one only when it says the same words."""

WEATHER: dict[str, tuple[str, frozenset[str]]] = {
    "晴": (
        r"晴|阳光|太阳(?!镜|能)|蓝天|万里无云|风和日丽|艳阳",
        frozenset({"晴"}),
    ),
    "天气好": (
        r"天气(?:真|很|超|挺|特别|非常|也|还)?(?:好|不错)|好天气",
        frozenset({"晴", "多云"}),
    ),
    "下雨": (
        r"(?<![风小])雨(?!伞衣靴)|打(?:着)?伞|带(?:了)?伞",
        frozenset({"小雨", "雨", "雷雨"}),
    ),
    "下雪": (r"(?<![滑])雪(?![糕碧白])", frozenset({"雪"})),
    "阴天": (r"阴天|天阴|阴沉|阴阴|多云|灰蒙蒙", frozenset({"阴", "多云"})),
    "雾": (r"雾", frozenset({"雾"})),
    "热": (
        r"(?<![加发亲])热(?![闹情心门水饮乎爱络烈身腾狗量点可咖茶汤饭菜奶巧])|闷得|闷热|晒死",
        frozenset({"炎热"}),
    ),
    "冷": (
        r"(?<![冰])冷(?![静漠淡门饮笑场落])|寒|冻死|冻得|凉飕飕",
        frozenset({"严寒", "寒冷"}),
    ),
    "暖和": (r"暖和|暖洋洋|晒得(?:暖|热)", frozenset({"温暖", "舒适"})),
    "凉快": (r"凉快|凉爽|凉凉", frozenset({"清凉", "舒适"})),
    # a temperature said in degrees, with or without a weather word (三十多度，好想吃冰)
    "三十多度": (r"(?:[三四]十|[34]\d)(?:多|几|来)?度(?![假数])", frozenset({"炎热"})),
    "二十多度": (r"(?:二十|2\d)(?:多|几|来)?度(?![假数])", frozenset({"温暖", "舒适", "炎热"})),
    "十几度": (
        r"(?<![一二三四五六七八九\d])(?:十[一二三四五六七八九多几来]?|1\d)度(?![假数])",
        frozenset({"清凉", "舒适", "寒冷"}),
    ),
    "几度": (
        r"(?<![十\d])[1-9]度|(?:只有|才|就|才有)[一两二三四五六七八九几]度",
        frozenset({"寒冷", "严寒", "清凉"}),
    ),
    "零下": (r"零下|负\d+度", frozenset({"严寒"})),
}
"""What she may say about the weather, and the weathers (`world.state.Weather` type or
temperature) that make it true; degrees by the temperature levels they fall in."""

MEALS: dict[str, tuple[str, tuple[float, float] | None]] = {
    "早饭": (r"早饭|早餐", (5.0, 10.5)),
    "午饭": (r"午饭|午餐|中饭", (10.5, 14.5)),
    "晚饭": (r"晚饭|晚餐", (16.5, 22.0)),
    "吃饭": (r"吃" + _INFIX + r"(?:饭|东西)", None),
}
"""Meals said in general: true of any eating action (one whose description fills her up) at
that time of day."""

_CJK_RUN = r"[\u4e00-\u9fff]"
_UNKNOWN_PLACE = re.compile(
    rf"(?:去|在|到|逛|从|一趟)(?:了|过|完)?(?:一趟|一下)?(?P<w>(?!这|那|哪|什么|一家|某|在|正|去|到|了|过){_CJK_RUN}{{0,4}}"
    r"(?:店|馆|园|场|院|街|城|山|湖|河|楼|厅|吧|屋|市|中心|车站|岛|村|镇|边|桥|滩|台|顶|家|宫|所|厂|寺|庙|塔|港|舍))"
)
"""Somewhere said as visited, whatever its name: a claim even when her town has no such place
(not 正在家: the 在 of 现在 before it)."""
_BOUGHT = re.compile(
    r"(?:(?<=在)(?:吃|喝)|(?:吃|喝|啃|嚼|买下?|尝|入手|购入|下单|淘|抢|(?<![\d一二两三四五六七八九十])点)"
    r"(?:到|下)?(?:了|过|完|到|着|的))"
    r"(?:[一两几半]?[个碗杯份块盒包瓶串根片袋只颗口条本件双束支套盆张枚台部把顶副对斤]|些|点儿?|好多|很多)?"
    rf"(?P<w>{_CJK_RUN}{{2,6}})"
)
"""Something said as eaten, drunk or bought, whatever it is."""
_NOT_WEATHER_DEGREES = re.compile(r"烧|体温|发热|水温|油温|度数|近视|角|鞠躬|转身|掉头|酒")
"""Degrees that are not the weather (发烧38度, 九十度鞠躬)."""
_MEAL_IS = re.compile(
    rf"(?:早饭|早餐|午饭|午餐|中饭|晚饭|晚餐|夜宵|宵夜)(?:吃的)?(?:就)?是"
    r"(?:(?:自己|我)?(?:亲手)?(?:做|煮|煎|烤|炒|蒸|买|点|带)的)?"
    rf"(?!在|和|跟|与|自己|一个人|随便|什么|啥)(?P<w>{_CJK_RUN}{{2,6}})"
)
"""A meal said as what it was (午饭是鲷鱼烧, 早饭是自己做的煎蛋): that dish is a claim about
today, 了 or not."""
_RECEIVED = re.compile(
    r"(?:收到|拿到|接到|领到|得到)(?P<d>了|过|啦)?"
    r"(?P<m>[一两几]?[个份张封件盒束包袋本瓶只])?(?P<o>[\u4e00-\u9fff]{1,12})"
)
"""Something said as received (收到了朋友寄来的明信片, 收到一个X): a claim like a purchase, which
only a record that names the thing (a gift's episode) backs."""
_MESSAGE = re.compile(r"^(?:消息|信息|短信|微信|留言|回复|电话|邮件|私信|通知|回信)")
"""Received words, not a thing: who sent them is the people check's claim (收到了千夏的消息)."""
_LATE = re.compile(
    r"(?<!一)起(?:得|的|床)?(?:有点|有些|太|很|比较)?晚(?![饭餐上安点])|睡过(?:了)?头|睡懒觉|赖(?:了)?床"
)
"""Woke late: backed by sleeping more, a late wake-up, or no wake-up in her record that day."""
LATE_WAKE = 8.0
"""A wake-up before this hour (without sleeping more) is her normal time, not 起晚了."""
_TAKEN_HOME = re.compile(
    r"把(?:[一两几]?[个碗杯份块盒包瓶串根片袋只颗条本件双束支套盆张枚台部顶副对])?"
    rf"(?P<w>{_CJK_RUN}{{2,6}}?)(?:买|带|拿|捡|抱|领|搬|扛|提|运)(?:回|到|进)"
)
"""Something said as bought or brought home (把一盒彩色铅笔买回家了)."""
_DISPOSAL = re.compile(r"(?<![一两几这那每])把(?![我你他她它握手关戏柄持])")
"""A 把-sentence (把衣服洗好了, 把吉他谱练熟了) says she did something, whatever its result
word (好了, 完了 are states elsewhere)."""
_DEED = re.compile(rf"{_CJK_RUN}(?:了|过|完|啦|咯|喽)(?!解|得|不起|吧)|^(?:其实)?把")
"""A clause saying she did something (…了, 把…): of her world, only what her record has."""
_DAY_NAMED = re.compile(
    r"今天|今儿|今早|昨天|昨儿|昨晚|前天|刚才|刚刚|早上|上午|中午|下午|傍晚|晚上|那会儿"
)
_VERB = re.compile(
    r"[帮搬做去买吃喝看听玩写画学读练打跑逛泡煮烤剪捐整收洗扫拖浇种养喂遛撸拍唱弹参]"
)
"""A day or a time of day named and a verb (今儿帮邻居搬东西): a doing, 了 or not."""
_STATE = re.compile(
    r"累|困|饿|饱|渴|开心|高兴|快乐|难过|伤心|无聊|忙|闲|醒|起床|到家|回家|回来|出门|下课|放学"
    r"|好了|完了|行了|对了|算了|罢了|知道|明白|记得|忘|想|觉得|感觉|发现|喜欢|心情|有点|还好|不错"
    r"|差不多|结束|开始|准备|来了|走了|到了|说|聊|笑|哭|谢谢|收到|看到你|听到你|明天|下次|改天"
    r"|见面|见到|遇到|碰到|碰见|遇见|一起|一块|约|找我|陪|招呼|是|有"
)
"""What one says of oneself that is a state or a feeling, not a doing to check."""
_FILLER_WORDS = re.compile(
    rf"(?:{_OWN_WORDS})|好久|一下午|一上午|一整天|半天|很久|好充实|啦|呢|呀|哦|吧|嘛|～|的|地|得"
)


def _core(clause: str) -> str:
    """The content words of a clause: times, spans, her adverbs and particles left out."""
    bare = _FILLER_WORDS.sub("", _SPAN.sub("", clause))
    return "".join(c for c in bare if "\u4e00" <= c <= "\u9fff")


_DOING_NOW = re.compile(
    r"(?:正在|一直在|^(?:今儿|今天|我|刚才|现在|这会儿|其实|还|又)*在)"
    rf"(?P<w>{_CJK_RUN}{{2,8}}?)(?:呢|着|中|$)"
)
"""What she says she is doing now, whatever it is: of her world only what her world has."""
_ANY_DOING = re.compile(
    r"^(?:想|等|忙|聊|跟你|和你|陪你|回你|看你|听你|发呆|休息|睡|躺|坐|待|呆|上课|学习|吃|喝|赶路|路上|"
    r"外面|家|这|那|准备|努力|考虑|犹豫|纠结|担心|期待|烦)"
)
"""What one says one is doing that is a state or a step of anything (在等你、在想、在路上),
not a doing to check."""
_WORD_END = re.compile(r"[了啦呀吧呢啊哦的和跟还也就都很真好超特别挺而然后又再去来]")
_GENERIC_FOOD = re.compile(r"^(?:饭|东西|早饭|早餐|午饭|午餐|中饭|晚饭|晚餐|零食|点东西)")
_NOT_ABOUT_TO = r"(?<![备快要该想就得算上会])"
"""Before 回家/出门: not about to (准备回家了, 快出门了, 该回家了 are no claim that she did)."""
_PURCHASED = re.compile(
    r"(?:买|购入|入手|下单)(?P<v>好|到|齐|下)?(?P<d>了|过|完|啦|咯|喽)?(?P<o>[\u4e00-\u9fff]{0,6})"
)
"""A purchase said as done (买了…, 买好菜, 买到了): a claim that she bought something, which only a
record saying she bought it backs (not one where she only read or ate it)."""
_BUYING = r"(?:买|购|入手)"


@dataclass
class ClaimLexicon:
    """Every word that makes a checkable claim about her day."""

    terms: list[Term] = field(default_factory=list)

    def __post_init__(self) -> None:
        ordered = sorted(self.terms, key=lambda t: len(t.word), reverse=True)  # longest first
        self._by_group = {f"t{i}": t for i, t in enumerate(ordered)}
        alternatives = "|".join(f"(?P<t{i}>{t.pattern})" for i, t in enumerate(ordered))
        self._regex = re.compile(alternatives) if ordered else None
        self._known = {t.word for t in self.terms}
        self._routine = ROUTINE

    @classmethod
    def build(
        cls,
        actions: Iterable[Action],
        *,
        town: Town = HAURA,
        items: Iterable[str] = ALL_ITEMS,
        outside: dict[str, str] = OUTSIDE,
    ) -> ClaimLexicon:
        """From the action catalogue ("在<地方><做什么>" names), the town's places, the items,
        the meals and the weather her world knows, and what is ``outside`` it."""
        activities: dict[str, set[str]] = {}
        places: dict[str, set[str]] = {
            pid: {p.name} for pid, p in town.places.items() if pid != "home"
        }
        meals: set[str] = set()
        wakes: set[str] = set()
        oversleeps: set[str] = set()
        homeward: set[str] = set()
        outward: set[str] = set()
        for action in actions:
            name = action.name
            if action.moves_to == "home":
                homeward.add(action.id)
            elif action.moves_to is not None and action.at == "home":
                outward.add(action.id)
            if "饱腹+" in action.description or re.search("吃|喝|饭", name):
                meals.add(action.id)
            if "wake" in action.tags:
                wakes.add(action.id)
            if "sleep_more" in action.tags:
                oversleeps.add(action.id)
            if action.moves_to is not None or name.startswith("从"):
                continue  # a walk from A to B: its place is the claim
            if m := _PLACE_NOUN.match(name):
                noun, name = m.group(1), name[m.end() :]
                if action.at and action.at != "home" and noun != "家":
                    places.setdefault(action.at, set()).add(noun)
            if len(name) >= 3 and name.endswith("吃"):
                name = name[:-1]  # 做饭吃 → 做饭
            if len(name) >= 2 and name not in ROUTINE:
                activities.setdefault(name, set()).add(action.id)
        terms = [
            Term(word, "action", frozenset(ids), re.escape(word[0]) + _INFIX + re.escape(word[1:]))
            for word, ids in activities.items()
        ]
        by_word: dict[str, set[str]] = {}
        for pid, words in places.items():
            for word in words:
                by_word.setdefault(word, set()).add(pid)
        names = {p.name for p in town.places.values()}
        terms += [
            Term(
                word,
                "place",
                frozenset(pids),
                _TO_PLACE + re.escape(word),
                # a part of a place (图书馆, 教室 of the school) is backed by what happened there
                backed_by="" if word in names or _whole_place(word, pids, town) else word,
            )
            for word, pids in by_word.items()
        ]
        if "home" in town.places:
            terms.append(
                Term("家", "place", frozenset({"home"}), r"(?:在|回|到)(?:了|过)?家(?![人长乡务])")
            )
        if homeward:  # 回家啦: she came home, which being at home all day does not back
            terms.append(
                Term(
                    "回家",
                    "action",
                    frozenset(homeward),
                    _NOT_ABOUT_TO + r"回(?:了|到)?家(?![人长乡务])",
                )
            )
        if outward:  # 刚出门: she left home (not 没出门看电影: no film is the claim)
            terms.append(
                Term(
                    "出门",
                    "action",
                    frozenset(outward),
                    _NOT_ABOUT_TO + r"出(?:了)?门(?=$|[了啦呢呀吧，,。！!~～…\s]|就)",
                )
            )
        if wakes:  # 起晚了: her wake-up that day says when she got up
            oversleep = "|".join(map(re.escape, sorted(oversleeps))) or "(?!)"
            terms.append(
                Term("起晚了", "late", frozenset(wakes), _LATE.pattern, backed_by=oversleep)
            )
        terms += [Term(name, "item", frozenset({name}), re.escape(name)) for name in items]
        terms += [
            Term(word, "action", frozenset(meals), pattern, span=span)
            for word, (pattern, span) in MEALS.items()
        ]
        terms += [
            Term(word, "weather", weathers, pattern)
            for word, (pattern, weathers) in WEATHER.items()
        ]
        terms += [
            Term(word, "outside", frozenset(), pattern, backed_by=pattern)
            for word, pattern in outside.items()
        ]
        return cls(terms)

    def find(self, clause: str) -> list[tuple[Term, re.Match[str]]]:
        """The terms ``clause`` says, in order; a place or a food said as visited, eaten or
        bought that no term names is a term of its own (outside her world)."""
        found = [
            (self._literal(self._by_group[m.lastgroup], m), m)
            for m in (self._regex.finditer(clause) if self._regex is not None else ())
            if m.lastgroup
        ]
        taken = [m.span() for t, m in found if t.kind != "weather"]
        for pattern in (_UNKNOWN_PLACE, _BOUGHT, _MEAL_IS, _TAKEN_HOME):
            for m in pattern.finditer(clause):
                w = m.group("w")
                w = w.rsplit("的", 1)[-1] if len(_WORD_END.split(w)[0]) < 2 else w  # 新的手机壳
                word = _WORD_END.split(w)[0]
                a = m.start("w") + m.group("w").find(word)
                b = a + len(word)
                if len(word) < 2 or _GENERIC_FOOD.match(word) or word in self._known:
                    continue
                inside = [
                    (t, tm)
                    for t, tm in found
                    if t.kind != "weather" and a < tm.end() and tm.start() < b
                ]
                if any(not _part_of_place(t, word) for t, _ in inside):
                    continue  # a word of her world says it
                found = [(t, tm) for t, tm in found if (t, tm) not in inside]
                backed = re.escape(word)
                found.append((Term(word, "outside", frozenset(), backed, backed_by=backed), m))
                taken.append((a, b))
        for m in _RECEIVED.finditer(clause):
            thing = _WORD_END.split(m["o"].rsplit("的", 1)[-1])[0]
            if not (m["d"] or m["m"]) or not thing or _MESSAGE.match(thing):
                continue
            if any(t.kind != "weather" and m.start("o") <= tm.start() for t, tm in found):
                continue  # a word of her world names it (收到了野莓): that claim is checked
            backed = re.escape(thing)
            found.append((Term(thing, "outside", frozenset(), backed, backed_by=backed), m))
        for m in _PURCHASED.finditer(clause):
            verb = m.start("o")
            if not (m["v"] or m["d"]) or any(
                t.kind == "action" and tm.start() < verb and m.start() < tm.end() for t, tm in found
            ):
                continue  # not said as done, or an action of her world (买零食) says it
            things = [
                t.backed_by
                for t, tm in found
                if t.kind == "outside" and verb <= tm.start() < m.end()
            ]  # 买了一本新小说: a record of reading 小说 does not back buying one
            bought = _BUYING + (rf"[^。；;\n]{{0,12}}?(?:{'|'.join(things)})" if things else "")
            found.append((Term("买", "outside", frozenset(), bought, backed_by=bought), m))
        said_day = _DAY_NAMED.search(clause) and _VERB.search(clause)
        disposal = _DISPOSAL.search(clause) is not None
        said_done = _DEED.search(clause) or said_day or disposal
        if not found and said_done and (disposal or not _STATE.search(clause)):
            core = _core(clause)
            if len(core) >= 3:
                deed = re.search(re.escape(clause), clause)
                assert deed is not None
                found.append((Term(core, "deed", frozenset(), "", backed_by=core), deed))
                return found
        if (doing := _DOING_NOW.search(clause)) is not None and not found:
            word = doing.group("w")
            if not _ANY_DOING.search(word) and not any(r in word for r in self._routine):
                backed = re.escape(word[:2])
                found.append((Term(word, "outside", frozenset(), backed, backed_by=backed), doing))
        body = _NOT_WEATHER_DEGREES.search(clause) is not None
        found = [  # 热可可 is a drink, not the weather; 发烧38度 a fever
            (t, m)
            for t, m in found
            if t.kind != "weather"
            or not (
                any(m.start() < y and x < m.end() for x, y in taken)
                or (body and m.group(0).endswith("度"))
            )
        ]
        return sorted(found, key=lambda f: f[1].start())

    @staticmethod
    def _literal(term: Term, m: re.Match[str]) -> Term:
        """A word outside her world is backed only by a record that says those very words."""
        if term.kind != "outside":
            return term
        return replace(term, backed_by=re.escape(m.group(0)))


_SAME_PLACE = re.compile(r"^(?:店|里|内|外|门口|附近|旁边|前|那边|这边|那儿|这儿)?$")


def _part_of_place(term: Term, word: str) -> bool:
    """Whether ``word`` (学校天台) names a part of the place ``term`` says (学校) that her world
    does not have (not 咖啡店 for 咖啡, nor 公园里 for 公园)."""
    if term.kind != "place" or term.word not in word:
        return False
    return not _SAME_PLACE.match(word.replace(term.word, "", 1))


def _whole_place(word: str, pids: Iterable[str], town: Town) -> bool:
    """Whether ``word`` names a place as a whole (学校 for 星见丘高校, 公园 for 南风公园: the same
    kind of place by its last character) rather than a part of it (图书馆, 教室)."""
    return any(town.place_name(pid)[-1:] == word[-1:] for pid in pids)


_TODAY_WORD = re.compile(r"今天|今早|今晚|今儿|刚才|刚刚|刚(?!好)")
"""Today by name; a time of day alone (下午) keeps the day the conversation is about."""
_REPORTED = re.compile(r"说|告诉|听说|讲")
"""What follows is what someone said: its day words are not when she did anything."""
_PAST_DAY = re.compile(r"(?P<d2>前天|前日)|(?P<d1>昨天|昨晚|昨日|昨儿)")
_NOW_WORD = re.compile(r"正在|现在|此刻|这会儿?")
Day = DayKey | Literal["other"] | None
"""The time a text speaks of: a day (0 today, 1 yesterday, 2 the day before), a wider span
(`SPANS`), "other" (another time, not checked), None (it does not say)."""


def day_offset(text: str) -> Day:
    """Which day or span ``text`` talks about, by its first time word (`Day`); what she is doing
    now (正在复习明天的考试) is about today whatever day follows. A time of day alone names no
    day."""
    words: list[tuple[int, Day]] = [
        (m.start(), 0) for m in (*_NOW_WORD.finditer(text), *_TODAY_WORD.finditer(text))
    ]
    words += [(m.start(), 2 if m["d2"] else 1) for m in _PAST_DAY.finditer(text)]
    words += [(m.start(), "other") for m in _OTHER_DAY.finditer(text)]
    # 吃饭之前: before that, no time of its own
    relative = {m.end() - 2 for m in _RELATIVE_BEFORE.finditer(text)}
    words += [
        (m.start(), _span_key(m))
        for m in _SPAN.finditer(text)
        if not (m["before"] and m.start() in relative)
    ]
    if not words:
        return None
    return min(words, key=lambda w: w[0])[1]


def _span_key(m: re.Match[str]) -> SpanKey:
    key = m.lastgroup
    assert key in SPANS, key
    return key


def is_checked(day: Day) -> TypeGuard[DayKey]:
    """Whether a claim about ``day`` is checked: a day or a span, not another time."""
    return isinstance(day, int) or day in SPANS


def span_range(key: SpanKey, now: datetime) -> tuple[datetime, datetime]:
    """The time `SPANS` ``key`` names, from ``now``: [start, end), never past now."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = midnight - timedelta(days=now.weekday())
    soon = now + timedelta(seconds=1)
    if key == "last_month":
        first = midnight.replace(day=1)
        return (first - timedelta(days=1)).replace(day=1), first
    if key == "last_week":
        return monday - timedelta(days=7), monday
    if key == "last_weekend" or (key == "weekend" and now.weekday() < 5):
        return monday - timedelta(days=2), monday
    if key == "weekend":
        return monday + timedelta(days=5), soon
    if key == "recent":
        return midnight - timedelta(days=RECENT_DAYS), soon
    return midnight - timedelta(days=BEFORE_DAYS), midnight


def _number(text: str) -> int:
    if text.isdigit():
        return int(text)
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (digits.get(tens, 1) if tens else 1) * 10 + (digits.get(ones, 0) if ones else 0)
    return digits.get(text, 0)


def time_of(sentence: str) -> tuple[tuple[float, float], str] | None:
    """The time of day a sentence names: a clock time (±0) or a period, as hours (from, to)."""
    if m := _CLOCK.search(sentence):
        period, hour = m.group(1) or "", _number(m.group(2))
        minute = {"半": 30, "一刻": 15, "三刻": 45}.get(m.group(3) or "")
        if minute is None:
            minute = int(m.group(3)) if (m.group(3) or "").isdigit() else 0
        if (period in ("下午", "傍晚", "晚上") and hour < 12) or (period == "中午" and hour < 6):
            hour += 12
        spoken = not m.group(2).isdigit() and not period and not m.group(3)
        if spoken and not sentence[m.end() :].startswith("钟"):
            pass  # "吃了一点" is a little, not one o'clock
        elif 0 <= hour < 24 and minute < 60:
            at = hour + minute / 60
            return (at, at), f"{hour:02d}:{minute:02d}"
    if m := _PERIOD.search(sentence):
        return (float(_PERIODS[m.group(0)][0]), float(_PERIODS[m.group(0)][1])), m.group(0)
    return None


def claims(
    answer: str,
    lexicon: ClaimLexicon,
    *,
    day: Literal["today", "other"] | Day = None,
    undated_is_now: bool = False,
) -> list[Claim]:
    """The claims ``answer`` makes about today, yesterday, the day before and the wider spans of
    `SPANS` (上周, 周末, 最近, 以前…); ``day`` is the day the conversation is about. Where neither
    names a day, what she says she is doing or has just done is about today. ``undated_is_now``
    (a post about what she just did): what she says without a time or 了/过 is about now."""
    out: list[Claim] = []
    asked: Day = 0 if day == "today" else day
    for sentence in _SENTENCES.findall(answer):
        if "？" in sentence or "?" in sentence or sentence.rstrip("。！!…~～ \n").endswith("吗"):
            continue
        said: Timed = None  # the time said last in the sentence, and whether it stood alone
        current = asked
        framed = _WHILE.search(sentence) is not None and not (
            _HAPPENED.search(sentence) or time_of(sentence) or day_offset(sentence) is not None
        )  # 散步的时候心情会变好: whenever she walks
        for clause in _CLAUSES.findall(sentence):
            clause = _FINISHED.sub("", clause)
            named = day_offset(_REPORTED.split(clause)[0])  # not a day in what someone said
            current = named if named is not None else current
            if current is None and _PERIOD.search(clause):
                current = 0  # a time of day, no day said: today
            found = lexicon.find(clause)
            when, carried, said = _scope(clause, said, bool(found))
            if not found:
                continue
            bare = clause  # the words of the claims aside: 吉他 names no one
            for t, m in found:
                if t.kind != "deed":  # a deed is the whole clause
                    bare = bare[: m.start()] + " " * (m.end() - m.start()) + bare[m.end() :]
            if _NOT_A_CLAIM.search(bare) or (_OTHERS.search(bare) and "我" not in clause):
                continue
            weather = [(t, m) for t, m in found if t.kind == "weather"]
            doings = [(t, m) for t, m in found if t.kind != "weather"]
            about = current
            # a span's habit (最近天天去…) is a claim about that span; a liking never is
            often = about in SPANS and about != "before"
            habit = bool((_LIKING if often else _HABIT).search(clause)) or framed
            if about is None and doings:
                own = "我" in clause or _own(clause, clause[: doings[0][1].start()])
                if _NOW_OR_JUST.search(clause) and not habit and own:
                    about = 0
            if about is None and _MEAL_IS.search(clause):
                about = 0  # 午饭是鲷鱼烧: today's lunch
            if about is not None and named is None and _PRESENT.search(clause):
                about = 0  # …呢: now, whatever day was asked
            if habit and (named is None or named in SPANS):
                about = None  # a liking or a habit, whatever day the question named
            done = _DONE.search(clause) is not None
            going = _GOING.search(clause) and when is not None
            plan = bool(_SOON.search(bare) or _LEAVING.search(clause)) or (
                not done and bool(_PLAN.search(bare) or going)
            )
            if current is None and not _CONSUMED.search(clause):
                # naming an item (我超爱铜锣烧了) claims nothing without a day or a verb
                doings = [(term, m) for term, m in doings if term.kind != "item"]
            chosen = (doings if is_checked(about) else []) + (
                weather if named in (None, 0) and not habit else []
            )
            for term, m in chosen:
                if term.kind == "deed":  # the whole clause: its 没 may stand anywhere (都没买)
                    before = _NOT_NEGATION.sub("", clause)
                else:
                    before = _NOT_NEGATION.sub("", clause[: m.start()])[-6:]
                own_span = (term.span, term.word) if term.span else None
                # a meal (午饭) keeps its own time over one said in an earlier clause
                span = (own_span or when) if carried else (when or own_span)
                present = (
                    when is None
                    and not done
                    and about == 0
                    and (bool(_PRESENT.search(clause)) or undated_is_now)
                )
                out.append(
                    Claim(
                        term,
                        m.group(0),
                        bool(_NEGATION.search(before)),
                        span[0] if span else None,
                        span[1] if span else "",
                        done,
                        present=present and term.kind != "weather",
                        day=about if is_checked(about) and term.kind != "weather" else 0,
                        plan=plan,
                    )
                )
    return out


Timed = tuple[tuple[tuple[float, float], str], bool] | None
"""A time said in a sentence (`time_of`), and whether its clause said nothing else."""
_CONTINUES = re.compile(r"^(?:还|也|顺便|顺手|又|一边|边|同时|并且|而且|就在)")
"""A clause that goes on with the same moment (…，还吃了冰淇淋): an earlier time holds for it."""


def _scope(
    clause: str, said: Timed, claiming: bool
) -> tuple[tuple[tuple[float, float], str] | None, bool, Timed]:
    """The time of day ``clause`` speaks of, whether it was carried from an earlier clause, and
    the time later clauses may carry. A time holds for its own clause; an earlier one holds only
    when it was said alone (下午三点，在公园散步), when the clause goes on with the same moment
    (…，还吃了冰淇淋), or for a period (早上…，然后去了公园) when the clause opens with her words —
    not for a clause that makes its own claim (7点多起床，午饭吃过了)."""
    if (own := time_of(clause)) is not None:
        return own, False, (own, not claiming and not _core(clause))
    if said is None or _JUST_NOW.search(clause):
        return None, False, None
    (time, alone), opening = said, clause.lstrip("，, 嗯诶欸哎啊呀哈嘿…")
    period = ":" not in time[1]
    mine = _OWN_TOKENS.match(opening)
    if alone or _CONTINUES.match(opening) or (period and mine and mine.group(0).strip()):
        return time, True, said
    return None, False, (None if claiming else said)


def _hours(moment: datetime, tz: tzinfo | None) -> float:
    local = moment.astimezone(tz)
    return local.hour + local.minute / 60


_WHAT_HAPPENED = ("name", "result", "params", "notes", "with", "items")
"""The fields of an episode's data that say what happened to her (not why she chose it: a
reason such as 想看小说 backs nothing; nor what others said in a meeting)."""


def _said_of(episode: Episode) -> str:
    typed = episode.record()  # None: a document that does not fit (warned once), its summary only
    data = typed.model_dump(by_alias=True, mode="json") if typed is not None else {}
    happened = {k: data[k] for k in _WHAT_HAPPENED if data.get(k)}
    return episode.summary + json.dumps(happened, ensure_ascii=False, default=str)


def _where_and_what(episode: Episode) -> tuple[str | None, str | None]:
    """The action (id) and place of a behavior episode or a meeting."""
    typed = episode.record()
    if isinstance(typed, BehaviorData | ConversationData):
        return typed.action, typed.place
    return None, None


def _matches(claim: Claim, episode: Episode) -> bool:
    action, place = _where_and_what(episode)
    if claim.term.kind == "action" and action in claim.term.keys:
        return True
    record = _said_of(episode)
    term = claim.term
    if (
        term.kind == "place"
        and place in term.keys
        and (not term.backed_by or term.backed_by in record)
    ):
        return True
    if claim.term.kind == "deed":
        return backs(claim.term.backed_by, record)
    if claim.term.kind == "outside":
        return re.search(claim.term.backed_by, record) is not None
    if claim.term.kind == "action":
        return re.search(claim.term.pattern, record) is not None
    return claim.term.word in record


def _in_time(claim: Claim, episode: Episode, tz: tzinfo | None) -> bool:
    if claim.span is None:
        return True
    start = _hours(episode.time, tz)
    end = _hours(episode.end_time, tz) if episode.end_time else start + 0.5
    end = end if end >= start else 24.0
    slack = (NOW_SLACK if claim.present else CLOCK_SLACK).total_seconds() / 3600
    lo, hi = claim.span
    return lo - slack <= end and start <= hi + slack


Record = Sequence[Episode] | Mapping[int, Sequence[Episode]] | Mapping[DayKey, Sequence[Episode]]
"""Her episodes: today's, or by day (0 today, 1 yesterday, 2 the day before) and span."""
DAY_NAMES = ("今天", "昨天", "前天")


def day_name(day: DayKey) -> str:
    """How the feedback names a day or a span (今天, 上周, 以前)."""
    if isinstance(day, int):
        return DAY_NAMES[day] if day < len(DAY_NAMES) else "那天"
    return SPANS[day]


def _day_order(day: DayKey) -> tuple[int, int]:
    return (0, day) if isinstance(day, int) else (1, list(SPANS).index(day))


def _by_day(record: Record) -> Mapping[DayKey, Sequence[Episode]]:
    return (
        cast(Mapping[DayKey, Sequence[Episode]], record)
        if isinstance(record, Mapping)
        else {0: record}
    )


_SUNSHINE = re.compile(r"阳光|太阳(?!镜|能)|艳阳|晒")


def _sun_at_night(claim: Claim, now: datetime) -> bool:
    """Sunshine (阳光, 太阳, 晒) said while it is dark (before 06:00, from 19:00) with no time of
    day of its own (下午阳光很好 at night is about the afternoon)."""
    hour = now.astimezone(now.tzinfo).hour
    return bool(_SUNSHINE.search(claim.said)) and claim.span is None and (hour < 6 or hour >= 19)


def problems(
    found: Sequence[Claim], record: Record, now: datetime, *, weather: Sequence[str] = ()
) -> list[str]:
    """What in ``found`` her episodes of that day (or span) contradict or cannot back, as lines
    for the model. A doing at a time of day still ahead is a plan when its clause says so
    (`Claim.plan`: "下午去打工" in the morning), and otherwise a claim nothing can back yet; 周末
    on a weekday without 了 is the coming weekend (a plan). A day whose episodes were not read is
    not checked. ``weather``: the weather now (its type and temperature); without it, what she
    says of the weather is not checked."""
    tz = now.tzinfo
    days = _by_day(record)
    out: list[str] = []
    for claim in found:
        if claim.term.kind == "weather":
            if weather and not claim.negated and not claim.term.keys & set(weather):
                out.append(f"你说「{claim.said}」，但现在的天气是{'，'.join(weather)}。")
            elif weather and not claim.negated and _sun_at_night(claim, now):
                out.append(f"你说「{claim.said}」，但现在是{now:%H:%M}，天还没亮或已经黑了。")
            continue
        if claim.day not in days:
            continue
        if claim.day == "weekend" and now.weekday() < 5 and not claim.past:
            continue  # 周末去游乐园玩 on a Tuesday: the coming weekend
        name = day_name(claim.day)
        stamp = "%H:%M" if isinstance(claim.day, int) else "%m-%d %H:%M"
        if claim.present:
            claim = replace(claim, span=(_hours(now, tz),) * 2, clock="现在")
        if claim.term.kind == "late":
            if not claim.negated and (line := _woke_on_time(claim, days[claim.day], tz)):
                out.append(line)
            continue
        ahead = claim.day == 0 and claim.span is not None and claim.span[0] > _hours(now, tz) + 0.25
        if claim.day == 0 and claim.plan and (ahead or claim.span is None):
            continue
        matching = [e for e in days[claim.day] if _matches(claim, e)]
        if claim.negated and matching:
            first = matching[0].time.astimezone(tz)
            out.append(f"你说{name}没「{claim.said}」，但记录里 {first:{stamp}} 有这件事。")
        elif not claim.negated and ahead and not any(_in_time(claim, e, tz) for e in matching):
            out.append(
                f"你说「{claim.clock}」时「{claim.said}」，但现在才 {now.astimezone(tz):%H:%M}，"
                "那个时间还没到，记录里不会有；要说打算就说是打算。"
            )
        elif not claim.negated and not matching:
            out.append(f"你说{name}「{claim.said}」，但{name}的生活记录里没有。")
        elif not claim.negated and not any(_in_time(claim, e, tz) for e in matching):
            times = "、".join(f"{e.time.astimezone(tz):{stamp}}" for e in matching[:5])
            when = "现在" if claim.present else f"「{claim.clock}」时"
            out.append(f"你说{when}「{claim.said}」，但记录里是 {times}。")
    return list(dict.fromkeys(out))


def _woke_on_time(claim: Claim, episodes: Sequence[Episode], tz: tzinfo | None) -> str | None:
    """Feedback when she says she woke late (`_LATE`) but that day's record shows her up at a
    normal time (before `LATE_WAKE`) without sleeping more; None when the record backs it or
    cannot say (no wake-up recorded)."""
    woke: list[Episode] = []
    for e in episodes:
        action, _ = _where_and_what(e)
        if action is not None and re.fullmatch(claim.term.backed_by, action):
            return None  # she slept a little more
        if action in claim.term.keys:
            woke.append(e)
    if not woke or any(_hours(e.time, tz) >= LATE_WAKE for e in woke):
        return None
    first = min(e.time for e in woke).astimezone(tz)
    return f"你说「{claim.said}」，但记录里{day_name(claim.day)} {first:%H:%M} 就起床了，不算晚。"


def _episode_of(running: RunningAction) -> Episode:
    """Her running action as the episode the engine writes for it."""
    return Episode.model_validate(
        {
            "_id": running.episode_id,
            "character_id": "",
            "type": "behavior",
            "time": running.started_at,
            "end_time": running.ends_at,
            "status": "running",
            "summary": running.name,
            "data": {"action": running.action_id, "name": running.name, "place": running.place},
        }
    )


class GroundingCheck:
    """Checks every answer that will be sent against her episodes of the day it speaks of
    (``memory.today_events``; ``memory.episodes`` for yesterday and the day before) and the
    world's weather now."""

    def __init__(
        self,
        lexicon: ClaimLexicon | None,
        memory: MemoryService | None,
        clock: Clock,
        world: WorldView | None = None,
    ) -> None:
        self.lexicon = lexicon
        self.memory = memory
        """Her memory (``today_events``, ``episodes``), or None: no check."""
        self.clock = clock
        self.world = world
        """A `message.deps.WorldView` (the weather now), or None: the weather is not checked."""

    async def check(self, text: str, *, question: str = "", char: Any = None) -> str | None:
        """Feedback for the model when ``text`` claims what her record does not show. ``char``
        (her live state) adds what she is doing right now, which the record may not have caught
        up with yet."""
        if self.memory is None or self.lexicon is None:
            return None
        found = claims(text, self.lexicon, day=day_offset(question))
        if not found:
            return None
        now = self.clock.now()
        try:
            days = await read_days(self.memory, now, {c.day for c in found})
        except Exception as exc:  # no record to check against: let the answer through
            log.warning("grounding check skipped: her episodes unavailable (%s)", exc)
            return None
        running = getattr(char, "running", None)
        today = days.get(0)
        if (
            running is not None
            and today is not None
            and running.episode_id not in {e.id for e in today}
        ):
            days[0] = [*today, _episode_of(running)]
        weather = await self._weather() if any(c.term.kind == "weather" for c in found) else []
        return feedback(found, days, now, weather=weather)

    async def _weather(self) -> list[str]:
        if self.world is None:
            return []
        try:
            world = await self.world.load_world()
        except Exception as exc:
            log.warning("grounding check: the weather is unavailable (%s)", exc)
            return []
        if world is None or world.weather is None:
            return []
        return [world.weather.type, world.weather.temperature]


async def read_days(
    memory: MemoryService, now: datetime, days: Iterable[DayKey]
) -> dict[DayKey, list[Episode]]:
    """Her episodes of each of ``days`` (0 today, 1 yesterday, …, or a span of `SPANS`): what
    she did and her meetings with other characters (not her chat windows): the one place the
    check reads her record, one range per day or span (`span_range`), read only for the days
    and spans the claims speak of. A span reads at most `SPAN_READ_LIMIT` episodes (the newest);
    以前 reads the last `BEFORE_DAYS` days and her latest `DIARIES_READ` diaries besides. A past
    day or span the memory cannot read is left out (not checked)."""
    wanted = set(days)
    out: dict[DayKey, list[Episode]] = {}
    # a memory without a history store behind it (a test's, a chat without one) reads today only
    if callable(getattr(memory.episodes, "between", None)):
        diary = getattr(memory, "diary", None)
        out = await read_past(memory.episodes, memory.character_id, now, wanted, diaries=diary)
    if 0 in wanted:
        today = list(await memory.today_events(now, limit=200))
        out[0] = sorted([*today, *out.get(0, [])], key=lambda e: e.time)
    return out


class EpisodeRange(Protocol):
    """What the check reads her past from (`memory.episodes.EpisodeRepo`)."""

    async def between(
        self,
        character_id: str,
        start: datetime,
        end: datetime,
        *,
        type_: EpisodeType | Sequence[EpisodeType] | None = None,
        id_prefix: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Episode]: ...


class DiaryShelf(Protocol):
    """Where the check reads her diaries (`memory.diary.DiaryWriter`)."""

    async def find(
        self, character_id: str, *, end: date | None = None, limit: int | None = None
    ) -> list[Diary]: ...


async def read_past(
    episodes: EpisodeRange,
    character_id: str,
    now: datetime,
    days: Iterable[DayKey],
    *,
    diaries: DiaryShelf | None = None,
) -> dict[DayKey, list[Episode]]:
    """`read_days` from the history store itself: her doings of each past day or span, and her
    meetings of each of ``days`` (today's too: what she did today is the caller's to add);
    ``diaries``: her diaries, read for 以前."""
    out: dict[DayKey, list[Episode]] = {}
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for day in sorted(set(days), key=_day_order):
        if isinstance(day, int):
            start = midnight - timedelta(days=day)
            end, limit = start + timedelta(days=1), 200
        else:
            (start, end), limit = span_range(day, now), SPAN_READ_LIMIT
        found: list[Episode] = []
        if day != 0:
            found = list(
                reversed(
                    await episodes.between(
                        character_id, start, end, type_=DOINGS, limit=limit, newest_first=True
                    )
                )
            )
        met = await episodes.between(
            character_id,
            start,
            end,
            type_="conversation",
            id_prefix=MEETING_PREFIX,
            limit=50 if isinstance(day, int) else limit,
        )
        out[day] = sorted([*found, *met], key=lambda e: e.time)
        if day == "before" and diaries is not None:
            out[day] = [*await _diaries(diaries, character_id, now), *out[day]]
    return out


async def _diaries(diaries: DiaryShelf, character_id: str, now: datetime) -> list[Episode]:
    """Her latest diaries before today, each as an episode whose summary is its text (what a
    claim about 以前 may be backed by beyond the episodes read)."""
    found = await diaries.find(character_id, end=now.date(), limit=DIARIES_READ)
    return [
        Episode.model_validate(
            {
                "_id": diary.id,
                "character_id": character_id,
                "type": "system",
                "time": datetime.fromisoformat(diary.date).replace(tzinfo=now.tzinfo),
                "summary": f"日记：{diary.text}",
            }
        )
        for diary in sorted(found, key=lambda d: d.date)
    ]


def feedback(
    found: Sequence[Claim], record: Record, now: datetime, *, weather: Sequence[str] = ()
) -> str | None:
    """What the model reads when ``found`` claims what ``record`` (her episodes, by day) does
    not show; None when the record bears every claim out."""
    wrong = problems(found, record, now, weather=weather)
    if not wrong:
        return None
    tz = now.tzinfo
    lines = ["你的回答和你的生活记录对不上：", *(f"- {w}" for w in wrong)]
    days = _by_day(record)
    shown = {c.day for c in found if c.day in days} | ({0} if 0 in days else set())
    for day in sorted(shown, key=_day_order):
        lines.append(f"{day_name(day)}的生活记录：")
        if isinstance(day, int):
            lines += [f"- {e.time.astimezone(tz):%H:%M} {e.summary}" for e in days[day]]
        else:  # a span: the latest few, each with its day
            lines += [
                f"- {e.time.astimezone(tz):%m-%d %H:%M} {e.summary[:SPAN_LINE_CHARS]}"
                for e in list(days[day])[-SPAN_LINES:]
            ]
        if not days[day]:
            lines.append("- （没有记录）")
    if weather:
        lines.append(f"现在的天气：{'，'.join(weather)}。")
    lines.append("请只根据记录重新回答；记录里没有的事就说没做或不记得，不要编造。")
    return "\n".join(lines)


# -- what a tool records from chat must be what the speaker said ----------------------------------

SPOKEN_BACK = 10
"""How many of the session's latest messages are read for what the speaker said."""
NOT_SAID = (
    "{name}没有说过「{what}」这件事（他们的原话里没有），所以没有记下，也不会告诉别人。"
    "只记对方自己说过的事；不要说你已经记下了。"
)
"""What the model reads when a tool's argument is not in the speaker's own words."""


def said_by(argument: str, said: Sequence[str], *, name: str = "") -> bool:
    """Whether ``argument`` (news in the third person, a gift's item) is what ``said`` (the
    speaker's own messages) says: most of its word pairs are in one of them, the speaker's
    name and pronouns aside; an item also when a two-character part of it was said
    (苹果 for 青苹果)."""
    core = argument.replace(name, "") if name else argument
    core = re.sub(r"[他她它]们?", "", core)
    if any(backs(core, text) for text in said):
        return True
    plain = re.sub(r"[^\u4e00-\u9fffA-Za-z0-9]", "", core)
    return 0 < len(plain) <= 6 and any(
        plain[i : i + 2] in text for text in said for i in range(len(plain) - 1)
    )


def grounded_tool(tool: Tool[ChatDeps], argument: str, done: str = "") -> Tool[ChatDeps]:
    """``tool`` (a `message.agent.Tool` that records what someone told or gave her) run only
    when its ``argument`` is in the speaker's own recent messages; otherwise the model reads
    why, nothing is queued, and a later line of hers that says it was done (``done``, a regex:
    记住了, 谢谢) does not go out (`message.agent.Refusal`)."""

    async def run(ctx: RunContext[ChatDeps], args: dict[str, Any]) -> object:
        what = str(args.get(argument, "")).strip()
        if what:
            recent = await ctx.deps.sessions.recent(ctx.session_id, SPOKEN_BACK)
            said = [e.text for e in recent if e.user_id == ctx.user_id and not e.from_bot]
            if not said_by(what, said, name=ctx.user_name):
                log.info("%s not queued: %r is not in what %s said", tool.name, what, ctx.user_id)
                reason = NOT_SAID.format(name=ctx.user_name or "对方", what=what)
                refusal = Refusal(reason, re.compile(done)) if done else None
                return ToolResult(reason, refused=refusal)
        result = tool.run(ctx, args)
        return await result if inspect.isawaitable(result) else result

    return replace(tool, run=run)
