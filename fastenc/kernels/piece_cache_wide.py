"""Piece caches for vocabularies with ids above 65,535 (cl100k_base, o200k_base): 18-bit ids.

Same tables, keys, hashing, probing, markers and refcount-free style as ``piece_cache`` (read
its docstring first); only the id words differ. Each id keeps its low 16 bits in a uint16 slot as
before, and its two high bits go to spare bits next to the id count, so ids up to 262,143 fit:

- tiny slot, word 1: ``id0 | id1 << 16 | id2 << 32 | count << 48 | high bits << 50 | length << 56``
  (count 0..3 in two bits, ``(id_j >> 16) << (50 + 2j)``): up to 3 ids, as before;
- short / long slot (``W`` words, ``W/2`` id words): the ids' low halves fill the first
  ``W/2 - 1`` id words (4 or 12 ids), and the last id word is ``high bits | count << 48``
  (``(id_j >> 16) << 2j``). A short slot therefore holds up to 4 ids and a long one up to 12
  (narrow vocabularies: 7 and 15); a piece with more ids is merged every time.

The caller checks that every id is below ``WIDE_MAX_ID + 1`` before storing.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels.loads import load_word
from fastenc.kernels.piece_cache import _LEN_SHIFT, _MUL, _MUL2, _ONES, _PROBES, ELSEWHERE

WIDE_MAX_ID = (1 << 18) - 1
_U16 = np.uint64(0xFFFF)
_THREE = np.uint64(3)
_COUNT_SHIFT = np.uint64(48)
_TINY_HIGH_SHIFT = 50


@njit(cache=True)
def wide_max_piece_ids(cache):
    """Ids per entry of a short (4 words: 4 ids) or long (8 words: 12 ids) wide cache."""
    return 4 * (cache.shape[1] // 2 - 1)


@njit(cache=True)
def wide_tiny_lookup(cache, data, start, end, out, out_pos, out_limit):
    """``tiny_cache_lookup`` for the wide layout (same contract)."""
    mask = cache.shape[0] - 1
    n = end - start
    k0 = np.uint64(0)
    if start + 8 <= data.shape[0]:
        k0 = load_word(data, start)
        k0 = k0 & (_ONES >> np.uint64(64 - 8 * n))
    else:
        for i in range(start, end):
            k0 |= np.uint64(data[i]) << np.uint64(8 * (i - start))
    length = np.uint64(n)
    h = ((k0 * _MUL) ^ length) * _MUL
    slot = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))
    result = -1
    for _ in range(_PROBES):
        w1 = cache[slot, 1]
        if cache[slot, 0] == k0 and (w1 >> _LEN_SHIFT) == length:
            count = np.int64((w1 >> _COUNT_SHIFT) & _THREE)
            if out_pos + 3 <= out_limit:  # all three places: no branch on the count
                out[out_pos] = (w1 & _U16) | (((w1 >> np.uint64(50)) & _THREE) << np.uint64(16))
                out[out_pos + 1] = ((w1 >> np.uint64(16)) & _U16) | (((w1 >> np.uint64(52)) & _THREE) << np.uint64(16))
                out[out_pos + 2] = ((w1 >> np.uint64(32)) & _U16) | (((w1 >> np.uint64(54)) & _THREE) << np.uint64(16))
            else:
                for j in range(count):
                    out[out_pos + j] = ((w1 >> np.uint64(16 * j)) & _U16) | (
                        ((w1 >> np.uint64(_TINY_HIGH_SHIFT + 2 * j)) & _THREE) << np.uint64(16))
            result = out_pos + count if count > 0 else ELSEWHERE
            break
        if w1 == 0:
            break
        slot = (slot + 1) & mask
    if (cache.shape[0] | data.shape[0] | out.shape[0]) < 0:
        result = -1
    return result


@njit(cache=True)
def wide_tiny_store(cache, data, start, end, ids, ids_start, count):
    """``tiny_cache_store`` for the wide layout: 0..3 ids, each <= WIDE_MAX_ID."""
    mask = cache.shape[0] - 1
    n = end - start
    k0 = np.uint64(0)
    for i in range(start, end):
        k0 |= np.uint64(data[i]) << np.uint64(8 * (i - start))
    length = np.uint64(n)
    h = ((k0 * _MUL) ^ length) * _MUL
    home = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))
    slot = home
    for probe in range(_PROBES):
        candidate = (home + probe) & mask
        if cache[candidate, 1] == 0:
            slot = candidate
            break
    w1 = (length << _LEN_SHIFT) | (np.uint64(count) << _COUNT_SHIFT)
    for j in range(count):
        tid = np.uint64(ids[ids_start + j])
        w1 |= (tid & _U16) << np.uint64(16 * j)
        w1 |= (tid >> np.uint64(16)) << np.uint64(_TINY_HIGH_SHIFT + 2 * j)
    cache[slot, 0] = k0
    cache[slot, 1] = w1
    if (cache.shape[0] | data.shape[0] | ids.shape[0]) < 0:
        count = 0
    return count


@njit(cache=True)
def wide_cache_lookup(cache, data, start, end, out, out_pos, out_limit):
    """``cache_lookup`` for the wide layout (any ``W``; same contract: up to ``4 * (W/2 - 1)``
    places past ``out_pos`` may be written, never past ``out_limit``)."""
    key_words = cache.shape[1] >> 1
    mask = cache.shape[0] - 1
    n = end - start
    size = data.shape[0]
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    k3 = np.uint64(0)
    if start + 8 * key_words <= size:
        k0 = load_word(data, start)
        k1 = load_word(data, start + 8)
        if key_words == 4:
            k2 = load_word(data, start + 16)
            k3 = load_word(data, start + 24)
        m = np.int64(n)
        k0 = k0 if m >= 8 else k0 & ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1))
        m -= 8
        k1 = k1 & (_ONES if m >= 8 else ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
        m -= 8
        k2 = k2 & (_ONES if m >= 8 else ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
        m -= 8
        k3 = k3 & (((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
    else:
        for i in range(start, end):
            j = i - start
            byte = np.uint64(data[i]) << np.uint64(8 * (j & 7))
            if j < 8:
                k0 |= byte
            elif j < 16:
                k1 |= byte
            elif j < 24:
                k2 |= byte
            else:
                k3 |= byte
    length = np.uint64(n) << _LEN_SHIFT
    if key_words == 2:
        k1 |= length
        last = k1
    else:
        k3 |= length
        last = k3
    h = (((k0 * _MUL) ^ k1) * _MUL ^ k2 ^ (k3 * _MUL2)) * _MUL
    slot = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))
    result = -1
    for _ in range(_PROBES):
        stored_last = cache[slot, key_words - 1]
        if stored_last == 0:
            break
        if (
            stored_last == last
            and cache[slot, 0] == k0
            and (key_words == 2 or (cache[slot, 1] == k1 and cache[slot, 2] == k2))
        ):
            top = cache[slot, 2 * key_words - 1]  # high bits | count << 48
            count = np.int64(top >> _COUNT_SHIFT)
            places = 4 * (key_words - 1)
            if out_pos + places <= out_limit:
                for w in range(key_words - 1):  # every place: no branch on the count
                    word = cache[slot, key_words + w]
                    o = out_pos + 4 * w
                    hi = top >> np.uint64(8 * w)
                    out[o] = (word & _U16) | ((hi & _THREE) << np.uint64(16))
                    out[o + 1] = ((word >> np.uint64(16)) & _U16) | (((hi >> np.uint64(2)) & _THREE) << np.uint64(16))
                    out[o + 2] = ((word >> np.uint64(32)) & _U16) | (((hi >> np.uint64(4)) & _THREE) << np.uint64(16))
                    out[o + 3] = (word >> np.uint64(48)) | (((hi >> np.uint64(6)) & _THREE) << np.uint64(16))
            else:
                for j in range(count):
                    low = (cache[slot, key_words + (j >> 2)] >> np.uint64(16 * (j & 3))) & _U16
                    out[out_pos + j] = low | (((top >> np.uint64(2 * j)) & _THREE) << np.uint64(16))
            result = out_pos + count if count > 0 else ELSEWHERE
            break
        slot = (slot + 1) & mask
    if (cache.shape[0] | data.shape[0] | out.shape[0]) < 0:
        result = -1
    return result


@njit(cache=True)
def wide_cache_store(cache, data, start, end, ids, ids_start, count):
    """``cache_store`` for the wide layout: 0..wide_max_piece_ids(cache) ids, each <= WIDE_MAX_ID."""
    key_words = cache.shape[1] >> 1
    mask = cache.shape[0] - 1
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    k3 = np.uint64(0)
    for i in range(start, end):
        j = i - start
        byte = np.uint64(data[i]) << np.uint64(8 * (j & 7))
        if j < 8:
            k0 |= byte
        elif j < 16:
            k1 |= byte
        elif j < 24:
            k2 |= byte
        else:
            k3 |= byte
    length = np.uint64(end - start) << _LEN_SHIFT
    if key_words == 2:
        k1 |= length
    else:
        k3 |= length
    h = (((k0 * _MUL) ^ k1) * _MUL ^ k2 ^ (k3 * _MUL2)) * _MUL
    home = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))
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
    top = np.uint64(count) << _COUNT_SHIFT
    for w in range(key_words - 1):
        word = np.uint64(0)
        for k in range(4):
            i = 4 * w + k
            if i < count:
                tid = np.uint64(ids[ids_start + i])
                word |= (tid & _U16) << np.uint64(16 * k)
                top |= (tid >> np.uint64(16)) << np.uint64(2 * i)
        cache[slot, key_words + w] = word
    cache[slot, 2 * key_words - 1] = top
    if (cache.shape[0] | data.shape[0] | ids.shape[0]) < 0:
        count = 0
    return count
