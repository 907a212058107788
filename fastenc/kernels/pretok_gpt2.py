"""GPT-2 pre-tokenizer over UTF-8 bytes, equal to tiktoken's ``gpt2`` (r50k) splitting.

The pattern, as tiktoken 0.14 runs it over code points::

    '(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s

Every code point is in exactly one class (``classes`` = ``fastenc.unicode_classes.gpt2_class_table()``:
0 other, 1 letter, 2 number, 3 whitespace), so the piece that starts at ``pos`` is one of:

- a contraction: ``'`` then lowercase ``s t d m`` or ``ll ve re`` (case-sensitive, and taken even
  when letters follow: ``'sand`` is ``'s`` + ``and``);
- an optional ASCII space, then a maximal run of one class other than whitespace;
- whitespace: the whole run if it reaches ``end`` (``\\s++$``); else the run minus its last code
  point if that leaves at least one (``\\s+(?!\\S)`` leaves the last space to the next word);
  else the single whitespace code point (``\\s``).

Invalid UTF-8 (binary columns, user code): a byte that does not start a well-formed sequence
(strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF, nothing cut off by ``end``)
is one code point of class "other" on its own: U+DC00 + byte, what Python's
``errors="surrogateescape"`` decodes it to (the table calls surrogates "other"). Only bytes in
``[pos, end)`` are read, so no input makes the kernel read out of bounds or stop advancing.

Performance notes (they shape the code):

- Numba increfs every array argument on entry and decrefs it where the variable dies; its LLVM
  pruner removes the pair only when there is a single decref site that post-dominates the entry.
  With several ``return`` statements, or a call to any other function, two atomic
  increments and two decrements stay in every call (~20 ns per piece, a 2-3x slowdown). So
  ``gpt2_piece_end`` has one ``return``, calls nothing but the UTF-8 decoder (scalars only,
  inlined by LLVM) and touches both arrays in its last block.
- The small kernels here are inlined into their callers by LLVM (``forceinline=True``), not at
  the Numba level (``inline="always"``), which typed and lowered each body again at every call
  site: the encode loop's cold compile took several times longer (docs/compile.md).
- ``pos`` is proven non-negative before any read, so LLVM drops the negative-index wraparound code.
- Runs of ASCII letters, the bulk of most text, are skipped 8 bytes at a time (SWAR) and the run
  length is found with a multiply, so a typical word costs no mispredicted loop exit.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from numba.cpython.unsafe.numbers import trailing_zeros

from fastenc.kernels.jit import HELPER
from fastenc.kernels.loads import ascii_masks64, load_word

_SPACE = 3  # whitespace class in the table
_LETTER = 1

_HI = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_CASE = np.uint64(0x2020202020202020)
_GE_A = np.uint64(0x1F1F1F1F1F1F1F1F)  # y + this has bit 7 set iff y >= 'a' (y < 0x80)
_GT_Z = np.uint64(0x0505050505050505)  # y + this has bit 7 set iff y > 'z'
_BYTE_INDEX = np.uint64(0x0001020304050607)  # (1 << 8k) * this >> 56 == k


@njit(forceinline=True, **HELPER)
def _utf8_seq(b, b1, b2, b3):
    """(code point << 3) | length of the sequence that starts with byte b >= 0x80, followed by
    b1, b2, b3 (0 where past the end). An invalid or cut-off lead byte stands alone as U+DC00 + b.
    Scalars only: inlined by LLVM, so it adds no call and no refcount operation."""
    if b >= 0xC2:
        if b < 0xE0:
            if (b1 & 0xC0) == 0x80:
                return ((((b & 0x1F) << 6) | (b1 & 0x3F)) << 3) | 2
        elif b < 0xF0:
            lo = 0xA0 if b == 0xE0 else 0x80  # E0: no overlongs
            hi = 0x9F if b == 0xED else 0xBF  # ED: no surrogates
            if lo <= b1 and b1 <= hi and (b2 & 0xC0) == 0x80:
                return ((((b & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)) << 3) | 3
        elif b < 0xF5:
            lo = 0x90 if b == 0xF0 else 0x80  # F0: no overlongs
            hi = 0x8F if b == 0xF4 else 0xBF  # F4: nothing above U+10FFFF
            if lo <= b1 and b1 <= hi and (b2 & 0xC0) == 0x80 and (b3 & 0xC0) == 0x80:
                return ((((b & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)) << 3) | 4
    return ((0xDC00 + b) << 3) | 1


@njit(cache=True, forceinline=True)
def gpt2_piece_end(data, pos, end, classes):
    """Exclusive byte end of the GPT-2 piece that starts at byte ``pos`` of UTF-8 ``data``.

    ``data``: uint8[::1]; ``0 <= pos < end <= len(data)``; the regex sees the text up to ``end``
    (the lookahead of ``\\s+(?!\\S)`` and ``\\s++$`` look no further); ``classes``:
    ``gpt2_class_table()``. Walk a document from its first byte with
    ``pos = gpt2_piece_end(data, pos, end, classes)`` until ``pos == end``.
    Outside the contract it reads nothing: ``end`` is clipped to ``len(data)`` and a ``pos``
    outside ``[0, end)`` returns ``max(pos, end)``. Invalid UTF-8: see the module docstring.
    """
    # (Indices are cast to uint64: Numba emits no wraparound code for unsigned ones.)
    if end > data.shape[0]:
        end = data.shape[0]
    r = pos if pos > end else end
    if pos >= 0 and pos < end:
        b = data[np.uint64(pos)]
        i = pos + 1
        if b < 0x80:
            c = classes[b]
        else:
            s = _utf8_seq(b, data[np.uint64(i)] if i < end else 0, data[np.uint64(i + 1)] if i + 1 < end else 0,
                          data[np.uint64(i + 2)] if i + 2 < end else 0)
            c = classes[np.uint64(s >> 3)]
            i = pos + (s & 7)
        done = False
        if b == 0x27:  # "'": contractions first
            if i < end:
                b1 = data[np.uint64(i)]
                if b1 == 0x73 or b1 == 0x74 or b1 == 0x64 or b1 == 0x6D:  # s t d m
                    r = i + 1
                    done = True
                elif i + 1 < end:
                    b2 = data[np.uint64(i + 1)]
                    if (b2 == 0x6C and b1 == 0x6C) or (b2 == 0x65 and (b1 == 0x76 or b1 == 0x72)):  # ll ve re
                        r = i + 2
                        done = True
        elif b == 0x20 and i < end:  # " ?X++": the space joins a run that is not whitespace
            b1 = data[np.uint64(i)]
            if b1 < 0x80:
                k = classes[b1]
                n = 1
            else:
                s = _utf8_seq(b1, data[np.uint64(i + 1)] if i + 1 < end else 0, data[np.uint64(i + 2)] if i + 2 < end else 0,
                              data[np.uint64(i + 3)] if i + 3 < end else 0)
                k = classes[np.uint64(s >> 3)]
                n = s & 7
            if k != _SPACE:
                c = k
                i += n
        if done:
            pass
        elif c != _SPACE:
            if c == _LETTER:
                # ASCII letters 8 at a time: flag the bytes in [A-Za-z] (b | 0x20 in 'a'..'z', high
                # bit clear), then count the letters below the first non-letter with a multiply.
                while i + 8 <= end:
                    w = load_word(data, i)
                    y = (w | _CASE) & _LOW7
                    stop = ~((y + _GE_A) & ~(y + _GT_Z) & ~w) & _HI
                    if stop != 0:
                        low = (stop & (~stop + np.uint64(1))) >> np.uint64(7)
                        i += np.int64((low * _BYTE_INDEX) >> np.uint64(56))
                        break
                    i += 8
            while i < end:  # the run of class c (non-ASCII letters continue a letter run)
                b = data[np.uint64(i)]
                if b < 0x80:
                    if classes[b] != c:
                        r = i
                        break
                    i += 1
                else:
                    s = _utf8_seq(b, data[np.uint64(i + 1)] if i + 1 < end else 0, data[np.uint64(i + 2)] if i + 2 < end else 0,
                                  data[np.uint64(i + 3)] if i + 3 < end else 0)
                    if classes[np.uint64(s >> 3)] != c:
                        r = i
                        break
                    i += s & 7
        else:
            last = pos  # start of the last whitespace code point so far
            while i < end:
                b = data[np.uint64(i)]
                if b < 0x80:
                    k = classes[b]
                    n = 1
                else:
                    s = _utf8_seq(b, data[np.uint64(i + 1)] if i + 1 < end else 0, data[np.uint64(i + 2)] if i + 2 < end else 0,
                                  data[np.uint64(i + 3)] if i + 3 < end else 0)
                    k = classes[np.uint64(s >> 3)]
                    n = s & 7
                if k != _SPACE:
                    r = last if last > pos else i  # \s+(?!\S) keeps all but the last; one alone is \s
                    break
                last = i
                i += n
    # Touch both arrays in the single exit block: see the module docstring (refcount pruning).
    if (data.shape[0] | classes.shape[0]) < 0:
        r = 0
    return r


WINDOW = 64  # bytes that gpt2_window_starts reads
_DECIDED = np.uint64(0x1FFFFFFFFFFFFFFE)  # bits 1..60: the starts a window decides
_STARTED = np.uint64(0x1FFFFFFFFFFFFFFF)  # bits 0..60: where a contraction may begin (bit 0: pos)
_ONE = np.uint64(1)
_THREE = np.uint64(3)


@njit(cache=True, forceinline=True)
def window_decided(high):
    """The bits a 64-byte window decides (1..60), given its mask of bytes >= 0x80 (``high``): bit k
    reads the classes of bytes k-1..k+1 (k+2 for some rules), so with a byte >= 0x80 at h the bits
    up to h-2 stay decided. One rule for the GPT-2, cl100k and o200k windows."""
    decided = _DECIDED
    if high != 0:
        h = trailing_zeros(high)
        decided = _DECIDED & ((_ONE << np.uint64(h - 1)) - _ONE) if h >= 3 else np.uint64(0)
    return decided


@njit(cache=True, forceinline=True)
def gpt2_window_starts(data, pos):
    """The GPT-2 pieces that start in ``data[pos + 1:pos + 61]``, as a bitmask (bit k: a piece
    starts at ``pos + k``), decided from the 64 bytes ``data[pos:pos + 64]`` at once: bits up to
    two before the first byte >= 0x80, if any (the rest are 0: walk on with ``gpt2_piece_end``
    where no piece start is decided). ``pos`` must be where a piece
    starts, and ``pos + 64`` at most the document's end (the regex's lookaheads then see the
    same bytes as in the whole text).

    For ASCII the pattern's pieces follow from each byte's class (letter, digit, whitespace,
    other) and its neighbours', so they are computed for 64 bytes with bit operations instead
    of byte by byte:

    - a run of letters, digits or others starts where the class changes, one byte earlier when
      a space (0x20) precedes it (`` ?\\p{L}++``: the space joins the run);
    - a whitespace run starts where whitespace begins, and its last byte starts a piece of its
      own when a non-space follows (``\\s+(?!\\S)`` leaves it: joined to the next run when it is
      a space, alone otherwise);
    - an apostrophe that starts a piece and is followed by ``s t d m`` or ``ll ve re`` is a
      contraction: the piece after it starts 2 or 3 bytes on.

    Bit k needs bytes up to ``pos + k + 1`` (``pos + k + 3`` for a contraction), so bits 1..60
    are final. Same pieces as ``gpt2_piece_end`` (tests/test_pretok_gpt2.py compares them).
    """
    letter, digit, space, sp, apostrophe, high = ascii_masks64(data, pos)
    # Bit k needs the classes of bytes k-1..k+1: with a byte >= 0x80 at h (whose class the masks
    # do not know), bits up to h-2 are still decided.
    decided = window_decided(high)
    starts = np.uint64(0)
    if decided != 0:
        other = ~(letter | digit | space)
        changed = (letter ^ (letter << _ONE)) | (digit ^ (digit << _ONE)) | (other ^ (other << _ONE))
        runs = ~space & (changed | (space << _ONE))  # a letter/digit/other run starts here
        joined = runs & (sp << _ONE)  # ... right after a space, which joins it
        starts = (runs ^ joined) | (joined >> _ONE) | (space & ~(space << _ONE)) | (space & (~space >> _ONE))
        contractions = starts & apostrophe & _STARTED
        while contractions != 0:
            k = trailing_zeros(contractions)
            contractions &= contractions - _ONE
            b1 = data[pos + k + 1]
            b2 = data[pos + k + 2]
            at = np.uint64(k)
            if b1 == 0x73 or b1 == 0x74 or b1 == 0x64 or b1 == 0x6D:  # s t d m
                starts = (starts & ~(_ONE << (at + _ONE))) | (_ONE << (at + np.uint64(2)))
            elif (b2 == 0x6C and b1 == 0x6C) or (b2 == 0x65 and (b1 == 0x76 or b1 == 0x72)):  # ll ve re
                starts = (starts & ~(_THREE << (at + _ONE))) | (_ONE << (at + _THREE))
        starts &= decided
    if (data.shape[0]) < 0:  # the array used in the single exit block (no refcounting)
        starts = np.uint64(0)
    return starts


@njit(cache=True)
def gpt2_split(data, start, end, classes, out_bounds):
    """Split ``data[start:end]`` into GPT-2 pieces; write each piece's exclusive end (an absolute
    byte offset into ``data``) to ``out_bounds`` (int64, length >= end - start) and return the
    number of pieces: piece k is ``data[out_bounds[k-1]:out_bounds[k]]``, piece 0 starts at
    ``start``. Raises ValueError on bad bounds or a short ``out_bounds`` / ``classes``."""
    if start < 0 or end < start or end > data.shape[0]:
        raise ValueError("gpt2_split: need 0 <= start <= end <= len(data)")
    if out_bounds.shape[0] < end - start:
        raise ValueError("gpt2_split: out_bounds must hold end - start entries")
    if classes.shape[0] < 0x110000:
        raise ValueError("gpt2_split: classes must be gpt2_class_table() (0x110000 entries)")
    n = 0
    pos = start
    while pos < end:
        pos = gpt2_piece_end(data, pos, end, classes)
        out_bounds[n] = pos
        n += 1
    return n
