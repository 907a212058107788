"""Cut a long pre-token piece where no merge can ever cross, so its parts encode alone.

A BPE merge joins two adjacent symbols into a token of the vocabulary, so a merge across the
boundary between bytes ``x`` (ending one part) and ``y`` (starting the next) makes a token in
which ``x`` is directly followed by ``y``. If no token of the vocabulary contains the byte pair
``x y``, no merge ever crosses that boundary: the pairs on either side never compete with each
other (a merge changes only its neighbours, and none lies across), so each part merges exactly
as it would on its own, in the same lowest-rank-first, leftmost-on-ties order. The piece's ids
are then the parts' ids, concatenated.

This matters for text without spaces (Chinese, Japanese, Thai: a whole clause is one piece of
``\\p{L}+``): GPT-2's vocabulary holds only 2,693 of the 65,536 byte pairs, and cutting at the
others turns 97% of such pieces' bytes into parts of at most 31 bytes, which the piece caches
already know, instead of merging every clause from scratch.

One caveat, for the rules that first look a whole piece up in the vocabulary (tiktoken's,
HF's ``ignore_merges``): the piece caches and the short merge give a part that is itself a token
that token, while inside the longer piece its bytes are merged. The two agree when the token's
bytes merge to the token, which holds for every mergeable GPT-2 token (and then the lookup is
turned off altogether, see ``fastenc.vocab``). For a token where they differ, every pair that
starts or ends it is marked joinable, so no part can ever begin or end where it does (a piece
that *is* such a token is looked up before any cutting).

``joinable`` is ``uint8[65536]``: ``joinable[x << 8 | y]`` is 0 only when cutting between a byte
``x`` and a following ``y`` is exact.

**Cutting where no token spans** (``span_segment_end``, the cl100k/o200k loop): a stronger rule
with the same argument. Every symbol of a merge is a token whose bytes are the piece's bytes it
covers, so a merge across the boundary ``b`` makes a token equal to ``piece[x:y]`` with
``x < b < y``. If no token of the vocabulary occurs in the piece across ``b``, no merge crosses
it, whatever the byte pair there. o200k_base holds multi-character CJK tokens, which make almost
every byte pair between two CJK characters joinable: by pairs its long CJK runs stay 4.6 MB of
parts over 31 bytes on docs.parquet (87k parts, 89k distinct of 190k); by spans 0.8 MB (1.13 M
parts, 23k distinct), which the piece caches then mostly know. The walk (``token_prefixes``: the
hashes of every token's prefixes) costs ~20 ns per byte, against ~70 ns per byte of merging, so
it only runs on parts the pair rule leaves longer than the caches hold. Hash collisions only
ever keep a boundary that could be cut; the whole-piece-lookup caveat above is kept by
``SPAN_GUARD``, set on the same byte pairs that ``build_joinable`` forces joinable.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels.bpe import long_merge_room, merge_long_piece
from fastenc.kernels.tables import token_id_of

SPAN_GUARD = 0x8000  # span_pairs' top bit: never cut between these two bytes (the whole-piece caveat)
_SPAN_LONGEST = 0x7FFF  # its low bits: the longest token that starts with these two bytes (0: none)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_IS_TOKEN = np.uint64(1)  # a token_prefixes entry's low bit: the prefix is a whole token
_KEY_BITS = ~np.uint64(1)


@njit(cache=True)
def tokens_merging_differently(vocab, include):
    """``bool[V]``: the tokens with ``include[id]`` whose bytes do not merge to the one token a
    whole-piece lookup of those bytes finds. (None for GPT-2's mergeable tokens: its
    whole-piece lookup can then never change an id, and ``fastenc.vocab`` turns it off.)"""
    token_bytes = vocab.token_bytes
    token_offsets = vocab.token_offsets
    n_ids = token_offsets.shape[0] - 1
    longest = 1
    for tid in range(n_ids):
        longest = max(longest, token_offsets[tid + 1] - token_offsets[tid])
    work = np.empty(long_merge_room(longest), dtype=np.int64)
    out = np.empty(longest, dtype=np.int64)
    differs = np.zeros(n_ids, dtype=np.bool_)
    for tid in range(n_ids):
        start, end = token_offsets[tid], token_offsets[tid + 1]
        if include[tid] and end > start:
            count = merge_long_piece(token_bytes, start, end, vocab, work, out, 0)
            looked_up = token_id_of(vocab.token_table, token_bytes, token_offsets, token_bytes, start, end)
            differs[tid] = count != 1 or out[0] != looked_up
    return differs


@njit(cache=True)
def build_joinable(vocab, include, differs):
    """``joinable`` for the tokens with ``include[id]`` (the ones merges can make), with the
    cuts around the tokens flagged in ``differs`` (``tokens_merging_differently``, where a
    whole-piece lookup applies; all False where none does) forbidden."""
    token_bytes = vocab.token_bytes
    token_offsets = vocab.token_offsets
    joinable = np.zeros(1 << 16, dtype=np.uint8)
    for tid in range(token_offsets.shape[0] - 1):
        start, end = token_offsets[tid], token_offsets[tid + 1]
        if include[tid]:
            for i in range(start, end - 1):
                joinable[(np.int64(token_bytes[i]) << 8) | np.int64(token_bytes[i + 1])] = 1
        if differs[tid] and end > start:  # never cut just before or just after it
            first = np.int64(token_bytes[start])
            last = np.int64(token_bytes[end - 1])
            for other in range(256):
                joinable[(other << 8) | first] = 1
                joinable[(last << 8) | other] = 1
    return joinable


@njit(cache=True, forceinline=True)
def segment_end(data, start, end, joinable):
    """End of the part of ``data[start:end]`` that begins at ``start``: the first boundary
    no merge can cross, or ``end``. One return, arrays used at the exit (no refcounting)."""
    i = start + 1
    while i < end and joinable[(np.int64(data[i - 1]) << 8) | np.int64(data[i])] != 0:
        i += 1
    if (data.shape[0] | joinable.shape[0]) < 0:
        i = end
    return i


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _prefix_key(h):
    """A prefix hash as a table key: the low bit cleared (it carries the token flag), never 0 (empty)."""
    return (h & _KEY_BITS) | np.uint64(2)


@njit(cache=True)
def build_token_prefixes(token_bytes, token_offsets, include, capacity):
    """The hash set of every prefix of two or more bytes of the tokens with ``include[id]``
    (``uint64[capacity]``, a power of two; 0 = empty): FNV-1a of the prefix as ``_prefix_key``,
    with ``_IS_TOKEN`` set where the prefix is itself such a token. Two prefixes whose keys
    collide share a slot (and its flag, or-ed): ``span_segment_end`` then only cuts less."""
    table = np.zeros(capacity, dtype=np.uint64)
    mask = np.uint64(capacity - 1)
    for tid in range(token_offsets.shape[0] - 1):
        start, end = token_offsets[tid], token_offsets[tid + 1]
        if not include[tid] or end - start < 2:
            continue
        h = (_FNV_OFFSET ^ np.uint64(token_bytes[start])) * _FNV_PRIME
        for i in range(start + 1, end):
            h = (h ^ np.uint64(token_bytes[i])) * _FNV_PRIME
            key = _prefix_key(h)
            slot = ((key * _GOLDEN) >> np.uint64(32)) & mask
            while table[slot] != 0 and (table[slot] & _KEY_BITS) != key:
                slot = (slot + np.uint64(1)) & mask
            table[slot] |= key | (_IS_TOKEN if i == end - 1 else np.uint64(0))
    return table


def token_prefix_table(token_bytes, token_offsets, include, capacity_of) -> np.ndarray:
    """``build_token_prefixes`` at the capacity ``capacity_of(n)`` asks for the ``n`` distinct keys:
    counted on a first build sized for every prefix (most are shared: 421k distinct of 1.5 M for
    o200k_base, an 8 MB table instead of 32)."""
    every = max(int((np.diff(token_offsets)[include] - 1).clip(0).sum()), 1)
    first = build_token_prefixes(token_bytes, token_offsets, include, capacity_of(every))
    return build_token_prefixes(token_bytes, token_offsets, include, capacity_of(int(np.count_nonzero(first))))


def never_cutting_span_tables() -> tuple[np.ndarray, np.ndarray]:
    """``(token_prefixes, span_pairs)`` for a vocabulary whose loop cuts by byte pairs only: every
    pair guarded, so ``span_segment_end`` never cuts (an empty prefix table alone would cut
    everywhere)."""
    return np.zeros(16, dtype=np.uint64), np.full(1 << 16, SPAN_GUARD, dtype=np.uint16)


@njit(cache=True)
def build_span_pairs(token_bytes, token_offsets, include, differs):
    """``uint16[65536]``: for ``x << 8 | y``, the length of the longest included token that starts
    with bytes ``x, y`` (0: none; at most ``_SPAN_LONGEST``), and ``SPAN_GUARD`` where the pair
    rule forbids a cut for the whole-piece caveat (the pairs around the tokens in ``differs``)."""
    pairs = np.zeros(1 << 16, dtype=np.uint16)
    for tid in range(token_offsets.shape[0] - 1):
        start, end = token_offsets[tid], token_offsets[tid + 1]
        if include[tid] and end - start >= 2:
            k = (np.int64(token_bytes[start]) << 8) | np.int64(token_bytes[start + 1])
            pairs[k] = max(pairs[k], min(end - start, _SPAN_LONGEST))
        if differs[tid] and end > start:
            first = np.int64(token_bytes[start])
            last = np.int64(token_bytes[end - 1])
            for other in range(256):
                pairs[(other << 8) | first] |= SPAN_GUARD
                pairs[(last << 8) | other] |= SPAN_GUARD
    return pairs


@njit(cache=True)
def span_segment_end(data, start, end, token_prefixes, span_pairs):
    """End of the part of ``data[start:end]`` that begins at ``start``: the first boundary ``b``
    that no token occurrence ``data[x:y]`` (``start <= x < b < y``) spans and ``SPAN_GUARD``
    allows, or ``end``. Tokens that begin before ``start`` need no look: ``start`` is such a
    boundary itself (or the piece's start). ``reach`` is one past the furthest end of a token
    seen to begin so far; the walk from ``x`` follows the prefixes (at most the longest token
    that starts with its two bytes) and stops at the first one that no token has."""
    mask = np.uint64(token_prefixes.shape[0] - 1)
    reach = start + 1
    cut = end
    x = start
    while x + 1 < end:
        pair = np.int64(span_pairs[(np.int64(data[x]) << 8) | np.int64(data[x + 1])])
        bound = min(end, x + (pair & _SPAN_LONGEST))
        if bound > reach:
            h = (_FNV_OFFSET ^ np.uint64(data[x])) * _FNV_PRIME
            for y in range(x + 1, bound):
                h = (h ^ np.uint64(data[y])) * _FNV_PRIME
                key = _prefix_key(h)
                slot = ((key * _GOLDEN) >> np.uint64(32)) & mask
                entry = np.uint64(0)
                while token_prefixes[slot] != 0:
                    if (token_prefixes[slot] & _KEY_BITS) == key:
                        entry = token_prefixes[slot]
                        break
                    slot = (slot + np.uint64(1)) & mask
                if entry == 0:
                    break  # no token starts with data[x:y + 1]
                if entry & _IS_TOKEN:
                    reach = max(reach, y + 1)
        x += 1
        if reach <= x and (pair & SPAN_GUARD) == 0:
            cut = x
            break
    if (data.shape[0] | token_prefixes.shape[0] | span_pairs.shape[0]) < 0:
        cut = end
    return cut
