"""Record every exchange with the model, replay it with no network: the same timeline again."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.openai_stub import OpenAIStub, StubError, schema_following
from yuiju import cli as yuiju_cli
from yuiju.config import load_config
from yuiju.llm import CassetteError, CassetteMismatch
from yuiju.llm.cassette import read_cassette
from yuiju.world.simulate import simulate


def timeline_bytes(report: dict) -> bytes:
    return json.dumps(report["timeline"], ensure_ascii=False, sort_keys=True).encode()


@pytest.fixture
def flaky_fake(openai_stub: OpenAIStub) -> OpenAIStub:
    """The schema-following fake, with an HTTP 500 every ninth request (outages replay too)."""
    follow = schema_following(seed=4)
    count = iter(range(10**9))

    def handler(body: dict) -> object:
        answer = follow(body)  # drawn for every request, so the answers do not depend on the errors
        return StubError(500) if next(count) % 9 == 8 else answer

    openai_stub.handler = handler
    return openai_stub


async def record_day(tmp_path: Path, stub: OpenAIStub, seed: int = 2) -> tuple[Path, dict]:
    """One simulated day in json_object mode against the fake, recorded."""
    cfg = load_config(
        environ={},
        overrides={
            "llm": {"base_url": stub.base_url, "model": "fake", "output_mode": "json_object"}
        },
    )
    cassette = tmp_path / "day.cassette.jsonl"
    report = await simulate(cfg, days=1, seed=seed, policy="llm", progress=False, record=cassette)
    return cassette, report


async def test_a_replayed_day_reproduces_the_recorded_timeline_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flaky_fake: OpenAIStub
) -> None:
    monkeypatch.chdir(tmp_path)
    cassette, first = await record_day(tmp_path, flaky_fake)
    sent = len(flaky_fake.requests)
    flaky_fake.stop()  # nothing answers any more

    again = await simulate(
        load_config(environ={}), days=1, seed=2, policy="llm", progress=False, replay=cassette
    )  # no [llm] config at all: the cassette is the model

    assert timeline_bytes(again) == timeline_bytes(first)
    assert again["llm"]["replayed"] == {"requests": sent, "unused": 0}
    assert again["llm"]["by_purpose"] == first["llm"]["by_purpose"]
    assert first["llm"]["by_purpose"]["decide"]["failed"] >= 1  # the HTTP 500s replayed too
    meta, entries = read_cassette(cassette)
    assert (
        meta["seed"] == 2 and meta["llm"]["output_mode"] == "json_object" and len(entries) == sent
    )
    assert sum("error" in e for e in entries) >= 1 and all(
        e["request"]["purpose"] == "decide" for e in entries
    )


async def test_a_replay_that_asks_something_else_stops_at_the_first_differing_request(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flaky_fake: OpenAIStub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.chdir(tmp_path)
    cassette, _ = await record_day(tmp_path, flaky_fake)
    lines = cassette.read_text(encoding="utf-8").splitlines()
    fifth = json.loads(lines[5])  # change what the fifth request said: the run now asks otherwise
    fifth["request"]["messages"][1]["content"] = fifth["request"]["messages"][1]["content"].replace(
        "金币", "铜板"
    )
    lines[5] = json.dumps(fifth, ensure_ascii=False)
    cassette.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with caplog.at_level(logging.WARNING), pytest.raises(CassetteMismatch) as diverged:
        await simulate(
            load_config(environ={}), days=1, seed=2, policy="llm", progress=False, replay=cassette
        )

    # before: an ERROR "policy llm crashed" with a 40-line traceback, then this message
    assert [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info] == []
    message = str(diverged.value)
    assert diverged.value.index == 4
    assert "request #5 (complete, purpose 'decide') is not in the cassette" in message
    assert "messages[1].content" in message and "铜板" in message and "金币" in message


def test_the_cli_replays_with_the_recorded_parameters(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flaky_fake: OpenAIStub,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yuiju.toml").write_text(
        f'[llm]\nbase_url = "{flaky_fake.base_url}"\nmodel = "fake"\n', encoding="utf-8"
    )
    cassette = tmp_path / "c.jsonl"
    first = tmp_path / "first.json"
    again = tmp_path / "again.json"

    yuiju_cli.main(
        [
            "simulate",
            "--record",
            str(cassette),
            "--days",
            "1",
            "--seed",
            "6",
            "--quiet",
            "--report",
            str(first),
        ]
    )
    flaky_fake.stop()
    yuiju_cli.main(["simulate", "--replay", str(cassette), "--quiet", "--report", str(again)])

    assert '"replayed"' in capsys.readouterr().out
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in (first, again)]
    assert reports[0]["seed"] == reports[1]["seed"] == 6 and reports[1]["days"] == 1
    assert timeline_bytes(reports[0]) == timeline_bytes(reports[1])

    code = yuiju_cli.main(["simulate", "--replay", str(cassette), "--seed", "9", "--quiet"])

    assert code == 2  # another seed, another world: it says where, instead of a traceback
    assert (
        "request #1 (complete, purpose 'decide') is not in the cassette" in capsys.readouterr().err
    )


def test_a_file_that_is_not_a_cassette_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": 1}\n', encoding="utf-8")
    with pytest.raises(CassetteError, match="not a yuiju-llm cassette"):
        read_cassette(path)
    with pytest.raises(CassetteError, match="does not exist"):
        read_cassette(tmp_path / "missing.jsonl")
