"""Helpers for the split-pattern tests: rank files and tokenizer.json files for any pattern, and
the reference engines (tiktoken for rank files, HF tokenizers for tokenizer.json).

GPT-2's vocabulary (committed in vocab/gpt2, MIT) paired with another model's pattern is a
vocabulary tiktoken and HF tokenizers both encode: ids must equal theirs whatever the pattern,
so the fast suite needs no model files; the real Llama 3 / Llama 4 / Qwen rank files in
../shared/data/tokenizers are used where present (tests/test_modern_tokenizers.py).
"""
from __future__ import annotations

import base64
import copy
import json
import sys
from pathlib import Path

import numpy as np

from conftest import GPT2_TOKENIZER_JSON, SHARED_DATA, mergeable_ranks_from_tokenizer_json

TOKENIZERS_DIR = SHARED_DATA / "tokenizers"
_gpt2_ranks = None


def gpt2_ranks() -> dict[bytes, int]:
    global _gpt2_ranks
    if _gpt2_ranks is None:
        _gpt2_ranks = mergeable_ranks_from_tokenizer_json(GPT2_TOKENIZER_JSON)
    return _gpt2_ranks


def write_rank_file(ranks: dict[bytes, int], path: Path) -> Path:
    lines = [f"{base64.b64encode(tok).decode()} {rank}" for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])]
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
    return path


def tiktoken_reference(pattern: str, ranks: dict[bytes, int]):
    import tiktoken

    return tiktoken.Encoding(name="ref", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def gpt2_tokenizer_json(pre_tokenizer: dict, ignore_merges: bool = False) -> dict:
    """GPT-2's tokenizer.json with another pre-tokenizer (and ``ignore_merges``)."""
    spec = json.loads(GPT2_TOKENIZER_JSON.read_text(encoding="utf-8"))
    spec = copy.deepcopy(spec)
    spec["pre_tokenizer"] = pre_tokenizer
    spec["model"]["ignore_merges"] = ignore_merges
    return spec


def split(pattern: str, behavior: str = "Isolated", invert: bool = False) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
BYTE_LEVEL_REGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def hf_pair(spec: dict, path: Path):
    """(fastenc Encoder, HF Tokenizer) of one tokenizer.json."""
    import tokenizers

    import fastenc

    path.write_text(json.dumps(spec), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.encode_special_tokens = True
    return fastenc.load(path), hf


def hf_pieces(pattern: str, text: str) -> list[str]:
    """HF tokenizers' (Oniguruma's) Split(pattern, Isolated) of ``text``: matches and gaps."""
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pt

    return [p for p, _ in pt.Split(Regex(pattern), "isolated").pre_tokenize_str(text)]


def fastenc_pieces(program, text: str) -> list[str]:
    """The pieces fastenc's scanner cuts ``text`` into with a compiled ``SplitProgram``."""
    from fastenc.kernels.pretok_regex import regex_split

    data = text.encode("utf-8")
    arr = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, dtype=np.uint8)
    cuts = regex_split(arr, 0, len(data), program.classes, program.program)
    return [data[a:b].decode("utf-8") for a, b in cuts.tolist()]


def model_reference(name: str):
    """tiktoken oracle of a model in ../shared/data/tokenizers (None where that folder is absent)."""
    if not (TOKENIZERS_DIR / "oracle.py").is_file():
        return None
    sys.path.insert(0, str(TOKENIZERS_DIR))
    try:
        import oracle
    finally:
        sys.path.remove(str(TOKENIZERS_DIR))
    return oracle


def model_reference_or_skip(name: str):
    """``model_reference``, or a skip in a fresh clone; under CI=true a missing folder fails (a parity test never skips in CI)."""
    import os

    import pytest

    oracle = model_reference(name)
    if oracle is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{TOKENIZERS_DIR} is absent under CI=true: lay ../shared/data/tokenizers beside the checkout")
        pytest.skip(f"{TOKENIZERS_DIR} is absent (a fresh clone); CI has it")
    return oracle


def encoder_with_split(base, stages):
    """``base`` (an Encoder of a split-pattern vocabulary) with another split: same tables, the
    program and classes of ``stages`` (a list of ``fastenc.pattern.Stage``)."""
    from fastenc.encoder import Encoder
    from fastenc.pattern import compile_stages

    program = compile_stages(list(stages))
    vocab = base.vocab._replace(split_program=program.program, split_classes=program.classes)
    return Encoder(vocab, base.info._replace(split=[list(s) for s in stages]), name="split-swap")


# Characters that the split patterns ask about: cases, marks, digits of several scripts, every
# kind of space and line break, apostrophes, CJK, symbols, an emoji, a surrogate-free astral char.
TRAPS = ("aAbBsStTdDlLmMvVrReE' '\u2019 \t\n\r\x0b\x0c\x85\u00a0\u2028\u3000"
         "0123456789\u0661\u0966\u00b2\u2167"
         "\u00c9\u00e9\u00df\u017f\u212a\u01c5\u02b0\u0301\u0300\u0915\u093f"
         "\u4e2d\u6587\u3042\u30a2\u30fc\uac00\u0416\u0436\u03a9\u03c9\u05d0\u0627"
         ".,!?-_/()[]{}#@$%^&*+=<>|\\~`\"\u00bf\u2014\u20ac\U0001F600\U00010348")


def random_texts(rng, n: int, max_len: int = 40) -> list[str]:
    """``n`` texts of trap characters, with runs (repeated characters) and plain words mixed in."""
    alphabet = list(TRAPS)
    words = ["the", " world", "'s", "'LL", " 2024", "\n\n", "   ", "\r\n", "Hello", " naïve", "ſt", "ДОМ", "日本語"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(int(rng.integers(0, max_len // 2))):
            r = rng.random()
            if r < 0.15:
                parts.append(words[int(rng.integers(len(words)))])
            elif r < 0.25:
                parts.append(alphabet[int(rng.integers(len(alphabet)))] * int(rng.integers(2, 6)))
            else:
                parts.append(alphabet[int(rng.integers(len(alphabet)))])
        out.append("".join(parts))
    return out
