"""``kernels.runs.encode_docs``: many documents in one call without reference counting,
in both layouts, including the stop-and-grow path for a long part that needs more merge room."""
from __future__ import annotations

import numba
import numpy as np
import pytest

import fastenc
from fastenc.kernels.encode import new_scratch
from fastenc.kernels.piece_cache import new_piece_caches
from fastenc.kernels.runs import _encode_span, encode_docs

# Short documents around long ones: "x" * 20_000 is one piece that no cut shortens, so its merge
# needs a work array far larger than new_scratch()'s; the documents after it must still be right.
DOCS = ["Hello, world!", "x" * 20_000, "", " short one", "中" * 3_000 + " tail", "1" * 5_000, "a\r\n b", "last"]


@pytest.fixture(scope="module")
def gpt2():
    return fastenc.load("gpt2")


def _flat(texts):
    blobs = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8).copy()
    data.flags.writeable = False  # the loops' one input type
    return data, offsets


def test_back_to_back_layout_matches_tiktoken(gpt2, tiktoken_gpt2):
    data, offsets = _flat(DOCS)
    out = np.zeros(len(data) + 8, dtype=np.uint16)
    counts = np.zeros(len(DOCS), dtype=np.int64)
    caches = new_piece_caches(1 << 12, 1 << 10, 1 << 12)
    end = encode_docs(data, offsets, 0, len(DOCS), gpt2.vocab, gpt2.classes, caches, out, np.int64(3), counts, np.int64(-1))
    assert end == 3 + counts.sum()
    at = 3
    for text, count in zip(DOCS, counts):
        assert out[at : at + count].tolist() == tiktoken_gpt2.encode_ordinary(text), text[:20]
        at += count


def test_slotted_layout_puts_eos_then_ids_in_each_documents_slot(gpt2, tiktoken_gpt2):
    data, offsets = _flat(DOCS)
    out = np.full(len(data) + len(DOCS) + 8, 65535, dtype=np.uint16)
    counts = np.zeros(len(DOCS), dtype=np.int64)
    caches = new_piece_caches(1 << 12, 1 << 10, 1 << 12)
    first, last, eos = 1, len(DOCS), 50256  # from a document other than 0: slots are offsets[i] + i
    encode_docs(data, offsets, first, last, gpt2.vocab, gpt2.classes, caches, out, np.int64(0), counts, np.int64(eos))
    assert counts[0] == 0  # outside [first, last): untouched
    for i in range(first, last):
        slot = int(offsets[i]) + i
        assert out[slot] == eos
        assert out[slot + 1 : slot + counts[i]].tolist() == tiktoken_gpt2.encode_ordinary(DOCS[i]), i


def test_the_span_stops_for_a_bigger_work_array_and_the_driver_finishes(gpt2, tiktoken_gpt2):
    # The no-refcount loop cannot allocate: it must stop in the long document (index 1) and say
    # where to go on; encode_docs then allocates and resumes (the test above ends right).
    data, offsets = _flat(DOCS)
    out = np.zeros(len(data) + 8, dtype=np.uint16)
    counts = np.zeros(len(DOCS), dtype=np.int64)
    caches = new_piece_caches(1 << 12, 1 << 10, 1 << 12)
    s = new_scratch()
    stopped = _encode_span(data, offsets, 0, len(DOCS), offsets[0], offsets[0], 0, 0, np.int64(-1), gpt2.vocab, gpt2.classes,
                           caches, s.ranks, s.work, s.ring, s.state, out, counts)
    assert stopped == 1
    assert s.state[2] > s.work.shape[0]  # the room it needs
    assert counts[0] == len(tiktoken_gpt2.encode_ordinary(DOCS[0]))
    assert offsets[1] <= s.state[0] < offsets[2]  # where to resume: inside document 1


def test_batch_entry_points_use_it_for_any_thread_count(gpt2, tiktoken_gpt2):
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            ids, offsets = gpt2.encode_batch(DOCS * 3)
            for i, text in enumerate(DOCS * 3):
                assert ids[offsets[i] : offsets[i + 1]].tolist() == tiktoken_gpt2.encode_ordinary(text), (threads, i)
    finally:
        numba.set_num_threads(before)


def test_a_url_vocabulary_without_a_class_table_is_checked(gpt2):
    data, offsets = _flat(["abc"])
    with pytest.raises(ValueError, match="classes=None"):
        encode_docs(data, offsets, 0, 1, gpt2.vocab, None, new_piece_caches(1 << 12, 1 << 10, 1 << 12),
                    np.zeros(8, np.uint16), np.int64(0), np.zeros(1, np.int64), np.int64(-1))


# Documents that end in short pieces, so the last pieces of each lie within 8 bytes of its end:
# the hot path (an 8-place id store) must not run there (encode._RING: hot entries). Each is
# encoded alone into exactly its room (its byte count) with a guard band after it; a padding
# document after them keeps 16 bytes of data readable past each one (the finder's own condition
# for a lookup), so only the 8-bytes-before-the-end rule guards the room.
TAILS = ["the end", "a b c", " ok.", "Hello world", "  \n\n  ", "it's 12", "é", "the the the the", "x", "ab"]


def test_ids_never_spill_past_a_documents_room(gpt2, tiktoken_gpt2):
    data, offsets = _flat(TAILS + ["padding, padding, padding"])
    caches = new_piece_caches(1 << 12, 1 << 10, 1 << 12)
    for rep in range(2):  # cold, then warm: every piece found in its home slot
        for i, text in enumerate(TAILS):
            room = len(text.encode())
            big = np.full(room + 16, 54321, dtype=np.uint16)
            counts = np.zeros(len(TAILS) + 1, dtype=np.int64)
            end = encode_docs(data, offsets, i, i + 1, gpt2.vocab, gpt2.classes, caches, big[:room], np.int64(0), counts, np.int64(-1))
            assert (big[room:] == 54321).all(), (rep, text)
            assert big[:end].tolist() == tiktoken_gpt2.encode_ordinary(text), (rep, text)


def test_a_short_cache_in_the_long_layout_is_read_without_the_hot_path(gpt2, tiktoken_gpt2, docs_fixture):
    # Any W = 4 or 8 cache serves as the short one (cache_lookup is generic); the hot path reads
    # only the SHORT_WORDS layout, so with W = 8 every piece must take the general path, and be right.
    from fastenc.kernels.piece_cache import LONG_WORDS, PieceCaches, new_piece_cache

    base = new_piece_caches(1 << 12, 1 << 10, 1 << 12)
    caches = PieceCaches(base.tiny, new_piece_cache(1 << 12, LONG_WORDS), base.long, base.memo)
    texts = docs_fixture.column("text").to_pylist()[:40] + DOCS
    data, offsets = _flat(texts)
    for rep in range(2):
        out = np.zeros(len(data) + 8, dtype=np.uint16)
        counts = np.zeros(len(texts), dtype=np.int64)
        encode_docs(data, offsets, 0, len(texts), gpt2.vocab, gpt2.classes, caches, out, np.int64(0), counts, np.int64(-1))
        at = 0
        for text, count in zip(texts, counts):
            assert out[at : at + count].tolist() == tiktoken_gpt2.encode_ordinary(text), (rep, text[:30])
            at += count
