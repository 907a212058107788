"""UTF-8 validity per document: the recipes count (and record) documents that are not valid
UTF-8, since a string column is not guaranteed to hold valid UTF-8 (parquet does not check)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from fastenc.kernels.loads import load_word

#: the high bit of each byte of a word: a word without any is eight ASCII bytes
_HIGH_BITS = np.uint64(0x8080808080808080)


@njit(cache=True)
def is_valid_utf8(data, a, b):
    """True if ``data[a:b]`` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at
    most U+10FFFF). ASCII is skipped eight bytes at a time."""
    i = a
    while i < b:
        if i + 8 <= b and (load_word(data, i) & _HIGH_BITS) == 0:
            i += 8
            continue
        c = data[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2:
            return False
        lo, hi = 0x80, 0xBF
        if c < 0xE0:
            n = 1
        elif c < 0xF0:
            n = 2
            if c == 0xE0:
                lo = 0xA0
            elif c == 0xED:
                hi = 0x9F
        elif c < 0xF5:
            n = 3
            if c == 0xF0:
                lo = 0x90
            elif c == 0xF4:
                hi = 0x8F
        else:
            return False
        if i + n >= b:
            return False
        if data[i + 1] < lo or data[i + 1] > hi:
            return False
        for j in range(2, n + 1):
            if (data[i + j] & 0xC0) != 0x80:
                return False
        i += n + 1
    return True


@njit(cache=True, parallel=True)
def count_invalid_utf8(data, offsets):
    """How many documents ``data[offsets[i]:offsets[i + 1]]`` are not valid UTF-8 (on every
    Numba thread: the recipes run it over each batch next to the encoder)."""
    bad = 0
    for d in prange(offsets.shape[0] - 1):
        if not is_valid_utf8(data, offsets[d], offsets[d + 1]):
            bad += 1
    return np.int64(bad)
