"""One task's share of a batch: serial ``nogil`` kernels that ``fastenc.tasks`` runs on threads.

``encode_docs`` is ``encode_batch_counts``' loop body for one run of documents. The batch
entry points call it from Python threads instead of compiling ``encode_batch_counts``
(``parallel=True``), which would compile the whole encoder a second time inside the
parallel loop (see ``fastenc.tasks``). ``encode_batch_counts`` stays for Numba callers.
The URL recipe's ``url_pack.pack_url_run`` calls it too, for its ``[eos] ++ ids`` slots. Its
document loop, ``_encode_span``, is compiled without reference counting (one call per
document of a reference-counted kernel cost more than half of a short URL's encoding).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels.bpe import grown_work
from fastenc.kernels.encode import check_narrow_classes, encode_run, new_scratch
from fastenc.kernels.encode_wide import grown_wide_scratch, new_wide_scratch, wide_loop
from fastenc.kernels.jit import NO_REFCOUNTING

# encode_docs' resume point, in scratch.state beside encode_run's own words (0..5)
_STOP_DOC = 8  # the document it stopped in
_STOP_DOC_AT = 9  # where that document's output begins (its eos slot, for a slotted layout)
_STOP_OUT = 10  # the output position it stopped at (when done: the end of the last document's ids)


@njit(cache=True, nogil=True)
def encode_docs(data, offsets, first, last, vocab, classes, caches, out, at, counts, eos):
    """Encode documents ``first..last-1`` of ``(data, offsets)`` (``encode_narrow`` of each), in one of
    two layouts:

    - ``eos < 0``: back to back into ``out`` from ``at``; ``counts[i]`` = document i's id count;
      returns the end position in ``out``, which needs ``offsets[last] - offsets[first]`` places
      from ``at`` (ids never outnumber bytes);
    - ``eos >= 0`` (the URL bins' ``[eos] ++ ids``, ``url_pack.pack_url_run``): document i's output
      goes to its own slot ``out[offsets[i] + i:]``, ``eos`` then its ids (a slot has room for
      them); ``counts[i]`` = 1 + its id count; ``at`` is not used.

    ``caches``: one task's ``PieceCaches``. Only for a vocabulary that ``encode.takes_wide_loop``
    does not send to the wide loop (GPT-2, URLs); the others: ``encode_docs_wide``. Two kernels,
    so that each run compiles only the loop it uses.

    The documents are walked by ``_encode_span``, compiled without reference counting: a call of
    ``encode_narrow`` per document paid ~25 atomic reference-count updates of the arrays it passes
    on (~40% of the URL encoder's time; bench/RESULTS.md, "A documents loop without reference
    counting"). It stops only
    when a long part needs a bigger merge work array, which is allocated here."""
    check_narrow_classes(vocab, classes)
    if first >= last:
        return at
    scratch = new_scratch()
    state = scratch.state
    work = scratch.work
    doc = first
    pos = offsets[first]
    cut_end = pos
    doc_at = at
    out_pos = at
    if eos >= 0:
        doc_at = offsets[first] + first
        out[doc_at] = eos
        out_pos = doc_at + 1
    while True:
        doc = _encode_span(data, offsets, doc, last, pos, cut_end, doc_at, out_pos, eos, vocab, classes, caches,
                           scratch.ranks, work, scratch.ring, state, out, counts)
        if doc >= last:
            return state[_STOP_OUT]
        work = grown_work(work, state[2])
        pos = state[0]
        cut_end = state[1]
        doc_at = state[_STOP_DOC_AT]
        out_pos = state[_STOP_OUT]


@njit(cache=True, **NO_REFCOUNTING)
def _encode_span(data, offsets, doc, last, pos, cut_end, doc_at, out_pos, eos, vocab, classes, caches, ranks, work, ring,
                 state, out, counts):
    """``encode_docs``' loop, from ``pos`` (with ``cut_end``: ``encode_run``'s resume point)
    in document ``doc``, whose output began at ``doc_at`` and goes on at ``out_pos``. Returns
    ``last`` when done (``state[_STOP_OUT]``: the end position), else the document where a part
    needs more than ``work`` holds: ``state[0..2]`` as ``encode_run`` set them, and the
    ``_STOP_*`` words where to go on. Allocates nothing. ``encode_run`` is inlined here (no call per
    document: encode.py)."""
    while doc < last:
        end = offsets[doc + 1]
        while True:
            out_pos = encode_run(data, pos, end, cut_end, vocab, classes, caches, out, out_pos, ranks, work, ring, state)
            if state[0] < 0:
                break
            pos = state[0]
            cut_end = state[1]
            if state[2] > work.shape[0]:  # (0: a memo entry failed its check; the piece is cut, here)
                state[_STOP_DOC] = doc
                state[_STOP_DOC_AT] = doc_at
                state[_STOP_OUT] = out_pos
                return doc
        counts[doc] = out_pos - doc_at
        doc += 1
        if doc < last:
            pos = offsets[doc]
            cut_end = pos
            doc_at = out_pos
            if eos >= 0:
                doc_at = pos + doc
                out[doc_at] = eos
                out_pos = doc_at + 1
    state[_STOP_OUT] = out_pos
    return doc


@njit(cache=True, nogil=True)
def encode_docs_wide(data, offsets, first, last, vocab, classes, caches, out, at, counts):
    """``encode_docs`` for a vocabulary that ``encode.takes_wide_loop`` sends to the wide loop
    (cl100k_base, o200k_base, their patterns): the same contract, ``encode_text_wide``'s loop per
    document (called directly: the batch entry points already pass read-only data and int64
    offsets, which is all that ``encode_text_wide`` adds), inlined, with one scratch for all of them."""
    scratch = new_wide_scratch()
    doc = first
    while doc < last:
        end = wide_loop(data, offsets[doc], offsets[doc + 1], vocab, classes, caches, out, at, scratch)
        if end < 0:  # a long part needs more merge room: grown, and the document encoded again
            scratch = grown_wide_scratch(scratch, -end)
            continue
        counts[doc] = end - at
        at = end
        doc += 1
    return at
