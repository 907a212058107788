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
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels.bpe import merge_long_piece
from fastenc.kernels.tables import token_id_of


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
    work = np.empty(7 * longest, dtype=np.int64)
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
