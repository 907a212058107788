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


_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_BYTE_SUM = np.uint64(0x0101010101010101)
_U1 = np.uint64(1)
_U7 = np.uint64(7)
_U56 = np.uint64(56)


@njit(cache=True, nogil=True)
def char_to_byte_offsets(data, offsets):
    """Turn ``offsets``, ascending positions in code points of the text whose UTF-8 is ``data``, into
    the byte positions of those code points, in place (``Encoder.encode_batch`` of a ``list[str]``:
    one ``"".join(texts).encode()`` and each string's ``len``). A code point is a byte that is not a
    continuation byte (``10xxxxxx``); eight bytes are counted at a time while at least eight code
    points remain to be passed."""
    n = data.shape[0]
    i = 0
    chars = 0
    for k in range(offsets.shape[0]):
        target = offsets[k]
        while target - chars >= 8 and i + 8 <= n:
            word = load_word(data, i)
            cont = word & ~(word << _U1) & _HIGH_BITS  # the high bit of each continuation byte
            chars += 8 - np.int64((((cont >> _U7) * _BYTE_SUM) >> _U56))
            i += 8
        while chars < target:
            if (data[i] & 0xC0) != 0x80:
                chars += 1
            i += 1
        while i < n and (data[i] & 0xC0) == 0x80:  # the last code point's continuation bytes
            i += 1
        offsets[k] = i
