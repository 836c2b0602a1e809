"""Doing things with someone who is here: greeting, talking, eating, studying and walking
together, and inviting someone to a place and a time.

Each is a joint action built with `together` (world/social.py): it is offered only while someone
who qualifies is at her place (never at home: each character has her own), the decision names
whom (``partner``), and the engine starts it for both of them at once — the partner breaks off a
pastime for it, never class, work, a meal or another conversation — with a short conversation
recorded on both sides, closeness moving on both sides and news passing on. Copy one to add your
own: ``partner_when`` says who qualifies, ``run`` may change both (``ctx.partner``), ``complete``
runs on each side when it ends.
"""

from __future__ import annotations

from collections.abc import Callable

from yuiju.world.action import (
    ActionContext,
    Companion,
    Condition,
    at_least,
    below,
    between,
    not_done_today,
    school_day,
)
from yuiju.world.clock import in_window, is_school_day
from yuiju.world.social import (
    MEETING_PLACES,
    InviteParams,
    free_times,
    met_today,
    preferred_partner,
    together,
)

# -- short ones, anywhere but home -----------------------------------------------------------


def _in_class(ctx: ActionContext) -> bool:
    return school_day(ctx) and (
        in_window(ctx.now, "07:30", "11:50") or in_window(ctx.now, "13:00", "16:30")
    )


def _not_in_class(
    value: Callable[[ActionContext], float] | None = None,
) -> Callable[[ActionContext], float]:
    """The offline policy's hint, less a lot in class time: meeting friends is for the breaks."""

    def utility(ctx: ActionContext) -> float:
        return (value(ctx) if value is not None else 0.0) - (2.5 if _in_class(ctx) else 0.0)

    return utility


def _greet(ctx: ActionContext) -> str:
    gain = ctx.character.recover_mood(2)
    return f"打了个招呼，心情+{gain:.0f}"


def _not_greeted_yet(ctx: ActionContext) -> float:
    """Saying hello to someone she has not seen today comes before anything but sleep."""
    met = ctx.character.social.met_on(ctx.now.date())
    return 1.8 if any(f"character:{c.id}" not in met and c.free for c in ctx.company) else -1.0


greet = together(
    id="greet",
    name="打招呼",
    description="今天第一次见面时。[心情+2][5分钟]",
    kind="greet",
    invited="来打招呼",
    when=between("06:30", "21:30"),
    partner_when=met_today(),
    partner_why="在场的人今天都打过招呼了",
    news=False,
    duration=5,
    complete=_greet,
    utility=_not_in_class(_not_greeted_yet),
    share=False,
)


def _chat(ctx: ActionContext) -> str:
    gain = ctx.character.recover_mood(6)
    ctx.character.change(stamina=1)
    return f"聊了一会儿天，心情+{gain:.0f}"


chat = together(
    id="chat",
    name="聊天",
    description="会聊到最近听说的事。[心情+6][20分钟]",
    kind="chat",
    invited="找我聊天",
    when=between("07:00", "21:30") & at_least("stamina", 5),
    duration=20,
    complete=_chat,
    tags=("leisure",),
    utility=_not_in_class(),
)


# -- meals, study, walks -----------------------------------------------------------------------


def _hungry_too(ctx: ActionContext, partner: Companion) -> bool:
    return partner.state.satiety < 85


def _canteen_lunch(ctx: ActionContext) -> str:
    ctx.character.change(satiety=40, stamina=6)
    gain = ctx.character.recover_mood(5)
    dish = ctx.rng.choice(["咖喱饭", "炸鸡块定食", "乌冬面", "亲子丼", "炒面面包"])
    return f"一起在食堂吃了{dish}，饱腹+40，心情+{gain:.0f}"


lunch_together = together(
    id="lunch_together",
    name="一起在食堂吃午饭",
    description="[饱腹+40][心情+5][30分钟]",
    kind="together",
    invited="叫我一起吃午饭",
    at="school",
    when=school_day & between("11:50", "13:00") & below("satiety", 85),
    partner_when=_hungry_too,
    partner_why="在场的人不饿",
    duration=30,
    complete=_canteen_lunch,
    tags=("meal",),
    # The lunch break is for lunch with classmates, not for waiting in the classroom.
    utility=lambda ctx: 1.3,
)

DINER_SET = 30
"""What the set meal they share costs each of them."""


def _can_pay_and_hungry(ctx: ActionContext, partner: Companion) -> bool:
    return partner.state.satiety < 80 and partner.state.money >= DINER_SET


def _pay_both(ctx: ActionContext) -> str:
    assert ctx.partner is not None
    ctx.character.pay(DINER_SET)
    ctx.partner.pay(DINER_SET)
    return f"各点了一份{DINER_SET}金币的定食"


def _diner_meal(ctx: ActionContext) -> str:
    ctx.character.change(satiety=45, stamina=5)
    gain = ctx.character.recover_mood(6)
    return f"一起在日和食堂吃了定食，饱腹+45，心情+{gain:.0f}"


dinner_together = together(
    id="diner_together",
    name="一起在日和食堂吃饭",
    description=f"各付{DINER_SET}金币。[饱腹+45][心情+6][40分钟]",
    kind="together",
    invited="叫我一起吃饭",
    at="diner",
    when=below("satiety", 80) & at_least("money", DINER_SET),
    partner_when=_can_pay_and_hungry,
    partner_why="在场的人不饿或钱不够",
    run=_pay_both,
    duration=40,
    complete=_diner_meal,
    tags=("meal",),
)


def _rested(ctx: ActionContext, partner: Companion) -> bool:
    return partner.state.stamina >= 12


def _study(ctx: ActionContext) -> str:
    ctx.character.change(stamina=-4)
    gain = ctx.character.recover_mood(3)
    return f"一起在图书馆自习了一小时，互相讲了题，心情+{gain:.0f}"


study_together = together(
    id="study_together",
    name="一起在图书馆自习",
    description="[体力-4][心情+3][60分钟]",
    kind="together",
    invited="叫我一起自习",
    at="school",
    when=between("12:00", "17:30") & at_least("stamina", 12),
    partner_when=_rested,
    partner_why="在场的人太累了",
    duration=60,
    complete=_study,
    tags=("study",),
    # As with studying alone: during the school day, study means classes.
    utility=lambda ctx: -2.3 if in_window(ctx.now, "07:00", "16:30") else 0.0,
)


def _walk(where: str, mood: float, minutes: int):
    def complete(ctx: ActionContext) -> str:
        gain = ctx.character.recover_mood(mood)
        ctx.character.change(stamina=-minutes / 15)
        return f"一起在{where}散步，边走边聊，心情+{gain:.0f}"

    return complete


walk_together = together(
    id="walk_together",
    name="一起在公园散步",
    description="[心情+8][体力-2][30分钟]",
    kind="together",
    invited="叫我一起散步",
    at="park",
    when=between("06:00", "21:00") & at_least("stamina", 8),
    partner_when=_rested,
    partner_why="在场的人太累了",
    duration=30,
    complete=_walk("南风公园", 8, 30),
    tags=("leisure",),
)

coast_walk_together = together(
    id="coast_walk_together",
    name="一起在海边散步",
    description="[心情+12][体力-4][60分钟]",
    kind="together",
    invited="叫我一起去海边走走",
    at="coast",
    when=between("05:30", "21:00") & at_least("stamina", 10),
    partner_when=_rested,
    partner_why="在场的人太累了",
    duration=60,
    complete=_walk("月汐海岸", 12, 60),
    tags=("leisure",),
)


# -- invitations -------------------------------------------------------------------------------


def _not_yet_meeting(ctx: ActionContext, partner: Companion) -> bool:
    """No appointment between them yet."""
    return not any(a.other.id == partner.id for a in ctx.character.social.planned())


def _day_off(ctx: ActionContext, when: str) -> bool:
    return not is_school_day(InviteParams.start_of(ctx.now, when).date())


def _slot(ctx: ActionContext) -> dict[str, str]:
    """The offline choice: a day off, in the afternoon if she can, when the one she asks has
    nothing planned as far as she knows; somewhere she fancies."""
    partner = preferred_partner(ctx, invite.joint)  # type: ignore[arg-type]
    times = free_times(ctx, also=partner.state) or free_times(ctx)
    days_off = [w for w in times if _day_off(ctx, w)]
    pool = [w for w in days_off if w.endswith("15:00")] or days_off or times
    place = ctx.rng.choice(sorted(MEETING_PLACES))
    return {"place": ctx.town.place_name(place), "when": pool[0]}


def _invite_value(ctx: ActionContext) -> float:
    """Worth it for the offline policy when a day off comes soon with nothing planned for it."""
    planned = {a.start.date() for a in ctx.character.social.planned()}
    soon = [InviteParams.start_of(ctx.now, f"{day} 15:00") for day in ("明天", "后天")]
    free_day_off = any(not is_school_day(s.date()) and s.date() not in planned for s in soon)
    return 2.2 if free_day_off else -0.6


_a_free_time = Condition(lambda ctx: bool(free_times(ctx)), lambda _ctx: "最近三天都排满了")

invite = together(
    id="invite",
    name="约人",
    description="约对方改天见面，对方可能有事。[10分钟]",
    kind="invite",
    invited="来约我",
    when=between("07:00", "21:00") & not_done_today("invite") & _a_free_time,
    partner_when=_not_yet_meeting,
    partner_why="已经和在场的人约好了",
    news=False,
    params=InviteParams,
    duration=10,
    offline_params=_slot,
    choices=lambda ctx: {
        "place": {"enum": [ctx.town.place_name(p) for p in MEETING_PLACES]},
        "when": {"enum": free_times(ctx)},
    },
    utility=_not_in_class(_invite_value),
    share=False,
)
