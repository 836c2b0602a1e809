"""Life at home: sleep and waking, breakfast and cooking, rest, reading, homework, the phone."""

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from yuiju.world.action import (
    Action,
    ActionContext,
    Condition,
    at_least,
    below,
    between,
    choose_minutes,
    decision_ctx,
    some_of,
)
from yuiju.world.clock import is_school_day, next_at
from yuiju.world.items import ALL, owned


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
    description="[体力恢复][到闹钟响]",
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
    description="[心情看天气][10分钟]",
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
    description="[心情+1][10/20/30分钟]",
    at="home",
    while_asleep=True,
    complete=lambda ctx: f"又睡了一会儿，心情+{ctx.character.recover_mood(1):.0f}",
    duration=choose_minutes(10, 20, 30, default=10),
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
    description="[饱腹+35][体力+5][20分钟]",
    at="home",
    when=between("05:30", "10:30") & below("satiety", 90),
    complete=_meal(35, 5, 2, "吃了米饭和味噌汤"),
    duration=20,
    tags=frozenset({"meal"}),
)


def _rest_at_home(ctx: ActionContext) -> str:
    ctx.character.change(stamina=12)
    ctx.character.recover_mood(2)
    return "在沙发上休息了一会儿"


rest_at_home = Action(
    id="rest_at_home",
    name="在家休息",
    description="[体力+12][心情+2][60分钟]",
    at="home",
    when=below("stamina", 85),
    complete=_rest_at_home,
    duration=60,
    tags=frozenset({"rest"}),
    share=False,
)

read_at_home = Action(
    id="read_at_home",
    name="在家看书",
    description="[心情+6][30/60分钟]",
    at="home",
    when=between("07:00", "23:00"),
    complete=lambda ctx: f"看了会儿小说，心情+{ctx.character.recover_mood(6):.0f}",
    duration=choose_minutes(30, 60, default=30),
    tags=frozenset({"leisure"}),
)


def _do_homework(ctx: ActionContext) -> str:
    ctx.character.change(stamina=-5, mood=-2)
    return "把作业写完了"


do_homework = Action(
    id="do_homework",
    name="在家写作业",
    description="[体力-5][心情-2][60分钟]",
    at="home",
    when=between("15:00", "22:30") & at_least("stamina", 15),
    complete=_do_homework,
    duration=60,
    tags=frozenset({"study"}),
)


class CookParams(BaseModel):
    ingredients: list[str] = Field(
        min_length=1, max_length=3, description="要用的食材（背包里有的，1-3 种，各用一份）"
    )
    dish: str = Field("家常菜", max_length=20, description="给这道菜起个名字")

    @field_validator("ingredients")
    @classmethod
    def _owned(cls, ingredients: list[str], info: ValidationInfo) -> list[str]:
        if len(set(ingredients)) != len(ingredients):
            raise ValueError("每种食材只写一次")
        ctx = decision_ctx(info)
        if ctx is not None:
            have = owned(ctx.character.inventory, "ingredient")
            missing = [i for i in ingredients if i not in have]
            if missing:
                raise ValueError(
                    f"背包里没有 {'、'.join(missing)}；现有食材：{'、'.join(have) or '无'}"
                )
        return ingredients


def _start_cooking(ctx: ActionContext) -> str:
    p = ctx.params
    assert isinstance(p, CookParams)
    for name in p.ingredients:
        ctx.character.consume_item(name)
    return f"用{'、'.join(p.ingredients)}做{p.dish}"


def _eat_cooked(ctx: ActionContext) -> str:
    assert ctx.running is not None and ctx.running.params
    used = [ALL[n] for n in ctx.running.params["ingredients"]]
    stamina = max(1, round(sum(i.stamina for i in used) * 1.1))
    satiety = max(1, round(sum(i.satiety for i in used) * 1.2)) + 15  # a cooked meal fills more
    ctx.character.change(stamina=stamina, satiety=satiety)
    gain = ctx.character.recover_mood(sum(i.mood for i in used) + (2 if len(used) == 2 else 1))
    return f"做好并吃掉了{ctx.running.params['dish']}，饱腹+{satiety}，心情+{gain:.0f}"


def _pick_cooking(ctx: ActionContext) -> dict:
    have = owned(ctx.character.inventory, "ingredient")
    return {"ingredients": have[:3], "dish": "家常便饭"}


cook_and_eat = Action(
    id="cook_and_eat",
    name="在家做饭吃",
    description="用背包里的食材。[饱腹+食材之和×1.2+15][40分钟]",
    at="home",
    when=Condition(
        lambda c: bool(owned(c.character.inventory, "ingredient")), lambda _c: "没有食材"
    )
    & below("satiety", 85),
    params=CookParams,
    run=_start_cooking,
    complete=_eat_cooked,
    offline_params=_pick_cooking,
    choices=lambda ctx: {
        "ingredients": some_of(owned(ctx.character.inventory, "ingredient"), at_most=3)
    },
    duration=40,
    tags=frozenset({"meal"}),
)


def _charge_minutes(ctx: ActionContext) -> int:
    return max(10, round((100 - ctx.character.phone_battery) / 10 * 3))


def _charged(ctx: ActionContext) -> str:
    ctx.character.phone_battery = 100
    return "手机充满电了"


charge_phone = Action(
    id="charge_phone",
    name="给手机充电",
    description="[电量→100%][每充10%约3分钟]",
    at="home",
    when=below("phone_battery", 60),
    complete=_charged,
    duration=_charge_minutes,
    tags=frozenset({"rest", "phone"}),
    share=False,
)
