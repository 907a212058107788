"""UTF-8 validity per document: the recipes count (and record) documents that are not valid
UTF-8, since a string column is not guaranteed to hold valid UTF-8 (parquet does not check)."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def is_valid_utf8(data, a, b):
    """True if ``data[a:b]`` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at
    most U+10FFFF)."""
    i = a
    while i < b:
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


@njit(cache=True)
def count_invalid_utf8(data, offsets):
    """How many documents ``data[offsets[i]:offsets[i + 1]]`` are not valid UTF-8."""
    bad = 0
    for d in range(offsets.shape[0] - 1):
        if not is_valid_utf8(data, offsets[d], offsets[d + 1]):
            bad += 1
    return np.int64(bad)
