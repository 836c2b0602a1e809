"""Chat turns are read in their conversation: a reply is indexed with the line it answers, found
by a question about what it replied to, and a question naming a speaker puts that speaker's own
lines first."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from yuiju.memory.distill import CHAT_MEMORIES, ChatLine, ChatMemories, line_end
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.lexical import LexicalEncoder, addressed_names
from yuiju.memory.semantic import SemanticMemory, names
from yuiju.memory.vectors import VectorStore, point_id

TZ = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 10, 21, 0, tzinfo=TZ)


class SameVector(HashingEmbedder):
    """Every text gets the same vector: meaning says nothing, only words and links can decide."""

    def vector(self, text: str) -> list[float]:
        return super().vector("同")


class Recording(HashingEmbedder):
    """Remembers every text it embedded for a document."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.seen: list[str] = []

    async def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.seen += list(texts)
        return await super().embed_documents(texts)


SMALL_TALK = [
    "Haha, totally.",
    "How was your day?",
    "Work was long today.",
    "Did you eat yet?",
    "Good morning!",
    "It's raining again.",
    "I'm so sleepy.",
    "Traffic was terrible.",
    "Talk later!",
    "Miss you!",
]


def line(who: str, text: str, minute: float, group: str = "g1") -> ChatLine:
    return ChatLine(
        user_id=f"qq:{who}",
        text=text,
        time=NOW + timedelta(minutes=minute),
        group_id=group,
        nickname=who,
    )


async def chat_memories(
    store: VectorStore, history, embedder: HashingEmbedder, **kw: object
) -> tuple[ChatMemories, SemanticMemory]:
    memory = SemanticMemory(store, embedder)
    chat = ChatMemories(history, memory, "yuiju", **kw)  # type: ignore[arg-type]
    await chat.ensure()
    return chat, memory


async def ask(memory: SemanticMemory, question: str, group: str = "g1") -> list[str]:
    later = NOW + timedelta(days=1)
    return [
        r.text
        for r in await memory.recall(
            question, character_id="yuiju", now=later, group_id=group, token_budget=None
        )
    ]


async def test_a_reply_is_found_by_the_question_it_answered(
    vector_store: VectorStore, sqlite_history
) -> None:
    # character n-grams for meaning: with meaning saying nothing at all (SameVector), every line
    # would look as close as the best by meaning, and Ann's small talk would take the speaker
    # bonus past the question
    chat, memory = await chat_memories(vector_store, sqlite_history, HashingEmbedder(64))
    await chat.add_many([line("Mel", t, i) for i, t in enumerate(SMALL_TALK)])
    await chat.add_many(
        [
            line("Mel", "Did you go to the support group?", 20),
            line("Ann", "Yes! It was so powerful.", 21),
        ]
    )
    await chat.add_many([line("Ann", t, 40 + i) for i, t in enumerate(SMALL_TALK)])
    found = await ask(memory, "How did Ann feel after the support group?")
    assert found[:2] == ["Yes! It was so powerful.", "Did you go to the support group?"]


async def test_each_line_is_embedded_after_the_end_of_the_line_before_it_in_its_own_chat(
    vector_store: VectorStore, sqlite_history
) -> None:
    embedder = Recording()
    chat, memory = await chat_memories(vector_store, sqlite_history, embedder)
    ids = await chat.add_many(
        [
            line(
                "Mel",
                "Hey Ann! It has been such a long time, I really missed our long chats. Did you go to the support group?",
                0,
            ),
            line("Bob", "Anyone up for lunch?", 0.5, group="g2"),  # another group: not context
            line("Ann", "Yes! It was so powerful.", 1),
            line("Ann", "Back again after dinner.", 200),  # three hours later: no context
        ]
    )
    assert embedder.seen == [
        "Mel: Hey Ann! It has been such a long time, I really missed our long chats. Did you go to the support group?",
        "Bob: Anyone up for lunch?",
        "Mel: Did you go to the support group?\nAnn: Yes! It was so powerful.",
        "Ann: Back again after dinner.",
    ]
    reply = await vector_store.scroll(memory.scope_filter("yuiju", group_id="g1"), 10)
    payload = next(h.payload for h in reply if h.payload["text"] == "Yes! It was so powerful.")
    assert payload["reply_to"] == point_id("chat", "yuiju", ids[0]) and payload["speaker"] == "Ann"
    assert (
        payload["context_text"]
        == "Hey Ann! It has been such a long time, I really missed our long chats. Did you go to the support group?"
    )
    stored = await sqlite_history.get(CHAT_MEMORIES.name, ids[2])
    assert stored is not None and stored["reply_to"] == ids[0]


async def test_one_line_per_add_and_after_a_restart_reads_the_same_context(
    vector_store: VectorStore, sqlite_history
) -> None:
    embedder = Recording()
    chat, _ = await chat_memories(vector_store, sqlite_history, embedder)
    await chat.add("qq:Mel", "What did you paint?", NOW, group_id="g1", nickname="Mel")
    restarted, _ = await chat_memories(
        vector_store, sqlite_history, embedder
    )  # nothing in its memory
    await restarted.add(
        "qq:Ann",
        "A sunset over the lake.",
        NOW + timedelta(minutes=1),
        group_id="g1",
        nickname="Ann",
    )
    await restarted.add(
        "qq:Ann", "私聊说一句", NOW + timedelta(minutes=2), nickname="Ann"
    )  # her private chat: no context
    assert embedder.seen[1:] == [
        "Mel: What did you paint?\nAnn: A sunset over the lake.",
        "Ann: 私聊说一句",
    ]


async def test_without_conversation_context_a_line_is_indexed_alone(
    vector_store: VectorStore, sqlite_history
) -> None:
    embedder = Recording()
    chat, _ = await chat_memories(vector_store, sqlite_history, embedder, context_minutes=0)
    await chat.add_many(
        [line("Mel", "What did you paint?", 0), line("Ann", "A sunset over the lake.", 1)]
    )
    assert embedder.seen == ["Mel: What did you paint?", "Ann: A sunset over the lake."]


async def test_a_question_naming_a_speaker_puts_their_own_lines_first(
    vector_store: VectorStore, sqlite_history
) -> None:
    chat, memory = await chat_memories(
        vector_store, sqlite_history, SameVector(64), context_minutes=0
    )
    await chat.add_many(
        [
            line("Ann", "I started pottery classes on Monday", 0),
            line("Bob", "I started pottery classes on Monday", 300),
        ]
    )
    assert (await ask(memory, "What classes did Ann start?"))[
        0
    ] == "I started pottery classes on Monday"
    for question, speaker in (
        ("What classes did Ann start?", "Ann"),
        ("Bob上周开始上什么课？", "Bob"),
    ):
        found = await memory.recall(
            question, character_id="yuiju", now=NOW + timedelta(days=1), group_id="g1"
        )
        assert found[0].payload["speaker"] == speaker, question


@pytest.mark.parametrize(
    ("query", "name", "named"),
    [
        ("What did Ann say?", "Ann", True),
        ("what did ann do", "Ann", True),
        ("What did Anna say?", "Ann", False),
        ("planning a trip", "Ann", False),
        ("小林去哪了", "小林", True),
        ("她去哪了", "小林", False),
        ("Ann?", "", False),
    ],
)
def test_a_speaker_is_named_as_a_whole_word_or_a_chinese_name_anywhere(
    query: str, name: str, named: bool
) -> None:
    assert names(query, name) is named


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ("Ooh, what's it of?", "Ooh, what's it of?"),
        (
            "That sounds beautiful, Han. You're seriously talented. So what did you paint this time, was it the lake?",
            "You're seriously talented. So what did you paint this time, was it the lake?",
        ),
        ("我去了公园。你呢？", "我去了公园。你呢？"),
        ("x" * 200, "x" * 80),
        ("周六接回来的，已经把我拖鞋咬坏了。" * 4, "周六接回来的，已经把我拖鞋咬坏了。" * 2),
    ],
)
def test_the_end_of_a_line_is_its_last_sentences_that_fit(text: str, end: str) -> None:
    assert line_end(text) == end


async def test_reindex_reads_old_chat_memories_in_their_conversation_re_embedding_only_replies(
    tmp_path,
) -> None:
    from yuiju.memory.reindex import reindex_store
    from yuiju.memory.semantic import NewMemory
    from yuiju.memory.vectors import EdgeVectorStore, group_scope

    path = tmp_path / "qdrant-edge" / "yuiju_memory"
    embedder = Recording()
    store = EdgeVectorStore.open(path, 64, embedder=embedder.name)
    said = [
        ("Mel", "Did you go to the support group?", 0),
        ("Ann", "Yes! It was so powerful.", 1),
        ("Ann", "Back again after dinner.", 300),
    ]
    # indexed as chat memories were before: "name: text" embedded, no speaker, no context
    await SemanticMemory(store, embedder).remember(
        [
            NewMemory(
                kind="chat",
                character_id="yuiju",
                text=text,
                time=NOW + timedelta(minutes=minute),
                key=f"k{i}",
                user_id=f"qq:{who}",
                group_id="g1",
                scope=group_scope("g1"),
                embed_text=f"{who}: {text}",
            )
            for i, (who, text, minute) in enumerate(said)
        ]
    )
    await store.close()
    embedder.seen.clear()

    report = await reindex_store(
        url=None,
        api_key=None,
        collection="yuiju_memory",
        data_dir=tmp_path,
        engine="edge",
        embedder=embedder,
    )
    assert (report.points, report.re_embedded, report.chat_upgraded, report.chat_re_embedded) == (
        3,
        False,
        3,
        1,
    )
    assert embedder.seen == ["Mel: Did you go to the support group?\nAnn: Yes! It was so powerful."]
    assert "3 chat memories now read in their conversation, 1 of them re-embedded" in str(report)
    store = EdgeVectorStore.open(path, 64, embedder=embedder.name)
    try:
        by_text = {
            h.payload["text"]: h.payload
            for h in await store.scroll(SemanticMemory.scope_filter("yuiju", group_id="g1"))
        }
        assert by_text["Yes! It was so powerful."]["reply_to"] == point_id("chat", "yuiju", "k0")
        assert by_text["Yes! It was so powerful."]["speaker"] == "Ann"
        assert (
            "reply_to" not in by_text["Back again after dinner."]
            and by_text["Did you go to the support group?"]["speaker"] == "Mel"
        )
    finally:
        await store.close()
    again = await reindex_store(
        url=None,
        api_key=None,
        collection="yuiju_memory",
        data_dir=tmp_path,
        engine="edge",
        embedder=embedder,
    )
    assert again.chat_upgraded == 0  # once is enough


def test_a_reply_closes_part_of_the_gap_to_the_line_it_answers_and_never_passes_it() -> None:
    from yuiju.memory.semantic import RankWeights
    from yuiju.memory.vectors import Hit

    memory = SemanticMemory.__new__(SemanticMemory)
    memory.weights = RankWeights(recency=0.0, importance=0.0, reply=0.7, speaker=0.15)
    t = NOW.timestamp()
    hits = [
        Hit(
            id="q",
            score=1.6,
            payload={"text": "Did you go to the support group?", "time": t, "speaker": "Mel"},
        ),
        Hit(
            id="a",
            score=0.4,
            payload={
                "text": "Yes! It was so powerful.",
                "time": t,
                "speaker": "Ann",
                "reply_to": "q",
                "answer": True,
            },
        ),
        Hit(
            id="b",
            score=1.8,
            payload={
                "text": "The support group? I went too.",
                "time": t,
                "speaker": "Bob",
                "reply_to": "a",
                "answer": True,
            },
        ),
    ]
    ranked = {r.id: r for r in memory.rank(hits, NOW, query="How was the support group for Ann?")}
    assert ranked["q"].relevance == pytest.approx(0.8)
    assert ranked["a"].relevance == pytest.approx(0.2 + 0.7 * (0.8 - 0.2))  # toward what it answers
    assert ranked["b"].relevance == pytest.approx(0.9)  # already above it: unchanged
    assert ranked["a"].score == pytest.approx(ranked["a"].relevance + 0.15)  # Ann is named
    assert [r.id for r in memory.rank(hits, NOW, query="How was the support group?")] == [
        "b",
        "q",
        "a",
    ]


async def test_a_question_or_an_answer_is_read_with_the_line_before_it_a_reaction_alone(
    vector_store: VectorStore, sqlite_history
) -> None:
    embedder = Recording()
    chat, memory = await chat_memories(vector_store, sqlite_history, embedder)
    await chat.add_many(
        [
            line("Mel", "I went to the support group yesterday!", 0),
            line("Ann", "Wow, how was it?", 1),
            line("Mel", "So powerful.", 2),
            line("Ann", "Glad to hear.", 3),
        ]
    )
    assert embedder.seen == [
        "Mel: I went to the support group yesterday!",
        "Mel: I went to the support group yesterday!\nAnn: Wow, how was it?",
        "Ann: Wow, how was it?\nMel: So powerful.",
        "Ann: Glad to hear.",
    ]
    # "Glad to hear." does not carry what it reacts to along, so it cannot crowd it out
    assert (await ask(memory, "When did Mel go to the support group?"))[
        0
    ] == "I went to the support group yesterday!"


class RecordingLexical(LexicalEncoder):
    """Remembers the text of every lexical query."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def query(self, text: str):  # type: ignore[no-untyped-def]
        self.queries.append(text)
        return super().query(text)


async def test_the_asked_about_persons_name_is_not_a_search_word(
    vector_store: VectorStore, sqlite_history
) -> None:
    """Bob addresses Ann by name; a question about Ann must not find Bob's lines by her name."""
    lexical = RecordingLexical()
    memory = SemanticMemory(vector_store, SameVector(64), lexical=lexical)
    chat = ChatMemories(sqlite_history, memory, "yuiju", context_minutes=0)
    await chat.ensure()
    await chat.add_many(
        [
            line("Ann", "I painted the old lighthouse", 0),
            line("Bob", "Ann, Ann! Guess what, Ann, my brushes arrived", 300),
            line("Bob", "Hey Ann, did you see the game?", 600),
            line("Bob", "Good night Ann!", 900),
            line("Bob", "Hi Han, how was the trip?", 1200),  # what Bob calls her
        ]
    )
    assert (await ask(memory, "What did Ann paint?"))[0] == "I painted the old lighthouse"
    lexical.queries.clear()
    await ask(memory, "What did Ann paint? Did Han paint?")
    assert lexical.queries and all(
        "Ann" not in q and "Han" not in q and "paint" in q for q in lexical.queries
    )
    lexical.queries.clear()
    await ask(memory, "小林去哪了？")  # a name no one has: an ordinary word
    assert lexical.queries == ["小林去哪了？"]


@pytest.mark.parametrize(
    ("text", "addressed"),
    [
        ("Hey Hannah, how was the trip?", ["Hannah"]),
        ("Good night Han!", ["Han"]),
        ("That's awesome, Han!", ["Han"]),
        ("So proud of you, Hannah. Really.", ["Hannah"]),
        ("Thanks Marc, you're the best", ["Marc"]),
        ("We moved to Austin, Texas.", []),
        ("Wow, that's great!", []),
        ("I met Hannah at the park", []),
        ("Hey! How are you?", []),
        ("Hi I, uh, forgot", []),
    ],
)
def test_names_a_line_addresses_are_found_by_how_people_are_greeted(
    text: str, addressed: list[str]
) -> None:
    assert addressed_names(text) == addressed


class QueryRecording(HashingEmbedder):
    """Remembers the text of every query it embedded."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.queries: list[str] = []

    async def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return await super().embed_query(text)


async def test_a_known_name_is_left_out_of_the_questions_meaning_too(
    vector_store: VectorStore, sqlite_history
) -> None:
    embedder = QueryRecording()
    chat, memory = await chat_memories(vector_store, sqlite_history, embedder, context_minutes=0)
    await chat.add_many([line("Ann", "I painted the old lighthouse", 0)])
    await ask(memory, "What did Ann paint?")
    assert embedder.queries == ["What did paint?"]


async def test_a_follow_up_question_steps_back_behind_the_line_it_asks_about(
    vector_store: VectorStore, sqlite_history
) -> None:
    chat, memory = await chat_memories(vector_store, sqlite_history, HashingEmbedder(64))
    await chat.add_many(
        [line("Mel", t, 500 + i) for i, t in enumerate(SMALL_TALK * 3)]
        + [
            line("Ann", "I finally finished the painting I'd been fussing over!", 600),
            line("Mel", "Ooh, what's it of?", 601),
            line("Ann", "A stormy sea with one tiny boat.", 602),
        ]
    )
    found = await ask(memory, "Which painting was finished?")  # no speaker named: no bonus
    assert found[:2] == [
        "I finally finished the painting I'd been fussing over!",
        "A stormy sea with one tiny boat.",
    ]
