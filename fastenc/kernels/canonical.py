"""The URL card's ``canonical()`` (host labels reversed, TLD first) as Numba kernels on bytes.

Byte-for-byte the card's function applied to the UTF-8 encoding (``fastenc.reference.
canonical_ref`` is the oracle). Every character it looks at is ASCII (``/?#@:.[`` and the
digits), and UTF-8 never uses ASCII bytes inside a multi-byte character, so the card's
``str`` operations map one-to-one onto byte scans; bytes that are not valid UTF-8 pass
through as label content, as non-ASCII characters do.

The rules, in order (see the card for why):

1. Only URLs that start with exactly ``https://`` or ``http://`` (case-sensitive) change.
2. The authority runs from the scheme to the first ``/``, ``?`` or ``#`` (or the end).
3. Userinfo is everything up to the LAST ``@`` in the authority (``str.rpartition``).
4. A port is what follows the LAST ``:`` of the rest, if it is one or more ASCII digits;
   otherwise there is no port and any ``:`` stays in the host.
5. A host that starts with ``[`` (IPv6 literal) or is a dotted quad (exactly four labels of
   1-3 ASCII digits, each < 256) is left as is; any other host has its ``.``-separated labels
   written in reverse order (empty labels and trailing dots included).

The output has the input's length (labels are only permuted), so a batch keeps its offsets,
and the function is an involution: canonical(canonical(u)) == u.

Kernels (``@njit(cache=True)``; ``data``/``out`` are ``uint8[:]``, positions ``int64``):

- ``canonical_into(data, start, end, out, out_pos) -> int``: writes canonical(data[start:end])
  to ``out[out_pos:out_pos + (end - start)]`` and returns the new ``out_pos``. ``out`` must not
  overlap ``data[start:end]`` (not in place: labels are read while others are written).
- ``canonical_batch(data, offsets) -> out_data``: every item of an Arrow string layout;
  ``out_data`` shares ``offsets``.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from fastenc.kernels.jit import HELPER

_SLASH, _QUESTION, _HASH, _AT, _COLON, _DOT, _LBRACKET = 47, 63, 35, 64, 58, 46, 91


@njit(**HELPER)
def _scheme_len(data, start, end):
    """8 for ``https://``, 7 for ``http://`` at data[start:], else 0 (case-sensitive)."""
    if end - start < 7:
        return 0
    if data[start] != 104 or data[start + 1] != 116 or data[start + 2] != 116 or data[start + 3] != 112:
        return 0
    q = start + 4
    if data[q] == 115:  # 's'
        q += 1
        if end - q < 3:
            return 0
    if data[q] == _COLON and data[q + 1] == _SLASH and data[q + 2] == _SLASH:
        return q + 3 - start
    return 0


@njit(cache=True)
def _is_dotted_quad(data, h0, h1):
    """Exactly four '.'-separated labels of 1-3 ASCII digits, each < 256."""
    labels = 0
    digits = 0
    value = 0
    for i in range(h0, h1 + 1):
        if i == h1 or data[i] == _DOT:
            if digits == 0 or value > 255:
                return False
            labels += 1
            if labels > 4:
                return False
            digits = 0
            value = 0
        else:
            c = data[i]
            if c < 48 or c > 57:
                return False
            digits += 1
            if digits > 3:
                return False
            value = value * 10 + (c - 48)
    return labels == 4


@njit(**HELPER)
def _host_bounds(data, a0, a1):
    """(h0, h1): the host inside the authority data[a0:a1], per rules 3 and 4."""
    h0 = a0
    for i in range(a1 - 1, a0 - 1, -1):  # last '@'
        if data[i] == _AT:
            h0 = i + 1
            break
    h1 = a1
    for i in range(a1 - 1, h0 - 1, -1):  # last ':'; a port only if all ASCII digits, >= 1
        c = data[i]
        if c == _COLON:
            if i + 1 < a1:
                h1 = i
            break
        if c < 48 or c > 57:
            break
    return h0, h1


@njit(**HELPER)
def _copy(src, a, b, dst, o):
    """dst[o:o+(b-a)] = src[a:b]; returns o + (b - a). Unsigned indices: Numba then emits no
    negative-index wrap-around per byte (~20% of canonical_into's time on real URLs)."""
    u1 = np.uint64(1)
    k = np.uint64(0)
    n = np.uint64(b - a)
    ua = np.uint64(a)
    uo = np.uint64(o)
    while k < n:
        dst[uo + k] = src[ua + k]
        k += u1
    return o + (b - a)


@njit(cache=True)
def canonical_into(data, start, end, out, out_pos):
    """Write canonical(data[start:end]) to out[out_pos:]; return out_pos + (end - start)."""
    s = _scheme_len(data, start, end)
    a0 = start + s
    a1 = end
    h0 = h1 = a0
    if s:
        for i in range(a0, end):
            c = data[i]
            if c == _SLASH or c == _QUESTION or c == _HASH:
                a1 = i
                break
        h0, h1 = _host_bounds(data, a0, a1)
        if (h1 > h0 and data[h0] == _LBRACKET) or _is_dotted_quad(data, h0, h1):
            s = 0  # left as is
    if not s:
        return _copy(data, start, end, out, out_pos)
    o = _copy(data, start, h0, out, out_pos)  # scheme + userinfo, verbatim
    # host labels, last first: label [i, j) is copied, then the '.' that preceded it
    j = h1
    while True:
        i = j
        while i > h0 and data[i - 1] != _DOT:
            i -= 1
        o = _copy(data, i, j, out, o)
        if i == h0:
            break
        out[o] = _DOT
        o += 1
        j = i - 1
    return _copy(data, h1, end, out, o)  # port + path + query + fragment, verbatim


@njit(cache=True, parallel=True)
def canonical_batch(data, offsets):
    """canonical() of every item data[offsets[i]:offsets[i+1]]; the result shares offsets."""
    out = np.empty_like(data)
    n = max(offsets.shape[0] - 1, 0)
    # bytes outside [offsets[0], offsets[n]] (a sliced Arrow buffer) are copied unchanged
    if n > 0:
        out[: offsets[0]] = data[: offsets[0]]
        out[offsets[n] :] = data[offsets[n] :]
    else:
        out[:] = data
    for i in prange(n):
        canonical_into(data, offsets[i], offsets[i + 1], out, offsets[i])
    return out


@njit(cache=True, nogil=True)
def canonical_run(data, offsets, out, i0, i1):
    """canonical() of items ``i0 <= i < i1`` into ``out`` at their own offsets: one task's share
    of ``canonical_batch`` (``fastenc.recipes.urls.threads.canonical_batch`` runs the tasks on
    threads and copies the bytes outside the items)."""
    for i in range(i0, i1):
        canonical_into(data, offsets[i], offsets[i + 1], out, offsets[i])
