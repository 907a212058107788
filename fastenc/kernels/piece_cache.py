"""A per-thread memo of piece bytes -> ids, one 32-byte slot per entry.

Most pre-token pieces are short and repeat endlessly (" the", ",", "\\n"), so remembering
their ids skips the merge loop almost always. A slot is four ``uint64`` words:

    word 0   piece bytes 0..7            (little-endian, zero padded)
    word 1   piece bytes 8..14, then byte 15 = length (bits 56..59) | id count (bits 60..63)
    word 2   ids 0..3 as uint16
    word 3   ids 4..7 as uint16

so a hit costs one hash and one cache line. Only pieces of 2..15 bytes that encode to at
most 8 ids below 65,536 are stored; the rest go through the merge loop every time. A slot
with word 1 == 0 is empty (a stored piece has length >= 2). On a collision after a short
probe the home slot is overwritten: the cache only memoizes a pure function, so eviction
can never change an output.
"""
from __future__ import annotations

import numpy as np
from numba import njit

MAX_PIECE_BYTES = 15
MAX_PIECE_IDS = 8
DEFAULT_SLOTS = 1 << 16
_PROBES = 4
_KEY_MASK = np.uint64(0x0FFFFFFFFFFFFFFF)  # word 1 without the id count
_MUL0 = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xC2B2AE3D27D4EB4F)


def new_piece_cache(slots: int = DEFAULT_SLOTS) -> np.ndarray:
    """An empty cache of ``slots`` entries (a power of two): ``uint64[slots, 4]``, 32 B each."""
    if slots < 1 or slots & (slots - 1):
        raise ValueError(f"piece cache slots must be a power of two, got {slots}")
    return np.zeros((slots, 4), dtype=np.uint64)


@njit(cache=True, inline="always")
def piece_key(data, start, end):
    """The piece's (word 0, word 1 without count) key; requires 1 <= end - start <= 15."""
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    n = end - start
    for i in range(min(n, 8)):
        k0 |= np.uint64(data[start + i]) << np.uint64(8 * i)
    for i in range(8, n):
        k1 |= np.uint64(data[start + i]) << np.uint64(8 * (i - 8))
    k1 |= np.uint64(n) << np.uint64(56)
    return k0, k1


@njit(cache=True, inline="always")
def _home_slot(k0, k1, mask):
    h = (k0 * _MUL0) ^ (k1 * _MUL1)
    return np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))


@njit(cache=True, inline="always")
def cache_lookup(cache, k0, k1, out, out_pos):
    """Write the cached ids of the key to ``out[out_pos:]``; return the new position, or -1."""
    mask = cache.shape[0] - 1
    slot = _home_slot(k0, k1, mask)
    for _ in range(_PROBES):
        w1 = cache[slot, 1]
        if w1 == 0:
            return -1
        if cache[slot, 0] == k0 and (w1 & _KEY_MASK) == k1:
            count = np.int64(w1 >> np.uint64(60))
            w2 = cache[slot, 2]
            w3 = cache[slot, 3]
            for j in range(count):
                word = w2 if j < 4 else w3
                out[out_pos + j] = (word >> np.uint64(16 * (j & 3))) & np.uint64(0xFFFF)
            return out_pos + count
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, inline="always")
def cache_store(cache, k0, k1, ids, start, count):
    """Remember ``ids[start:start+count]`` (count <= 8, each id < 65,536) for the key."""
    mask = cache.shape[0] - 1
    home = _home_slot(k0, k1, mask)
    slot = home
    for probe in range(_PROBES):
        candidate = (home + probe) & mask
        if cache[candidate, 1] == 0:
            slot = candidate
            break
    w2 = np.uint64(0)
    w3 = np.uint64(0)
    for j in range(count):
        v = np.uint64(ids[start + j]) << np.uint64(16 * (j & 3))
        if j < 4:
            w2 |= v
        else:
            w3 |= v
    cache[slot, 0] = k0
    cache[slot, 1] = k1 | (np.uint64(count) << np.uint64(60))
    cache[slot, 2] = w2
    cache[slot, 3] = w3
