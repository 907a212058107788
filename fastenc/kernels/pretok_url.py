"""URL structural pre-split: the pieces BPE runs on, as Numba kernels over UTF-8 bytes.

The URL card splits every URL with HF tokenizers'
``pre_tokenizers.Split(Regex(URL_PATTERN), behavior="isolated")`` where

    URL_PATTERN = https?://|%[0-9A-Fa-f]{2}|[!#$%&'()*+,\\-./:;=?@\\[\\\\\\]\\^_`{|}~]

so each regex match is a piece of its own and each run of text between two matches is one
piece. Spelled out for bytes (the alternation is leftmost-first and case-sensitive):

- at a position where ``http://`` or ``https://`` starts, that is one piece (7 or 8 bytes),
  wherever it occurs, also mid-path (``/redirect?to=http://x``);
- ``%`` followed by two ASCII hex digits is one 3-byte piece; a ``%`` not so followed is a
  1-byte piece (it is in the delimiter set);
- every byte of the delimiter set is a 1-byte piece: all ASCII punctuation except ``"<>``;
- everything else (letters, digits, ``"<>``, space, tab, control bytes, every byte >= 0x80,
  so whole non-ASCII characters) runs together into one piece up to the next position where
  a match starts. An ``h`` that does not begin ``http(s)://`` is ordinary content.

No match is empty and the regex needs no look-behind, so a piece's end depends only on the
bytes from its start onward: ``url_piece_end`` can be called piece after piece.

Kernels (``@njit(cache=True)``; ``data`` is ``uint8[:]``, positions are absolute ``int64``):

- ``url_piece_end(data, pos, end) -> int``: exclusive end of the piece starting at ``pos``
  (``pos < end``). Small on purpose, so LLVM inlines it into a caller's loop.
- ``url_split(data, start, end, out_ends) -> int``: writes the end of every piece of
  ``data[start:end]`` into ``out_ends[0:n]`` and returns ``n`` (``out_ends`` needs
  ``end - start`` slots at most).
- ``url_split_batch(data, offsets) -> (piece_ends, piece_offsets)``: all items of an Arrow
  string layout; item ``i``'s pieces end at ``piece_ends[piece_offsets[i]:piece_offsets[i+1]]``
  (and its first piece starts at ``offsets[i]``). Count, prefix-sum, fill: the output does not
  depend on the thread count.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from fastenc.kernels.jit import HELPER

URL_PATTERN = r"""https?://|%[0-9A-Fa-f]{2}|[!#$%&'()*+,\-./:;=?@\[\\\]\^_`{|}~]"""

# The delimiter set as a 128-bit mask over ASCII codes (bit b set <=> chr(b) is a delimiter):
# ! # $ % & ' ( ) * + , - . / : ; = ? @ [ \ ] ^ _ ` { | } ~  (all ASCII punctuation but " < >).
# Scalar constants, frozen into the compiled code; tests/test_pretok_url.py rebuilds the mask
# from URL_PATTERN's character class and checks these two words.
_DELIM_LO = np.uint64(0xAC00FFFA00000000)  # codes 0..63
_DELIM_HI = np.uint64(0x78000001F8000001)  # codes 64..127


@njit(cache=True, forceinline=True)
def is_url_delim(b):
    """True when byte value ``b`` is in the card's delimiter set (``%`` included)."""
    if b < 64:
        return (_DELIM_LO >> np.uint64(b)) & np.uint64(1) != 0
    if b < 128:
        return (_DELIM_HI >> np.uint64(b - 64)) & np.uint64(1) != 0
    return False


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _is_hex(b):
    return (48 <= b <= 57) or (65 <= b <= 70) or (97 <= b <= 102)


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _http_len(data, pos, end):
    """7 for ``http://``, 8 for ``https://`` at pos, else 0 (data[pos] is already known to be 'h')."""
    if pos + 7 > end or data[pos + 1] != 116 or data[pos + 2] != 116 or data[pos + 3] != 112:  # "ttp"
        return 0
    q = pos + 4
    if data[q] == 115:  # 's'
        q += 1
        if q + 3 > end:
            return 0
    if data[q] == 58 and data[q + 1] == 47 and data[q + 2] == 47:  # "://"
        return q + 3 - pos
    return 0


@njit(cache=True, forceinline=True)
def url_piece_end(data, pos, end):
    """Exclusive end of the pre-split piece that starts at ``pos`` (requires pos < end)."""
    b = data[pos]
    if b == 104:  # 'h'
        n = _http_len(data, pos, end)
        if n:
            return pos + n
    elif b == 37:  # '%': an escape if two hex digits follow, else a delimiter on its own
        if pos + 3 <= end and _is_hex(data[pos + 1]) and _is_hex(data[pos + 2]):
            return pos + 3
        return pos + 1
    elif is_url_delim(b):
        return pos + 1
    # content: runs until the next position where a match starts
    q = pos + 1
    while q < end:
        c = data[q]
        if is_url_delim(c):
            return q
        if c == 104 and _http_len(data, q, end):
            return q
        q += 1
    return end


@njit(**HELPER)
def _match_len(data, pos, end, b):
    """Length of the match at pos when data[pos] == b is 'h' or '%' (0: 'h' that is content)."""
    if b == 104:
        return _http_len(data, pos, end)
    if pos + 3 <= end and _is_hex(data[pos + 1]) and _is_hex(data[pos + 2]):
        return 3
    return 1


@njit(**HELPER)
def _delim_bit(b):
    """1 if byte b is a delimiter else 0, without branches (uint64 arithmetic)."""
    mask = _DELIM_LO if b < 64 else _DELIM_HI
    return ((mask >> np.uint64(b & 63)) & np.uint64(1)) & np.uint64(b < 128)


# url_split and _count_pieces do not call url_piece_end piece by piece: a data-dependent branch
# at every piece boundary (a piece is ~3.6 bytes on real URLs) costs more than the scan itself.
# They walk the bytes once with the rule "a piece ends at i when byte i or byte i-1 is a
# one-byte delimiter", which needs no branch, and take a branch only at 'h' and '%', where the
# multi-byte matches (http://, https://, %XX) can start. Positions are uint64 so that Numba
# emits no negative-index wrap-around on each access. The tests check both against HF tokenizers
# and against url_piece_end.


@njit(cache=True)
def url_split(data, start, end, out_ends):
    """Write the piece ends of data[start:end] to out_ends[0:n]; return n.

    ``out_ends`` needs ``end - start`` slots at most; nothing past ``out_ends[n - 1]`` is written.
    """
    u1 = np.uint64(1)
    s = np.uint64(start)
    e = np.uint64(end)
    n = np.uint64(0)
    prev = np.uint64(0)  # 1 when the previous piece ends at i whatever byte i is
    i = s
    while i < e:
        b = data[i]
        if b == 104 or b == 37:  # 'h' or '%'
            k = _match_len(data, np.int64(i), end, b)
            if k:
                if i > s:
                    out_ends[n] = i
                    n += u1
                i += np.uint64(k)
                prev = u1
                continue
        d = _delim_bit(b)
        out_ends[n] = i  # kept only if n advances; otherwise overwritten later
        n += (d | prev) & np.uint64(i != s)
        prev = d
        i += u1
    if e > s:
        out_ends[n] = e
        n += u1
    return np.int64(n)


@njit(**HELPER)
def _count_pieces(data, start, end):
    """url_split's count without the stores (the first pass of url_split_batch)."""
    u1 = np.uint64(1)
    s = np.uint64(start)
    e = np.uint64(end)
    n = np.uint64(0)
    prev = np.uint64(0)
    i = s
    while i < e:
        b = data[i]
        if b == 104 or b == 37:
            k = _match_len(data, np.int64(i), end, b)
            if k:
                n += np.uint64(i > s)
                i += np.uint64(k)
                prev = u1
                continue
        d = _delim_bit(b)
        n += (d | prev) & np.uint64(i != s)
        prev = d
        i += u1
    return np.int64(n + np.uint64(e > s))


@njit(cache=True, parallel=True)
def url_split_batch(data, offsets):
    """Pieces of every item data[offsets[i]:offsets[i+1]] -> (piece_ends, piece_offsets)."""
    n = max(offsets.shape[0] - 1, 0)
    counts = np.empty(n, dtype=np.int64)
    for i in prange(n):
        counts[i] = _count_pieces(data, offsets[i], offsets[i + 1])
    piece_offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        piece_offsets[i + 1] = piece_offsets[i] + counts[i]
    piece_ends = np.empty(piece_offsets[n], dtype=np.int64)
    for i in prange(n):
        url_split(data, offsets[i], offsets[i + 1], piece_ends[piece_offsets[i]:piece_offsets[i + 1]])
    return piece_ends, piece_offsets
