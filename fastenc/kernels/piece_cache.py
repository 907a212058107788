"""Per-thread memos of piece bytes -> ids, one slot (one or two cache lines) per entry.

Most pre-token pieces are short and repeat endlessly (" the", ",", "\\n    "), so remembering
their ids skips the merge loop almost always. A cache is ``uint64[slots, W]``:

    words 0 .. W/2-1    the key: piece bytes, little-endian, zero padded; the top byte of
                        the last key word holds the piece's length
    words W/2 .. W-1    the ids, four uint16 per word, unused ones 0xFFFF

so a ``W = 4`` cache (32-byte slots) holds pieces of 2..15 bytes with up to 8 ids, and a
``W = 8`` cache (64-byte slots) pieces of up to 31 bytes with up to 16 ids. Ids must be below
65,535 (the caller checks the vocabulary size). A slot whose last key word is 0 is empty (a
stored piece has a non-zero length). On a collision after a short probe the home slot is
overwritten: a cache only memoizes a pure function, so eviction never changes an output.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

SHORT_WORDS = 4  # 32-byte slots: pieces up to 15 bytes
LONG_WORDS = 8  # 64-byte slots: pieces up to 31 bytes
DEFAULT_SHORT_SLOTS = 1 << 18  # 8 MB: most of a multilingual corpus's distinct short pieces
DEFAULT_LONG_SLOTS = 1 << 16  # 4 MB
_PROBES = 8
_NO_ID = np.uint64(0xFFFF)
_MUL = np.uint64(0x9E3779B97F4A7C15)
_MUL2 = np.uint64(0xC2B2AE3D27D4EB4F)


def new_piece_cache(slots: int = DEFAULT_SHORT_SLOTS, words: int = SHORT_WORDS) -> np.ndarray:
    """An empty cache: ``uint64[slots, words]``; ``slots`` a power of two, ``words`` 4 or 8."""
    if slots < 1 or slots & (slots - 1):
        raise ValueError(f"piece cache slots must be a power of two, got {slots}")
    if words not in (SHORT_WORDS, LONG_WORDS):
        raise ValueError(f"piece cache words must be {SHORT_WORDS} or {LONG_WORDS}, got {words}")
    return np.zeros((slots, words), dtype=np.uint64)


@njit(cache=True, inline="always")
def max_piece_bytes(cache):
    return 8 * (cache.shape[1] // 2) - 1


@njit(cache=True, inline="always")
def max_piece_ids(cache):
    return 4 * (cache.shape[1] // 2)


@njit(cache=True, inline="always")
def _load_word(data, lo, hi):
    """Bytes data[lo:hi] (at most 8, possibly none) as a little-endian, zero-padded uint64."""
    w = np.uint64(0)
    for i in range(lo, hi):
        w |= np.uint64(data[i]) << np.uint64(8 * (i - lo))
    return w


@njit(cache=True, inline="always")
def _piece_key(data, start, end, key_words):
    """The key words of a piece (k2, k3 are 0 for a 2-word key); length in the last one's top byte."""
    k0 = _load_word(data, start, min(start + 8, end))
    k1 = _load_word(data, start + 8, min(start + 16, end))
    k2 = np.uint64(0)
    k3 = np.uint64(0)
    length = np.uint64(end - start) << np.uint64(56)
    if key_words == 2:
        k1 |= length
    else:
        k2 = _load_word(data, start + 16, min(start + 24, end))
        k3 = _load_word(data, start + 24, min(start + 32, end)) | length
    h = (((k0 * _MUL) ^ k1) * _MUL ^ k2 ^ (k3 * _MUL2)) * _MUL
    return k0, k1, k2, k3, h ^ (h >> np.uint64(31))


@njit(cache=True, inline="always")
def cache_lookup(cache, data, start, end, out, out_pos):
    """Write the cached ids of ``data[start:end]`` to ``out[out_pos:]``; return the new
    position, or -1 if the piece is not cached. Needs ``2 <= end - start <= max_piece_bytes``."""
    key_words = cache.shape[1] // 2
    mask = cache.shape[0] - 1
    k0, k1, k2, k3, h = _piece_key(data, start, end, key_words)
    last = k1 if key_words == 2 else k3
    slot = np.int64(h & np.uint64(mask))
    for _ in range(_PROBES):
        stored_last = cache[slot, key_words - 1]
        if stored_last == 0:
            return -1
        if (
            stored_last == last
            and cache[slot, 0] == k0
            and (key_words == 2 or (cache[slot, 1] == k1 and cache[slot, 2] == k2))
        ):
            n = out_pos
            for w in range(key_words, 2 * key_words):
                word = cache[slot, w]
                for k in range(4):
                    tid = word & _NO_ID
                    if tid == _NO_ID:
                        return n
                    out[n] = tid
                    n += 1
                    word >>= np.uint64(16)
            return n
        slot = (slot + 1) & mask
    return -1


@njit(cache=True)
def cache_store(cache, data, start, end, ids, ids_start, count):
    """Remember that ``data[start:end]`` encodes to ``ids[ids_start:ids_start+count]``
    (count <= max_piece_ids, each id < 65,535). Called once per miss: not inlined."""
    key_words = cache.shape[1] // 2
    mask = cache.shape[0] - 1
    k0, k1, k2, k3, h = _piece_key(data, start, end, key_words)
    home = np.int64(h & np.uint64(mask))
    slot = home
    for probe in range(_PROBES):
        candidate = (home + probe) & mask
        if cache[candidate, key_words - 1] == 0:
            slot = candidate
            break
    cache[slot, 0] = k0
    cache[slot, 1] = k1
    if key_words == 4:
        cache[slot, 2] = k2
        cache[slot, 3] = k3
    for w in range(key_words):
        word = np.uint64(0)
        for k in range(4):
            i = 4 * w + k
            tid = np.uint64(ids[ids_start + i]) if i < count else _NO_ID
            word |= tid << np.uint64(16 * k)
        cache[slot, key_words + w] = word


class PieceCaches(NamedTuple):
    """The two memos one thread uses: pieces of up to 15 bytes, and of 16..31 bytes."""

    short: np.ndarray
    long: np.ndarray


def new_piece_caches(short_slots: int = DEFAULT_SHORT_SLOTS, long_slots: int = DEFAULT_LONG_SLOTS) -> PieceCaches:
    """Fresh caches for one thread (12 MB by default). Keep them between calls: a warm
    cache is what makes encoding fast, and it never changes the ids."""
    return PieceCaches(new_piece_cache(short_slots, SHORT_WORDS), new_piece_cache(long_slots, LONG_WORDS))
