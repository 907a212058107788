"""Every code point against tiktoken: the o200k class table probed code point by code point, and
every code point in context through the whole encoder for gpt2, cl100k_base and o200k_base.

Kept out of test_encodings.py: pytest-xdist runs a file in one process (``--dist loadfile``), and
that file is already the suite's longest; here these ~50 s run beside it.
"""
from __future__ import annotations

import numpy as np
import pytest
from test_encodings import NAMES, _bad_docs, oracle  # noqa: F401  (oracle: the fixture)

import fastenc
from fastenc.unicode_classes import (
    O_CASELESS,
    O_LOWER,
    O_MARK,
    O_NUMBER,
    O_SPACE,
    O_UPPER,
    o200k_class_table,
)

# Slow: every code point of Unicode, in context, against tiktoken for three encodings.
pytestmark = pytest.mark.slow

PER_TEXT = 2048  # code points a text; it divides 0xD800, so no text straddles the surrogates


def test_o200k_class_table_equals_tiktoken_on_every_code_point():
    """The five sets o200k's pattern asks about, probed in tiktoken for all 1,114,112 code points
    (surrogates: tiktoken cannot take them, and the table gives them 'other'). Together they pin
    every class: U = upper side only, W = lower side only, B = both and a letter, M = both and not
    a letter (marks), N, S. (cl100k reads GPT-2's table, which test_pretok_gpt2 checks the same way.)"""
    from reference import tiktoken_set_probe

    cps = np.arange(0x110000)
    o2 = o200k_class_table()
    probes = {
        r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]": [O_UPPER, O_CASELESS, O_MARK],
        r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]": [O_LOWER, O_CASELESS, O_MARK],
        r"\p{L}": [O_UPPER, O_LOWER, O_CASELESS],
        r"\p{N}": [O_NUMBER],
        r"\s": [O_SPACE],
    }
    for pattern, classes in probes.items():
        differ = np.flatnonzero(tiktoken_set_probe(pattern, cps) != np.isin(o2, classes))
        assert len(differ) == 0, (pattern, [hex(c) for c in differ[:10]])
    assert int(o2.max()) == O_SPACE


def every_code_point_texts() -> list[str]:
    """Every code point but the surrogates, each in one string that sets it in the pre-tokenizers'
    traps: doubled, after a space, before and after a lower- and an upper-case letter (o200k's case
    classes), before an apostrophe and a contraction in both cases, beside a digit, CR/LF and a
    slash (o200k's ``[\\r\\n/]*``)."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = []
    for start in range(0, len(cps), PER_TEXT):
        chars = map(chr, cps[start:start + PER_TEXT])
        texts.append("".join(f"{c}{c} {c}a{c}A{c}'S{c}'ll1{c}2\r\n{c}/ {c}\n" for c in chars))
    return texts


@pytest.mark.parametrize("name", NAMES + ["gpt2"])
def test_every_code_point_in_context_matches_tiktoken(name, oracle, tiktoken_gpt2):
    """All 1,112,064 code points, each in a dozen contexts, against tiktoken: the scanners, the UTF-8
    walk and the merges on every code point, the Unicode 15-16 ones included. (A wrong class shows
    here only where a token spans the boundary it moves: 5 of 6 planted class errors failed this
    test, a lower-case Cyrillic letter made upper-case did not. The class tables themselves are
    checked code point by code point: test_o200k_class_table_equals_tiktoken_on_every_code_point,
    test_pretok_gpt2.) An ad hoc sweep in 14 separate contexts found no difference."""
    ref = tiktoken_gpt2 if name == "gpt2" else oracle[name]
    bad, _ = _bad_docs(fastenc.load(name), ref, every_code_point_texts())
    if bad:
        first = bad[0] * PER_TEXT
        first += 0x800 if first >= 0xD800 else 0  # (the surrogates are left out)
        assert bad == [], f"texts {bad[:5]} differ; the first holds the {PER_TEXT} code points from {first:#x}"
