"""The batch kernels run as tasks on Python threads (fastenc.tasks, recipes/urls/threads):
the same results as the references, for any number of tasks."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
import xxhash

from fastenc.url_canonical import canonical
from fastenc.recipes.urls.threads import canonical_batch, copy_spans, gather_spans, hash_batch, plan_spans, sort_by_hash
from fastenc.tasks import Behind, each_on_threads, read_only, run_tasks, usable_cpus

URLS = ["https://www.example.com/a?b#c", "", "http://x:1.y/", "ftp://[::1]/f", "https://日本.example.jp/ページ",
        "http://a.b.c.d.e/", "no scheme at all", "https://com.example.www/"]


def _flat(items):
    raw = [u.encode() for u in items]
    data = np.frombuffer(b"".join(raw), np.uint8)
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return data, offsets


@pytest.mark.parametrize("tasks", [1, 2, 3, 7])
@pytest.mark.parametrize("kind", ["uniform", "duplicates", "narrow"])
def test_sort_by_hash_is_a_stable_argsort(tasks, kind):
    rng = np.random.default_rng(tasks)
    n = 20_000
    if kind == "uniform":
        keys = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    elif kind == "duplicates":  # big equal-key buckets: the merge-sort fallback
        keys = rng.integers(0, 3, n).astype(np.uint64) << np.uint64(61)
    else:
        keys = rng.integers(0, 500, n).astype(np.uint64)
    order, sorted_keys = sort_by_hash(keys, tasks)
    want = np.lexsort((np.arange(n), keys))
    assert order.tolist() == want.tolist()
    assert sorted_keys.tolist() == keys[want].tolist()


def test_sort_by_hash_of_nothing_and_of_one_key():
    order, keys = sort_by_hash(np.zeros(0, np.uint64), 2)
    assert order.shape == keys.shape == (0,)
    order, keys = sort_by_hash(np.array([7], np.uint64), 4)
    assert order.tolist() == [0] and keys.tolist() == [7]


@pytest.mark.parametrize("tasks", [1, 2, 5, 50])
def test_hash_batch_equals_xxhash(tasks):
    data, offsets = _flat(URLS)
    want = [xxhash.xxh3_64_intdigest(u.encode()) for u in URLS]
    assert hash_batch(data, offsets, tasks).tolist() == want
    assert hash_batch(data, offsets[2:6], tasks).tolist() == want[2:5]  # a slice of an Arrow column
    assert hash_batch(data, offsets[:1], tasks).shape == (0,)


@pytest.mark.parametrize("tasks", [1, 2, 5])
def test_canonical_batch_on_threads_equals_the_cards_function(tasks):
    data, offsets = _flat(URLS)
    out = canonical_batch(data, offsets, tasks)
    assert out.tobytes() == "".join(canonical(u) for u in URLS).encode()
    part = canonical_batch(data, offsets[3:6], tasks)  # bytes outside the items stay as they are
    a, b = offsets[3], offsets[5]
    assert part[:a].tobytes() == data[:a].tobytes() and part[b:].tobytes() == data[b:].tobytes()
    assert part[a:b].tobytes() == "".join(canonical(u) for u in URLS[3:5]).encode()
    assert canonical_batch(data, offsets[:1], tasks).tobytes() == data.tobytes()


@pytest.mark.parametrize("scratch", [False, True])
@pytest.mark.parametrize("tasks", [1, 2, 3])
def test_gather_spans_copies_spans_in_order(tasks, scratch):
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 9, 300)
    tok_offsets = np.zeros(301, np.int64)
    np.cumsum(lengths, out=tok_offsets[1:])
    tokens = rng.integers(0, 65535, int(tok_offsets[-1])).astype(np.uint16)
    order = rng.permutation(300)
    out = np.empty(len(tokens), np.uint16)
    out_offsets = np.empty(301, np.int64)
    starts = np.full(400, -1, np.int64) if scratch else None  # longer than needed, reused as chunks are

    def gather(order, out_offsets):
        if not scratch:
            return gather_spans(tokens, tok_offsets, order, out, out_offsets, tasks)
        total, chunk_starts = plan_spans(tok_offsets, order, out_offsets, starts)  # the bin writer's two steps
        assert total == out_offsets[-1]
        copy_spans(tokens, chunk_starts, out, out_offsets, tasks)

    gather(order, out_offsets)
    want = np.concatenate([tokens[tok_offsets[i]:tok_offsets[i + 1]] for i in order])
    assert out.tolist() == want.tolist()
    assert np.diff(out_offsets).tolist() == lengths[order].tolist()
    part = order[100:150]  # a second chunk through the same scratch
    gather(part, out_offsets[:51])
    assert out[: out_offsets[50]].tolist() == np.concatenate([tokens[tok_offsets[i]:tok_offsets[i + 1]] for i in part]).tolist()
    # the kernel library's own parallel version (prange) gives the same
    from fastenc.kernels import url_pack

    out2, offsets2 = np.zeros_like(out), np.empty(301, np.int64)
    url_pack.gather_spans(tokens, tok_offsets, order, out2, offsets2, tasks)
    assert out2.tolist() == want.tolist() and np.diff(offsets2).tolist() == lengths[order].tolist()


def test_run_tasks_runs_every_task_and_reraises_after_all_finished():
    seen = []
    lock = threading.Lock()

    def task(t):
        with lock:
            seen.append(t)
        if t == 2:
            raise ValueError("task 2")

    with pytest.raises(ValueError, match="task 2"):
        run_tasks(task, 5)
    assert sorted(seen) == [0, 1, 2, 3, 4]
    run_tasks(task, 0)  # nothing to do
    assert len(seen) == 5


def test_each_on_threads_runs_every_item_once_and_reraises_after_all_finished():
    seen, lock = [], threading.Lock()

    def fn(item):
        with lock:
            seen.append(item)
        if item in ("c", "e"):
            raise ValueError(f"item {item}")

    with pytest.raises(ValueError, match="item c"):  # the first error in the items' order
        each_on_threads(fn, "abcdef")
    assert sorted(seen) == list("abcdef")
    each_on_threads(fn, [])
    assert len(seen) == 6


def test_each_on_threads_uses_at_most_one_thread_per_usable_cpu():
    n = usable_cpus()
    live, most, lock = [0], [0], threading.Lock()

    def fn(item):
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])
        time.sleep(0.05)  # I/O: the GIL is free, the others run meanwhile
        with lock:
            live[0] -= 1

    each_on_threads(fn, range(3 * n))
    assert most[0] <= n and (n == 1 or most[0] > 1)
    if hasattr(os, "sched_setaffinity"):
        mask = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(mask)})  # one usable CPU: the items run in this thread, in order
        try:
            order = []
            each_on_threads(lambda i: order.append((i, threading.current_thread() is threading.main_thread())), range(5))
            assert order == [(i, True) for i in range(5)]
        finally:
            os.sched_setaffinity(0, mask)


@pytest.mark.skipif(usable_cpus() < 2, reason="one usable CPU: the items run in the calling thread, nothing to wait for")
def test_each_on_threads_interrupted_lets_the_running_items_finish_first(sigint_delivered):
    """Ctrl-C while the calling thread waits: KeyboardInterrupt, but only once the items already
    running are done (they write into a staging folder that the caller deletes next)."""
    done = []

    def fn(i):
        if i == 0:
            time.sleep(0.05)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(0.3)
        done.append(i)

    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(KeyboardInterrupt):
        each_on_threads(fn, range(2))
    assert sorted(done) == [0, 1]


def test_behind_runs_calls_in_order_one_behind_the_caller():
    log = []

    def call(k):
        time.sleep(0.02 if k % 2 else 0)  # odd calls slower: the next one still waits for them
        log.append(("call", k, threading.current_thread() is threading.main_thread()))

    behind = Behind("test")
    try:
        for k in range(6):
            behind.submit(call, k)
            log.append(("caller", k, True))
            # the caller is never more than one call ahead: every call before k has finished
            assert [e[1] for e in log if e[0] == "call"][:k] == list(range(k))
        behind.finish()
    finally:
        behind.close()
    assert [e[1] for e in log if e[0] == "call"] == list(range(6))
    assert not any(e[2] for e in log if e[0] == "call")  # on a thread of their own


def test_behind_reraises_a_calls_error_at_the_next_submit_or_finish():
    def fail(k):
        raise OSError(28, f"No space left on device ({k})")

    ran = []
    behind = Behind("test")
    try:
        behind.submit(fail, 1)
        with pytest.raises(OSError, match=r"\(1\)"):
            behind.submit(ran.append, 2)  # the error stops the caller before this call is queued
        behind.finish()  # nothing left
        behind.submit(ran.append, 3)
        behind.submit(fail, 4)
        with pytest.raises(OSError, match=r"\(4\)"):
            behind.finish()
    finally:
        behind.close()
    assert ran == [3]


def test_behind_inline_runs_each_call_in_submit_in_the_callers_thread():
    log = []
    behind = Behind("test", inline=True)
    try:
        behind.submit(lambda k: log.append((k, threading.current_thread() is threading.main_thread())), 1)
        assert log == [(1, True)]  # done before submit returned
        with pytest.raises(ValueError):
            behind.submit(int, "not a number")
        behind.finish()
    finally:
        behind.close()


def test_behind_close_waits_for_a_running_call_and_leaves_no_thread():
    done = []
    behind = Behind("fastenc-test-behind")
    behind.submit(lambda: (time.sleep(0.3), done.append(1)))
    behind.close()  # (as in a finally after Ctrl-C: the call is not awaited by finish)
    assert done == [1]
    assert not any(t.name.startswith("fastenc-test-behind") for t in threading.enumerate())


def test_read_only_is_a_view():
    a = np.arange(4, dtype=np.uint8)
    v = read_only(a)
    assert not v.flags.writeable and a.flags.writeable
    a[0] = 9
    assert v[0] == 9
