"""Markers in the wide loop's caches (kernels/encode_wide.py, piece_cache_wide.py): a cl100k/o200k
piece whose ids do not fit its slot (a tiny one, up to 8 bytes, holds 3 ids; a short one 6; a long
one 12) leaves a marker there and its ids in a later cache, where the lookup goes on; a piece with
more than 12 ids is merged every time. Cold and warm, with collisions in small caches and in each
cache-size layout (the narrow loop's hot path follows markers only where a later cache is no larger:
tests/test_marker_follow.py), the ids are tiktoken's."""
from __future__ import annotations

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

import fastenc
from fastenc.kernels.piece_cache import TINY_MAX_BYTES, new_piece_caches
from test_encodings import _from_committed_files
from test_marker_follow import _encode_all  # (encode_text over each document, one njit loop)

# Slow: its own njit loop compiles the whole wide loop again, per cache layout type (minutes on 2 cores).
pytestmark = pytest.mark.slow

# Pieces by where their ids live in cl100k_base (checked against tiktoken below, so a changed
# vocabulary cannot silently empty a group); o200k_base runs the same words, whatever their groups.
_TINY_MARKER = [" ŋŋŋ", " ǅǅ", " ₿₿", " ႠႡ", " ꙮꙮ", " 𓀀", " ǅǅabc"]  # 1..8 bytes, 4..6 ids: the short slot
# Short pieces whose first 8 bytes are a tiny marker piece's (" ǅǅabc"): in the small caches below
# they share the short slot of its ids now and then, where only the key's second word tells them apart.
_SAME_HEAD = [" ǅǅabcd", " ǅǅabcde", " ǅǅabcdef"]
_TINY_TO_LONG = [" ꙮ𓀀", " 𓀀ꙮ", " ǅ𓀀", " 𓀀ⴰ"]  # 1..8 bytes, 7..8 ids: the long slot
_SHORT_MARKER = [" საქ", " Ελλάδα", " ᚠᚢᚦ", " 𐌰𐌱", " ᏣᎳᎩᎯ", " ⴰⴱⴲⴳ", " Երևան"]  # 9..15 bytes, 7..12 ids: the long slot
_TOO_MANY = [" Հայաստ", " 𐌰𐌱𐌲"]  # more than 12 ids (cl100k): merged every time
_PLAIN = [" the", " of", ",", " привет", " Ωμέγα", "\n", " x", "ab", "123", " naïve"]
_WORDS = _TINY_MARKER + _SAME_HEAD + _TINY_TO_LONG + _SHORT_MARKER + _TOO_MANY + _PLAIN

# (short, long, tiny) slots: each later cache no larger; the long one larger; the short one larger
_LAYOUTS = {"follow both": (1 << 8, 1 << 6, 1 << 8), "long larger": (1 << 6, 1 << 8, 1 << 8),
            "short larger": (1 << 8, 1 << 6, 1 << 6)}
_NAMES = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module")
def encodings():
    return {name: (fastenc.load(name), _from_committed_files(name)) for name in _NAMES}


def _passes(enc, texts, caches, n_passes=3):
    raw = [t.encode() for t in texts]
    data = np.frombuffer(b"".join(raw) + bytes(16), dtype=np.uint8).copy()  # (slack: the hot path needs 16 bytes)
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    out = np.empty(max(len(data), 1), dtype=np.uint32)
    return [out[:_encode_all(data, offsets, enc.vocab, enc.kernel_classes, caches, out)].tolist() for _ in range(n_passes)]


def test_the_groups_are_what_they_claim(encodings):
    ref = encodings["cl100k_base"][1]
    ids = {w: len(ref.encode_ordinary(w)) for w in _WORDS}
    for w in _TINY_MARKER:
        assert len(w.encode()) <= TINY_MAX_BYTES and 4 <= ids[w] <= 6, w
    for w in _TINY_TO_LONG:
        assert len(w.encode()) <= TINY_MAX_BYTES and 7 <= ids[w] <= 8, w
    for w in _SHORT_MARKER:
        assert TINY_MAX_BYTES < len(w.encode()) <= 15 and 7 <= ids[w] <= 12, w
    for w in _SAME_HEAD:
        assert TINY_MAX_BYTES < len(w.encode()) <= 15 and w.encode()[:8] == " ǅǅabc".encode(), w
    for w in _TOO_MANY:
        assert len(w.encode()) <= 15 and ids[w] > 12, w
    pattern = regex.compile(ref._pat_str)
    for w in _WORDS:  # each is one piece of the pattern, so it lands in the cache whole
        assert pattern.findall(w) == [w], w


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("name", _NAMES)
def test_markers_cold_and_warm_match_tiktoken(encodings, name, layout):
    enc, ref = encodings[name]
    rng = np.random.default_rng(11)
    texts = ["".join(rng.choice(_WORDS, 80)) for _ in range(40)]
    expected = [i for t in texts for i in ref.encode_ordinary(t)]
    for got in _passes(enc, texts, new_piece_caches(*_LAYOUTS[layout])):
        assert got == expected


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=40), st.sampled_from(sorted(_LAYOUTS)), st.sampled_from(_NAMES))
def test_fuzz_markers_cold_and_warm(encodings, parts, layout, name):
    enc, ref = encodings[name]
    text = "".join(parts)
    expected = ref.encode_ordinary(text)
    # Tiny caches: pieces collide in their home slots, so a marker's later slot often holds another piece.
    short, long, tiny = _LAYOUTS[layout]
    for got in _passes(enc, [text, text], new_piece_caches(short >> 4, long >> 4, tiny >> 4)):
        assert got == expected + expected


@pytest.mark.parametrize("name", _NAMES)
def test_a_short_slot_holding_a_piece_with_the_same_first_word_is_not_taken(encodings, name):
    # One short and one long slot: " ǅǅabcd" (9 bytes) overwrites the short slot where the marker of
    # " ǅǅabc" (8 bytes, the same first 8 bytes) sends its lookup; only the length in the key's
    # second word tells them apart.
    enc, ref = encodings[name]
    text = " ǅǅabc ǅǅabcd ǅǅabc ǅǅabcdef ǅǅabc"
    expected = ref.encode_ordinary(text)
    for got in _passes(enc, [text], new_piece_caches(1, 1, 1 << 8)):
        assert got == expected
