"""One task's share of a batch: serial ``nogil`` kernels that ``fastenc.tasks`` runs on threads.

``encode_docs`` is ``encode_batch_counts``' loop body for one run of documents. The batch
entry points call it from Python threads instead of compiling ``encode_batch_counts``
(``parallel=True``), which would compile the whole encoder a second time inside the
parallel loop (see ``fastenc.tasks``). ``encode_batch_counts`` stays for Numba callers.
"""
from __future__ import annotations

from numba import njit

from fastenc.kernels.encode import encode_narrow, new_scratch
from fastenc.kernels.encode_wide import wide_loop


@njit(cache=True, nogil=True)
def encode_docs(data, offsets, first, last, vocab, classes, caches, out, at, counts):
    """Encode documents ``first..last-1`` of ``(data, offsets)`` back to back into ``out`` from
    ``at``; document i's id count goes to ``counts[i]``. Returns the end position in ``out``.
    ``caches``: one task's ``PieceCaches``; ``out`` needs ``offsets[last] - offsets[first]``
    places from ``at`` (ids never outnumber bytes). Only for a vocabulary that
    ``encode.takes_wide_loop`` does not send to the wide loop (GPT-2, URLs); the others:
    ``encode_docs_wide``. Two kernels, so that each run compiles only the loop it uses."""
    scratch = new_scratch()
    for doc in range(first, last):
        end = encode_narrow(data, offsets[doc], offsets[doc + 1], vocab, classes, caches, scratch, out, at)
        counts[doc] = end - at
        at = end
    return at


@njit(cache=True, nogil=True)
def encode_docs_wide(data, offsets, first, last, vocab, classes, caches, out, at, counts):
    """``encode_docs`` for a vocabulary that ``encode.takes_wide_loop`` sends to the wide loop
    (cl100k_base, o200k_base, their patterns): the same contract, ``encode_text_wide``'s loop per
    document (called directly: the batch entry points already pass read-only data and int64
    offsets, which is all that ``encode_text_wide`` adds)."""
    for doc in range(first, last):
        end = wide_loop(data, offsets[doc], offsets[doc + 1], vocab, classes, caches, out, at)
        counts[doc] = end - at
        at = end
    return at
