"""Long pieces cut where no merge can cross (kernels/segments.py), the short-cache lookup, and
the batch kernel's in-place runs: each checked against an independent reference."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples
from numba import njit

import fastenc
from fastenc.kernels.encode import compact_runs, encode_batch_counts
from fastenc.kernels.loads import element_address, load_word
from fastenc.kernels.piece_cache import (
    SHORT_WORDS,
    PieceCaches,
    cache_lookup,
    cache_store,
    new_piece_cache,
    new_piece_caches,
    new_tiny_cache,
    piece_key,
    piece_slot,
    short_cache_lookup,
    tiny_cache_lookup,
    tiny_cache_store,
)
from fastenc.kernels.segments import segment_end
from reference import bpe_ref
from fastenc.vocab import load_vocab
from test_vocab import toy_spec, write


@pytest.fixture(scope="module")
def gpt2():
    return fastenc.load("gpt2")


def _token_bytes(vocab) -> list[bytes]:
    tb, to = vocab.token_bytes, vocab.token_offsets
    return [tb[to[i] : to[i + 1]].tobytes() for i in range(len(to) - 1)]


def test_gpt2_joinable_is_the_byte_pairs_inside_tokens(gpt2):
    # Recomputed in Python: every byte pair inside a mergeable token (not <|endoftext|>, which
    # tiktoken keeps out of its ranks). Every such token merges back to itself (test_bpe), so
    # no cut needs forbidding and the whole-piece lookup is off: it could never change an id.
    from fastenc.kernels import config as cfg

    tokens = _token_bytes(gpt2.vocab)
    expected = np.zeros(1 << 16, dtype=np.uint8)
    for token in tokens[:50256]:
        for x, y in zip(token, token[1:]):
            expected[x << 8 | y] = 1
    assert np.array_equal(gpt2.vocab.joinable, expected)
    assert 2000 < expected.sum() < 4000  # most byte pairs can be cut: the point of it all
    assert gpt2.vocab.config[cfg.WHOLE_PIECE_LOOKUP] == 0


def test_segment_end_stops_at_the_first_cuttable_pair():
    joinable = np.zeros(1 << 16, dtype=np.uint8)
    joinable[ord("a") << 8 | ord("b")] = 1
    data = np.frombuffer(b"abab|ab", dtype=np.uint8)
    assert segment_end(data, 0, 7, joinable) == 2  # "ab" | "ab" is cuttable (b, a not joinable)
    assert segment_end(data, 2, 7, joinable) == 4
    assert segment_end(data, 4, 7, joinable) == 5
    assert segment_end(data, 5, 7, joinable) == 7
    assert segment_end(data, 5, 6, joinable) == 6  # never past end


def test_cutting_is_exact_when_a_token_does_not_merge_to_itself(tmp_path):
    # "abc" is a token that no merge can build (neither "ab" nor "bc" is a token), so tiktoken's
    # rule gives [abc] for the piece "abc" but a, b, c inside a longer piece. Cutting a long
    # piece just before "a" or just after "c" would hand the part "abc" to the whole-piece
    # lookup; the joinable table must forbid both cuts.
    from fastenc.kernels import config as cfg

    spec = toy_spec(extra=("abc", "xx", "xxxx"), merges=(("x", "x"), ("xx", "xx")))
    path = write(tmp_path, spec)
    vocab, _ = load_vocab(path, merge_rule="tiktoken")
    assert vocab.joinable[ord("x") << 8 | ord("a")] == 1 and vocab.joinable[ord("c") << 8 | ord("x")] == 1
    assert vocab.joinable[ord("x") << 8 | ord("b")] == 0  # other pairs stay cuttable
    assert vocab.config[cfg.WHOLE_PIECE_LOOKUP] == 1  # "abc" needs the lookup
    ranks = {t: i for i, t in enumerate(_token_bytes(vocab))}
    enc = fastenc.load(path, merge_rule="tiktoken")
    for word in ("abc", "xabc", "abcx", "x" * 17 + "abc" + "x" * 16, "abc" * 12, "xxbxxabcxx" * 4):
        expected = [ranks[p] for p in bpe_ref(word.encode(), lambda a, b: ranks.get(a + b))]
        if word == "abc":
            expected = [ranks[b"abc"]]
        assert enc.encode(word) == expected, word


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(["中文", "日本語", "テキスト", "한국어", "ภาษาไทย", "的", "ー", "ก", "a", "\u0301", "😀"]),
                min_size=1, max_size=60))
def test_long_runs_without_spaces_match_tiktoken(gpt2, tiktoken_gpt2, parts):
    # Runs of letters without spaces are single pieces far longer than the caches hold: they
    # are cut into parts, and the ids must not change.
    text = "".join(parts)
    assert gpt2.encode(text) == tiktoken_gpt2.encode_ordinary(text)


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(min_size=2, max_size=15), st.binary(max_size=20), st.integers(1, 7))
def test_short_cache_lookup_equals_the_general_lookup(piece, before, count):
    cache = new_piece_cache(1 << 6, SHORT_WORDS)
    ids = np.arange(1000, 1000 + count, dtype=np.int64)
    for tail in (b"", b"0123456789abcdefghijklmnopqrstuvwxyz"):  # at the buffer's end and well inside
        data = np.frombuffer(before + piece + tail, dtype=np.uint8)
        start, end = len(before), len(before) + len(piece)
        out_a = np.zeros(40, dtype=np.int64)
        out_b = np.zeros(40, dtype=np.int64)
        assert short_cache_lookup(cache, data, start, end, out_a, 3, 40) == -1
        cache_store(cache, data, start, end, ids, 0, count, False)
        got = short_cache_lookup(cache, data, start, end, out_a, 3, 40)
        assert got == cache_lookup(cache, data, start, end, out_b, 3, 40) == 3 + count
        assert out_a[3 : 3 + count].tolist() == ids.tolist() == out_b[3 : 3 + count].tolist()
        # room for only the ids themselves: nothing is written past out_limit
        out_c = np.full(3 + count + 5, -7, dtype=np.int64)
        assert short_cache_lookup(cache, data, start, end, out_c, 3, 3 + count) == 3 + count
        assert out_c[3 + count :].tolist() == [-7] * 5
        cache[:] = 0


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.binary(min_size=2, max_size=8), min_size=1, max_size=40), st.binary(max_size=9))
def test_tiny_cache_gives_back_what_was_stored(pieces, before):
    # A 4-slot table: probing, wrap-around and overwriting all happen; a hit must always give
    # the stored ids of exactly those bytes (a cache memoizes a function of the bytes: here
    # 1..3 ids derived from them), never ids of another piece, and the latest store is kept.
    cache = new_tiny_cache(4)
    remembered = {}
    for piece in pieces:
        data = np.frombuffer(before + piece, dtype=np.uint8)  # the piece ends the buffer
        start, end = len(before), len(before) + len(piece)
        digest = hashlib.sha256(piece).digest()
        count = 1 + digest[0] % 3
        ids = np.frombuffer(digest[2 : 2 + 2 * count], dtype=np.uint16).astype(np.int64)
        tiny_cache_store(cache, data, start, end, ids, 0, count, False)
        remembered[piece] = ids.tolist()
        for other, other_ids in remembered.items():
            padded = np.frombuffer(other + b"\xff" * 9, dtype=np.uint8)  # and well inside a buffer
            for buf in (np.frombuffer(other, dtype=np.uint8), padded):
                out = np.full(12, -1, dtype=np.int64)
                got = tiny_cache_lookup(cache, buf, 0, len(other), out, 2, 12)
                if got >= 0:
                    assert out[2:got].tolist() == other_ids
        out = np.full(12, -1, dtype=np.int64)
        assert tiny_cache_lookup(cache, data, start, end, out, 2, 12) == 2 + count  # the latest is never lost
        assert out[2 : 2 + count].tolist() == ids.tolist()


@pytest.mark.parametrize("n_tasks", [1, 3, 7])
def test_batch_runs_are_compacted_in_order_for_any_task_count(gpt2, n_tasks):
    texts = ["", "hello world", "", "中文字符串没有空格" * 9, "x" * 300, "", "a b c", "end"]
    data = np.frombuffer("".join(texts).encode(), dtype=np.uint8)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t.encode()) for t in texts], out=offsets[1:])
    per_task = [new_piece_caches(1 << 10, 1 << 8, 1 << 9) for _ in range(n_tasks)]
    stacked = PieceCaches(*(np.stack(tables) for tables in zip(*per_task)))
    out = np.full(len(data), 65535, dtype=np.uint16)
    counts = np.zeros(len(texts), dtype=np.int64)
    encode_batch_counts(data, offsets, gpt2.vocab, gpt2.classes, stacked, out, counts)
    total = compact_runs(out, offsets, counts, n_tasks)
    expected = [gpt2.encode(t) for t in texts]
    assert counts.tolist() == [len(e) for e in expected]
    assert total == sum(counts) and out[:total].tolist() == [i for e in expected for i in e]


def test_changing_the_thread_count_keeps_the_warm_caches():
    import numba

    enc = fastenc.load("gpt2")
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = enc._task_caches()
        enc._encode_in_slot(b"warm the first task's caches")  # (on task slot 0; encode() would run on the one-text lane)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        every = enc._task_caches()
    finally:
        numba.set_num_threads(before)
    assert one.short.shape[0] == 1 and every.short.shape[0] == numba.config.NUMBA_NUM_THREADS
    for a, b in zip(one, every):
        assert np.shares_memory(a, b) and np.array_equal(a[0], b[0])
    assert one.tiny[0].any()  # the warm entries are still there


def test_a_marker_sends_the_lookup_on_and_a_miss_means_never_seen():
    from fastenc.kernels.piece_cache import ELSEWHERE

    data = np.frombuffer(b"ab" + b"abcdefghijkl" + b" tail bytes to read past", dtype=np.uint8)
    out = np.zeros(32, dtype=np.int64)
    ids = np.arange(1, 16, dtype=np.int64)
    tiny = new_tiny_cache(16)
    short = new_piece_cache(16, SHORT_WORDS)
    assert tiny_cache_lookup(tiny, data, 0, 2, out, 0, 32) == -1
    tiny_cache_store(tiny, data, 0, 2, ids, 0, 0, False)  # a marker: no ids
    assert tiny_cache_lookup(tiny, data, 0, 2, out, 0, 32) == ELSEWHERE
    assert short_cache_lookup(short, data, 2, 14, out, 0, 32) == -1
    cache_store(short, data, 2, 14, ids, 0, 0, False)
    assert short_cache_lookup(short, data, 2, 14, out, 0, 32) == ELSEWHERE
    assert cache_lookup(short, data, 2, 14, out, 0, 32) == ELSEWHERE


@pytest.mark.slow
def test_pieces_with_many_ids_are_found_again_through_the_markers(gpt2, tiktoken_gpt2):
    # 2..8-byte pieces with 4+ ids and 9..15-byte pieces with 8+ ids live in later caches; a
    # second encode must find them there (and give the same ids as the first and as tiktoken).
    from fastenc.kernels.encode import encode_text

    words = ["\U0001f600\U0001f601", "\u0e01\u0e02\u0e03", "\U0001f44d\U0001f3fd" * 2, "한국어", "👨‍👩‍👧"]
    text = " ".join(words * 3)
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    caches = new_piece_caches(1 << 8, 1 << 6, 1 << 8)
    out = np.zeros(len(data), dtype=np.int64)
    first = out[: encode_text(data, 0, len(data), gpt2.vocab, gpt2.classes, caches, out, 0)].tolist()
    assert first == tiktoken_gpt2.encode_ordinary(text)
    markers = caches.tiny[(caches.tiny[:, 1] != 0) & ((caches.tiny[:, 1] >> np.uint64(48)) & np.uint64(0xFF) == 0)]
    assert len(markers) > 0  # the test does reach the marker path
    out[:] = 0
    again = out[: encode_text(data, 0, len(data), gpt2.vocab, gpt2.classes, caches, out, 0)].tolist()
    assert again == first


@njit
def _word_at(data, i):
    return load_word(data, i)


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(min_size=8, max_size=40), st.data())
def test_load_word_is_eight_little_endian_bytes(raw, draw):
    i = draw.draw(st.integers(0, len(raw) - 8))
    data = np.frombuffer(raw, dtype=np.uint8)  # read-only, like Arrow buffers
    assert int(_word_at(data, i)) == int.from_bytes(raw[i : i + 8], "little")


@njit(cache=True)
def _home_slot(tiny, short, data, start, n):
    # piece_slot's address as (which table, slot): 0 tiny, 1 short.
    at = piece_slot(tiny, short, data, start, n)
    k0, second, is_short = piece_key(data, start, n)
    if is_short:
        return 1, np.int64((at - element_address(short, 0)) // 32), k0, second
    return 0, np.int64((at - element_address(tiny, 0)) // 16), k0, second


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(min_size=1, max_size=15), st.binary(max_size=9), st.integers(1, 3))
def test_piece_slot_names_the_slot_a_store_fills(piece, before, count):
    # The encode loop's hot path reads a piece's ids from the slot piece_slot names; the stores and
    # the general lookups must put and find every piece of 1..15 bytes there (when it is at home).
    tiny = new_tiny_cache(1 << 8)
    short = new_piece_cache(1 << 8, SHORT_WORDS)
    ids = np.arange(1000, 1000 + count, dtype=np.int64)
    data = np.frombuffer(before + piece + bytes(16), dtype=np.uint8)  # 16 bytes of room past the piece
    start, end = len(before), len(before) + len(piece)
    table, slot, k0, second = _home_slot(tiny, short, data, start, len(piece))
    assert k0 == int.from_bytes(piece[:8], "little")
    if len(piece) <= 8:
        tiny_cache_store(tiny, data, start, end, ids, 0, count, False)
        assert table == 0 and tiny[slot, 0] == k0 and tiny[slot, 1] >> 56 == len(piece) == second >> 56
    else:
        cache_store(short, data, start, end, ids, 0, count, False)
        assert table == 1 and short[slot, 0] == k0 and short[slot, 1] == second
        assert second == int.from_bytes(piece[8:], "little") | (len(piece) << 56)


def _span_cut_reference(data: bytes, start: int, end: int, tokens: set, longest: int, guarded) -> int:
    """The first boundary b in (start, end) that no token data[x:y] (start <= x < b < y <= end)
    spans and that is not guarded; else end. Brute force over every substring."""
    spanned = [False] * (end + 1)
    for x in range(start, end):
        for y in range(x + 2, min(end, x + longest) + 1):
            if data[x:y] in tokens:
                for b in range(x + 1, y):
                    spanned[b] = True
    return next((b for b in range(start + 1, end) if not spanned[b] and not guarded(data[b - 1], data[b])), end)


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def wide_vocab(request):
    vocab = fastenc.load(request.param).vocab
    tokens = {t for t in _token_bytes(vocab) if len(t) >= 2}
    return vocab, tokens, max(map(len, tokens)), sorted(tokens)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=25), st.integers(0, 3), st.data())
def test_span_cuts_are_the_first_boundary_no_token_spans(wide_vocab, picks, trim, data):
    # Strings made of real tokens (CJK ones among them) with their bytes cut anywhere: the
    # kernel's first cut equals the brute-force one, from every start (so it neither cuts where a
    # token spans nor misses a boundary it could cut at).
    from fastenc.kernels.segments import SPAN_GUARD, span_segment_end

    vocab, tokens, longest, ordered = wide_vocab
    text = b"".join(ordered[p % len(ordered)] for p in picks)[trim:]
    if len(text) < 2:
        return
    arr = np.frombuffer(text, dtype=np.uint8)
    guarded = lambda x, y: bool(vocab.span_pairs[x << 8 | y] & SPAN_GUARD)  # noqa: E731
    start = data.draw(st.integers(0, len(text) - 2))
    want = _span_cut_reference(text, start, len(text), tokens, longest, guarded)
    assert span_segment_end(arr, start, len(text), vocab.token_prefixes, vocab.span_pairs) == want


def test_span_cuts_split_cjk_runs_that_byte_pairs_cannot(wide_vocab):
    # The point of the span rule: o200k_base's (and cl100k_base's) CJK tokens make the byte pairs
    # between CJK characters joinable, so the pair rule keeps a clause whole; no token spans
    # some of those boundaries, and the span rule cuts there.
    from fastenc.kernels.segments import span_segment_end

    vocab, tokens, longest, _ = wide_vocab
    text = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从".encode()
    arr = np.frombuffer(text, dtype=np.uint8)
    pair_cuts, span_cuts, at = 0, 0, 0
    while at < len(text):
        nxt = segment_end(arr, at, len(text), vocab.joinable)
        pair_cuts += nxt < len(text)
        at = nxt
    at = 0
    while at < len(text):
        nxt = span_segment_end(arr, at, len(text), vocab.token_prefixes, vocab.span_pairs)
        assert nxt == _span_cut_reference(text, at, len(text), tokens, longest, lambda x, y: False)
        span_cuts += nxt < len(text)
        at = nxt
    assert span_cuts > pair_cuts + 30, (pair_cuts, span_cuts)


def test_a_gpt2_vocabulary_never_span_cuts(gpt2):
    # The narrow loop cuts by byte pairs only; its placeholder tables must never cut (an empty
    # prefix table on its own would cut at every boundary).
    from fastenc.kernels.segments import span_segment_end

    arr = np.frombuffer("中文テキスト hello".encode() * 4, dtype=np.uint8)
    assert span_segment_end(arr, 0, len(arr), gpt2.vocab.token_prefixes, gpt2.vocab.span_pairs) == len(arr)
