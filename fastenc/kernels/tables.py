"""Flat hash tables in numpy arrays, built and probed by the same ``@njit`` code.

Two tables back the BPE merge loop:

* the **pair table** (``uint64[cap]``): one 8-byte slot per mergeable pair (with tiktoken's
  rule, only the pairs ``last_merges`` finds: one per token that merges to itself),
  ``(left << 20 | right) << 24 | rank``. Key and value share the slot so a probe touches one
  cache line; an empty slot is all ones. Ids must be < 2**20 - 1 and ranks < 2**24
  (checked by ``fastenc.vocab`` before building).
* the **pair filter** (``uint64[F]``): one bit per hash of every pair in the pair table, set.
  Most pairs a merge loop asks about merge into nothing (56% of the lookups of a first pass
  over docs.parquet); a clear bit answers those from 64 KB (GPT-2) that stay in the CPU's
  caches, where the pair table (1-2 MB) is evicted by the piece caches a first pass fills (its
  probe was a tenth of such a pass).
* the **token table** (``int32[cap]``): token id per slot (-1 = empty), keyed by the token's
  bytes, which live in ``token_bytes[token_offsets[id]:token_offsets[id + 1]]``. It answers
  "is this whole piece a token?" (tiktoken's first step, HF's ``ignore_merges``).

Building and probing share the hash functions below, so the tables are only ever built
here (never by numpy code that might hash differently).
"""
from __future__ import annotations

import numpy as np
from numba import njit

EMPTY_PAIR_SLOT = np.uint64(0xFFFFFFFFFFFFFFFF)
ID_BITS = 20
RANK_BITS = 24
MAX_ID = (1 << ID_BITS) - 2  # the all-ones id is reserved so that EMPTY never matches a key
MAX_RANK = (1 << RANK_BITS) - 1
NO_RANK = -1

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
FILTER_MUL = np.uint64(0xC2B2AE3D27D4EB4F)  # the pair filter's hash: another multiplier than the table's
PAIR_FILTER_BITS_PER_PAIR = 8  # ~10% false positives
# The pair table's load: up to 0.8 (o200k_base: 200k pairs in 2 MB, not 4 MB at 0.5). The table is
# probed on every merge and is evicted by the piece caches a first pass fills: the smaller one stays
# in the CPU's caches more (first passes faster; bench/RESULTS.md, "rank is the id, a denser pair
# table, a bigger wide long cache"); the longer probes it costs are few, since the pair filter answers most misses.
PAIR_TABLE_LOAD = 0.8
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _pair_key(left, right):
    return (np.uint64(left) << np.uint64(ID_BITS)) | np.uint64(right)


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def mix_slot(key, mask):
    return np.int64(((key * _GOLDEN) >> np.uint64(32)) & np.uint64(mask))


@njit(cache=True, forceinline=True)
def pair_rank(pair_table, left, right):
    """Rank of merging ``left``+``right``, or ``NO_RANK`` (-1) if the pair never merges."""
    key = _pair_key(left, right)
    mask = pair_table.shape[0] - 1
    slot = mix_slot(key, mask)
    while True:
        entry = pair_table[slot]
        if entry == EMPTY_PAIR_SLOT:
            return NO_RANK
        if (entry >> np.uint64(RANK_BITS)) == key:
            return np.int64(entry & np.uint64(MAX_RANK))
        slot = (slot + 1) & mask


@njit(cache=True)
def build_pair_table(lefts, rights, ranks, capacity):
    """Open-addressing table of pair -> rank. A later duplicate pair overwrites an earlier
    one, as HF's merges HashMap does; ``capacity`` must be a power of two > len(lefts)
    (``table_capacity``)."""
    table = np.full(capacity, EMPTY_PAIR_SLOT, dtype=np.uint64)
    mask = capacity - 1
    for i in range(lefts.shape[0]):
        key = _pair_key(lefts[i], rights[i])
        entry = (key << np.uint64(RANK_BITS)) | np.uint64(ranks[i])
        slot = mix_slot(key, mask)
        while True:
            current = table[slot]
            if current == EMPTY_PAIR_SLOT or (current >> np.uint64(RANK_BITS)) == key:
                table[slot] = entry
                break
            slot = (slot + 1) & mask
    return table


@njit(cache=True, forceinline=True)
def pair_filter_bit(key, n_words):
    """``(word, bit)`` of a pair's key (``left << 20 | right``) in a pair filter of ``n_words`` words
    (a power of two)."""
    b = ((key * FILTER_MUL) >> np.uint64(32)) & (np.uint64(n_words) * np.uint64(64) - np.uint64(1))
    return b >> np.uint64(6), np.uint64(1) << (b & np.uint64(63))


@njit(cache=True)
def build_pair_filter(pair_table):
    """The pair filter of a pair table: ``PAIR_FILTER_BITS_PER_PAIR`` bits per pair (a power of two
    of 64-bit words), the bit of each pair's key set."""
    n = 0
    for slot in range(pair_table.shape[0]):
        n += pair_table[slot] != EMPTY_PAIR_SLOT
    words = 1
    while words * 64 < PAIR_FILTER_BITS_PER_PAIR * n:
        words *= 2
    filt = np.zeros(words, dtype=np.uint64)
    for slot in range(pair_table.shape[0]):
        entry = pair_table[slot]
        if entry != EMPTY_PAIR_SLOT:
            word, bit = pair_filter_bit(entry >> np.uint64(RANK_BITS), words)
            filt[word] |= bit
    return filt


HEAD_MAX_BYTES = 7  # a token head holds the bytes of a token of up to 7 bytes, and its length
HEAD_LONG = np.uint64(0xFF) << np.uint64(56)  # the head of a longer (or empty) token: read its bytes


@njit(cache=True)
def build_token_heads(token_bytes, token_offsets):
    """One ``uint64`` per id: the bytes of a token of 1..7 bytes (little-endian, zero padded) with
    its length in the top byte; ``HEAD_LONG`` for any other token. A memo hit is checked id by id
    against the piece (piece_memo.token_differs): with the heads that is one load per id, where
    ``token_offsets`` then ``token_bytes`` were two dependent ones, from tables of 730 KB together
    for GPT-2, more than a 512 KB L2 holds (bench/RESULTS.md, "Token heads: the memo's check in one
    load per id")."""
    n = token_offsets.shape[0] - 1
    heads = np.empty(n, dtype=np.uint64)
    for tid in range(n):
        a = token_offsets[tid]
        length = token_offsets[tid + 1] - a
        if 1 <= length <= HEAD_MAX_BYTES:
            h = np.uint64(length) << np.uint64(56)
            for k in range(length):
                h |= np.uint64(token_bytes[a + k]) << np.uint64(8 * k)
            heads[tid] = h
        else:
            heads[tid] = HEAD_LONG
    return heads


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _hash_bytes(data, start, end):
    h = _FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * _FNV_PRIME
    return h ^ (h >> np.uint64(29))


@njit(cache=True)
def token_id_of(token_table, token_bytes, token_offsets, data, start, end):
    """Id of the token whose bytes equal ``data[start:end]``, or -1."""
    mask = token_table.shape[0] - 1
    slot = np.int64(_hash_bytes(data, start, end) & np.uint64(mask))
    n = end - start
    while True:
        tid = token_table[slot]
        if tid < 0:
            return -1
        t0 = token_offsets[tid]
        if token_offsets[tid + 1] - t0 == n:
            same = True
            for k in range(n):
                if token_bytes[t0 + k] != data[start + k]:
                    same = False
                    break
            if same:
                return np.int64(tid)
        slot = (slot + 1) & mask


@njit(cache=True)
def build_token_table(token_bytes, token_offsets, include, capacity):
    """Hash every id with ``include[id]`` by its bytes. The first id with given bytes wins."""
    table = np.full(capacity, -1, dtype=np.int32)
    mask = capacity - 1
    for tid in range(token_offsets.shape[0] - 1):
        if not include[tid]:
            continue
        start, end = token_offsets[tid], token_offsets[tid + 1]
        if token_id_of(table, token_bytes, token_offsets, token_bytes, start, end) >= 0:
            continue
        slot = np.int64(_hash_bytes(token_bytes, start, end) & np.uint64(mask))
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = tid
    return table


def table_capacity(n_entries: int, load: float = 0.5) -> int:
    """Smallest power of two that keeps the load factor at or below ``load``."""
    cap = 16
    while cap * load < n_entries:
        cap *= 2
    return cap


@njit(cache=True)
def last_merges(pair_table, merge_result, byte_ids, token_bytes, token_offsets, include):
    """``(lefts, rights, ranks)``: for every id with ``include[id]`` whose bytes merge (with
    ``pair_table``, lowest rank first, leftmost on ties) to one symbol, the last merge of that run.

    With tiktoken's rule (every split of a token into two tokens is a pair, ranked by the
    token) these are the only pairs a merge ever applies: in any run, the symbols that become
    one token ``t`` only ever merge among themselves, and always in the lowest-rank-first order
    of ``t``'s bytes merged alone, so the last of those merges is this one. A pair that is
    another split of ``t`` may sit side by side in a run but is never the lowest (it would merge,
    and that merge is the last one of ``t``'s own run), so a table of these pairs alone gives
    every piece the same ids, with half the entries (o200k_base: 200k of 446k)."""
    n_ids = token_offsets.shape[0] - 1
    lefts = np.empty(n_ids, dtype=np.int64)
    rights = np.empty(n_ids, dtype=np.int64)
    ranks = np.empty(n_ids, dtype=np.int64)
    ids = np.empty(16, dtype=np.int64)
    found = 0
    for tid in range(n_ids):
        a, b = token_offsets[tid], token_offsets[tid + 1]
        n = b - a
        if not include[tid] or n < 2:
            continue
        if ids.shape[0] < n:
            ids = np.empty(2 * n, dtype=np.int64)
        for i in range(n):
            ids[i] = byte_ids[token_bytes[a + i]]
        left = right = rank = -1
        while n > 1:
            best = -1
            at = -1
            for i in range(n - 1):
                r = pair_rank(pair_table, ids[i], ids[i + 1])
                if r >= 0 and (best < 0 or r < best):
                    best = r
                    at = i
            if at < 0:
                break
            left, right, rank = ids[at], ids[at + 1], best
            ids[at] = merge_result[best]
            for i in range(at + 1, n - 1):
                ids[i] = ids[i + 1]
            n -= 1
        if n == 1:
            lefts[found], rights[found], ranks[found] = left, right, rank
            found += 1
    return lefts[:found], rights[:found], ranks[:found]


@njit(cache=True)
def build_byte_pair_ranks(pair_table, byte_ids):
    """``int32[65536]``: the rank of merging the single bytes ``x`` then ``y`` at ``x << 8 | y``
    (``NO_RANK`` if they never merge). Every merge starts from bytes, so a direct table answers
    the first round of lookups of each piece from 256 kB instead of the larger hash table."""
    ranks = np.empty(1 << 16, dtype=np.int32)
    for x in range(256):
        for y in range(256):
            ranks[(x << 8) | y] = pair_rank(pair_table, byte_ids[x], byte_ids[y])
    return ranks
