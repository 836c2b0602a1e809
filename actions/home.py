"""Life at home: sleep and waking, meals, rest, reading, homework."""

from world.action import (
    Action,
    ActionContext,
    at_least,
    below,
    between,
    choose_minutes,
)
from world.clock import is_school_day, next_at


def _sleep(ctx: ActionContext) -> str:
    ctx.character.asleep = True
    return "躺下睡觉了"


def _sleep_minutes(ctx: ActionContext) -> int:
    """Until the alarm: 06:40 before a school day, 07:30 otherwise."""
    wake = next_at(ctx.now, "06:40")
    if not is_school_day(wake.date()):
        wake = next_at(ctx.now, "07:30")
    return max(30, int((wake - ctx.now).total_seconds() // 60))


sleep = Action(
    id="sleep",
    name="睡觉",
    description="上床睡觉，一直睡到闹钟响。睡眠中体力会慢慢恢复。[体力恢复][耗时到第二天早上]",
    at="home",
    when=between("20:30", "04:00") | below("stamina", 12),
    run=_sleep,
    duration=_sleep_minutes,
    tags=frozenset({"sleep"}),
    share=False,
)

MORNING_MOOD = {"晴": 5, "多云": 2, "阴": -2, "小雨": 0, "雨": -4, "雷雨": -8, "雪": 3, "雾": -1}
TEMPERATURE_MOOD = {"严寒": -6, "寒冷": -3, "清凉": 1, "舒适": 4, "温暖": 2, "炎热": -5}


def _wake_up(ctx: ActionContext) -> str:
    c = ctx.character
    c.asleep = False
    weather = ctx.world.weather
    delta = 0
    if weather is not None:
        delta += MORNING_MOOD[weather.type] + TEMPERATURE_MOOD[weather.temperature]
    if ctx.now.weekday() >= 5:
        delta += 3
    c.mood = min(100.0, max(0.0, 55 + delta + (c.mood - 55) * 0.3))
    sky = f"，外面{weather.type}" if weather else ""
    return f"起床了{sky}"


wake_up = Action(
    id="wake_up",
    name="起床",
    description="闹钟响了，起床开始新的一天。心情受天气和温度影响。[耗时10分钟]",
    at="home",
    while_asleep=True,
    run=_wake_up,
    duration=10,
    tags=frozenset({"wake"}),
    share=False,
)

sleep_more = Action(
    id="sleep_more",
    name="再睡一会",
    description="关掉闹钟再睡一会儿。[心情+1][耗时10分钟]",
    at="home",
    while_asleep=True,
    complete=lambda ctx: f"又睡了一会儿，心情+{ctx.character.recover_mood(1):.0f}",
    duration=10,
    tags=frozenset({"sleep_more"}),
    share=False,
)


def _meal(satiety: int, stamina: int, mood: float, text: str):
    def eat(ctx: ActionContext) -> str:
        ctx.character.change(satiety=satiety, stamina=stamina)
        ctx.character.recover_mood(mood)
        return text

    return eat


eat_breakfast = Action(
    id="eat_breakfast",
    name="在家吃早饭",
    description="在家吃一顿简单的早饭（米饭、味噌汤、煎蛋）。[饱腹+35][体力+5][耗时20分钟]",
    at="home",
    when=between("05:30", "10:30") & below("satiety", 90),
    complete=_meal(35, 5, 2, "吃了米饭、味噌汤和煎蛋"),
    duration=20,
    tags=frozenset({"meal"}),
)

eat_lunch_at_home = Action(
    id="eat_lunch_at_home",
    name="在家吃午饭",
    description="在家做午饭吃。[饱腹+40][体力+5][心情+2][耗时30分钟]",
    at="home",
    when=between("11:00", "14:30") & below("satiety", 90),
    complete=_meal(40, 5, 2, "在家做了午饭吃"),
    duration=30,
    tags=frozenset({"meal"}),
)

eat_dinner = Action(
    id="eat_dinner",
    name="在家吃晚饭",
    description="在家做晚饭吃。[饱腹+45][体力+8][心情+3][耗时40分钟]",
    at="home",
    when=between("17:00", "21:30") & below("satiety", 90),
    complete=_meal(45, 8, 3, "在家做了晚饭吃"),
    duration=40,
    tags=frozenset({"meal"}),
)

rest_at_home = Action(
    id="rest_at_home",
    name="在家休息",
    description="躺在沙发上休息。[体力+12][心情+2][耗时60分钟]",
    at="home",
    when=below("stamina", 85),
    complete=lambda ctx: (ctx.character.change(stamina=12), ctx.character.recover_mood(2), "在沙发上休息了一会儿")[-1],
    duration=60,
    tags=frozenset({"rest"}),
    share=False,
)

read_at_home = Action(
    id="read_at_home",
    name="在家看书",
    description="窝在房间里看喜欢的小说。[心情+6][耗时30/60分钟]",
    at="home",
    when=between("07:00", "23:00"),
    complete=lambda ctx: f"看了会儿小说，心情+{ctx.character.recover_mood(6):.0f}",
    duration=choose_minutes(30, 60, default=30),
    tags=frozenset({"leisure"}),
)

do_homework = Action(
    id="do_homework",
    name="在家写作业",
    description="在书桌前写今天的作业。[体力-5][心情-2][耗时60分钟]",
    at="home",
    when=between("15:00", "22:30") & at_least("stamina", 15),
    complete=lambda ctx: (ctx.character.change(stamina=-5, mood=-2), "把作业写完了")[-1],
    duration=60,
    tags=frozenset({"study"}),
)
