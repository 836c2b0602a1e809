"""星见丘高校: getting there and back, classes, lunch, the library."""

from yuiju.world.action import Action, ActionContext, at_least, below, between, school_day
from yuiju.world.clock import in_window, minutes_until


def _class_minutes(ctx: ActionContext) -> int:
    """Until the next break: lunch at 12:00, the end of the day at 16:30."""
    end = "12:00" if in_window(ctx.now, "07:30", "12:00") else "16:30"
    return minutes_until(ctx.now, end)


def _attend_class(ctx: ActionContext) -> str:
    minutes = (
        (ctx.running.ends_at - ctx.running.started_at).total_seconds() / 60 if ctx.running else 60
    )
    hours = minutes / 60
    ctx.character.change(stamina=-3 * hours, mood=-1.5 * hours)
    lesson = ctx.rng.choice(["数学", "国语", "英语", "物理", "历史", "生物", "美术", "体育"])
    return f"上了{minutes:.0f}分钟的课，其中有一节{lesson}"


attend_class = Action(
    id="attend_class",
    name="在学校上课",
    description="上到12:00午休或16:30放学。[体力-3/小时][心情-1.5/小时]",
    at="school",
    when=school_day & (between("07:30", "11:50") | between("13:00", "16:20")),
    complete=_attend_class,
    duration=_class_minutes,
    tags=frozenset({"school", "study"}),
)


def _school_lunch(ctx: ActionContext) -> str:
    ctx.character.change(satiety=40, stamina=6)
    dish = ctx.rng.choice(["咖喱饭", "炸鸡块定食", "乌冬面", "亲子丼", "炒面面包"])
    ctx.character.recover_mood(3)
    return f"在学校食堂吃了{dish}"


school_lunch = Action(
    id="school_lunch",
    name="在学校食堂吃午饭",
    description="不花金币。[饱腹+40][体力+6][心情+3][30分钟]",
    at="school",
    when=school_day & between("11:50", "13:00") & below("satiety", 90),
    complete=_school_lunch,
    duration=30,
    tags=frozenset({"meal"}),
)


def _library_study(ctx: ActionContext) -> str:
    ctx.character.change(stamina=-4)
    ctx.character.recover_mood(2)
    return "在图书馆自习了一小时"


library_study = Action(
    id="library_study",
    name="在图书馆自习",
    description="[体力-4][心情+2][60分钟]",
    at="school",
    when=between("12:00", "17:30") & at_least("stamina", 10),
    complete=_library_study,
    duration=60,
    tags=frozenset({"study", "leisure"}),
    # During the school day, study means classes, and the lunch break is for lunch.
    utility=lambda ctx: -2.3 if in_window(ctx.now, "07:00", "16:30") else 0.0,
)


def _break_minutes(ctx: ActionContext) -> int:
    """Until the next class: 07:30 in the morning, 13:00 after lunch."""
    return max(1, minutes_until(ctx.now, "07:30" if ctx.now.hour < 8 else "13:00"))


def _break(ctx: ActionContext) -> str:
    ctx.character.change(stamina=2)
    chat = ctx.rng.choice(
        [
            "和同学聊了聊昨天的作业",
            "趴在桌上眯了一会儿",
            "看着窗外发了会儿呆",
            "把下节课的课本翻了翻",
        ]
    )
    return f"在教室里等上课，{chat}"


class_break = Action(
    id="class_break",
    name="在教室等上课",
    description="[体力+2][到下节课开始]",
    at="school",
    when=school_day & (between("06:30", "07:30") | between("11:50", "13:00")),
    complete=_break,
    duration=_break_minutes,
    tags=frozenset({"school", "rest"}),
    share=False,
    # The lunch break is for lunch when she is at all hungry, not for waiting in the classroom
    # (the offline policy's pull to school would otherwise skip it: one meal a day).
    utility=lambda ctx: (
        -1.2 if in_window(ctx.now, "11:50", "13:00") and ctx.character.satiety < 75 else 0.0
    ),
)
