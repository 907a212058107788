"""Byte-level BPE over one pre-token piece: lowest rank first, leftmost on ties.

``bpe_piece`` is the uncached merge. Short pieces use the simple loop (a rank per adjacent
pair, rescanned after each merge: quadratic, but the fastest below ~64 symbols). Long pieces
(a megabyte of one letter is a single piece) use a min-heap of (rank, position) over a
linked list of symbols, so they cost O(n log n) and never go quadratic.

Both give exactly tiktoken's / HF's result: the pair with the lowest rank merges first, and
among equal ranks the leftmost one. ``vocab`` is a ``fastenc.vocab.Vocab``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels import config as cfg
from fastenc.kernels.tables import NO_RANK, pair_rank, token_id_of

# Above this many bytes a piece is merged with the heap; below, with the rescanning loop.
HEAP_THRESHOLD = 64
_NO_PAIR = np.int64(1) << np.int64(62)


@njit(cache=True)
def _merge_small(data, start, end, byte_ids, pair_table, merge_result, out, out_pos):
    # The symbols are built in place in out[out_pos:]: one allocation (the ranks) per call.
    n = end - start
    ids = out[out_pos : out_pos + n]
    ranks = np.empty(n, dtype=np.int64)
    for i in range(n):
        ids[i] = byte_ids[data[start + i]]
    for i in range(n - 1):
        r = pair_rank(pair_table, ids[i], ids[i + 1])
        ranks[i] = _NO_PAIR if r == NO_RANK else r
    ranks[n - 1] = _NO_PAIR
    while n > 1:
        best = _NO_PAIR
        at = -1
        for i in range(n - 1):
            if ranks[i] < best:
                best = ranks[i]
                at = i
        if at < 0:
            break
        ids[at] = merge_result[best]
        for i in range(at + 1, n - 1):
            ids[i] = ids[i + 1]
            ranks[i] = ranks[i + 1]
        n -= 1
        ranks[n - 1] = _NO_PAIR
        if at + 1 < n:
            r = pair_rank(pair_table, ids[at], ids[at + 1])
            ranks[at] = _NO_PAIR if r == NO_RANK else r
        else:
            ranks[at] = _NO_PAIR
        if at > 0:
            r = pair_rank(pair_table, ids[at - 1], ids[at])
            ranks[at - 1] = _NO_PAIR if r == NO_RANK else r
    return out_pos + n


@njit(cache=True)
def _heap_push(heap, size, key):
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return size + 1


@njit(cache=True)
def _heap_pop(heap, size):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[i] <= heap[child]:
            break
        heap[i], heap[child] = heap[child], heap[i]
        i = child
    return top, size


@njit(cache=True)
def _merge_long(data, start, end, vocab, out, out_pos):
    # Symbols live in a linked list indexed by their first byte's position in the piece, so
    # the heap key rank * 2**32 + position orders by rank, then leftmost.
    n = end - start
    ids = np.empty(n, dtype=np.int64)
    nxt = np.empty(n, dtype=np.int64)
    prv = np.empty(n, dtype=np.int64)
    alive = np.ones(n, dtype=np.bool_)
    heap = np.empty(3 * n + 1, dtype=np.int64)  # n initial pairs + 2 pushes per merge
    size = 0
    for i in range(n):
        ids[i] = vocab.byte_ids[data[start + i]]
        nxt[i] = i + 1 if i + 1 < n else -1
        prv[i] = i - 1
    for i in range(n - 1):
        r = pair_rank(vocab.pair_table, ids[i], ids[i + 1])
        if r != NO_RANK:
            size = _heap_push(heap, size, (r << np.int64(32)) | i)
    while size > 0:
        key, size = _heap_pop(heap, size)
        rank = key >> np.int64(32)
        at = key & np.int64(0xFFFFFFFF)
        right = nxt[at]
        # Entries go stale when a neighbour merges; re-check against the current list.
        if not alive[at] or right < 0 or pair_rank(vocab.pair_table, ids[at], ids[right]) != rank:
            continue
        ids[at] = vocab.merge_result[rank]
        alive[right] = False
        nxt[at] = nxt[right]
        if nxt[at] >= 0:
            prv[nxt[at]] = at
            r = pair_rank(vocab.pair_table, ids[at], ids[nxt[at]])
            if r != NO_RANK:
                size = _heap_push(heap, size, (r << np.int64(32)) | at)
        if prv[at] >= 0:
            r = pair_rank(vocab.pair_table, ids[prv[at]], ids[at])
            if r != NO_RANK:
                size = _heap_push(heap, size, (r << np.int64(32)) | prv[at])
    i = 0
    while i >= 0:
        out[out_pos] = ids[i]
        out_pos += 1
        i = nxt[i]
    return out_pos


@njit(cache=True)
def bpe_piece(data, start, end, vocab, out, out_pos):
    """Encode ``data[start:end]`` (one pre-token piece, non-empty) into ``out[out_pos:]``.

    Returns the new ``out_pos``. ``out`` needs room for ``end - start`` ids (one id never
    covers less than one byte). No cache: see ``fastenc.kernels.encode`` for the cached path.
    """
    n = end - start
    if n == 1:
        out[out_pos] = vocab.byte_ids[data[start]]
        return out_pos + 1
    if vocab.config[cfg.WHOLE_PIECE_LOOKUP] != 0:
        tid = token_id_of(vocab.token_table, vocab.token_bytes, vocab.token_offsets, data, start, end)
        if tid >= 0:
            out[out_pos] = tid
            return out_pos + 1
    if n <= HEAP_THRESHOLD:
        return _merge_small(data, start, end, vocab.byte_ids, vocab.pair_table, vocab.merge_result, out, out_pos)
    return _merge_long(data, start, end, vocab, out, out_pos)
