"""One `redact_url` for every URL that reaches a log, an error or a name: user info and
secret-looking query values hidden, the rest as written."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from yuiju.config import YuijuConfig, redact_url
from yuiju.llm.openai_model import OpenAIChatModel
from yuiju.memory.embeddings import OpenAIEmbedder

TABLE = [
    # user info: the password always, a lone user info too (it may be a token: https://sk-...@host)
    ("redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"),
    ("mongodb://admin:s3cret@db:27017/yuiju", "mongodb://admin:***@db:27017/yuiju"),
    ("https://sk-123@proxy.example/v1", "https://***@proxy.example/v1"),
    ("mongodb://u:pw@h1:27017,h2:27017/db?replicaSet=rs0", "mongodb://u:***@h1:27017,h2:27017/db?replicaSet=rs0"),
    ("redis+cluster://:pw@127.0.0.1:1,127.0.0.1:2", "redis+cluster://:***@127.0.0.1:1,127.0.0.1:2"),
    ("redis://:pa/ss+w0rd=@cache:6379/0", "redis://:***@cache:6379/0"),  # base64: '/' unencoded
    ("redis://:pa#ss@cache:6379/0#x", "redis://:***@cache:6379/0#x"),
    ("unix://:pw@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
    ("user:pw@cache:6379", "user:***@cache:6379"),  # someone forgot the scheme
    # query parameters named like a secret, whatever their case and spelling
    ("https://proxy.example/v1?api_key=sk-123", "https://proxy.example/v1?api_key=***"),
    ("https://proxy.example/v1?apikey=sk-1&model=x", "https://proxy.example/v1?apikey=***&model=x"),
    ("https://proxy.example/v1?API-KEY=sk-1", "https://proxy.example/v1?API-KEY=***"),
    ("https://h/v1?apiKey=sk-1", "https://h/v1?apiKey=***"),
    ("https://h/?key=k1", "https://h/?key=***"),
    ("https://h/?token=t&access_token=a&refreshToken=r", "https://h/?token=***&access_token=***&refreshToken=***"),
    ("https://h/?secret=s&client_secret=c", "https://h/?secret=***&client_secret=***"),
    ("redis://cache:6379/0?password=pw&pass=p&PWD=q", "redis://cache:6379/0?password=***&pass=***&PWD=***"),
    ("https://b.blob/c?sv=2024&sig=abc%2Bdef", "https://b.blob/c?sv=2024&sig=***"),
    ("https://s3/o?X-Amz-Credential=AK&X-Amz-Signature=ff", "https://s3/o?X-Amz-Credential=***&X-Amz-Signature=***"),
    ("https://h/?auth=a&authorization=b", "https://h/?auth=***&authorization=***"),
    ("https://h/cb#access_token=t&state=1", "https://h/cb#access_token=***&state=1"),
    # what is not secret stays readable, byte for byte
    ("mongodb://db/yuiju?authSource=admin&authMechanism=SCRAM-SHA-256", "mongodb://db/yuiju?authSource=admin&authMechanism=SCRAM-SHA-256"),
    ("mongodb://db/?authMechanismProperties=AWS_SESSION_TOKEN:t", "mongodb://db/?authMechanismProperties=***"),
    ("https://api.deepseek.com/v1", "https://api.deepseek.com/v1"),
    ("http://[::1]:8080/v1?model=%E6%82%A0&flag", "http://[::1]:8080/v1?model=%E6%82%A0&flag"),
    ("unix:///run/redis/redis.sock", "unix:///run/redis/redis.sock"),
    ("http://[::1", "http://[::1"),  # not even parsable: shown as written (nothing secret in it)
    ("", ""),
]  # fmt: skip


@pytest.mark.parametrize(("url", "shown"), TABLE)
def test_a_url_is_shown_without_its_secrets(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(SecretStr(url)) == shown


def test_no_url_stays_none() -> None:
    assert redact_url(None) is None


def test_a_models_name_never_holds_the_key_of_its_base_url() -> None:
    url = "https://proxy.example/v1?api_key=sk-123"
    chat = OpenAIChatModel(base_url=url, api_key=None, model="m")
    embedder = OpenAIEmbedder(base_url=url, model="e", dim=8)
    for name in (chat.name, embedder.name):
        assert "sk-123" not in name and "proxy.example/v1?api_key=***" in name


def test_the_start_up_summary_hides_every_urls_secrets() -> None:
    cfg = YuijuConfig.model_validate(
        {
            "llm": {"base_url": "https://proxy.example/v1?api_key=sk-123", "model": "m"},
            "qdrant": {"url": "https://q.example:6333/?api-key=qk-9"},
        }
    )
    summary = str(cfg.summary())
    assert "sk-123" not in summary and "qk-9" not in summary
