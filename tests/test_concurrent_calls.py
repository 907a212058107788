"""One Encoder called from several Python threads at once (a thread pool sharing what
``fastenc.load`` caches): each call holds task slots of its own (``Encoder._lanes``), so the calls
run at the same time and each gives exactly the ids it gives alone.

Checked here: calls really overlap (a barrier inside the kernel call that two serialised calls
could never pass), more callers than slots (they wait for a free one), ids equal to the reference
(tiktoken for gpt2, cl100k_base and o200k_base; the URL recipe's kernel against its own one-thread
run, itself checked against HF tokenizers in test_url_parity.py), and a lone caller keeping slot 0,
the warm one.
"""
from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

import fastenc
from fastenc.arrow_io import arrow_to_flat
from fastenc.encoder import Encoder
from test_encodings import _from_committed_files  # the offline tiktoken oracle

needs_two = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                               reason="one CPU: Numba reserves one task slot, so calls take turns by design")


def _fresh(name: str) -> Encoder:
    loaded = fastenc.load(name)
    return Encoder(loaded.vocab, loaded.info)  # (caches of its own)


def _oracle(name, tiktoken_gpt2):
    return tiktoken_gpt2 if name == "gpt2" else _from_committed_files(name)


def _on_threads(fn, args_list):
    """``fn(*args)`` for each args on a thread of its own, all started at once; results in order,
    the first error raised."""
    results, errors = [None] * len(args_list), []

    def run(k):
        try:
            results[k] = fn(*args_list[k])
        except BaseException as exc:  # noqa: BLE001 (re-raised below)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(args_list))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a call never returned"
    if errors:
        raise errors[0]
    return results


def _in_thread_count(n: int, fn, *args):
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # (per Python thread)
    return fn(*args)


@needs_two
@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_two_calls_overlap_and_each_gives_its_own_ids(name, docs_fixture, tiktoken_gpt2):
    """Both calls wait at a barrier inside the kernel call: with calls taking turns (one lock per
    Encoder, as before) the second could never get there while the first waits, and the barrier
    would break."""
    enc = _fresh(name)
    texts = docs_fixture.column("text").to_pylist()
    halves = [texts[0::2], texts[1::2]]
    barrier = threading.Barrier(2, timeout=60)
    kernel = enc._encode_docs

    def meeting(*args):
        barrier.wait()
        return kernel(*args)

    enc.__dict__["_encode_docs"] = meeting  # (a cached property: the instance's own value wins)
    got = _on_threads(lambda part: _in_thread_count(1, enc.encode_batch, part), [(h,) for h in halves])
    oracle = _oracle(name, tiktoken_gpt2)
    for part, (ids, offsets) in zip(halves, got):
        assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(part))] == oracle.encode_ordinary_batch(part)
    assert {0, 1} <= enc._memos_ready  # each call held a slot of its own


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_more_callers_than_slots_wait_their_turn_and_stay_exact(name, docs_fixture, tiktoken_gpt2):
    """Six threads, some asking for every core, over as many slots as Numba has threads: each call
    gets the free slots there are (at least one), waits when there are none, and its ids are the
    reference's whatever it got. Several rounds, so warm caches are handed from call to call."""
    enc = _fresh(name)
    texts = docs_fixture.column("text").to_pylist()
    parts = [texts[k::6] for k in range(6)]
    oracle = _oracle(name, tiktoken_gpt2)
    want = [oracle.encode_ordinary_batch(p) for p in parts]
    for _ in range(3):
        got = _on_threads(lambda k: _in_thread_count(1 + k % 2, enc.encode_batch, parts[k]), [(k,) for k in range(6)])
        for k, (ids, offsets) in enumerate(got):
            assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(parts[k]))] == want[k], k
    assert enc._free_slots == set(range(numba.config.NUMBA_NUM_THREADS))  # every slot handed back
    one = _on_threads(lambda: _in_thread_count(1, enc.encode, "one more"), [()])[0]
    assert one == oracle.encode_ordinary("one more")


def test_url_chunks_from_several_threads_equal_one_thread_alone(docs_fixture):
    """The URL recipe's kernel (``encode_url_chunk``) through the same slots: chunks encoded from
    three threads at once give the ids and flags of the same chunks encoded one after another."""
    import pyarrow.parquet as pq

    from fastenc.recipes.urls import encode_url_chunk
    from conftest import REPO

    urls = pq.read_table(REPO / "tests" / "data" / "urls_fixture.parquet", columns=["url"]).column("url").combine_chunks()
    data, offsets = arrow_to_flat(urls)
    n = len(offsets) - 1
    orders = [np.arange(k, n, 3) for k in range(3)]
    alone = _fresh("urls")
    want = [encode_url_chunk(alone, data, offsets, o) for o in orders]
    want = [(t.tokens.copy(), t.offsets.copy(), t.irreversible.copy()) for t in want]
    enc = _fresh("urls")
    for _ in range(2):
        got = _on_threads(lambda o: _in_thread_count(1, encode_url_chunk, enc, data, offsets, o), [(o,) for o in orders])
        for (tokens, tok_offsets, flags), g in zip(want, got):
            assert np.array_equal(g.tokens, tokens) and np.array_equal(g.offsets, tok_offsets)
            assert np.array_equal(g.irreversible, flags)


def test_a_lone_caller_gets_slot_zero_and_its_warm_caches():
    enc = _fresh("gpt2")
    enc.encode("warm slot zero")
    with enc._lanes(1) as (own,):
        assert np.shares_memory(own.short, enc._caches.short[0]) and own.short.any()
        if numba.config.NUMBA_NUM_THREADS > 1:
            with enc._lanes(1) as (other,):  # (meanwhile, another call gets the next free slot)
                assert np.shares_memory(other.short, enc._caches.short[1])
    assert enc._free_slots == set(range(numba.config.NUMBA_NUM_THREADS))


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_cleared_caches_start_cold_and_stay_exact(name, docs_fixture, tiktoken_gpt2):
    """``clear_caches`` drops the caches and every record of them (initialized memos, seeded slots):
    the next call allocates new ones and initializes their memos (a memo left uninitialized made
    the kernel read past its arena: benches that dropped the caches crashed), on one thread and on several,
    while another thread's call waits for it or it for that call."""
    enc = _fresh(name)
    texts = docs_fixture.column("text").to_pylist()
    want = _oracle(name, tiktoken_gpt2).encode_ordinary_batch(texts)

    def ids_of(result):
        ids, offsets = result
        return [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))]

    assert ids_of(enc.encode_batch(texts)) == want
    old = enc._caches
    for threads in (1, 2, 1):
        enc.clear_caches()
        assert enc._caches is None and not enc._memos_ready and not enc._seeded
        assert ids_of(_in_thread_count(threads, enc.encode_batch, texts)) == want
        assert enc._caches is not old and 0 in enc._memos_ready
    # clears from one thread while three others encode: a clear waits for the calls' slots, a call
    # that waited for a slot finds the caches gone and allocates new ones; nothing hangs, ids stay exact
    parts = [texts[k::3] for k in range(3)]
    part_want = [want[k::3] for k in range(3)]

    def encode_part(k):
        for _ in range(6):
            ids, offsets = _in_thread_count(1 + k % 2, enc.encode_batch, parts[k])
            assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(parts[k]))] == part_want[k], k

    def clear_often():
        for _ in range(24):
            enc.clear_caches()

    _on_threads(lambda k: clear_often() if k == 3 else encode_part(k), [(k,) for k in range(4)])
    assert ids_of(enc.encode_batch(texts)) == want


_DROPPED_BY_HAND = """
import sys
import pyarrow.parquet as pq
import fastenc
from fastenc.encoder import Encoder
texts = pq.read_table(sys.argv[1], columns=["text"]).column(0).to_pylist()
loaded = fastenc.load(sys.argv[2])
enc = Encoder(loaded.vocab, loaded.info)
first = enc.encode_batch(texts)
enc._caches = None
again = enc.encode_batch(texts)
assert (first[0] == again[0]).all() and (first[1] == again[1]).all()
print("ok")
"""


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_caches_dropped_by_hand_are_allocated_and_initialized_again(name):
    # The records of the caches belong to the caches: replaced, they start empty too (before, a
    # memo marked initialized for the old caches was not initialized in the new: a segfault, so
    # this runs in a process of its own)
    import subprocess
    import sys

    from pathlib import Path

    fixture = Path(__file__).parent / "data" / "docs_fixture.parquet"
    proc = subprocess.run([sys.executable, "-c", _DROPPED_BY_HAND, str(fixture), name], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-2000:])
