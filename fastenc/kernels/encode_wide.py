"""Text -> ids for vocabularies with ids above 65,535 (cl100k_base, o200k_base, large HF files).

``encode_run`` calls these for such vocabularies: the lookup chain and the store rule of the
piece caches of ``piece_cache_wide``, whose entries carry 18-bit ids. Called, not inlined, so
that the uint16 path, GPT-2's hot loop, keeps its specialised inlined lookups.
"""
from __future__ import annotations

from numba import njit

from fastenc.kernels.piece_cache import ELSEWHERE, TINY_MAX_BYTES, TINY_MAX_IDS, max_piece_bytes
from fastenc.kernels.piece_cache_wide import (
    WIDE_MAX_ID,
    wide_cache_lookup,
    wide_cache_store,
    wide_max_piece_ids,
    wide_tiny_lookup,
    wide_tiny_store,
)


@njit(cache=True, inline="always")
def wide_lookup(caches, data, start, end, out, out_pos, out_limit):
    """The ids of the piece ``data[start:end]`` (2..31 bytes) from the wide caches, as the
    narrow lookups in ``encode_run``: the cache its length calls for, then where a marker sends
    it. Returns the new position, or -1 when the piece is not cached. Inlined into the encode
    loop: as a call of its own it would count references to the three caches every time."""
    n = end - start
    if n <= TINY_MAX_BYTES:
        hit = wide_tiny_lookup(caches.tiny, data, start, end, out, out_pos, out_limit)
        if hit == ELSEWHERE:  # 4 or more ids: the short cache; more than 4: the long one
            hit = wide_cache_lookup(caches.short, data, start, end, out, out_pos, out_limit)
            if hit < 0:
                hit = wide_cache_lookup(caches.long, data, start, end, out, out_pos, out_limit)
    elif n <= max_piece_bytes(caches.short):
        hit = wide_cache_lookup(caches.short, data, start, end, out, out_pos, out_limit)
        if hit == ELSEWHERE:  # more than 4 ids: the long cache
            hit = wide_cache_lookup(caches.long, data, start, end, out, out_pos, out_limit)
    else:
        hit = wide_cache_lookup(caches.long, data, start, end, out, out_pos, out_limit)
    return hit


@njit(cache=True)
def remember_piece_wide(caches, cacheable, data, start, end, ids, ids_start, count):
    """``remember_piece`` for the wide caches: ``data[start:end]`` (2..31 bytes) merged to
    ``ids[ids_start:ids_start + count]``. Pieces with an id above ``WIDE_MAX_ID`` (possible
    only when not ``cacheable``) or more ids than an entry holds are merged every time."""
    n = end - start
    tiny = caches.tiny
    short = caches.short
    if not cacheable:
        for j in range(ids_start, ids_start + count):
            if ids[j] > WIDE_MAX_ID:
                count = -1  # an id too large for the wide layout: merged every time
    if count < 0:
        pass
    elif n <= TINY_MAX_BYTES and count <= TINY_MAX_IDS:
        wide_tiny_store(tiny, data, start, end, ids, ids_start, count)
    else:
        if n <= max_piece_bytes(short) and count <= wide_max_piece_ids(short):
            wide_cache_store(short, data, start, end, ids, ids_start, count)
        elif count <= wide_max_piece_ids(caches.long):
            wide_cache_store(caches.long, data, start, end, ids, ids_start, count)
        # Markers, as in encode.remember_piece: a lookup that finds one goes on to the next cache.
        if n <= TINY_MAX_BYTES:
            wide_tiny_store(tiny, data, start, end, ids, ids_start, 0)
        elif n <= max_piece_bytes(short) and count > wide_max_piece_ids(short):
            wide_cache_store(short, data, start, end, ids, ids_start, 0)
    return count
