"""The piece caches start with the vocabulary's tokens in them (``piece_cache_wide.seed_wide_cache``
for the cl100k/o200k loop, ``encode.seed_piece_caches`` for GPT-2's; ``Encoder._seed``): which
tokens, when, and that the ids stay tiktoken's.

Exactness over real text is the parity suite's (tests/test_encodings.py encodes docs.parquet and
the fixtures with Encoders that seed); here, the seeding itself.
"""
from __future__ import annotations

import numpy as np
import pytest

import fastenc
from fastenc.kernels.config import WHOLE_PIECE_LOOKUP
from fastenc.kernels.piece_cache import TINY_MAX_BYTES, cache_lookup, max_piece_bytes, one_task, tiny_cache_lookup
from fastenc.kernels.piece_cache_wide import WIDE_MAX_ID, seed_wide_cache, wide_cache_lookup
from test_encodings import _from_committed_files  # the offline tiktoken oracle

NAMES = ["cl100k_base", "o200k_base"]


def _fresh(name: str) -> fastenc.Encoder:
    """An Encoder of its own (``fastenc.load`` hands out one shared, already-used Encoder)."""
    shared = fastenc.load(name)
    return fastenc.Encoder(shared.vocab, shared.info)


def _token(enc, tid: int) -> np.ndarray:
    a, b = enc.vocab.token_offsets[tid], enc.vocab.token_offsets[tid + 1]
    return np.ascontiguousarray(enc.vocab.token_bytes[a:b])


def _cached(short, piece: np.ndarray):
    """The ids the short cache holds for ``piece`` (a list), or None."""
    out = np.zeros(64, np.uint32)
    got = wide_cache_lookup(short, piece, np.int64(0), np.int64(len(piece)), out, np.int64(0), np.int64(64), False)
    return out[:got].tolist() if got >= 0 else None


@pytest.mark.parametrize("name", NAMES)
def test_the_first_call_finds_every_short_token_in_the_cache(name):
    enc = _fresh(name)
    assert enc.encode("a") == _from_committed_files(name).encode_ordinary("a")
    short = enc._idle[0].caches.short  # (encode runs on the one-text lane, seeded like a task slot)
    most = max_piece_bytes(short)
    lengths = np.diff(enc.vocab.token_offsets)
    table = enc.vocab.token_table
    tids = np.sort(table[table >= 0])
    eligible = tids[(lengths[tids] >= 1) & (lengths[tids] <= most) & (tids <= WIDE_MAX_ID)]
    sample = np.random.default_rng(7).choice(eligible, 3000, replace=False).tolist() + eligible[-50:].tolist()
    missing = [t for t in sample if _cached(short, _token(enc, t)) != [t]]
    # A seeded cache may lose a few to a full probe run (it forgets, never answers wrongly).
    assert len(missing) <= len(sample) // 100, missing[:10]
    wrong = [t for t in sample if _cached(short, _token(enc, t)) not in (None, [t])]
    assert wrong == []


def test_gpt2s_first_call_finds_every_short_token_in_the_tiny_or_short_cache(tiktoken_gpt2):
    enc = _fresh("gpt2")
    assert enc.encode("a") == tiktoken_gpt2.encode_ordinary("a")
    caches = one_task(enc._task_caches(), 0)
    enc._seed(enc._task_caches(), 0)  # (task 0 as a batch's first call seeds it: encode runs on the lane)
    lengths = np.diff(enc.vocab.token_offsets)
    table = enc.vocab.token_table
    tids = np.sort(table[table >= 0])
    eligible = tids[(lengths[tids] >= 1) & (lengths[tids] <= max_piece_bytes(caches.short))]
    out = np.zeros(64, np.uint16)

    def cached(tid, caches):
        piece = _token(enc, tid)
        lookup, cache = (tiny_cache_lookup, caches.tiny) if len(piece) <= TINY_MAX_BYTES else (cache_lookup, caches.short)
        got = lookup(cache, piece, np.int64(0), np.int64(len(piece)), out, np.int64(0), np.int64(64))
        return out[:got].tolist() if got >= 0 else None

    sample = np.random.default_rng(3).choice(eligible, 3000, replace=False).tolist() + eligible[-50:].tolist()
    for where in (caches, enc._idle[0].caches):  # task 0's, and the one-text lane's
        assert sum(cached(t, where) != [t] for t in sample) <= len(sample) // 100
        assert [t for t in sample if cached(t, where) not in (None, [t])] == []
    texts = [_token(enc, t).tobytes().decode("utf-8", "replace") for t in sample[:1500]]
    texts += [f"({t}) {t}" for t in texts[:500]]
    ids, offsets = enc.encode_batch(texts)
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == tiktoken_gpt2.encode_ordinary_batch(texts)


@pytest.mark.parametrize("name", NAMES)
def test_special_tokens_and_unused_tasks_are_not_seeded(name):
    enc = _fresh(name)
    enc.encode("hello")
    assert enc._seeded == set()  # (a one-text call runs on the lane, and seeds no task slot)
    enc._encode_in_slot(b"hello")
    short = enc._task_caches().short
    for text, tid in enc.info.special_tokens.items():
        piece = np.frombuffer(text.encode(), np.uint8)
        if len(piece) <= max_piece_bytes(short[0]):
            assert _cached(short[0], piece) is None, text
            assert _cached(enc._idle[0].caches.short, piece) is None, text
        assert tid not in set(enc._seed_ids.tolist())
    assert enc._seeded == {0}  # (thread 1's own caches, when it has any, stay empty until used)
    if short.shape[0] > 1:
        assert not short[1].any()


@pytest.mark.parametrize("name", NAMES)
def test_seeded_pieces_encode_as_tiktoken_does(name):
    """Every token of 1..15 bytes that is valid UTF-8, as a text of its own and inside words,
    through a seeded Encoder: tiktoken's ids (a seeded entry that disagreed with the merge would
    show here first: these are exactly the pieces it answers)."""
    enc = _fresh(name)
    oracle = _from_committed_files(name)
    lengths = np.diff(enc.vocab.token_offsets)
    texts = []
    for tid in enc._seed_ids[:: 7].tolist():
        if lengths[tid] <= 15:
            try:
                texts.append(_token(enc, tid).tobytes().decode("utf-8"))
            except UnicodeDecodeError:
                continue
    texts += [f"x{t}y {t}." for t in texts[:2000]]
    ids, offsets = enc.encode_batch(texts)
    bad = [t for i, t in enumerate(texts) if ids[offsets[i]:offsets[i + 1]].tolist() != oracle.encode_ordinary(t)]
    assert bad == []


def test_only_vocabularies_whose_tokens_encode_to_themselves_are_seeded():
    enc = _fresh("o200k_base")
    assert enc._seed_ids is not None and enc.info.merge_rule == "tiktoken"
    no_lookup = enc.vocab.config.copy()
    no_lookup[WHOLE_PIECE_LOOKUP] = 0
    with_lookup = enc.vocab.config.copy()
    with_lookup[WHOLE_PIECE_LOOKUP] = 1
    # A HF file without ignore_merges: a token's bytes may merge to other ids, so never seeded.
    hf_merges = fastenc.Encoder(enc.vocab._replace(config=no_lookup), enc.info._replace(merge_rule="hf"))
    assert hf_merges._seed_ids is None
    hf_merges.encode("hello world")
    unseen = np.frombuffer(" the".encode(), np.uint8)  # a token, not in that text
    assert hf_merges._seeded == set() and _cached(hf_merges._task_caches().short[0], unseen) is None
    hf_lookup = fastenc.Encoder(enc.vocab._replace(config=with_lookup), enc.info._replace(merge_rule="hf"))
    assert hf_lookup._seed_ids is not None
    # The URL vocabulary: a HF file without ignore_merges, never seeded; GPT-2's (tiktoken's rule) is.
    assert fastenc.Encoder(fastenc.load("urls").vocab, fastenc.load("urls").info)._seed_ids is None
    assert fastenc.Encoder(fastenc.load("gpt2").vocab, fastenc.load("gpt2").info)._seed_ids is not None


def test_the_seed_kernel_keeps_ids_it_cannot_hold_out():
    enc = _fresh("o200k_base")
    short = np.zeros_like(enc._task_caches().short[0][:1024])
    big = np.array([WIDE_MAX_ID + 1], np.int64)
    # A token id past the wide layout's 18 bits is skipped, not truncated into another id.
    data = np.frombuffer(b"ab", np.uint8)
    offsets = np.zeros(WIDE_MAX_ID + 3, np.int64)
    offsets[WIDE_MAX_ID + 2:] = 2
    offsets[WIDE_MAX_ID + 1] = 0
    assert seed_wide_cache(short, big, data, offsets) == 0
    assert _cached(short, data) is None
    ok = np.array([WIDE_MAX_ID], np.int64)
    offsets2 = np.zeros(WIDE_MAX_ID + 2, np.int64)
    offsets2[WIDE_MAX_ID + 1] = 2
    assert seed_wide_cache(short, ok, data, offsets2) == 1
    assert _cached(short, data) == [WIDE_MAX_ID]
