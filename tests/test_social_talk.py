"""What characters say when they meet: templates without a model, the model within its per-day
budget (one call per conversation, purpose ``converse``), the templates again after it."""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from tests.conftest import at_time, make_engine
from tests.test_social_meetings import (
    CHAT_WITH_KAEDE,
    WALK,
    by_character,
    in_the_park,
    step_in_order,
)
from yuiju.llm import FunctionChatModel
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import HistoryStore
from yuiju.world.conversation import (
    ModelTalker,
    Speaker,
    TalkRequest,
    TemplateTalker,
    render_talk_prompt,
)
from yuiju.world.relations import Appointment, NewsItem, Party, news_id

SATURDAY = "2026-09-05 10:00"


def lines(*pairs: tuple[str, str]) -> str:
    return json.dumps({"lines": [{"speaker": s, "text": t} for s, t in pairs]}, ensure_ascii=False)


def request(**kw: Any) -> TalkRequest:
    fields: dict[str, Any] = {
        "meeting_id": "mtg_1",
        "kind": "chat",
        "activity": "聊天",
        "place": "南风公园",
        "now": at_time(SATURDAY),
        "a": Speaker(id="yuiju", name="悠酱", persona="你是悠酱。", closeness=55),
        "b": Speaker(id="kaede", name="枫", persona="你是枫。", closeness=55),
        **kw,
    }
    return TalkRequest(**fields)


async def test_templates_say_the_news_with_where_it_came_from() -> None:
    origin = Party(kind="person", id="qq:123", name="小林")
    item = NewsItem(
        id=news_id(origin, "小林下周要搬家"),
        text="小林下周要搬家",
        origin=origin,
        source=Party(id="chika", name="千夏"),
        learned_at=at_time("2026-09-04 12:00"),
        hops=1,
    )
    said = await TemplateTalker().converse(request(news=(("yuiju", item),)), use_model=False)
    assert said.source == "template" and said.lines[0].speaker == "yuiju"
    assert any(line.text == "对了，听千夏说，小林下周要搬家。" for line in said.lines)
    again = await TemplateTalker().converse(request(news=(("yuiju", item),)), use_model=False)
    assert again == said  # the same meeting, the same words


async def test_the_model_writes_the_lines_in_one_call_and_its_prompt_says_what_happens() -> None:
    model = FunctionChatModel(lambda *_: lines(("悠酱", "枫！一起走走吗？"), ("枫", "好啊！")))
    talker = ModelTalker(model)

    said = await talker.converse(request(), use_model=True)

    assert said.source == "model" and [x.speaker for x in said.lines] == ["yuiju", "kaede"]
    assert model.purposes == ["converse"] and len(model.calls) == 1
    prompt = render_talk_prompt(request())
    assert "悠酱" in prompt and "枫" in prompt and "南风公园" in prompt and "朋友" in prompt


async def test_unusable_lines_fall_back_to_templates_after_one_call() -> None:
    model = FunctionChatModel(lambda *_: lines(("小明", "我是谁？"), ("枫", "嗯")))
    said = await ModelTalker(model).converse(request(), use_model=True)
    assert said.source == "template" and len(model.calls) == 1


async def test_lines_from_one_side_only_are_not_a_conversation() -> None:
    model = FunctionChatModel(lambda *_: lines(("枫", "今天天气真好。"), ("枫", "我们走吧。")))
    said = await ModelTalker(model).converse(request(), use_model=True)
    assert said.source == "template" and len(model.calls) == 1
    assert {line.speaker for line in said.lines} == {"yuiju", "kaede"}


def test_the_prompt_asks_both_to_speak_and_says_the_place_once() -> None:
    prompt = render_talk_prompt(
        request(kind="together", activity="一起在公园散步", place="南风公园")
    )
    assert "两个人都要说话" in prompt
    assert "南风公园一起在公园散步" not in prompt


def test_templates_never_say_together_twice() -> None:
    for n in range(40):
        said = TemplateTalker().write(
            request(meeting_id=f"mtg_{n}", kind="together", activity="一起在食堂吃午饭")
        )
        assert not any("一起一起" in line.text for line in said.lines)
    said = TemplateTalker().write(request(kind="together", activity="吃午饭", meeting_id="mtg_2"))
    assert not any("一起一起" in line.text for line in said.lines)
    kaede = Party(id="kaede", name="枫")
    walk = Appointment(
        id="apt_1",
        other=kaede,
        asked_by=Party(id="yuiju", name="悠酱"),
        place="park",
        start=at_time("2026-09-06 15:00"),
        activity="一起散步",
        created_at=at_time(SATURDAY),
    )
    said = TemplateTalker().write(
        request(kind="invite", activity="约人", proposal=walk, proposal_place="南风公园")
    )
    assert "明天15:00一起去南风公园散步好不好？" in [line.text for line in said.lines]


async def test_past_her_daily_budget_a_meeting_is_worded_from_templates(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    model = FunctionChatModel(lambda *_: lines(("悠酱", "枫！"), ("枫", "悠酱！")))
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
        talker=ModelTalker(model),
        model_talks_per_day=1,
    )

    await step_in_order(kit, SATURDAY, "kaede", "yuiju")
    await kit.engine.run(until=at_time("2026-09-05 10:41"))
    await kit.engine.flush_outbox(force=True)

    talks = await EpisodeRepo(sqlite_history).between(
        "yuiju", at_time(SATURDAY), at_time("2026-09-05 11:00"), type_="conversation"
    )
    assert [t.data["source"] for t in talks][:2] == ["model", "template"]
    assert len(model.calls) == 1
    yuiju = await kit.character("yuiju")
    assert yuiju is not None and yuiju.social.model_talks_today == 1
