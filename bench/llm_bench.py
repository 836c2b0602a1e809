"""Benchmark the LLM decision path against a schema-following fake OpenAI-compatible server.

    python bench/llm_bench.py [--days 7] [--seeds 1 2 3] [--replay-days 3]

The fake is `tests/openai_stub.py` over real HTTP with the `schema_following` handler: it reads
the ``response_format`` json_schema (or, in ``json_object`` mode, the schema shown in the prompt)
and answers a random valid instance, a choice uniform over the offered actions, deterministic for
the seed and the request. It reports usage with the CJK-aware estimate (`llm.estimate_tokens`:
0.6 token per CJK character, 0.3 per other) over the messages; a json_schema request's schema is
not counted (grammar engines such as llama.cpp's do not add it to the prompt) but its size is
listed.

Side by side, json_schema and json_object mode, `yuiju simulate --policy llm` for ``--days`` and
each seed (both modes live the same life: the fake's n-th answer draws from the same numbers):
first-attempt acceptance of decisions, calls per decision, prompt tokens per simulated day and
the stable-prefix share of consecutive decision prompts (the longest common prefix of the two
requests' messages, role and content, over the later one's length, in characters; median and
quartiles). Then a ``--replay-days`` run is recorded to a cassette and replayed with the server
stopped; the two timelines must be the same bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.openai_stub import OpenAIStub, flat_prompt, prefix_share, schema_following
from yuiju.config import load_config
from yuiju.llm import estimate_tokens
from yuiju.world.simulate import simulate

TARGETS = {
    "first_attempt_acceptance": 0.98,
    "calls_per_decision": 1.05,
    "prompt_tokens_per_day": 100_000,
    "prefix_share_median": 0.80,
}


def config(base_url: str, mode: str, data_dir: Path) -> Any:
    return load_config(
        environ={},
        overrides={
            "app": {"data_dir": str(data_dir), "log_level": "WARNING"},
            "llm": {"base_url": base_url, "model": "fake", "output_mode": mode},
        },
    )


async def run_mode(stub: OpenAIStub, mode: str, days: int, seed: int, tmp: Path) -> dict[str, Any]:
    stub.requests.clear()
    stub.handler = schema_following(
        seed
    )  # from its first answer again: both modes live the same life
    started = time.perf_counter()
    report = await simulate(
        config(stub.base_url, mode, tmp), days=days, seed=seed, policy="llm", progress=False
    )
    wall = time.perf_counter() - started
    requests = list(stub.requests)
    texts = [flat_prompt(r) for r in requests]
    shares = [prefix_share(a, b) for a, b in itertools.pairwise(texts)]
    quartiles = statistics.quantiles(shares, n=4) if len(shares) > 1 else [0, 0, 0]
    llm = report["llm"]
    decide = llm["per_simulated_day"].get("decide", {})
    schema_chars = [
        len(
            json.dumps(
                r["response_format"]["json_schema"]["schema"],
                ensure_ascii=False,
                separators=(",", ":"),
            )
        )
        for r in requests
        if (r.get("response_format") or {}).get("type") == "json_schema"
    ]
    return {
        "mode": mode,
        "decisions": report["decisions"],
        "decisions_per_day": round(report["decisions"] / days, 1),
        "requests": len(requests),
        "first_attempt_acceptance": llm["first_attempt_acceptance"],
        "calls_per_decision": llm["calls_per_decision"],
        "fallbacks": report["fallbacks"],
        "invariant_violations": len(report["invariant_violations"]),
        "prompt_tokens_per_day": decide.get("prompt_tokens", 0),
        "completion_tokens_per_day": decide.get("completion_tokens", 0),
        "calls_per_day": decide.get("calls", 0),
        "prompt_chars_median": statistics.median(len(t) for t in texts) if texts else 0,
        "prompt_tokens_median": statistics.median(estimate_tokens(t) for t in texts)
        if texts
        else 0,
        "schema_chars_median": statistics.median(schema_chars) if schema_chars else 0,
        "prefix_share_median": round(statistics.median(shares), 3) if shares else 0.0,
        "prefix_share_quartiles": [round(q, 3) for q in quartiles],
        "actions_used": len(report["action_histogram"]),
        "wall_seconds": round(wall, 1),
    }


async def record_and_replay(stub: OpenAIStub, days: int, seed: int, tmp: Path) -> dict[str, Any]:
    stub.handler = schema_following(seed)
    cassette = tmp / "run.cassette.jsonl"
    cfg = config(stub.base_url, "json_schema", tmp)
    recorded = await simulate(
        cfg, days=days, seed=seed, policy="llm", progress=False, record=cassette
    )
    stub.stop()  # nothing answers any more: the replay must not need the network
    replayed = await simulate(
        cfg, days=days, seed=seed, policy="llm", progress=False, replay=cassette
    )
    first, again = (
        json.dumps(r["timeline"], ensure_ascii=False).encode() for r in (recorded, replayed)
    )
    return {
        "days": days,
        "requests": replayed["llm"]["replayed"]["requests"],
        "unused": replayed["llm"]["replayed"]["unused"],
        "timeline_entries": len(recorded["timeline"]),
        "timeline_bytes": len(first),
        "identical": first == again,
        "cassette_bytes": cassette.stat().st_size,
    }


def verdict(row: dict[str, Any]) -> str:
    ok = (
        row["first_attempt_acceptance"] >= TARGETS["first_attempt_acceptance"]
        and row["calls_per_decision"] <= TARGETS["calls_per_decision"]
        and row["prompt_tokens_per_day"] <= TARGETS["prompt_tokens_per_day"]
        and row["prefix_share_median"] >= TARGETS["prefix_share_median"]
    )
    return "meets the bar" if ok else "MISSES the bar"


def table(rows: list[dict[str, Any]]) -> str:
    """The side-by-side table for bench/README.md (one line per seed and mode, then the means)."""
    head = (
        "| seed | mode | decisions/day | first-attempt acceptance | calls/decision | prompt tokens/call "
        "(median) | prompt tokens/day | prefix share (median, quartiles) |\n|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        q = r["prefix_share_quartiles"]
        lines.append(
            f"| {r['seed']} | {r['mode']} | {r['decisions_per_day']} | {r['first_attempt_acceptance']:.1%} | "
            f"{r['calls_per_decision']:.2f} | {r['prompt_tokens_median']:,.0f} | "
            f"{r['prompt_tokens_per_day']:,.0f} | {r['prefix_share_median']:.2f} ({q[0]:.2f}–{q[2]:.2f}) |"
        )
    for mode in ("json_schema", "json_object"):
        of = [r for r in rows if r["mode"] == mode]
        lines.append(
            f"| mean | {mode} | {statistics.fmean(r['decisions_per_day'] for r in of):.1f} | | | | "
            f"{statistics.fmean(r['prompt_tokens_per_day'] for r in of):,.0f} | |"
        )
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--replay-days", type=int, default=3)
    parser.add_argument("--out", default="bench/out/llm_bench.json")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="yuiju-llm-bench-") as tmp:
        stub = OpenAIStub(count_tokens=estimate_tokens)
        stub.start()
        try:
            for seed in args.seeds:
                for mode in ("json_schema", "json_object"):
                    rows.append(
                        {"seed": seed, **await run_mode(stub, mode, args.days, seed, Path(tmp))}
                    )
                    print(
                        json.dumps(rows[-1], ensure_ascii=False),
                        f"-> {verdict(rows[-1])}",
                        flush=True,
                    )
            replay = await record_and_replay(stub, args.replay_days, args.seeds[0], Path(tmp))
        finally:
            stub.stop()
    print(json.dumps({"record_replay": replay}, ensure_ascii=False))
    print(table(rows))
    out = Path(args.out)
    text = json.dumps(
        {
            "args": vars(args),
            "modes": rows,
            "record_replay": replay,
            "targets": TARGETS,
            "cpu_count": os.cpu_count(),
        },
        ensure_ascii=False,
        indent=1,
    )
    await asyncio.to_thread(out.parent.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread(out.write_text, text, encoding="utf-8")
    return 0 if all(verdict(r) == "meets the bar" for r in rows) and replay["identical"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
