"""Ids -> bytes, for other people's ``@njit`` code (``Encoder.decode_bytes`` is the Python face).

``decode_into(ids, token_bytes, token_offsets, out, out_pos) -> out_pos`` appends the bytes of
``ids`` to ``out`` (uint8) and returns the new position, or -1 when an id is out of range or
``out`` is too small (nothing past ``out_pos`` is then guaranteed). ``decoded_length`` says how
much room that takes. ``token_bytes`` and ``token_offsets`` are ``Vocab`` fields.
"""
from __future__ import annotations

from numba import njit


@njit(cache=True)
def decoded_length(ids, token_offsets):
    """Bytes that ``ids`` decode to, or -1 if an id is out of range."""
    n_ids = token_offsets.shape[0] - 1
    total = 0
    for i in range(ids.shape[0]):
        tid = ids[i]
        if tid < 0 or tid >= n_ids:
            return -1
        total += token_offsets[tid + 1] - token_offsets[tid]
    return total


@njit(cache=True)
def decode_into(ids, token_bytes, token_offsets, out, out_pos):
    n_ids = token_offsets.shape[0] - 1
    pos = out_pos
    for i in range(ids.shape[0]):
        tid = ids[i]
        if tid < 0 or tid >= n_ids:
            return -1
        a = token_offsets[tid]
        b = token_offsets[tid + 1]
        if pos + (b - a) > out.shape[0]:
            return -1
        for k in range(a, b):
            out[pos] = token_bytes[k]
            pos += 1
    return pos
