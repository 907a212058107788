"""Piece caches shared by the threads of a batch (``piece_cache``'s "Shared caches").

A store claims an empty slot by a compare-and-swap of its publishing word and writes that word
last; a lookup reads it first; while shared, no filled slot is rewritten. Checked here: the
store rules on each layout (tiny, short, long; narrow and wide ids), threads filling one set of
small caches at once (every thread's ids equal the reference, GPT-2's loop and the wide one),
and ``Encoder`` handing its threads one set.
"""
from __future__ import annotations

import concurrent.futures as cf

import numpy as np
import pytest

import fastenc
from fastenc.kernels.piece_cache import (
    CLAIMED,
    ELSEWHERE,
    cache_lookup,
    cache_store,
    new_piece_cache,
    new_piece_caches,
    tiny_cache_lookup,
    tiny_cache_store,
)
from fastenc.kernels.piece_cache_wide import wide_cache_lookup, wide_cache_store
from fastenc.kernels.piece_memo import caches_shared, set_caches_shared
from test_encodings import CJK_WORDS, _WIDE_LONG, _from_committed_files  # the offline tiktoken oracle

# (name, store, lookup, new cache, bytes per piece, its ids): a tiny, a short and a long layout,
# with 16-bit ids (GPT-2/URL loop) and 18-bit ones (cl100k/o200k loop)
LAYOUTS = [
    ("tiny", tiny_cache_store, tiny_cache_lookup, lambda: np.zeros((8, 2), np.uint64), 3, [7, 9]),
    ("short", cache_store, cache_lookup, lambda: new_piece_cache(8, 4), 11, [7, 9, 11, 13, 15]),
    ("long", cache_store, cache_lookup, lambda: new_piece_cache(8, 8), 20, list(range(1, 13))),
    ("wide short", wide_cache_store, lambda *a: wide_cache_lookup(*a, False), lambda: new_piece_cache(8, 4), 11,
     [70000, 5, 262143]),
    ("wide long", wide_cache_store, lambda *a: wide_cache_lookup(*a, False), lambda: new_piece_cache(8, 8), 20,
     [70000] * 7),
]


def _store(layout, cache, data, start, shared):
    _, store, _, _, n, ids = layout
    ids = np.array(ids, np.uint32)
    store(cache, data, np.int64(start), np.int64(start + n), ids, np.int64(0), np.int64(len(ids)), shared)


def _found(layout, cache, data, start):
    _, _, lookup, _, n, ids = layout
    out = np.zeros(64, np.uint32)
    got = lookup(cache, data, np.int64(start), np.int64(start + n), out, np.int64(0), np.int64(64))
    return out[:got].tolist() if got >= 0 else got


def _data(seed):
    return np.random.default_rng(seed).integers(0, 256, 4096).astype(np.uint8)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: x[0])
def test_a_shared_cache_never_rewrites_a_filled_slot(layout):
    """8 slots, 8 probes: after 8 pieces every probe run is full. A ninth piece evicts its home
    slot's entry in one thread's cache; a shared cache (another thread may be reading that slot)
    does not keep it, and every entry stays as it was."""
    data = _data(1)
    starts = [40 * k for k in range(8)]
    for shared in (False, True):
        cache = layout[3]()
        for start in starts:
            _store(layout, cache, data, start, shared)
        assert all(_found(layout, cache, data, s) == layout[5] for s in starts)
        before = cache.copy()
        _store(layout, cache, data, 2000, shared)
        if shared:
            assert (cache == before).all() and _found(layout, cache, data, 2000) == -1
        else:
            assert _found(layout, cache, data, 2000) == layout[5]
            assert sum(_found(layout, cache, data, s) == -1 for s in starts) == 1  # the evicted one


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: x[0])
def test_a_claimed_slot_is_neither_matched_nor_filled(layout):
    """A slot another thread is filling (its publishing word ``CLAIMED``, the rest not written yet)
    is passed over by a store, which takes the next slot, and by a lookup, which finds it there."""
    data = _data(2)
    probe = layout[3]()
    _store(layout, probe, data, 0, True)
    (home,) = np.nonzero(probe.any(axis=1))[0]
    publish = 1 if probe.shape[1] <= 4 else 3  # (tiny: its ids-and-length word; short: word 1; long: word 3)
    cache = layout[3]()
    cache[home, publish] = CLAIMED
    _store(layout, cache, data, 0, True)
    assert cache[home, publish] == CLAIMED and (cache[(home + 1) % 8] == probe[home]).all()
    assert _found(layout, cache, data, 0) == layout[5]


def _docs(words, n_docs, seed):
    rng = np.random.default_rng(seed)
    texts = ["".join(rng.choice(words, 80)) for _ in range(n_docs)]
    raw = [t.encode() for t in texts]
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)  # read-only, as the encoder's input always is
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return texts, data, offsets


def _race(enc, texts, data, offsets, expected, encode_docs, tail, small):
    """Four threads encode every document at once, each in its own order, with one set of small
    caches (``small``: its tiny, short and long) and their own memos marked shared; three rounds."""
    tasks = []
    for _ in range(4):
        own = new_piece_caches(1 << 7, 1 << 5, 1 << 6, 1 << 8, 1 << 12)
        set_caches_shared(own.memo, True)
        tasks.append(own._replace(tiny=small.tiny, short=small.short, long=small.long))

    def run(t):
        got = {}
        for d in np.roll(np.arange(len(texts)), 10 * t):  # the threads meet the same pieces at different times
            out = np.empty(offsets[d + 1] - offsets[d], dtype=enc.dtype)
            counts = np.zeros(len(texts), dtype=np.int64)
            n = encode_docs(data, offsets, d, d + 1, enc.vocab, enc.kernel_classes, tasks[t], out, 0, counts, *tail)
            got[int(d)] = out[:n].tolist()
        return [got[d] for d in range(len(texts))]

    for _ in range(3):
        with cf.ThreadPoolExecutor(4) as pool:
            for got in pool.map(run, range(4)):
                assert got == expected


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_threads_filling_one_set_of_small_wide_caches_give_tiktokens_ids(name):
    """The cl100k/o200k loop: stores race for slots, claim them, and find probe runs full; every
    thread's ids are tiktoken's, in the first round (all of them filling) and the next two."""
    from fastenc.kernels.runs import encode_docs_wide

    enc, ref = fastenc.load(name), _from_committed_files(name)
    words = _WIDE_LONG + CJK_WORDS + [" the", " of", ",", " and", "'s", " 123", "\r\n", "  ", " Ǆemal", "ab", " über"]
    texts, data, offsets = _docs(words, 40, 24)
    small = new_piece_caches(1 << 7, 1 << 5, 1, 1 << 8, 1 << 12)
    _race(enc, texts, data, offsets, [ref.encode_ordinary(t) for t in texts], encode_docs_wide, (), small)
    assert np.count_nonzero(small.short[:, 1]) > 0.9 * small.short.shape[0]  # the short cache did fill


def test_threads_filling_one_set_of_small_gpt2_caches_give_tiktokens_ids(tiktoken_gpt2):
    """The same for GPT-2's loop (tiny, short and long caches, markers followed by the hot path)."""
    from fastenc.kernels.runs import encode_docs

    enc = fastenc.load("gpt2")
    words = _WIDE_LONG + CJK_WORDS + [" the", " of", ",", " and", "'s", " 123", "\n" + " " * 7, "  ", " Ǆemal",
                                      " über", " 🙂🙂", "ab"]
    texts, data, offsets = _docs(words, 40, 25)
    small = new_piece_caches(1 << 7, 1 << 5, 1 << 6, 1 << 8, 1 << 12)
    _race(enc, texts, data, offsets, [tiktoken_gpt2.encode_ordinary(t) for t in texts], encode_docs, (-1,), small)
    assert np.count_nonzero(small.tiny[:, 1]) > 0.9 * small.tiny.shape[0]


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_the_encoder_gives_its_threads_one_set_of_caches(name, docs_fixture, tiktoken_gpt2):
    """``Encoder`` at 2 threads: both tasks read and fill task 0's tiny, short and long caches
    (task 1's stay untouched), each memo saying so; ``thread_caches`` (a caller's own thread)
    clears the mark. Ids as tiktoken's."""
    import numba

    from fastenc.encoder import Encoder

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one CPU: Numba runs one thread here, so a batch is one task")
    texts = docs_fixture.column("text").to_pylist()
    loaded = fastenc.load(name)
    enc = Encoder(loaded.vocab, loaded.info)  # (its own, fresh caches)
    old = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        ids, offsets = enc.encode_batch(texts)
    finally:
        numba.set_num_threads(old)
    ref = tiktoken_gpt2 if name == "gpt2" else _from_committed_files(name)
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == ref.encode_ordinary_batch(texts)
    caches = enc._caches
    assert np.count_nonzero(caches.short[0]) > 0 and np.count_nonzero(caches.short[1]) == 0
    assert np.count_nonzero(caches.tiny[1]) == 0 and np.count_nonzero(caches.long[1]) == 0
    assert all(caches_shared(caches.memo[t]) for t in range(2))
    assert not caches_shared(enc.thread_caches(0).memo)


def test_a_tasks_memo_is_written_only_once_a_call_runs_that_task(docs_fixture, tiktoken_gpt2):
    """Caches have room for every thread Numba may run, but a call of one thread (a ``--workers``
    process) writes no other task's memo: the header of each is on a huge page of its own, which
    stays unbacked. A later call on two threads initializes task 1's; ids as tiktoken's."""
    import numba

    from fastenc.encoder import Encoder

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one CPU: Numba runs one thread here, so there is no other task")
    texts = docs_fixture.column("text").to_pylist()[:60]
    want = tiktoken_gpt2.encode_ordinary_batch(texts)
    loaded = fastenc.load("gpt2")
    enc = Encoder(loaded.vocab, loaded.info)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        ids, offsets = enc.encode_batch(texts)
        memo = enc._caches.memo
        assert memo.shape[0] == numba.config.NUMBA_NUM_THREADS
        assert memo[0, :8].any() and not memo[1:, :8].any()  # (reading unbacked memory backs nothing)
        numba.set_num_threads(2)
        ids2, offsets2 = enc.encode_batch(texts)
    finally:
        numba.set_num_threads(old)
    assert memo[1, :8].any() and not memo[2:, :8].any()
    for got, off in ((ids, offsets), (ids2, offsets2)):
        assert [got[off[i]:off[i + 1]].tolist() for i in range(len(texts))] == want


def test_calls_from_several_python_threads_never_share_a_task_slot(tiktoken_gpt2, docs_fixture):
    """Four Python threads share one Encoder (as ``fastenc.load`` hands out one per vocabulary),
    each at one Numba thread, so each call is one task on a slot of its own (``Encoder._lanes``):
    two kernel runs at once never use the same slot's memo or caches (one would rewrite slots the
    other reads), and every result is tiktoken's. (That they do run at once:
    test_concurrent_calls.py.)"""
    import threading
    import time

    import numba

    from fastenc.encoder import Encoder

    texts = docs_fixture.column("text").to_pylist()[:40]
    want = tiktoken_gpt2.encode_ordinary_batch(texts)
    loaded = fastenc.load("gpt2")
    enc = Encoder(loaded.vocab, loaded.info)
    kernel = enc._encode_docs
    in_use: set = set()
    clashes, most = [], [0]
    guard = threading.Lock()

    def slot_of(own):
        return next(t for t in range(enc._caches.memo.shape[0]) if np.shares_memory(own.memo, enc._caches.memo[t]))

    def watched(*args):
        t = slot_of(args[6])
        with guard:
            if t in in_use:
                clashes.append(t)
            in_use.add(t)
            most[0] = max(most[0], len(in_use))
        try:
            time.sleep(0.002)  # (a window in which another call would come in)
            return kernel(*args)
        finally:
            with guard:
                in_use.discard(t)

    enc.__dict__["_encode_docs"] = watched

    def user(k):
        numba.set_num_threads(1)  # (per thread: this thread's calls are one task each)
        got = []
        for i in range(k, len(texts), 4):
            got.append((i, enc.encode(texts[i])))
            ids, off = enc.encode_batch(texts[i:i + 3])
            got += [(i + j, ids[off[j]:off[j + 1]].tolist()) for j in range(len(off) - 1)]
        return got

    with cf.ThreadPoolExecutor(4) as pool:
        results = [r for rs in pool.map(user, range(4)) for r in rs]
    assert clashes == [] and 1 <= most[0] <= numba.config.NUMBA_NUM_THREADS
    assert all(ids == want[i] for i, ids in results) and len(results) > len(texts)
