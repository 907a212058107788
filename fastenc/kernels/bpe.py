"""Byte-level BPE over one pre-token piece: lowest rank first, leftmost on ties.

``bpe_piece`` is the uncached merge. Short pieces use ``merge_short_piece``, a rank per
adjacent pair rescanned after each merge (quadratic, but the fastest for short pieces). Long
pieces (a megabyte of one letter is a single piece) use ``merge_long_piece``, a min-heap of
(rank, position) over a linked list of symbols: O(n log n), never quadratic.

Both give exactly tiktoken's / HF's result: the pair with the lowest rank merges first, and
among equal ranks the leftmost one. ``vocab`` is a ``fastenc.vocab.Vocab``. Both are written
without calls and with one return, the hash probes of ``fastenc.kernels.tables`` spelled out:
Numba then adds no reference counting to them, which matters on the per-miss hot path.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels import config as cfg
from fastenc.kernels.loads import element_address, prefetch_at
from fastenc.kernels.tables import mix_slot, pair_filter_bit, token_id_of

# Above this many bytes bpe_piece merges with the heap; below, with the rescanning loop.
HEAP_THRESHOLD = 64
_NO_PAIR = np.int64(1) << np.int64(62)


_NEEDS_RANK = np.int64(-2)
_U1 = np.uint64(1)
_EMPTY_PAIR = np.uint64(0xFFFFFFFFFFFFFFFF)
_NO_SLOT = np.uint64(0xFFFFFFFFFFFFFFFF)  # (no probe: the pair filter says the pair is not there)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, forceinline=True)
def _prefetch_pair(pair_filter, pair_table, key):
    """Start loading the filter word and the home slot of pair ``key`` (``left << 20 | right``):
    the places ``merge_short_piece``'s lookup reads first."""
    word, _ = pair_filter_bit(key, pair_filter.shape[0])
    prefetch_at(element_address(pair_filter, np.int64(word)))
    prefetch_at(element_address(pair_table, mix_slot(key, pair_table.shape[0] - 1)))


@njit(cache=True)
def merge_short_piece(data, start, end, vocab, ranks, out, out_pos):
    """``bpe_piece`` for a piece of 2..len(ranks) bytes, written for the per-miss hot path.

    Same result as ``bpe_piece``, but one block with no calls and a single return (so Numba
    adds no reference counting), the hash probes of ``fastenc.kernels.tables`` written out, and
    ``ranks`` (int64, at least end - start long) passed in instead of allocated. A pair's rank is
    looked up lazily, when the scan first needs it, so the lookup code appears once.

    A call: the body is ``merge_short_piece_inlined``, which a caller may inline instead.
    """
    return merge_short_piece_inlined(data, start, end, vocab, ranks, out, out_pos)


@njit(cache=True, forceinline=True)
def merge_short_piece_inlined(data, start, end, vocab, ranks, out, out_pos):
    """``merge_short_piece``, inlined into its caller (``forceinline``). A call passes every array of
    ``vocab`` exploded (7 words each): ~115 words on the stack per new piece. The wide loop's
    ``_cached_or_merged`` inlines it: cl100k_base and o200k_base first passes ran faster
    (bench/RESULTS.md, "calls that passed every table on the stack"). The GPT-2/URL loop calls
    ``merge_short_piece``: inlined there, the first pass ran no faster and URL warm passes slower
    (its hot loop's code got worse)."""
    byte_ids = vocab.byte_ids
    pair_table = vocab.pair_table
    merge_result = vocab.merge_result
    token_table = vocab.token_table
    token_bytes = vocab.token_bytes
    token_offsets = vocab.token_offsets
    byte_pair_ranks = vocab.byte_pair_ranks
    pair_filter = vocab.pair_filter
    filter_words = pair_filter.shape[0]
    n = end - start
    rank_is_id = vocab.config[cfg.RANK_IS_ID] != 0
    whole = -1
    if vocab.config[cfg.WHOLE_PIECE_LOOKUP] != 0:  # a piece that is a token is emitted as is
        h = _FNV_OFFSET
        for i in range(start, end):
            h = (h ^ np.uint64(data[i])) * _FNV_PRIME
        h ^= h >> np.uint64(29)
        tmask = token_table.shape[0] - 1
        slot = np.int64(h & np.uint64(tmask))
        while token_table[slot] >= 0:
            tid = token_table[slot]
            t0 = token_offsets[tid]
            if token_offsets[tid + 1] - t0 == n:
                same = True
                for k in range(n):
                    if token_bytes[t0 + k] != data[start + k]:
                        same = False
                        break
                if same:
                    whole = tid
                    break
            slot = (slot + 1) & tmask
    if whole >= 0:
        out[out_pos] = whole
        n = 1
    else:
        # Every index here is a uint64 (`u`, `ua`, from `first` and `ids`): Numba adds wraparound
        # code (a negative index counts from the end) to every signed index, on the loads that the
        # next merge waits for. Unsigned: faster first passes, most for cl100k and o200k (bench/RESULTS.md,
        # "Wraparound code in the short-piece merge").
        pmask = np.uint64(pair_table.shape[0] - 1)
        first = np.uint64(start)
        ids = np.uint64(out_pos)
        for k in range(n):
            u = np.uint64(k)
            out[ids + u] = byte_ids[data[first + u]]
        for k in range(n - 1):  # the first round of ranks from the direct byte-pair table
            u = np.uint64(k)
            r = np.int64(byte_pair_ranks[(np.uint64(data[first + u]) << np.uint64(8)) | np.uint64(data[first + u + _U1])])
            ranks[u] = r if r >= 0 else _NO_PAIR
        ranks[n - 1] = _NO_PAIR
        while n > 1:
            best = _NO_PAIR
            at = -1
            for i in range(n - 1):
                u = np.uint64(i)
                r = ranks[u]
                if r == _NEEDS_RANK:
                    key = (np.uint64(out[ids + u]) << np.uint64(20)) | np.uint64(out[ids + u + _U1])
                    slot = ((key * _GOLDEN) >> np.uint64(32)) & pmask
                    r = _NO_PAIR
                    word, bit = pair_filter_bit(key, filter_words)
                    if pair_filter[word] & bit == 0:  # no such pair (tables.py): skip the table's probe
                        slot = _NO_SLOT  # (the slot is hashed first, beside the filter's load: an `if` around the
                        # probe, hashing after the filter's answer, measured a 2% slower first pass)
                    while slot != _NO_SLOT and pair_table[slot] != _EMPTY_PAIR:
                        entry = pair_table[slot]
                        if (entry >> np.uint64(24)) == key:
                            r = np.int64(entry & np.uint64(0xFFFFFF))
                            break
                        slot = (slot + np.uint64(1)) & pmask
                    ranks[u] = r
                if r < best:
                    best = r
                    at = i
            if at < 0:
                break
            # The merged id: the rank itself in tiktoken's vocabularies. The merge_result load it
            # skips sits on the chain from one merge to the next pair lookups (config.RANK_IS_ID).
            ua = np.uint64(at)
            if rank_is_id:
                out[ids + ua] = best
            else:
                out[ids + ua] = merge_result[best]
            # The two pairs the merge makes are ranked in the next scan: start loading their
            # filter words and table slots now, while the tail shifts down. (cl100k's 1 MB and
            # o200k's 2 MB pair tables do not fit a 1 MB L2; `python bench/probes/merge_tables.py`, every
            # distinct piece of docs.parquet: o200k 478-483 -> 418-430 ns a piece, cl100k 378-401
            # -> 357-367; GPT-2's 512 KB table: level.)
            merged = np.uint64(out[ids + ua])
            if at > 0:
                _prefetch_pair(pair_filter, pair_table, (np.uint64(out[ids + ua - _U1]) << np.uint64(20)) | merged)
            if at + 2 < n:
                _prefetch_pair(pair_filter, pair_table, (merged << np.uint64(20)) | np.uint64(out[ids + ua + np.uint64(2)]))
            for i in range(at + 1, n - 1):
                u = np.uint64(i)
                out[ids + u] = out[ids + u + _U1]
                ranks[u] = ranks[u + _U1]
            n -= 1
            ranks[np.uint64(n - 1)] = _NO_PAIR
            ranks[ua] = _NEEDS_RANK if at + 1 < n else _NO_PAIR
            if at > 0:
                ranks[ua - _U1] = _NEEDS_RANK
    # Every array used in the exit block: Numba's pruner then drops all their refcounting.
    if (data.shape[0] | ranks.shape[0] | out.shape[0] | byte_ids.shape[0] | pair_table.shape[0] | merge_result.shape[0]
            | token_table.shape[0] | token_bytes.shape[0] | token_offsets.shape[0] | byte_pair_ranks.shape[0]
            | pair_filter.shape[0]) < 0:
        n = 0
    return out_pos + n


@njit(cache=True)
def merge_long_piece(data, start, end, vocab, work, out, out_pos):
    """The merge loop of ``bpe_piece`` for long pieces, O(n log n), written for speed: no calls,
    one return. Unlike ``bpe_piece`` it does not first look the whole piece up in the
    vocabulary (tiktoken's rule, HF's ``ignore_merges``): the caller does, where that applies.

    ``work`` is int64 scratch of at least ``7 * (end - start)``: per symbol (indexed by the
    piece offset of its first byte) its id, next and previous symbol and the rank of the pair
    it starts (-1: none), then a binary min-heap of ``rank << 32 | position`` keys. A heap
    entry is stale when the pair's current rank differs; an equal rank at the same position
    means the same merge, so popping the minimum valid key is exactly "lowest rank first,
    leftmost on ties". New pairs wait in ``pending`` (two per merge, every pair at the start)
    and are ranked and pushed in one place.
    """
    byte_ids = vocab.byte_ids
    pair_table = vocab.pair_table
    merge_result = vocab.merge_result
    rank_is_id = vocab.config[cfg.RANK_IS_ID] != 0
    n = end - start
    IDS = 0
    NXT = n
    PRV = 2 * n
    RANK = 3 * n
    HEAP = 4 * n
    pmask = np.uint64(pair_table.shape[0] - 1)
    for i in range(n):
        work[IDS + i] = byte_ids[data[start + i]]
        work[NXT + i] = i + 1 if i + 1 < n else -1
        work[PRV + i] = i - 1
        work[RANK + i] = -1
    size = 0
    init_next = 0
    pending_a = -1
    pending_b = -1
    while True:
        p = -1
        if init_next < n - 1:
            p = init_next
            init_next += 1
        elif pending_a >= 0:
            p = pending_a
            pending_a = -1
        elif pending_b >= 0:
            p = pending_b
            pending_b = -1
        if p >= 0:
            # Rank the pair that starts at p and push it.
            q = work[NXT + p]
            rank = -1
            if q >= 0:
                key = (np.uint64(work[IDS + p]) << np.uint64(20)) | np.uint64(work[IDS + q])
                slot = ((key * _GOLDEN) >> np.uint64(32)) & pmask
                while pair_table[slot] != _EMPTY_PAIR:
                    entry = pair_table[slot]
                    if (entry >> np.uint64(24)) == key:
                        rank = np.int64(entry & np.uint64(0xFFFFFF))
                        break
                    slot = (slot + np.uint64(1)) & pmask
            work[RANK + p] = rank
            if rank >= 0:
                k = size
                work[HEAP + k] = (rank << np.int64(32)) | p
                size += 1
                while k > 0:  # sift up
                    parent = (k - 1) >> 1
                    if work[HEAP + parent] <= work[HEAP + k]:
                        break
                    tmp = work[HEAP + parent]
                    work[HEAP + parent] = work[HEAP + k]
                    work[HEAP + k] = tmp
                    k = parent
            continue
        if size == 0:
            break
        top = work[HEAP]
        size -= 1
        work[HEAP] = work[HEAP + size]
        k = 0
        while True:  # sift down
            child = 2 * k + 1
            if child >= size:
                break
            if child + 1 < size and work[HEAP + child + 1] < work[HEAP + child]:
                child += 1
            if work[HEAP + k] <= work[HEAP + child]:
                break
            tmp = work[HEAP + child]
            work[HEAP + child] = work[HEAP + k]
            work[HEAP + k] = tmp
            k = child
        rank = top >> np.int64(32)
        at = top & np.int64(0xFFFFFFFF)
        if work[RANK + at] != rank:
            continue  # stale: the pair at `at` changed since this entry was pushed
        right = work[NXT + at]
        work[IDS + at] = rank if rank_is_id else merge_result[rank]
        work[RANK + right] = -1  # `right` is gone
        after = work[NXT + right]
        work[NXT + at] = after
        if after >= 0:
            work[PRV + after] = at
        pending_a = at
        pending_b = work[PRV + at]
        work[RANK + at] = -2  # re-ranked (from pending) before the next pop
        if pending_b >= 0:
            work[RANK + pending_b] = -2
    count = 0
    i = 0
    while i >= 0:
        out[out_pos + count] = work[IDS + i]
        count += 1
        i = work[NXT + i]
    if (data.shape[0] | work.shape[0] | out.shape[0] | byte_ids.shape[0] | pair_table.shape[0] | merge_result.shape[0]) < 0:
        count = 0
    return out_pos + count


@njit(cache=True, forceinline=True)
def long_merge_room(n):
    """The ``work`` places ``merge_long_piece`` needs for a piece of ``n`` bytes."""
    return 7 * n


@njit(cache=True)
def grown_work(work, need):
    """A fresh ``merge_long_piece`` work array of at least ``need`` places and at least twice as
    many as ``work``, so that a run of documents grows it only a few times (the encode loops' rule)."""
    return np.empty(max(need, 2 * work.shape[0]), dtype=np.int64)


@njit(cache=True)
def bpe_piece(data, start, end, vocab, out, out_pos):
    """Encode ``data[start:end]`` (one pre-token piece, non-empty) into ``out[out_pos:]``.

    Returns the new ``out_pos``. ``out`` needs room for ``end - start`` ids (one id never
    covers less than one byte). The uncached merge, allocating its own scratch: the hot path
    (``fastenc.kernels.encode``) calls the two merges below directly with reused scratch.
    """
    n = end - start
    if n <= HEAP_THRESHOLD:
        return merge_short_piece(data, start, end, vocab, np.empty(n, dtype=np.int64), out, out_pos)
    whole = -1
    if vocab.config[cfg.WHOLE_PIECE_LOOKUP] != 0:
        whole = token_id_of(vocab.token_table, vocab.token_bytes, vocab.token_offsets, data, start, end)
    if whole >= 0:
        out[out_pos] = whole
        return out_pos + 1
    return merge_long_piece(data, start, end, vocab, np.empty(long_merge_room(n), dtype=np.int64), out, out_pos)
