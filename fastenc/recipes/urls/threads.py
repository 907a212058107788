"""The URL recipe's batch kernels on threads: ``hash_batch`` (xxh3 of every URL),
``canonical_batch``, ``sort_by_hash(keys)`` (a stable argsort of uint64 hashes) and
``gather_spans`` (token spans copied out in that order).

The same permutation as ``fastenc.kernels.url_pack.hash_order`` (and ``np.lexsort((arange(n),
keys))``): a level-1 scatter on the top bits of the keys' range, then each bucket sorted in
cache. Each of these equals the ``parallel=True`` kernel of the same name in
``fastenc.kernels`` (which stay for Numba callers); here each step's parallel tasks are ``nogil`` kernels run on Python threads
(``fastenc.tasks``), so nothing is compiled with ``parallel=True``; ``hash_order`` stays for
Numba callers.
"""
from __future__ import annotations

import numpy as np

from fastenc.tasks import n_tasks as default_tasks
from fastenc.tasks import read_only, run_tasks

BUCKET_BITS = 12  # = url_pack._BUCKET_BITS


def sort_by_hash(keys: np.ndarray, n_tasks: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(order int64[n], sorted_keys uint64[n])``: ``keys[order]`` ascends, equal keys in index
    order. ``n_tasks`` (default: Numba's thread count) does not change the result."""
    from fastenc.kernels.url_pack import bucket_histogram, bucket_scatter, sort_buckets

    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    n = len(keys)
    order = np.empty(n, np.int64)
    out = np.empty(n, np.uint64)
    if n == 0:
        return order, out
    tasks = max(1, n_tasks or default_tasks())
    lo = int(keys.min())
    shift = max(0, (int(keys.max()) - lo).bit_length() - BUCKET_BITS)  # bucket index < 2**BUCKET_BITS
    lo_, shift_ = np.uint64(lo), np.uint64(shift)
    nb = 1 << BUCKET_BITS
    bounds = [n * t // tasks for t in range(tasks + 1)]
    hist = np.zeros((tasks, nb), np.int64)
    run_tasks(lambda t: bucket_histogram(keys, lo_, shift_, bounds[t], bounds[t + 1], hist[t]), tasks)
    # Bucket d's keys from task 0, then task 1, ...: a stable scatter. pos[t, d]: where task t's
    # first key of bucket d goes.
    counts = hist.T.ravel()
    pos = np.zeros(counts.size, np.int64)
    np.cumsum(counts[:-1], out=pos[1:])
    pos = np.ascontiguousarray(pos.reshape(nb, tasks).T)
    starts = np.empty(nb + 1, np.int64)
    starts[:nb] = pos[0]
    starts[nb] = n
    biggest = int(np.diff(starts).max())
    run_tasks(lambda t: bucket_scatter(keys, lo_, shift_, bounds[t], bounds[t + 1], pos[t], out, order), tasks)
    run_tasks(lambda t: sort_buckets(out, order, starts, nb * t // tasks, nb * (t + 1) // tasks, biggest), tasks)
    return order, out


def gather_spans(tokens, tok_offsets, order, out, out_offsets, n_tasks) -> None:
    """``fastenc.kernels.url_pack.gather_spans`` on threads: span ``i = order[k]``
    (``tokens[tok_offsets[i]:tok_offsets[i + 1]]``) is copied to ``out[out_offsets[k]:]``;
    ``out_offsets`` (int64[m + 1]) is filled here, ``out`` needs their total. In two steps for a
    caller that sizes ``out`` in between and reuses a scratch (the recipe's bin writer):
    ``plan_spans``, then ``copy_spans``."""
    starts = plan_spans(tok_offsets, order, out_offsets)[1]
    copy_spans(tokens, starts, out, out_offsets, n_tasks)


def plan_spans(tok_offsets, order, out_offsets, starts=None) -> tuple[int, np.ndarray]:
    """``url_pack.span_offsets``: fills ``out_offsets`` and each span's start; returns the token
    total and the starts (``starts[:m]``, or a new array when ``starts`` is None or too short)."""
    from fastenc.kernels.url_pack import span_offsets

    m = len(order)
    starts = np.empty(m, np.int64) if starts is None or len(starts) < m else starts[:m]
    return int(span_offsets(tok_offsets, order, out_offsets, starts)), starts


def copy_spans(tokens, starts, out, out_offsets, n_tasks) -> None:
    """``url_pack.gather_span_run`` over all planned spans, split into ``n_tasks`` threads."""
    from fastenc.kernels.url_pack import gather_span_run

    m = len(starts)
    tasks = max(1, n_tasks)
    run_tasks(lambda t: gather_span_run(tokens, starts, out, out_offsets, m * t // tasks, m * (t + 1) // tasks), tasks)


def _split(n: int, tasks: int) -> list[int]:
    return [n * t // tasks for t in range(tasks + 1)]


def hash_batch(data, offsets, n_tasks: int | None = None) -> np.ndarray:
    """``fastenc.kernels.xxh3.xxh3_64_batch`` on threads: XXH3-64 of every item of the Arrow
    layout ``(data, offsets)``, uint64[n]. ``data`` is handed over read-only (one compile)."""
    from fastenc.kernels.xxh3 import xxh3_64_run

    n = max(len(offsets) - 1, 0)
    out = np.empty(n, np.uint64)
    data = read_only(data)
    tasks = max(1, min(n_tasks or default_tasks(), n))
    bounds = _split(n, tasks)
    run_tasks(lambda t: xxh3_64_run(data, offsets, out, bounds[t], bounds[t + 1]), tasks)
    return out


def canonical_batch(data, offsets, n_tasks: int | None = None) -> np.ndarray:
    """``fastenc.kernels.canonical.canonical_batch`` on threads: canonical() of every item, at
    the same offsets (bytes outside the items copied as they are)."""
    from fastenc.kernels.canonical import canonical_run

    n = max(len(offsets) - 1, 0)
    out = np.empty_like(data)
    if n == 0:
        out[:] = data
        return out
    out[: offsets[0]] = data[: offsets[0]]
    out[offsets[n] :] = data[offsets[n] :]
    data = read_only(data)
    tasks = max(1, min(n_tasks or default_tasks(), n))
    bounds = _split(n, tasks)
    run_tasks(lambda t: canonical_run(data, offsets, out, bounds[t], bounds[t + 1]), tasks)
    return out
