"""tokenizer.json files with the pre-tokenizers modern models publish, against HF tokenizers.

Built from GPT-2's committed tokenizer.json with another pre_tokenizer, so every kind runs in a
fresh clone: Split + ByteLevel (Llama 3, Qwen 2), Digits + ByteLevel's own regex (StarCoder2),
a Sequence of Splits with ignore_merges (DeepSeek-V3), Split Removed, a String split.
"""
from __future__ import annotations

import numpy as np
import pytest

import fastenc
from fastenc.errors import VocabError
from fastenc.pattern import LLAMA3, QWEN2
from pattern_support import BYTE_LEVEL, BYTE_LEVEL_REGEX, gpt2_tokenizer_json, hf_pair, random_texts, split

pytest.importorskip("tokenizers")
DEEPSEEK_V3 = [split(r"\p{N}{1,3}"), split(r"[一-龥぀-ゟ゠-ヿ]+"),
               split(r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                     r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")]

KINDS = {
    "llama3-split": ({"type": "Sequence", "pretokenizers": [split(LLAMA3), BYTE_LEVEL]}, True),
    "qwen2-split": ({"type": "Sequence", "pretokenizers": [split(QWEN2), BYTE_LEVEL]}, False),
    "starcoder2-digits": ({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                                 BYTE_LEVEL_REGEX]}, False),
    "digits-contiguous": ({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": False},
                                                                 BYTE_LEVEL_REGEX]}, True),
    "deepseek3-sequence": ({"type": "Sequence", "pretokenizers": DEEPSEEK_V3 + [BYTE_LEVEL]}, True),
    "split-removed": ({"type": "Sequence", "pretokenizers": [split(r"\s+", "Removed"), BYTE_LEVEL]}, False),
    "split-removed-inverted": ({"type": "Sequence", "pretokenizers": [split(r"\p{L}+|\p{N}", "Removed", True),
                                                                      BYTE_LEVEL]}, False),
    "string-split": ({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": ". "}, "behavior": "Isolated", "invert": False}, BYTE_LEVEL_REGEX]}, False),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_pre_tokenizer_kinds_equal_hf(tmp_path, docs_fixture, kind):
    pre, ignore_merges = KINDS[kind]
    ours, hf = hf_pair(gpt2_tokenizer_json(pre, ignore_merges), tmp_path / f"{kind}.json")
    assert ours.info.pretokenizer == "regex"
    texts = docs_fixture.column("text").to_pylist()[:40] + random_texts(np.random.default_rng(3), 400)
    ids, offsets = ours.encode_batch(texts)
    reference = hf.encode_batch(texts, add_special_tokens=False)
    bad = [t for i, (t, r) in enumerate(zip(texts, reference)) if ids[offsets[i]:offsets[i + 1]].tolist() != r.ids]
    assert bad == []


@pytest.mark.parametrize("pre, named", [
    ({"type": "Sequence", "pretokenizers": [split(r"\s+", "MergedWithNext"), BYTE_LEVEL]}, "MergedWithNext"),
    ({"type": "Sequence", "pretokenizers": [BYTE_LEVEL, split(r"\s+")]}, "last"),
    ({"type": "Metaspace", "replacement": "▁"}, "ByteLevel as the last"),
    ({"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}, BYTE_LEVEL]}, "Whitespace"),
    ({"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}, "add_prefix_space"),
    ({"type": "Sequence", "pretokenizers": [split(r"(a)\1"), BYTE_LEVEL]}, "backreference"),
])
def test_pre_tokenizers_that_cannot_be_exact_are_refused(tmp_path, pre, named):
    path = tmp_path / "t.json"
    import json

    path.write_text(json.dumps(gpt2_tokenizer_json(pre)), encoding="utf-8")
    with pytest.raises(VocabError) as info:
        fastenc.load(path)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_the_url_and_gpt2_pre_tokenizers_keep_their_hand_written_scanners(tmp_path):
    import json

    path = tmp_path / "g.json"
    path.write_text(json.dumps(gpt2_tokenizer_json(BYTE_LEVEL_REGEX)), encoding="utf-8")
    assert fastenc.load(path).info.pretokenizer == "gpt2"
