"""The long-piece memo (kernels/piece_memo.py): what it stores it gives back, a tag collision is
caught by the check against the piece's bytes, a full memo stores nothing more, and the encode
loop that reads it stays exact (tiktoken) on repeated long pieces, cold and warm."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples
from numba import njit

import fastenc
from fastenc.kernels.encode import encode_text
from fastenc.kernels.piece_cache import new_piece_caches
from fastenc.kernels.piece_memo import (
    _HEADER,
    memo_emit,
    memo_find,
    memo_hash,
    memo_store,
    memo_words,
    new_piece_memo,
)

_ENTRIES = 2  # header words (piece_memo.py's layout)
_FILL = 0


@pytest.fixture(scope="module")
def gpt2():
    return fastenc.load("gpt2")


@njit
def _hash(data, start, end):
    return memo_hash(data, start, end)


def _u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.uint8).copy()


def _store(memo, enc, piece: bytes) -> list[int]:
    ids = np.asarray(enc.encode(piece.decode()), dtype=np.int64)
    data = _u8(piece)
    assert memo_store(memo, data, 0, len(data), ids, 0, len(ids))
    return ids.tolist()


def _emit(memo, enc, piece: bytes):
    data = _u8(piece)
    slot = memo_find(memo, np.uint64(_hash(data, 0, len(data))))
    if slot < 0:
        return None
    out = np.full(len(data), 65535, dtype=np.uint16)
    end = memo_emit(memo, slot, enc.vocab.token_heads, enc.vocab.token_bytes, enc.vocab.token_offsets, data, 0, len(data), out, 0)
    return -1 if end < 0 else out[:end].tolist()


def test_what_is_stored_comes_back_and_nothing_else(gpt2):
    memo = new_piece_memo(1 << 8, 1 << 12, 1 << 4)
    pieces = ["中文字符串没有空格的一段话".encode(), b" " * 40, b"1234567890123456789", " Donaudampfschiff".encode()]
    stored = {p: _store(memo, gpt2, p) for p in pieces}
    assert memo[_ENTRIES] == len(pieces)
    assert memo[_FILL] == sum(len(ids) for ids in stored.values())
    for piece, ids in stored.items():
        assert _emit(memo, gpt2, piece) == ids
    assert _emit(memo, gpt2, b" " * 41) is None  # never stored: the filter (or the table) says so


def test_a_tag_collision_is_caught_by_the_bytes(gpt2):
    # Point the entry of piece B (same length as A) at A's ids: the check against B's bytes fails.
    memo = new_piece_memo(1 << 4, 1 << 10, 1)
    a, b = "一二三四五六七八九十".encode(), "十九八七六五四三二一".encode()
    _store(memo, gpt2, a)
    slot_a = memo_find(memo, np.uint64(_hash(_u8(a), 0, len(a))))
    entry_a = int(memo[_HEADER + 1 + slot_a])
    hb = int(_hash(_u8(b), 0, len(b)))
    forged = (hb >> 40) << 40 | (entry_a & ((1 << 40) - 1))
    memo[:] = new_piece_memo(1 << 4, 1 << 10, 1)
    _store(memo, gpt2, a)
    memo[_HEADER + 1 + (hb & 15)] = forged
    memo[_HEADER] = np.uint64(0xFFFFFFFFFFFFFFFF)  # every filter bit: the probe goes to the table
    assert _emit(memo, gpt2, b) == -1
    assert _emit(memo, gpt2, a) == gpt2.encode(a.decode())


def test_a_full_memo_stores_nothing_more(gpt2):
    first = " Donaudampfschiffahrt".encode()
    memo = new_piece_memo(1 << 8, len(gpt2.encode(first.decode())) + 1, 1 << 4)  # room for one more id
    _store(memo, gpt2, first)
    text = "一二三四五六七八九十"
    ids = np.asarray(gpt2.encode(text), dtype=np.int64)
    data = _u8(text.encode())
    assert not memo_store(memo, data, 0, len(data), ids, 0, len(ids))
    assert memo[_ENTRIES] == 1 and _emit(memo, gpt2, bytes(data)) is None
    assert _emit(memo, gpt2, first) == gpt2.encode(first.decode())


def test_sizes_are_checked():
    with pytest.raises(ValueError, match="power of two"):
        memo_words(3, 16, 1)
    with pytest.raises(ValueError, match="power of two"):
        memo_words(4, 16, 6)
    with pytest.raises(ValueError, match="ids"):
        memo_words(4, -1, 1)


@njit
def _encode_all(data, offsets, vocab, classes, caches, out):
    at = 0
    for d in range(offsets.shape[0] - 1):
        at = encode_text(data, offsets[d], offsets[d + 1], vocab, classes, caches, out, at)
    return at


def _encode_twice(enc, texts, caches):
    raw = [t.encode() for t in texts]
    data = _u8(b"".join(raw) + b"\0" * 0)
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    out = np.empty(max(len(data), 1), dtype=np.uint16)
    passes = []
    for _ in range(2):
        n = _encode_all(data, offsets, enc.vocab, enc.classes, caches, out)
        passes.append(out[:n].tolist())
    return passes


_LONG = ["中文字符串没有空格的一段话", "日本語のテキストです", " " * 37, "\n" * 20, "1" * 25, "=" * 40, "ภาษาไทยไม่มีช่องว่าง",
         " internationalization", "😀" * 6, "a" * 300, "é" * 30]


@pytest.mark.slow
@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.sampled_from(_LONG + [" ", "x", "。", ", "]), min_size=1, max_size=30))
def test_repeated_long_pieces_match_tiktoken_cold_and_warm(gpt2, tiktoken_gpt2, parts):
    text = "".join(parts)
    expected = tiktoken_gpt2.encode_ordinary(text)
    first, warm = _encode_twice(gpt2, [text, text], new_piece_caches(1 << 10, 1 << 8, 1 << 10, 1 << 6, 1 << 12))
    assert first == warm == expected + expected


def test_the_memo_is_read_and_a_wrong_entry_never_reaches_the_output(gpt2, tiktoken_gpt2):
    texts = [" ".join(_LONG)] * 3
    expected = [i for t in texts for i in tiktoken_gpt2.encode_ordinary(t)]
    caches = new_piece_caches(1 << 10, 1 << 8, 1 << 10)
    first, warm = _encode_twice(gpt2, texts, caches)
    assert first == warm == expected
    memo = caches.memo
    assert memo[_ENTRIES] >= 8  # the long pieces were stored...
    # ...and are read: scramble every stored id (to other real tokens); the check against the
    # bytes refuses each entry, the loop cuts those pieces into parts, and the ids stay exact.
    table = _HEADER + int(memo[3])
    arena = table + int(memo[1])
    fill = int(memo[_FILL])
    ids = memo[arena:arena + (fill + 3) // 4].view(np.uint16)
    ids[:fill] = (ids[:fill].astype(np.int64) * 7 + 13) % 50000
    _, scrambled = _encode_twice(gpt2, texts, caches)
    assert scrambled == expected
    memo[table:arena] = 0  # no entries: the same again, from the parts
    memo[_HEADER:table] = 0
    assert _encode_twice(gpt2, texts, caches)[1] == expected


def test_a_piece_the_filter_wrongly_reports_held_is_still_stored(gpt2, tiktoken_gpt2):
    # Every filter bit set on an empty memo: each long piece looks "perhaps held", is looked up
    # in the table a block later (encode_block), is not there, and the loop resumes by cutting it
    # into parts. That resumed cut must still store it, and the ids must stay exact.
    texts = [" ".join(_LONG)] * 2
    expected = [i for t in texts for i in tiktoken_gpt2.encode_ordinary(t)]
    caches = new_piece_caches(1 << 10, 1 << 8, 1 << 10)
    memo = caches.memo
    table = _HEADER + int(memo[3])
    memo[_HEADER:table] = np.uint64(0xFFFFFFFFFFFFFFFF)
    first, warm = _encode_twice(gpt2, texts, caches)
    assert first == warm == expected
    assert memo[_ENTRIES] >= 8


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_token_heads_hold_each_short_token_and_mark_the_others(name):
    from fastenc.kernels.tables import HEAD_LONG, HEAD_MAX_BYTES

    vocab = fastenc.load(name).vocab
    heads, offsets, raw = vocab.token_heads, vocab.token_offsets, vocab.token_bytes.tobytes()
    assert len(heads) == len(offsets) - 1
    for tid in range(len(heads)):
        token = raw[offsets[tid]:offsets[tid + 1]]
        if 1 <= len(token) <= HEAD_MAX_BYTES:
            assert int(heads[tid]) == int.from_bytes(token, "little") | len(token) << 56, tid
        else:
            assert heads[tid] == HEAD_LONG, tid


def test_a_forged_entry_is_caught_on_tokens_of_every_length(gpt2):
    # Ids whose bytes are the piece's except for one byte, at every position, in tokens of 1..7
    # bytes (checked against their heads) and of 8 or more (checked byte by byte): each is refused.
    piece = " internationalization Donaudampfschiffahrt".encode()
    ids = gpt2.encode(piece.decode())
    assert any(len(gpt2.decode_bytes([t])) > 7 for t in ids) and any(len(gpt2.decode_bytes([t])) <= 7 for t in ids)
    memo = new_piece_memo(1 << 8, 1 << 12, 1 << 4)
    _store(memo, gpt2, piece)
    assert _emit(memo, gpt2, piece) == ids
    for k in range(len(piece)):
        other = bytearray(piece)
        other[k] = ord("#") if other[k] != ord("#") else ord("$")
        data = _u8(bytes(other))
        out = np.empty(len(data), dtype=np.uint16)
        slot = memo_find(memo, np.uint64(_hash(_u8(piece), 0, len(piece))))  # the stored entry, as a collision would find it
        v = gpt2.vocab
        assert memo_emit(memo, slot, v.token_heads, v.token_bytes, v.token_offsets, data, 0, len(data), out, 0) == -1, k
