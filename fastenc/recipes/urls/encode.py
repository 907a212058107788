"""Encoding a chunk of URLs the way the bins store them: ``[0] ++ encode(canonical(url))``.

One fused kernel (``fastenc.kernels.url_pack.pack_url_run``: canonical() + the URL pre-split +
BPE) per chunk, run as one byte-balanced task per thread (``fastenc.tasks``), then the ids are
gathered into one flat buffer (``gather_slots``, threads again).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class EncodeBuffers:
    """Per-chunk scratch arrays, grown on demand and reused (no page faults per chunk)."""

    def __init__(self):
        self.canon = np.empty(0, np.uint8)
        self.scratch = np.empty(0, np.uint16)
        self.out = np.empty(0, np.uint16)

    def get(self, nbytes: int, m: int):
        if self.canon.size < max(nbytes, 1):
            self.canon = np.empty(max(nbytes + nbytes // 4, 1), np.uint8)
        if self.scratch.size < nbytes + m:
            self.scratch = np.empty(nbytes + m + (nbytes + m) // 4, np.uint16)
        return self.canon, self.scratch

    def out_for(self, n: int):
        if self.out.size < n:
            self.out = np.empty(n + n // 4, np.uint16)
        return self.out[:n]


class EncodedUrls(NamedTuple):
    """URL k: ``tokens[offsets[k]:offsets[k + 1]] == [0] ++ encode(canonical(url))``;
    ``irreversible[k]`` is 1 when canonical() does not give that URL back (see docs/urls.md)."""

    tokens: np.ndarray
    offsets: np.ndarray
    irreversible: np.ndarray


def encode_url_chunk(enc, data: np.ndarray, offsets: np.ndarray, order: np.ndarray, lengths: np.ndarray | None = None,
                     bufs: EncodeBuffers | None = None, out: np.ndarray | None = None) -> EncodedUrls:
    """Encode URLs ``order[0..m-1]`` of ``(data, offsets)`` the way the bins store them.

    ``lengths`` (the URLs' byte lengths, in this order) and ``bufs`` (reused scratch) are
    optional. The tokens go to ``out`` when given (it needs room for the URLs' bytes + m ids:
    an id never covers less than one byte), else to ``bufs``; either way the returned
    ``tokens`` is a view: copy it before the buffer is reused.
    """
    import numba

    from fastenc.kernels.encode import split_by_bytes
    from fastenc.kernels.url_pack import gather_slots, pack_url_run
    from fastenc.tasks import run_tasks

    order = np.ascontiguousarray(order, dtype=np.int64)
    if lengths is None:
        lengths = offsets[order + 1] - offsets[order]
    if bufs is None:
        bufs = EncodeBuffers()
    m = len(order)
    canon_offsets = np.empty(m + 1, np.int64)
    canon_offsets[0] = 0
    np.cumsum(lengths, out=canon_offsets[1:])
    nbytes = int(canon_offsets[-1])
    canon, scratch = bufs.get(nbytes, m)
    counts = np.empty(m, np.int64)
    flags = np.zeros(m, np.uint8)
    tok_offsets = np.zeros(m + 1, np.int64)
    if m == 0:
        return EncodedUrls(bufs.out_for(0) if out is None else out[:0], tok_offsets, flags)
    canon_read = canon.view()
    canon_read.flags.writeable = False  # the encoder's input type everywhere: one compile of it
    # the Encoder's caches: task slots that no other call holds meanwhile (``Encoder._lanes``)
    with enc._lanes(numba.get_num_threads()) as sets:
        n_tasks = len(sets)
        bounds = split_by_bytes(canon_offsets, n_tasks)  # byte-balanced runs of URLs

        def encode_run(t):
            pack_url_run(data, offsets, order, canon_offsets, 0, enc.vocab, enc.kernel_classes, sets[t], canon, canon_read,
                         scratch, counts, flags, int(bounds[t]), int(bounds[t + 1]))

        run_tasks(encode_run, n_tasks)
    np.cumsum(counts, out=tok_offsets[1:])
    total = int(tok_offsets[-1])
    if out is None:
        out = bufs.out_for(total)
    elif out.size < total:
        raise ValueError(f"encode_url_chunk: out has room for {out.size} ids, {total} are needed")
    run_tasks(lambda t: gather_slots(scratch, canon_offsets, counts, out, tok_offsets, int(bounds[t]), int(bounds[t + 1])),
              n_tasks)
    return EncodedUrls(out[:total], tok_offsets, flags)
