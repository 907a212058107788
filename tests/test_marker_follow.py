"""Markers followed on the hot path (kernels/encode.py's encode_block, piece_cache.key_home): a
piece whose ids do not fit its cache's slot leaves a marker there and its ids in a later cache's
home slot for the same hash. The hot path reads that slot itself when the later cache is no larger
than the earlier one, and leaves the marker to the general lookup when it is larger. Either way,
cold and warm, with collisions in small caches, the ids are tiktoken's."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples
from numba import njit

import fastenc
from fastenc.kernels.encode import encode_text
from fastenc.kernels.piece_cache import TINY_MAX_BYTES, new_piece_caches

# Slow: its own njit loop over encode_text compiles the whole GPT-2 loop again (minutes on 2 cores).
pytestmark = pytest.mark.slow

# Pieces by where their ids live (GPT-2; checked against tiktoken below, so a changed vocabulary
# cannot silently empty a group):
_TINY_MARKER = [" мир", " ещё", " ŋŋŋ", " ǅǅ", "\t\t\t\t\t\t\t", " ₿₿"]  # 1..8 bytes, 4..7 ids: the short slot
_TINY_TO_LONG = ["\n        x", "\n        if"]  # "\n" and 7 spaces, 8 bytes, 8 ids: the long slot
_SHORT_MARKER = [" Երևան", " Ελλάδα", " საქ", " Հայաստ"]  # 9..15 bytes, 8 or more ids: the long slot
_PLAIN = [" the", " of", ",", " привет", " Ωμέγα", "\n", " x", "ab"]

# (short, long, tiny) slots: both follows on; the long one off (long > short); both off (short > tiny)
_LAYOUTS = {"follow both": (1 << 8, 1 << 6, 1 << 8), "long larger": (1 << 6, 1 << 8, 1 << 8),
            "short larger": (1 << 8, 1 << 6, 1 << 6)}


@pytest.fixture(scope="module")
def gpt2():
    return fastenc.load("gpt2")


@njit
def _encode_all(data, offsets, vocab, classes, caches, out):
    at = 0
    for d in range(offsets.shape[0] - 1):
        at = encode_text(data, offsets[d], offsets[d + 1], vocab, classes, caches, out, at)
    return at


def _passes(enc, texts, caches, n_passes=3):
    raw = [t.encode() for t in texts]
    data = np.frombuffer(b"".join(raw), dtype=np.uint8).copy()
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    out = np.empty(max(len(data), 1), dtype=np.uint16)
    return [out[:_encode_all(data, offsets, enc.vocab, enc.classes, caches, out)].tolist() for _ in range(n_passes)]


def test_the_groups_are_what_they_claim(tiktoken_gpt2):
    for piece in _TINY_MARKER:
        assert len(piece.encode()) <= TINY_MAX_BYTES and 4 <= len(tiktoken_gpt2.encode_ordinary(piece)) <= 7, piece
    for piece in _SHORT_MARKER:
        assert TINY_MAX_BYTES < len(piece.encode()) <= 15 and len(tiktoken_gpt2.encode_ordinary(piece)) > 7, piece
    indent = tiktoken_gpt2.encode_ordinary("\n        x")
    assert tiktoken_gpt2.decode_bytes(indent[:8]) == b"\n       "  # the 8-byte piece is 8 ids


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
def test_markers_cold_and_warm_match_tiktoken(gpt2, tiktoken_gpt2, layout):
    rng = np.random.default_rng(9)
    words = _TINY_MARKER + _TINY_TO_LONG + _SHORT_MARKER + _PLAIN
    texts = ["".join(rng.choice(words, 80)) for _ in range(40)]
    expected = [i for t in texts for i in tiktoken_gpt2.encode_ordinary(t)]
    for got in _passes(gpt2, texts, new_piece_caches(*_LAYOUTS[layout])):
        assert got == expected


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(_TINY_MARKER + _TINY_TO_LONG + _SHORT_MARKER + _PLAIN), min_size=1, max_size=40),
       st.sampled_from(sorted(_LAYOUTS)))
def test_fuzz_markers_cold_and_warm(gpt2, tiktoken_gpt2, parts, layout):
    text = "".join(parts)
    expected = tiktoken_gpt2.encode_ordinary(text)
    # Tiny caches: pieces collide in their home slots, so a followed slot often holds another piece.
    short, long, tiny = _LAYOUTS[layout]
    for got in _passes(gpt2, [text, text], new_piece_caches(short >> 4, long >> 4, tiny >> 4)):
        assert got == expected + expected
