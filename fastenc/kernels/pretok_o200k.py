"""o200k_base pre-tokenizer over UTF-8 bytes, equal to tiktoken's ``o200k_base`` splitting.

The pattern (tiktoken 0.14), alternatives tried in order, each with backtracking::

    1  [^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    2  [^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    3  \\p{N}{1,3}
    4   ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*
    5  \\s*[\\r\\n]+
    6  \\s+(?!\\S)
    7  \\s+

``classes`` is ``fastenc.unicode_classes.o200k_class_table()``: other, upper (Lu Lt: the "U" side
only), lower (Ll: the "W" side only), caseless letter (Lm Lo: both sides), mark (M: both sides,
but not a letter, so also "not CR/LF/letter/number" and "not space/letter/number"), number, space.

What the backtracking amounts to, for a start s (the code point after an optional leading c0 that
is not CR, LF, a letter or a number, or c0 itself), with R the maximal run of U-side code points
from s:

- alternative 1 matches up to the end of the W-side run that follows R when the code point after
  R is a lower-case letter; otherwise up to the end of the *last* W-side code point inside R
  (a caseless letter or a mark: ``[U]*`` gives back code points until ``[W]+`` can match one);
  with neither it fails. It is tried with the leading code point taken first, then without it
  (which matters only when c0 is itself a mark: a mark before an upper-case run is a piece alone);
- alternative 2 (only if 1 failed both ways) matches R itself, when it is not empty;
- either then takes a contraction right after it, case-insensitively (``'S``, and ``'ſ`` with
  U+017F, which Unicode case folding maps to ``s``);
- 3: one to three numbers; 4: an optional ASCII space, a run of code points that are not space,
  letter or number (marks included), then every CR, LF and ``/`` right after it;
- whitespace, from its maximal run: up to and including its last CR or LF if it holds one (even at
  the end of the text: unlike cl100k there is no ``\\s++$``); else the whole run at the end of the
  text; else the run minus its last code point if that leaves one; else the single code point.

Invalid UTF-8 is one "other" code point per bad byte (U+DC00 + byte), as in ``pretok_gpt2``. Only
bytes in ``[pos, end)`` are read. One return, no calls, both arrays touched in the exit block (no
reference counting); runs of ASCII lower-case letters are skipped eight bytes at a time.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from numba.cpython.unsafe.numbers import trailing_zeros

from fastenc.kernels.loads import ascii_masks64, load_word, wide_masks64
from fastenc.kernels.pretok_cl100k import window_contraction, window_digit_starts, window_space_starts
from fastenc.kernels.pretok_gpt2 import _BYTE_INDEX, _GE_A, _GT_Z, _HI, _LOW7, _utf8_seq, window_decided

_OTHER = 0
_UPPER = 1
_LOWER = 2
_CASELESS = 3
_MARK = 4
_NUMBER = 5
_SPACE = 6


# Not inlined into encode_text (unlike gpt2_piece_end): inlining this and the o200k/cl100k twin into
# both encode loops more than doubled a cold first `encode`'s compile.
@njit(cache=True)
def o200k_piece_end(data, pos, end, classes):
    """Exclusive byte end of the o200k piece that starts at byte ``pos`` of UTF-8 ``data``.

    Same contract as ``gpt2_piece_end`` (``0 <= pos < end <= len(data)``; the text ends at
    ``end``); ``classes`` is ``o200k_class_table()``. Outside the contract it reads nothing and
    returns ``max(pos, end)``.
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
        # --- alternatives 1 and 2: attempt 0 starts after c0 (when c0 may lead), attempt 1 at c0 ---
        lead = (c == _OTHER or c == _MARK or c == _SPACE) and b != 0x0D and b != 0x0A
        alt1_a = -1
        alt2_a = -1
        alt1_b = -1
        alt2_b = -1
        for attempt in range(2):
            if attempt == 0:
                if not lead:
                    continue
                j = i
            else:
                if c < _UPPER or c > _MARK:
                    break
                j = pos
            start = j
            last_w = -1  # end of the last W-side code point inside the U-side run
            k = -1  # class of the code point after the U-side run (-1: the end)
            n = 0
            while j < end:
                bj = data[j]
                if bj < 0x80:
                    k = classes[bj]
                    n = 1
                else:
                    s = _utf8_seq(bj, data[j + 1] if j + 1 < end else 0, data[j + 2] if j + 2 < end else 0,
                                  data[j + 3] if j + 3 < end else 0)
                    k = classes[s >> 3]
                    n = s & 7
                if k == _UPPER:
                    j += n
                elif k == _CASELESS or k == _MARK:
                    j += n
                    last_w = j
                else:
                    break
                k = -1
            run_end = j
            alt1 = -1
            if k == _LOWER:  # [W]+ after the whole run: lower-case letters, caseless, marks
                j += n
                while j + 8 <= end:  # ASCII lower-case letters 8 at a time
                    w = load_word(data, j)
                    y = w & _LOW7
                    stop = ~((y + _GE_A) & ~(y + _GT_Z) & ~w) & _HI
                    if stop != 0:
                        low = (stop & (~stop + np.uint64(1))) >> np.uint64(7)
                        j += np.int64((low * _BYTE_INDEX) >> np.uint64(56))
                        break
                    j += 8
                alt1 = end
                while j < end:
                    bj = data[j]
                    if bj < 0x80:
                        k = classes[bj]
                        n = 1
                    else:
                        s = _utf8_seq(bj, data[j + 1] if j + 1 < end else 0, data[j + 2] if j + 2 < end else 0,
                                      data[j + 3] if j + 3 < end else 0)
                        k = classes[s >> 3]
                        n = s & 7
                    if k < _LOWER or k > _MARK:
                        alt1 = j
                        break
                    j += n
            elif last_w >= 0:
                alt1 = last_w
            if attempt == 0:
                alt1_a = alt1
                alt2_a = run_end if run_end > start else -1
            else:
                alt1_b = alt1
                alt2_b = run_end if run_end > start else -1
        e = alt1_a
        if e < 0:
            e = alt1_b
        if e < 0:
            e = alt2_a
        if e < 0:
            e = alt2_b
        if e >= 0:
            r = e
            if e + 1 < end and data[e] == 0x27:  # (?i:'s|'t|'re|'ve|'m|'ll|'d)?
                f1 = data[e + 1] | 0x20
                if f1 == 0x73 or f1 == 0x74 or f1 == 0x6D or f1 == 0x64:  # s t m d
                    r = e + 2
                elif data[e + 1] == 0xC5 and e + 2 < end and data[e + 2] == 0xBF:  # U+017F long s
                    r = e + 3
                elif e + 2 < end and (f1 == 0x72 or f1 == 0x76 or f1 == 0x6C):
                    f2 = data[e + 2] | 0x20
                    if (f1 == 0x6C and f2 == 0x6C) or (f1 != 0x6C and f2 == 0x65):  # ll re ve
                        r = e + 3
        elif c == _NUMBER:  # \p{N}{1,3}
            r = i
            count = 1
            while r < end and count < 3:
                bj = data[r]
                if bj < 0x80:
                    k = classes[bj]
                    n = 1
                else:
                    s = _utf8_seq(bj, data[r + 1] if r + 1 < end else 0, data[r + 2] if r + 2 < end else 0,
                                  data[r + 3] if r + 3 < end else 0)
                    k = classes[s >> 3]
                    n = s & 7
                if k != _NUMBER:
                    break
                r += n
                count += 1
        else:
            # " ?[^\s\p{L}\p{N}]+[\r\n/]*": c0 of class other, or an ASCII space before one
            punct = c == _OTHER
            j = i
            if b == 0x20 and i < end:
                bj = data[i]
                if bj < 0x80:
                    k = classes[bj]
                    n = 1
                else:
                    s = _utf8_seq(bj, data[i + 1] if i + 1 < end else 0, data[i + 2] if i + 2 < end else 0,
                                  data[i + 3] if i + 3 < end else 0)
                    k = classes[s >> 3]
                    n = s & 7
                if k == _OTHER:
                    punct = True
                    j = i + n
            if punct:
                r = end
                while j < end:
                    bj = data[j]
                    if bj < 0x80:
                        k = classes[bj]
                        n = 1
                    else:
                        s = _utf8_seq(bj, data[j + 1] if j + 1 < end else 0, data[j + 2] if j + 2 < end else 0,
                                      data[j + 3] if j + 3 < end else 0)
                        k = classes[s >> 3]
                        n = s & 7
                    if k != _OTHER and k != _MARK:
                        r = j
                        break
                    j += n
                while r < end and (data[r] == 0x0D or data[r] == 0x0A or data[r] == 0x2F):
                    r += 1
            else:  # whitespace: its last CR/LF, the end of the text, all but its last, or one
                last = pos
                crlf = i if (b == 0x0D or b == 0x0A) else -1
                r = end
                while i < end:
                    bj = data[i]
                    if bj < 0x80:
                        k = classes[bj]
                        n = 1
                    else:
                        s = _utf8_seq(bj, data[i + 1] if i + 1 < end else 0, data[i + 2] if i + 2 < end else 0,
                                      data[i + 3] if i + 3 < end else 0)
                        k = classes[s >> 3]
                        n = s & 7
                    if k != _SPACE:
                        r = last if last > pos else i
                        break
                    last = i
                    i += n
                    if bj == 0x0D or bj == 0x0A:
                        crlf = i
                if crlf > 0:
                    r = crlf
    # Touch both arrays in the single exit block (refcount pruning, see pretok_gpt2).
    if (data.shape[0] | classes.shape[0]) < 0:
        r = 0
    return r


_ONE = np.uint64(1)
_TWO = np.uint64(2)
_ZERO = np.uint64(0)


@njit(cache=True)
def o200k_window_starts(data, pos):
    """The o200k pieces that start in ``data[pos + 1:pos + 61]``, as a bitmask (bit k: a piece
    starts at ``pos + k``), decided from the 64 bytes ``data[pos:pos + 64]`` at once: the same
    contract as ``pretok_cl100k.cl100k_window_starts`` (and its digit and whitespace rules, which
    agree for o200k where a run ends inside the window), with o200k's differences, for ASCII
    (L letter, U upper case, W lower case, B whitespace but CR/LF, O other):

    - after punctuation ``[\\r\\n/]*``: the CR/LF/slash bytes from the first CR/LF after an O
      belong to its piece (a carry from each such CR/LF clears its run: the OR with the seeds
      mends a run that a second seed, a CR/LF after an absorbed slash, split); an O right after an
      absorbed slash starts a new punctuation piece;
    - a letter run splits where an upper-case letter follows a lower-case one (for ASCII,
      ``[U]*[W]+`` then ``[U]+[W]*`` are the pieces ``U*W+`` and a final ``U+``); its first piece
      takes the byte before as in cl100k (``[^\\r\\n\\p{L}\\p{N}]?``);
    - a contraction is a suffix: an apostrophe right after a letter run, then ``s t m d re ve ll``
      in any case, belongs to the run's last piece (not when that letter is itself a contraction's:
      ``don't's`` is ``don't`` + ``'s``).

    Same pieces as ``o200k_piece_end`` (tests/test_pretok_cl100k_window.py compares them).
    """
    letter, digit, space, sp, apostrophe, high = ascii_masks64(data, pos)
    crlf, slash, upper = wide_masks64(data, pos)
    decided = window_decided(high)  # (bit k reads bytes k-2..k+1)
    starts = _ZERO
    if decided != 0:
        other = ~(letter | digit | space)  # (bytes >= 0x80 too: every bit they touch is undecided)
        blank = space & ~crlf
        lower = letter & ~upper
        chain = crlf | slash
        seeds = crlf & (other << _ONE)
        absorbed = (((chain + seeds) ^ chain) | seeds) & chain
        live = other & ~absorbed
        other_start = live & ~((live | sp) << _ONE)
        letter_start = (letter & ~((letter | blank | other_start) << _ONE)) | (upper & (lower << _ONE))
        digit_start = window_digit_starts(digit)
        ws_start, decided = window_space_starts(space, crlf, absorbed & crlf, high, decided)
        starts = other_start | letter_start | digit_start | ws_start
        contractions = apostrophe & (letter << _ONE) & decided
        while contractions != 0:
            k = trailing_zeros(contractions)
            contractions &= contractions - _ONE
            at = np.uint64(k)
            n = window_contraction(data[np.uint64(pos) + at + _ONE], data[np.uint64(pos) + at + _TWO])
            if n != 0:  # the apostrophe starts no piece, nor the bytes after it; the byte after them does
                starts = (starts & ~(((_ONE << n) - _ONE) << at)) | (_ONE << (at + n))
                contractions &= ~(_ONE << (at + n))  # ("don't's": that apostrophe follows a contraction)
        starts &= decided
    if (data.shape[0]) < 0:  # the array used in the single exit block (no refcounting)
        starts = _ZERO
    return starts
