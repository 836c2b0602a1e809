"""What two characters say when they meet is bound to their lives (issue 30): a model's line
that claims a doing, place, food or meeting the speaker's record does not back goes back to the
model once with the reason, a second miss gives the template lines, and true lines — the
meeting's own activity and place, the news passed on, what the speaker really did today — pass
unchanged in one call."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.conftest import TZ, at_time, cards_of, make_engine
from yuiju.config import load_config
from yuiju.llm import FunctionChatModel
from yuiju.llm.model import ChatMessage, JsonSchema
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.message.talk_grounding import TalkGrounding
from yuiju.storage.history import HistoryStore
from yuiju.world.behavior import StepInputs
from yuiju.world.clock import RealClock
from yuiju.world.conversation import Line, ModelTalker, Speaker, TalkRequest, TemplateTalker
from yuiju.world.decisions import DecisionLimits
from yuiju.world.loader import load_actions
from yuiju.world.policy import DecisionRequest
from yuiju.world.relations import NewsItem, Party, news_id
from yuiju.world.town import HAURA

CATALOGUE = load_actions("yuiju.actions")
ACTIONS = {a.id: a for a in CATALOGUE}
SATURDAY = "2026-09-05 10:00"


def done(who: str, action_id: str, when: str, minutes: int = 30) -> Episode:
    """A behavior episode as the engine writes it."""
    action = ACTIONS[action_id]
    place = action.at or "home"
    start = at_time(when)
    return Episode.model_validate(
        {
            "_id": f"{who}-{action_id}-{when}",
            "character_id": who,
            "type": "behavior",
            "time": start,
            "end_time": start + timedelta(minutes=minutes),
            "status": "completed",
            "summary": f"在{HAURA.place_name(place)}{action.name}",
            "data": {
                "action": action_id,
                "name": action.name,
                "place": place,
                "reason": "",
                "decided_by": "utility",
            },
        }
    )


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


def scripted(*drafts: str) -> FunctionChatModel:
    left = list(drafts)

    def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        return left.pop(0)

    return FunctionChatModel(answer)


@pytest.fixture
async def check(sqlite_history: HistoryStore) -> TalkGrounding:
    """Their record this Saturday morning: 枫 walked in the park, 悠酱 had breakfast at home."""
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    for episode in (
        done("kaede", "walk_in_park", "2026-09-05 09:00", 40),
        done("yuiju", "eat_breakfast", "2026-09-05 08:00", 20),
    ):
        await repo.put(episode)
    return TalkGrounding.build(CATALOGUE, cards_of(["yuiju", "kaede"]), repo)


INVENTED = lines(("悠酱", "枫！早上好～"), ("枫", "早！我刚在图书馆写完作业。"))


async def test_an_invented_doing_goes_back_to_the_model_with_the_speaker_and_the_claim(
    check: TalkGrounding,
) -> None:
    true = lines(("悠酱", "枫！早上好～"), ("枫", "早！我刚在公园散了会儿步。"))
    model = scripted(INVENTED, true)

    said = await ModelTalker(model, check=check).converse(request(), use_model=True)

    assert said.source == "model"
    assert [x.text for x in said.lines] == ["枫！早上好～", "早！我刚在公园散了会儿步。"]
    assert len(model.calls) == 2
    sent_back = model.calls[1][-1]["content"]
    assert model.calls[1][-2]["content"] == INVENTED  # the draft it wrote, then why it is wrong
    assert "枫" in sent_back and "图书馆" in sent_back and "作业" in sent_back


async def test_a_second_invented_draft_gives_the_template_lines(
    check: TalkGrounding, caplog: pytest.LogCaptureFixture
) -> None:
    again = lines(("悠酱", "我昨天去海边了，还买了奶茶。"), ("枫", "真好！"))
    model = scripted(INVENTED, again)

    with caplog.at_level(logging.INFO, logger="yuiju.world.conversation"):
        said = await ModelTalker(model, check=check).converse(request(), use_model=True)

    assert said.source == "template" and len(model.calls) == 2
    assert not any("图书馆" in x.text or "海边" in x.text for x in said.lines)
    fallbacks = [r for r in caplog.records if "templates instead" in r.getMessage()]
    assert len(fallbacks) == 1 and fallbacks[0].levelno == logging.INFO
    assert "悠酱" in fallbacks[0].getMessage()  # who said what the record does not back


async def test_true_lines_pass_unchanged_in_one_call(check: TalkGrounding) -> None:
    origin = Party(kind="person", id="qq:123", name="小林")
    item = NewsItem(
        id=news_id(origin, "小林下周要搬家"),
        text="小林下周要搬家",
        origin=origin,
        source=Party(id="chika", name="千夏"),
        learned_at=at_time("2026-09-04 12:00"),
        hops=1,
    )
    true = lines(
        ("悠酱", "枫！在南风公园碰到你真好，一起聊聊天吧。"),
        ("枫", "好呀，我早上在公园散了会儿步。"),
        ("悠酱", "我吃过早饭了。对了，听千夏说，小林下周要搬家。"),
        ("枫", "诶，真的吗？你昨天去哪儿了？"),
    )
    model = scripted(true)

    said = await ModelTalker(model, check=check).converse(
        request(news=(("yuiju", item),)), use_model=True
    )

    assert said.source == "model" and len(model.calls) == 1
    assert [x.text for x in said.lines] == [x["text"] for x in json.loads(true)["lines"]]


async def test_what_she_says_of_the_weather_is_the_worlds_weather(check: TalkGrounding) -> None:
    rainy = request(weather=("雨", "寒冷"))
    sunny = [Line("yuiju", "悠酱", "今天天气真好！"), Line("kaede", "枫", "是啊。")]
    wet = [Line("yuiju", "悠酱", "今天下雨了呢。"), Line("kaede", "枫", "是啊，好冷。")]

    wrong = await check.unbacked(rainy, sunny)
    assert list(wrong) == [0] and "悠酱" in wrong[0] and "雨" in wrong[0]
    assert await check.unbacked(rainy, wet) == {}


@pytest.mark.usefixtures("clean_config_env")
@pytest.mark.parametrize(("policy", "checked"), [("auto", True), ("utility", False)])
async def test_the_daemons_talker_has_the_check(
    tmp_path: Path, redis_url: str, policy: str, checked: bool
) -> None:
    """`yuiju run` / `yuiju world` build their runtime through `yuiju_cli.daemon_runtime`: with
    a model deciding (off the step), the talker that writes meetings checks its lines against
    their records; under the utility policy a meeting is worded inside the step, which never
    waits on a model nor on the check's reads (issue 29): the templates word it."""
    from yuiju import cli as yuiju_cli

    cfg = load_config(
        environ={},
        overrides={
            "app": {"data_dir": str(tmp_path / "data")},
            "redis": {"url": redis_url, "prefix": f"tc-{tmp_path.name}"},
            "embeddings": {"provider": "hashing"},
            "world": {"policy": policy, "characters": ["yuiju", "kaede"]},
        },
    )
    model = FunctionChatModel(lambda *_: "{}")
    runtime = await yuiju_cli.daemon_runtime(cfg, clock=RealClock(TZ), chat_model=model)
    try:
        talkers = [
            loop.neighbours.talker
            for town in runtime.engine.towns
            for loop in town.loops
            if loop.neighbours is not None
        ]
        assert len(talkers) == 2
        for talker in talkers:
            if checked:
                assert isinstance(talker, ModelTalker) and isinstance(talker.check, TalkGrounding)
            else:
                assert isinstance(talker, TemplateTalker), talker
    finally:
        await runtime.close()


async def test_a_meeting_the_offline_policy_decided_is_worded_without_the_model(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    """With decisions in flight, a meeting whose decision went past its deadline is started
    inside the step by the offline policy: its words come from the templates, so the step never
    waits on the talk model, nor on the check's reads of the history store (issue 29)."""
    from tests.test_decisions_in_flight import FakeWall, ModelPolicy
    from tests.test_social_meetings import CHAT_WITH_KAEDE, WALK, by_character, in_the_park

    async def answer(request: DecisionRequest) -> Any:
        if request.ctx.character.id == "yuiju":
            await asyncio.Event().wait()  # her model never answers
        return WALK

    wall = FakeWall()
    model = scripted(lines(("悠酱", "枫！"), ("枫", "悠酱！")))
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=ModelPolicy(answer),
        fallback=by_character(yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
        talker=ModelTalker(model),
        model_talks_per_day=5,
        decisions=DecisionLimits(deadline_minutes=600, deadline_seconds=20),
        wall=wall,
        prefix="offline-talk",
    )
    pool = kit.engine.decisions
    assert pool is not None
    now = at_time(SATURDAY)
    await kit.ticker.tick(now)
    inputs = StepInputs(decisions=pool)
    await kit.loops["kaede"].step(now, inputs)  # her decision goes out …
    for _ in range(5):
        await asyncio.sleep(0)
    await kit.loops["kaede"].step(now, inputs)  # … and comes back: she walks
    await kit.loops["yuiju"].step(now, inputs)  # hers never does
    wall.t += 21
    later = now + timedelta(minutes=1)
    await kit.loops["yuiju"].step(later, inputs)  # past the deadline: the offline policy

    her = await kit.character("yuiju")
    assert her is not None and her.running is not None
    assert her.running.decided_by.startswith("fallback") and "kaede" in str(her.running.params)
    assert model.calls == []
    await kit.engine.flush_outbox(force=True)
    talks = await EpisodeRepo(sqlite_history).between(
        "yuiju", now, now + timedelta(hours=1), type_="conversation"
    )
    assert [t.data["source"] for t in talks] == ["template"]
