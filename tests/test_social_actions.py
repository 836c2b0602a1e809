"""The joint actions of actions/social.py: offered with the right company, chosen by the model
and the offline policy, and what they change; invitations accepted or declined."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_ctx, make_engine
from tests.test_social_meetings import by_character, in_the_park, step_in_order
from yuiju.characters import load_card
from yuiju.llm import FunctionChatModel, estimate_prompt_tokens
from yuiju.llm.testing import schema_following
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import HistoryStore
from yuiju.world.action import ActionContext
from yuiju.world.loader import load_actions
from yuiju.world.policies.llm import LLMPolicy
from yuiju.world.policies.utility import UtilityPolicy
from yuiju.world.policy import DecisionRequest, RawDecision, validate_decision
from yuiju.world.randomness import Randomness
from yuiju.world.relations import Appointment, Party, Relation, appointment_id
from yuiju.world.social import company_of

CATALOGUE = load_actions()
ACTIONS = list(CATALOGUE)
JOINT = sorted(a.id for a in ACTIONS if a.joint is not None)
NAMES = {"yuiju": "悠酱", "kaede": "枫"}

SETTING: dict[str, tuple[str, str]] = {
    "greet": ("2026-09-05 10:00", "park"),
    "chat": ("2026-09-05 10:00", "park"),
    "walk_together": ("2026-09-05 10:00", "park"),
    "coast_walk_together": ("2026-09-05 10:00", "coast"),
    "lunch_together": ("2026-09-01 12:00", "school"),
    "diner_together": ("2026-09-05 12:00", "diner"),
    "study_together": ("2026-09-05 14:00", "school"),
    "invite": ("2026-09-03 17:00", "park"),
}


def with_kaede(now: str, where: str, **kaede: Any) -> ActionContext:
    """Yuiju at ``where`` at ``now`` with 枫 beside her, between two things."""
    ctx = make_ctx(now, location=where, satiety=40)
    other = make_character(**{"id": "kaede", "location": where, "satiety": 40, **kaede})
    ctx.company = company_of(
        ctx.character,
        [other],
        now=ctx.now,
        town=ctx.town,
        action_of=CATALOGUE.actions.get,
        names=NAMES,
    )
    return ctx


def test_every_joint_action_has_a_setting_here() -> None:
    assert set(JOINT) == set(SETTING)


@pytest.mark.parametrize("action_id", JOINT)
def test_a_joint_action_is_offered_only_with_someone_who_qualifies(action_id: str) -> None:
    action = CATALOGUE.actions[action_id]
    now, where = SETTING[action_id]
    assert action.available(with_kaede(now, where)), action.why_not(with_kaede(now, where))
    alone = make_ctx(now, location=where, satiety=40)
    assert not action.available(alone) and action.why_not(alone) == "这里没有别人"


@pytest.mark.parametrize("action_id", JOINT)
async def test_a_schema_following_model_picks_a_joint_action_and_a_partner_first_time(
    action_id: str,
) -> None:
    model = FunctionChatModel(schema_following(seed=5))
    policy = LLMPolicy(model, actions=ACTIONS)
    action = CATALOGUE.actions[action_id]
    for n in range(10):
        ctx = with_kaede(*SETTING[action_id])
        ctx.rng = random.Random(n)
        decision = await policy.decide(DecisionRequest(ctx=ctx, candidates=[action]))
        assert decision.action is action and decision.params is not None
        assert decision.params.partner == "kaede"  # type: ignore[attr-defined]
    assert policy.first_attempt_ok == policy.decisions == len(model.calls) == 10


async def test_the_offline_policy_fills_the_partner_and_the_invitation() -> None:
    policy = UtilityPolicy(all_actions=ACTIONS)
    ctx = with_kaede(*SETTING["invite"])
    decision = await policy.decide(
        DecisionRequest(
            ctx=ctx, candidates=[CATALOGUE.actions["invite"]], randomness=Randomness.seeded(1)
        )
    )
    params = decision.params
    assert params is not None and params.partner == "kaede"  # type: ignore[attr-defined]
    # Thursday evening: a day off comes on Saturday, so she proposes it, in the afternoon
    assert params.when == "后天 15:00"  # type: ignore[attr-defined]


def test_she_greets_only_whom_she_has_not_met_today() -> None:
    greet = CATALOGUE.actions["greet"]
    ctx = with_kaede("2026-09-05 10:00", "park")
    ctx.character.social.day = ctx.now.date()
    ctx.character.social.met_today = ["character:kaede"]
    assert greet.why_not(ctx) == "在场的人今天都打过招呼了"


def test_lunch_together_needs_the_other_hungry_too() -> None:
    lunch = CATALOGUE.actions["lunch_together"]
    assert not lunch.available(with_kaede("2026-09-01 12:00", "school", satiety=95))


def test_a_wrong_partner_goes_back_to_the_model_with_who_is_here() -> None:
    ctx = with_kaede("2026-09-05 10:00", "park")
    chat = CATALOGUE.actions["chat"]
    with pytest.raises(Exception, match="「千夏」不在这里；在场的是：枫"):
        validate_decision(
            RawDecision(action="聊天", reason="想聊天", params={"partner": "千夏"}),
            [chat],
            "t",
            ctx,
        )


async def test_at_the_diner_both_pay_for_their_set_meal(redis: aioredis.Redis) -> None:
    policy = by_character(
        yuiju={"action": "一起在日和食堂吃饭", "reason": "一起吃吧", "params": {"partner": "枫"}}
    )
    people = {
        cid: make_character(id=cid, location="diner", satiety=40, money=100)
        for cid in ("kaede", "yuiju")
    }
    kit = await make_engine(redis, None, policy=policy, start="2026-09-05 12:00", characters=people)

    await step_in_order(kit, "2026-09-05 12:00", "kaede", "yuiju")

    yuiju, kaede = await kit.character("yuiju"), await kit.character("kaede")
    assert yuiju is not None and kaede is not None
    assert (yuiju.money, kaede.money) == (70, 70)
    assert kaede.running is not None and kaede.running.action_id == "diner_together"


INVITE = {
    "action": "约人",
    "reason": "周六想和枫去公园",
    "params": {"partner": "枫", "place": "南风公园", "when": "后天 15:00"},
}


async def test_an_accepted_invitation_is_an_appointment_on_both_sides(
    redis: aioredis.Redis,
) -> None:
    people = in_the_park("kaede", "yuiju")
    yuiju_party = Party(id="yuiju", name="悠酱")
    people["kaede"].social.relations = {
        yuiju_party.key: Relation(party=yuiju_party, closeness=50, rest=50)
    }
    kit = await make_engine(
        redis, None, policy=by_character(yuiju=INVITE), start="2026-09-03 17:00", characters=people
    )

    await step_in_order(kit, "2026-09-03 17:00", "kaede", "yuiju")

    yuiju, kaede = await kit.character("yuiju"), await kit.character("kaede")
    assert yuiju is not None and kaede is not None
    (mine,) = yuiju.social.planned()
    (hers,) = kaede.social.planned()
    assert mine.id == hers.id and mine.start == at_time("2026-09-05 15:00") and mine.place == "park"
    assert (mine.other.id, hers.other.id) == ("kaede", "yuiju")
    assert mine.asked_by.id == hers.asked_by.id == "yuiju" and hers.source == "character"


async def test_a_declined_invitation_says_why_and_changes_no_plan(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    people = in_the_park("kaede", "yuiju")
    yuiju_party = Party(id="yuiju", name="悠酱")
    people["kaede"].social.relations = {
        yuiju_party.key: Relation(party=yuiju_party, closeness=50, rest=50)
    }
    chika = Party(id="chika", name="千夏")
    taken = at_time("2026-09-05 15:30")
    people["kaede"].social.appointments = [
        Appointment(
            id=appointment_id(chika, "kaede", taken, "coast"),
            other=chika,
            asked_by=chika,
            place="coast",
            start=taken,
            created_at=at_time("2026-09-02 12:00"),
        )
    ]
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=by_character(yuiju=INVITE),
        start="2026-09-03 17:00",
        characters=people,
    )

    await step_in_order(kit, "2026-09-03 17:00", "kaede", "yuiju")
    await kit.engine.flush_outbox(force=True)

    yuiju, kaede = await kit.character("yuiju"), await kit.character("kaede")
    assert yuiju is not None and kaede is not None
    assert yuiju.social.planned() == [] and len(kaede.social.planned()) == 1
    assert yuiju.running is not None and yuiju.running.action_id == "invite"
    (talk,) = await EpisodeRepo(sqlite_history).between(
        "yuiju", at_time("2026-09-03 17:00"), at_time("2026-09-03 18:00"), type_="conversation"
    )
    assert talk.data["declined"] == "那时候已经和千夏约好了"
    assert "枫没答应（那时候已经和千夏约好了）" in talk.summary
    assert any("抱歉，那时候已经和千夏约好了" in line["text"] for line in talk.data["lines"])


def test_a_sociable_decision_prompt_lists_the_joint_actions_within_its_budget() -> None:
    policy = LLMPolicy(FunctionChatModel(lambda *_: ""), actions=ACTIONS)
    ctx = with_kaede("2026-09-05 10:00", "park")
    request = DecisionRequest(
        ctx=ctx,
        candidates=[a for a in ACTIONS if a.available(ctx)],
        card=load_card("yuiju"),
        today=["06:40 起床", "07:00 在家吃早饭"],
        recent=["09:00 在家看书", "09:30 发呆（有点困）"],
        sociable=True,
    )
    system, moment = (m["content"] for m in policy.messages(request))
    for action_id in JOINT:
        assert f"- {CATALOGUE.actions[action_id].name}：" in system
    assert "在场：枫（不太熟）" in moment
    assert estimate_prompt_tokens(policy.messages(request)) <= 1100


def test_nobody_free_is_said_with_what_each_is_doing() -> None:
    chat = CATALOGUE.actions["chat"]
    ctx = with_kaede("2026-09-05 10:00", "park", asleep=False)
    ctx.company = tuple(
        c.__class__(**{**vars(c), "free": False, "busy": "正在和千夏聊天"}) for c in ctx.company
    )
    assert chat.why_not(ctx) == "在场的人都没空（枫正在和千夏聊天）"


def test_whom_she_met_yesterday_she_greets_again_today() -> None:
    greet = CATALOGUE.actions["greet"]
    ctx = with_kaede("2026-09-05 10:00", "park")
    ctx.character.social.day = ctx.now.date().replace(day=4)
    ctx.character.social.met_today = ["character:kaede"]
    assert greet.available(ctx)
