"""The tokenizers modern models publish, on every document of ../shared/data/text/docs.parquet and on
every code point, against their references: tiktoken with each model's own rank file and pattern
(Llama 3, Llama 4, Qwen: ../shared/data/tokenizers), mistral-common's Tekkenizer (its tekken.json
files ship in the package), and HF tokenizers' Oniguruma for tokenizer.json splits.

Slow (the full corpus): .ci/run runs them; without ../shared the model-file tests skip with the reason.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

import fastenc
from fastenc.pattern import LLAMA3, TEKKEN, Stage, compile_stages
from pattern_support import (TOKENIZERS_DIR, encoder_with_split, fastenc_pieces, gpt2_ranks, hf_pieces, model_reference,
                             tiktoken_reference, write_rank_file)

pytestmark = pytest.mark.slow
tiktoken = pytest.importorskip("tiktoken")


def _docs(shared_data):
    if shared_data is None:
        pytest.skip("../shared/data is absent (a fresh clone): the full-corpus parity runs in CI")
    return pq.read_table(shared_data / "text" / "docs.parquet", columns=["text"]).column("text")


def _mismatches(enc, column, reference) -> list[int]:
    ids, offsets = enc.encode_batch(column)
    texts = column.to_pylist()
    want = reference(texts)
    return [i for i, w in enumerate(want) if ids[offsets[i]:offsets[i + 1]].tolist() != w]


@pytest.mark.parametrize("name", ["llama3", "llama4", "qwen"])
def test_every_document_equals_the_models_tiktoken(shared_data, name):
    column = _docs(shared_data)
    oracle = model_reference(name)
    if oracle is None:
        pytest.skip(f"{TOKENIZERS_DIR} is absent")
    model = oracle.MODELS[name]
    enc = fastenc.load(TOKENIZERS_DIR / model["file"], pattern=model["pattern"])
    ref = oracle.reference(name)
    assert _mismatches(enc, column, lambda texts: ref.encode_ordinary_batch(texts, num_threads=2)) == []


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(
    os.path.dirname(pytest.importorskip("mistral_common").__file__), "data", "tekken*.json"))), ids=os.path.basename)
def test_every_document_equals_mistral_common(shared_data, path):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    column = _docs(shared_data)
    ref = Tekkenizer.from_file(path)
    enc = fastenc.load(path)
    assert enc.info.pretokenizer == "regex"
    assert _mismatches(enc, column, lambda texts: [ref.encode(t, bos=False, eos=False) for t in texts]) == []


def _contexts(cps) -> str:
    """Each code point where the patterns look: alone, in runs, after a space, a letter, a digit,
    an apostrophe, before a newline and at a piece's end."""
    return "".join(f" {c}a{c}{c} 1{c}'s{c}\n{c} " for c in map(chr, cps))


_ALL = np.array([c for c in range(0x110000) if not 0xD800 <= c < 0xE000])
_CHUNK = 1 << 15


@pytest.mark.parametrize("pattern", [LLAMA3, TEKKEN], ids=["llama3", "tekken"])
def test_every_code_point_in_context_equals_tiktoken(tmp_path, pattern):
    ours = fastenc.load(write_rank_file(gpt2_ranks(), tmp_path / "gpt2.tiktoken"), pattern=pattern)
    ref = tiktoken_reference(pattern, gpt2_ranks())
    texts = [_contexts(_ALL[i:i + _CHUNK]) for i in range(0, len(_ALL), _CHUNK)]
    ids, offsets = ours.encode_batch(texts)
    bad = [i for i, t in enumerate(texts) if ids[offsets[i]:offsets[i + 1]].tolist() != ref.encode_ordinary(t)]
    assert bad == []


@pytest.mark.parametrize("pattern", [LLAMA3, TEKKEN, r"[\p{P}\p{S}]+|\p{M}+|\d|\s+$|\s"], ids=["llama3", "tekken", "psmd"])
def test_every_code_point_in_context_equals_oniguruma(pattern):
    program = compile_stages([Stage(pattern, "hf", True, True)])
    for i in range(0, len(_ALL), _CHUNK):
        text = _contexts(_ALL[i:i + _CHUNK])
        assert fastenc_pieces(program, text) == hf_pieces(pattern, text), f"code points {_ALL[i]:X}.."


def test_ten_thousand_texts_per_model_pattern_equal_tiktoken(tmp_path):
    """The fuzz of test_pattern_engines.py at 10,000 texts for each model pattern (its default is smaller)."""
    from pattern_support import random_texts
    from test_pattern_engines import DEEPSEEK_V3_LAST, KIMI_LIKE, QWEN35

    from fastenc.pattern import O200K, QWEN2

    base = fastenc.load(write_rank_file(gpt2_ranks(), tmp_path / "gpt2.tiktoken"), pattern=LLAMA3)
    for pattern in (LLAMA3, QWEN2, TEKKEN, O200K, DEEPSEEK_V3_LAST, QWEN35, KIMI_LIKE):
        ours = encoder_with_split(base, [Stage(pattern, "tiktoken")])
        ref = tiktoken_reference(pattern, gpt2_ranks())
        texts = random_texts(np.random.default_rng(11), 10_000)
        ids, offsets = ours.encode_batch(texts)
        bad = [t for i, t in enumerate(texts) if ids[offsets[i]:offsets[i + 1]].tolist() != ref.encode_ordinary(t)]
        assert bad == [], pattern
