#!/usr/bin/env bash
# One simulated year with the utility policy on fresh embedded stores (bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/out
yuiju simulate --days 365 --seed 1 --quiet --report bench/out/year.json
python - <<'PY'
import json
r = json.load(open("bench/out/year.json"))
print(f"days={r['days']} decisions={r['decisions']} wall_seconds={r['wall_seconds']} "
      f"decisions_per_second={r['decisions_per_second']} overhead_ms={r['engine_overhead_ms']} "
      f"violations={len(r['invariant_violations'])} distinct_actions={len(r['action_histogram'])}")
PY
