"""cl100k_base pre-tokenizer over UTF-8 bytes, equal to tiktoken's ``cl100k_base`` splitting.

The pattern (tiktoken 0.14, ``tiktoken_ext/openai_public.py``), tried alternative by alternative::

    '(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+
    |\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s

It asks the same questions of a code point as GPT-2's pattern (``\\p{L}``, ``\\p{N}``, ``\\s``, of the
same regex engine), so ``classes`` is ``fastenc.unicode_classes.gpt2_class_table()`` (0 other,
1 letter, 2 number, 3 whitespace). The piece that starts at code point c0 is:

1. a contraction: ``'`` then, case-insensitively, ``s d m t`` or ``ll ve re`` (``S``, and ``ſ``
   U+017F which Unicode case folding maps to ``s``; taken even when letters follow);
2. a letter run: c0 a letter, or c0 anything but CR, LF, a letter or a number (a space, a tab,
   punctuation, a mark...) directly followed by a letter, then every letter after it;
3. one to three numbers (a run of seven digits is three pieces: 3 + 3 + 1);
4. punctuation: an optional ASCII space, a run of "other" code points (not whitespace, letter or
   number), then every CR and LF right after it;
5. whitespace, from the maximal run of it: the whole run if it reaches the end of the text;
   else up to and including its last CR or LF, if it holds one; else the run minus its last
   code point if that leaves one (``\\s+(?!\\S)``); else the single code point (``\\s``).

Invalid UTF-8 is handled as in ``pretok_gpt2``: a byte that does not start a well-formed
sequence is one "other" code point of its own (U+DC00 + byte). Only bytes in ``[pos, end)`` are
read. Written like ``gpt2_piece_end`` for speed: one return, no calls (the UTF-8 decoder is
inlined at the Numba level), both arrays touched in the exit block (no reference counting),
ASCII letters skipped eight at a time.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from numba.cpython.unsafe.numbers import trailing_zeros

from fastenc.kernels.loads import ascii_masks64, load_word, wide_masks64
from fastenc.kernels.pretok_gpt2 import _BYTE_INDEX, _CASE, _GE_A, _GT_Z, _HI, _LOW7, _STARTED, _utf8_seq, window_decided

_OTHER = 0
_LETTER = 1
_NUMBER = 2
_SPACE = 3


# Not inlined into encode_text (unlike gpt2_piece_end): inlining this and the o200k/cl100k twin into
# both encode loops more than doubled a cold first `encode`'s compile.
@njit(cache=True)
def cl100k_piece_end(data, pos, end, classes):
    """Exclusive byte end of the cl100k piece that starts at byte ``pos`` of UTF-8 ``data``.

    Same contract as ``gpt2_piece_end``: ``0 <= pos < end <= len(data)``, the regex sees the
    text up to ``end`` (``\\s++$`` and ``\\s+(?!\\S)`` look no further); ``classes`` is
    ``gpt2_class_table()``. Outside the contract it reads nothing and returns ``max(pos, end)``.
    """
    if end > data.shape[0]:
        end = data.shape[0]
    r = pos if pos > end else end
    if pos >= 0 and pos < end:
        b = data[pos]
        i = pos + 1
        if b < 0x80:
            c = classes[b]
        else:
            s = _utf8_seq(b, data[i] if i < end else 0, data[i + 1] if i + 1 < end else 0,
                          data[i + 2] if i + 2 < end else 0)
            c = classes[s >> 3]
            i = pos + (s & 7)
        # The code point after c0 (class k1, starting at i, n1 bytes; k1 = -1 at the end).
        k1 = -1
        b1 = 0
        cp1 = 0
        n1 = 0
        if i < end:
            b1 = data[i]
            if b1 < 0x80:
                k1 = classes[b1]
                cp1 = b1
                n1 = 1
            else:
                s = _utf8_seq(b1, data[i + 1] if i + 1 < end else 0, data[i + 2] if i + 2 < end else 0,
                              data[i + 3] if i + 3 < end else 0)
                cp1 = s >> 3
                k1 = classes[cp1]
                n1 = s & 7
        run = -1  # the class of a run to extend from i, if any
        contraction = False
        if b == 0x27 and k1 >= 0:  # "'": contractions first, case-insensitive
            f1 = cp1 | 0x20 if cp1 < 0x80 else cp1
            if f1 == 0x73 or f1 == 0x64 or f1 == 0x6D or f1 == 0x74 or cp1 == 0x17F:  # s d m t, long s
                r = i + n1
                contraction = True
            elif i + 1 < end and (f1 == 0x6C or f1 == 0x76 or f1 == 0x72):
                f2 = data[i + 1] | 0x20
                if (f1 == 0x6C and f2 == 0x6C) or (f1 != 0x6C and f2 == 0x65):  # ll ve re
                    r = i + 2
                    contraction = True
        if contraction:
            pass
        elif c == _LETTER:
            run = _LETTER
        elif k1 == _LETTER and c != _NUMBER and b != 0x0D and b != 0x0A:
            run = _LETTER  # one code point that is not CR, LF, letter or number, then letters
            i += n1
        elif c == _NUMBER:
            r = i
            if k1 == _NUMBER:  # up to three numbers
                i += n1
                r = i
                if i < end:
                    b2 = data[i]
                    if b2 < 0x80:
                        if classes[b2] == _NUMBER:
                            r = i + 1
                    else:
                        s = _utf8_seq(b2, data[i + 1] if i + 1 < end else 0, data[i + 2] if i + 2 < end else 0,
                                      data[i + 3] if i + 3 < end else 0)
                        if classes[s >> 3] == _NUMBER:
                            r = i + (s & 7)
        elif c == _OTHER or (b == 0x20 and k1 == _OTHER):
            run = _OTHER
            if c != _OTHER:
                i += n1
        else:  # whitespace: the maximal run, its last CR/LF, its last code point
            last = pos  # start of the last whitespace code point so far
            crlf = -1  # end of the last CR or LF so far
            if b == 0x0D or b == 0x0A:
                crlf = i
            r = end  # \s++$: the run reaches the end
            while i < end:
                b = data[i]
                if b < 0x80:
                    k = classes[b]
                    n = 1
                else:
                    s = _utf8_seq(b, data[i + 1] if i + 1 < end else 0, data[i + 2] if i + 2 < end else 0,
                                  data[i + 3] if i + 3 < end else 0)
                    k = classes[s >> 3]
                    n = s & 7
                if k != _SPACE:
                    if crlf > 0:
                        r = crlf  # \s*[\r\n]
                    elif last > pos:
                        r = last  # \s+(?!\S): all but the last
                    else:
                        r = i  # \s
                    break
                last = i
                i += n
                if b == 0x0D or b == 0x0A:
                    crlf = i
        if run == _LETTER:
            # ASCII letters 8 at a time (see pretok_gpt2), then the rest one code point at a time.
            while i + 8 <= end:
                w = load_word(data, i)
                y = (w | _CASE) & _LOW7
                stop = ~((y + _GE_A) & ~(y + _GT_Z) & ~w) & _HI
                if stop != 0:
                    low = (stop & (~stop + np.uint64(1))) >> np.uint64(7)
                    i += np.int64((low * _BYTE_INDEX) >> np.uint64(56))
                    break
                i += 8
        if run >= 0:
            r = end
            while i < end:
                b = data[i]
                if b < 0x80:
                    if classes[b] != run:
                        r = i
                        break
                    i += 1
                else:
                    s = _utf8_seq(b, data[i + 1] if i + 1 < end else 0, data[i + 2] if i + 2 < end else 0,
                                  data[i + 3] if i + 3 < end else 0)
                    if classes[s >> 3] != run:
                        r = i
                        break
                    i += s & 7
            if run == _OTHER:  # [\r\n]*+ after punctuation
                while r < end and (data[r] == 0x0D or data[r] == 0x0A):
                    r += 1
    # Touch both arrays in the single exit block (refcount pruning, see pretok_gpt2).
    if (data.shape[0] | classes.shape[0]) < 0:
        r = 0
    return r


_ONE = np.uint64(1)
_TWO = np.uint64(2)
_THREE = np.uint64(3)
_ZERO = np.uint64(0)


@njit(cache=True, forceinline=True)
def window_digit_starts(digit):
    """The piece starts among a window's digits (``\\p{N}{1,3}``, cl100k and o200k alike): each
    run's first digit, then every third one from it. Scalars only (inlined, no refcounting)."""
    starts = digit & ~(digit << _ONE)
    four = digit & (digit << _ONE) & (digit << _TWO) & (digit << _THREE)  # bytes k-3..k digits
    cut = (starts << _THREE) & four
    while cut != 0:  # (once per three digits of the longest run: rarely more than once)
        starts |= cut
        cut = (cut << _THREE) & four
    return starts


@njit(cache=True, forceinline=True)
def window_contraction(b1, b2):
    """Length in bytes (2 or 3) of the contraction that an apostrophe followed by bytes ``b1 b2``
    begins, case-insensitively (``s d m t``, ``ll ve re``: the set of cl100k and o200k), else 0.
    ASCII only (``| 0x20`` folds just A-Z onto a-z among the letters compared; the windows leave
    a contraction with a byte >= 0x80, such as ``'ſ``, undecided). Scalars only (inlined)."""
    f1 = b1 | 0x20
    f2 = b2 | 0x20
    n = np.uint64(0)
    if f1 == 0x73 or f1 == 0x74 or f1 == 0x64 or f1 == 0x6D:  # s t d m
        n = _TWO
    elif (f2 == 0x6C and f1 == 0x6C) or (f2 == 0x65 and (f1 == 0x76 or f1 == 0x72)):  # ll ve re
        n = _THREE
    return n


@njit(cache=True, forceinline=True)
def window_space_starts(space, crlf, absorbed, high, decided):
    """The piece starts among a window's whitespace bytes (cl100k's and o200k's rules agree for
    a run that ends inside the window), and ``decided`` cut where one is not known.

    ``absorbed``: the CR/LF bytes that belong to the punctuation piece before them. A run starts
    a piece at its first byte not absorbed; its last byte starts one when it is not a CR/LF
    (``\\s+(?!\\S)`` or ``\\s`` leave it to the next piece); and so does the byte after its
    last CR/LF (``\\s*[\\r\\n]`` ends there), the one rule that needs the run's end: checked per
    candidate (a non-CR/LF whitespace byte right after a CR/LF, rare) with one bit scan for the
    first byte on that is a CR/LF or not whitespace; if that byte is >= 0x80 or past the window,
    the start is not known and nothing from it on is decided. Scalars only (inlined)."""
    blank = space & ~crlf
    ws = space & ~absorbed
    starts = (ws & ~(ws << _ONE)) | (blank & (~space >> _ONE))
    candidates = blank & (crlf << _ONE) & ~starts & decided
    stops = crlf | ~space
    while candidates != 0:
        k = trailing_zeros(candidates)
        candidates &= candidates - _ONE
        ahead = stops >> np.uint64(k)
        stop = np.uint64(63)
        if ahead != 0:
            stop = np.uint64(trailing_zeros(ahead) + k)
        if ahead == 0 or ((high >> stop) & _ONE) != 0:
            # (Belt and braces: no start above k in the run is set either, so the caller would stop
            # before k anyway; cutting says so.)
            decided &= (_ONE << np.uint64(k)) - _ONE
            candidates = _ZERO
        elif ((crlf >> stop) & _ONE) == 0:
            starts |= _ONE << np.uint64(k)
    return starts, decided


@njit(cache=True)
def cl100k_window_starts(data, pos):
    """The cl100k pieces that start in ``data[pos + 1:pos + 61]``, as a bitmask (bit k: a piece
    starts at ``pos + k``), decided from the 64 bytes ``data[pos:pos + 64]`` at once, like
    ``pretok_gpt2.gpt2_window_starts`` (same contract: ``pos`` a piece start, ``pos + 64`` at most
    the document's end; every bit up to the highest set one is final, the rest are 0, for the
    caller to walk on with ``cl100k_piece_end``). Undecided, so 0 from there on: bits from two
    before the first byte >= 0x80, and from a whitespace run's piece start whose end lies past the
    window (or at a byte >= 0x80).

    For ASCII each rule of the pattern (module docstring) is a bit expression over the byte
    classes (L letter, D digit, W whitespace, N CR/LF, B = W - N, O other; ``x << 1``: the byte
    before is x, ``x >> 1``: the byte after is x):

    - O starts a piece unless it follows O (the run is possessive) or a space (`` ?`` joins it);
      such an O is an "O start";
    - L starts a piece unless it follows L or a byte that joins the letters
      (``[^\\r\\n\\p{L}\\p{N}]?``): a B (the last byte of a whitespace run is always a piece
      start) or an O start (an O inside a run, or after a space, belongs to the punctuation piece);
    - D: runs cut every three bytes from their start (``\\p{N}{1,3}``), nothing joins them;
    - W: the CR/LF right after an O belong to its piece (``[\\r\\n]*``); a whitespace run starts
      a piece at its first byte not so absorbed; its last byte starts one when it is a B
      (``\\s+(?!\\S)`` leaves it to the next piece, ``\\s`` takes it alone); and after the last
      CR/LF of the run (``\\s*[\\r\\n]``) a B starts one. The last is the only rule that needs
      the run's end, which may lie far ahead: it is checked per candidate (a B right after an N,
      rare) with one bit scan;
    - contractions (``'`` then ``s d m t ll ve re``, any case) at an apostrophe that starts a piece
      move the next start 2 or 3 bytes on, as in GPT-2's window.

    Same pieces as ``cl100k_piece_end`` (tests/test_pretok_cl100k_window.py compares them).
    """
    letter, digit, space, sp, apostrophe, high = ascii_masks64(data, pos)
    crlf, _, _ = wide_masks64(data, pos)
    decided = window_decided(high)  # (bit k reads bytes k-2..k+1)
    starts = _ZERO
    if decided != 0:
        other = ~(letter | digit | space)  # (bytes >= 0x80 too: every bit they touch is undecided)
        blank = space & ~crlf
        other_start = other & ~((other | sp) << _ONE)
        letter_start = letter & ~((letter | blank | other_start) << _ONE)
        digit_start = window_digit_starts(digit)
        # CR/LF runs right after an O: a carry from each run's first byte clears the run.
        absorbed = ((crlf + (crlf & (other << _ONE))) ^ crlf) & crlf
        ws_start, decided = window_space_starts(space, crlf, absorbed, high, decided)
        starts = other_start | letter_start | digit_start | ws_start
        contractions = starts & apostrophe & _STARTED
        while contractions != 0:
            k = trailing_zeros(contractions)
            contractions &= contractions - _ONE
            at = np.uint64(k)
            n = window_contraction(data[np.uint64(pos) + at + _ONE], data[np.uint64(pos) + at + _TWO])
            if n != 0:  # no start inside it, one right after it
                starts = (starts & ~(((_ONE << n) - _ONE) << at << _ONE)) | (_ONE << (at + n))
        starts &= decided
    if (data.shape[0]) < 0:  # the array used in the single exit block (no refcounting)
        starts = _ZERO
    return starts
