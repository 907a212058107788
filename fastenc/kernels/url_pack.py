"""URL bins: shard membership, hash order, fused canonicalize + encode, and decoding back.

The URL card's bin is, per shard, every URL as ``[eos] ++ encode(canonical(url))``, URLs in
``xxh3_64(url)`` ascending order (``url`` = the ORIGINAL bytes). These kernels are the steps of
that recipe that are not plain numpy (``fastenc.recipes.urls`` drives them):

- ``shard_of(h, num_shards) -> uint64``: ``floor(h * num_shards / 2**64)``, the card's shard of
  a hash, exact for every ``num_shards < 2**64`` (the 128-bit product from 32-bit halves).
- ``count_outside_shard(hashes, num_shards, shard, first, max_first) -> int``: how many hashes
  are NOT in ``shard``; the indices of the first ``max_first`` of them go to ``first``.
- ``hash_order(keys, n_tasks) -> (order, sorted_keys)``: the permutation that sorts ``keys`` (uint64)
  ascending, equal keys in index order (a stable argsort), and the sorted keys.
- ``pack_url_run(data, offsets, order, canon_offsets, eos, vocab, classes, caches, canon,
  canon_read, scratch, counts, irreversible, k0, k1)``: canonicalize and encode URLs ``order[k0:k1]`` into
  per-URL slots, ``[eos] ++ ids`` each, flagging the URLs that canonical() cannot give back;
  ``gather_slots`` packs the slots. One task's share: the recipe runs the tasks on threads
  (``fastenc.tasks``; the result does not depend on the split). The vocabulary must have at most
  65,536 ids (``encode.encode_narrow``; the recipe's tokenizer check refuses larger ones).
- ``gather_spans(tokens, tok_offsets, order, out, out_offsets, n_tasks)``: token spans (one per
  URL, encoded in source order) copied out in hash order: the recipe encodes URLs in the source's
  order, where neighbours share hosts and the piece caches hit, and then permutes the tokens.
- ``decoded_length(tokens, token_offsets, eos) -> (urls, bytes)`` and
  ``decode_urls(tokens, token_bytes, token_offsets, eos, out, out_offsets) -> urls``: a stretch
  of a bin back to flat URL text (canonical form), cut at every ``eos``.
- ``find_eos_before(tokens, hi, eos)``: the last ``eos`` position below ``hi`` (-1 if none),
  to cut a bin into stretches of whole URLs.
- ``first_difference(data, offsets, order, other, other_offsets) -> k``: compares URLs in an
  order with a flat list (``fastenc verify --source``).

Kernels that take long (``pack_url_run``, ``gather_slots``, ``gather_spans``) release the GIL (``nogil``), so the
recipe's reader and writer threads keep working while they run. The gathers prefetch the URLs a
few iterations ahead (``loads.prefetch``, an ``llvm.prefetch`` intrinsic): their reads are random.

Why a sort of our own: ``np.argsort`` of 36.6 M uint64 hashes takes ~9 s here (and its stable
kind ~12 s); xxh3 hashes are uniform, so a two-level bucket sort (one parallel scatter on the
top bits of the key's range, then an in-cache counting sort per bucket) does it in ~1.7 s, and
it is stable by construction. Buckets that are not small after both levels (many equal keys:
duplicate URLs) fall back to a merge sort, so no input makes it quadratic.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from fastenc.kernels.canonical import canonical_into
from fastenc.kernels.runs import encode_docs
from fastenc.kernels.jit import HELPER
from fastenc.kernels.loads import prefetch
from fastenc.kernels.xxh3 import mul128

_U64 = np.uint64
_MASK32 = np.uint64(0xFFFFFFFF)
_BUCKET_BITS = 12  # level-1 buckets: 4096 (tuned on 36.6 M keys: 12 bits 1.7 s, 14: 2.5 s, 16: 2.8 s)
_SUB_BITS_MAX = 20
_INSERTION_MAX = 64


_AHEAD = 16  # URLs to prefetch ahead in the gathers


# ----------------------------------------------------------------------------------------------
# Shard membership
# ----------------------------------------------------------------------------------------------


@njit(cache=True)
def shard_of(h, num_shards):
    """``floor(h * num_shards / 2**64)``: the high 64 bits of the 128-bit product."""
    return mul128(_U64(h), _U64(num_shards))[0]


@njit(cache=True)
def count_outside_shard(hashes, num_shards, shard, first, max_first):
    """Count the hashes whose shard is not ``shard``; write the first ``max_first`` indices to ``first``."""
    n_bad = 0
    s = _U64(shard)
    for i in range(hashes.shape[0]):
        if shard_of(hashes[i], num_shards) != s:
            if n_bad < max_first and n_bad < first.shape[0]:
                first[n_bad] = i
            n_bad += 1
    return n_bad


# ----------------------------------------------------------------------------------------------
# Hash order: a stable argsort of uint64 keys
# ----------------------------------------------------------------------------------------------


@njit(**HELPER)
def _shift_for(span, bits):
    """The smallest shift with ``span >> shift < 2**bits``."""
    shift = 0
    while shift < 64 and (span >> _U64(shift)) >= _U64(1 << bits):
        shift += 1
    return _U64(shift)


@njit(**HELPER)
def _insertion_sort(k, idx, a, b):
    """Stable insertion sort of k[a:b] (idx moves along); only moves past strictly greater keys."""
    for i in range(a + 1, b):
        kv = k[i]
        iv = idx[i]
        j = i - 1
        while j >= a and k[j] > kv:
            k[j + 1] = k[j]
            idx[j + 1] = idx[j]
            j -= 1
        k[j + 1] = kv
        idx[j + 1] = iv


@njit(**HELPER)
def _merge_sort_run(k, idx, a, b):
    """Stable sort of k[a:b] (idx moves along) for runs that bucketing did not break up (many
    equal keys): insertion-sorted runs of 32, then bottom-up merges. O(n log n) on any input.
    (Written out: ``np.argsort(kind="mergesort")`` costs ~6 s of compile time in Numba.)"""
    n = b - a
    sk = k[a:b].copy()
    si = idx[a:b].copy()
    dk = np.empty(n, k.dtype)
    di = np.empty(n, idx.dtype)
    for s in range(0, n, 32):
        _insertion_sort(sk, si, s, min(s + 32, n))
    width = 32
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            o = lo
            while i < mid and j < hi:
                if sk[j] < sk[i]:  # strictly less: equal keys take the left run first (stable)
                    dk[o] = sk[j]
                    di[o] = si[j]
                    j += 1
                else:
                    dk[o] = sk[i]
                    di[o] = si[i]
                    i += 1
                o += 1
            while i < mid:
                dk[o] = sk[i]
                di[o] = si[i]
                i += 1
                o += 1
            while j < hi:
                dk[o] = sk[j]
                di[o] = si[j]
                j += 1
                o += 1
        sk, dk = dk, sk
        si, di = di, si
        width *= 2
    for q in range(n):
        k[a + q] = sk[q]
        idx[a + q] = si[q]


@njit(**HELPER)
def _sort_bucket(k, idx, a, b, tk, ti, counts):
    """Stable sort of the bucket k[a:b]: a counting sort on its own key range into about as many
    sub-buckets as keys (in cache), then insertion sort of each small sub-bucket."""
    m = b - a
    if m <= 16:
        _insertion_sort(k, idx, a, b)
        return
    lo = k[a]
    hi = k[a]
    for i in range(a, b):
        v = k[i]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    bits = 1
    while (1 << bits) < m and bits < _SUB_BITS_MAX:
        bits += 1
    s = _shift_for(hi - lo, bits)
    nb = 1 << bits
    c = counts[: nb + 1]
    c[:] = 0
    for i in range(a, b):
        c[((k[i] - lo) >> s) + _U64(1)] += 1
    for d in range(nb):
        c[d + 1] += c[d]
    for i in range(a, b):  # in index order: equal keys keep their order
        d = (k[i] - lo) >> s
        p = c[d]
        c[d] = p + 1
        tk[p] = k[i]
        ti[p] = idx[i]
    # np.int64, not 0: a literal 0 reaches the calls below before the loop makes it int64, and
    # Numba then compiles each callee for Literal[int](0) as well (one more signature each).
    prev = np.int64(0)
    for d in range(nb):  # c[d] is now the end of sub-bucket d
        e = c[d]
        if e - prev > _INSERTION_MAX:
            _merge_sort_run(tk, ti, prev, e)
        elif e - prev > 1:
            _insertion_sort(tk, ti, prev, e)
        prev = e
    for j in range(m):
        k[a + j] = tk[j]
        idx[a + j] = ti[j]


@njit(cache=True, parallel=True)
def hash_order(keys, n_tasks):
    """``(order int64[n], sorted_keys uint64[n])``: ``keys[order]`` ascends, equal keys in index order.

    The same permutation as ``np.lexsort((np.arange(n), keys))``, for any keys; fast for
    uniform ones (hashes). ``n_tasks``: parallel tasks (``numba.get_num_threads()``); the result
    does not depend on it. Memory: the two outputs, plus ``n_tasks`` x 8 MB of scratch.
    """
    n = keys.shape[0]
    order = np.empty(n, np.int64)
    out = np.empty(n, np.uint64)
    if n == 0:
        return order, out
    n_tasks = max(1, n_tasks)
    lo = keys[0]
    hi = keys[0]
    for i in range(n):
        v = keys[i]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    s = _shift_for(hi - lo, np.int64(_BUCKET_BITS))  # not the literal 12: one signature
    nb = 1 << _BUCKET_BITS
    bounds = np.empty(n_tasks + 1, np.int64)
    for t in range(n_tasks + 1):
        bounds[t] = n * t // n_tasks
    # Level 1: per-task histograms over contiguous index ranges, then a stable scatter in which
    # task t's keys of bucket d follow tasks 0..t-1's keys of bucket d.
    hist = np.zeros((n_tasks, nb), np.int64)
    for t in prange(n_tasks):
        h = hist[t]
        for i in range(bounds[t], bounds[t + 1]):
            h[(keys[i] - lo) >> s] += 1
    starts = np.empty(nb + 1, np.int64)
    total = 0
    for d in range(nb):
        starts[d] = total
        for t in range(n_tasks):
            c = hist[t, d]
            hist[t, d] = total
            total += c
    starts[nb] = total
    biggest = 0
    for d in range(nb):
        biggest = max(biggest, starts[d + 1] - starts[d])
    for t in prange(n_tasks):
        h = hist[t]
        for i in range(bounds[t], bounds[t + 1]):
            d = (keys[i] - lo) >> s
            p = h[d]
            h[d] = p + 1
            out[p] = keys[i]
            order[p] = i
    # Level 2: each bucket on its own, buckets split between tasks.
    for t in prange(n_tasks):
        tk = np.empty(biggest, np.uint64)
        ti = np.empty(biggest, np.int64)
        counts = np.empty((1 << _SUB_BITS_MAX) + 1, np.int64)
        for d in range(nb * t // n_tasks, nb * (t + 1) // n_tasks):
            _sort_bucket(out, order, starts[d], starts[d + 1], tk, ti, counts)
    return order, out


# hash_order's three parallel steps as one task's share each, for Python threads
# (``fastenc.recipes.urls.threads.sort_by_hash``; see ``fastenc.tasks`` for why): the same
# permutation, and none of them is compiled with parallel=True.


@njit(cache=True, nogil=True)
def bucket_histogram(keys, lo, shift, i0, i1, hist):
    """``hist[d] += 1`` for the level-1 bucket ``d = (keys[i] - lo) >> shift`` of each ``i0 <= i < i1``."""
    for i in range(i0, i1):
        hist[(keys[i] - lo) >> shift] += 1


@njit(cache=True, nogil=True)
def bucket_scatter(keys, lo, shift, i0, i1, pos, out, order):
    """Stable scatter of ``keys[i0:i1]`` to their buckets: ``pos[d]`` is where this task's next
    key of bucket ``d`` goes (advanced here); ``out`` gets the key, ``order`` its index."""
    for i in range(i0, i1):
        d = (keys[i] - lo) >> shift
        p = pos[d]
        pos[d] = p + 1
        out[p] = keys[i]
        order[p] = i


@njit(cache=True, nogil=True)
def sort_buckets(out, order, starts, d0, d1, biggest):
    """Sort buckets ``d0 <= d < d1`` (``out[starts[d]:starts[d + 1]]``, ``order`` along) in place."""
    tk = np.empty(biggest, np.uint64)
    ti = np.empty(biggest, np.int64)
    counts = np.empty((1 << _SUB_BITS_MAX) + 1, np.int64)
    for d in range(d0, d1):
        _sort_bucket(out, order, starts[d], starts[d + 1], tk, ti, counts)


# ----------------------------------------------------------------------------------------------
# Encoding: [eos] ++ encode(canonical(url)) for URLs in a given order
# ----------------------------------------------------------------------------------------------


@njit(**HELPER)
def _authority_has_colon_or_bracket(data, start, end):
    """For an ``http(s)://`` URL, whether its authority holds ``:`` or ``[``. Only such URLs can
    be ones where the card's canonical() is not its own inverse (see ``pack_url_run``)."""
    if end - start < 7 or data[start] != 104 or data[start + 1] != 116 or data[start + 2] != 116 or data[start + 3] != 112:
        return False
    q = start + 4
    if data[q] == 115:  # 's'
        q += 1
    if q + 3 > end or data[q] != 58 or data[q + 1] != 47 or data[q + 2] != 47:
        return False
    for j in range(q + 3, end):
        c = data[j]
        if c == 47 or c == 63 or c == 35:  # / ? #: the authority ends
            return False
        if c == 58 or c == 91:  # : [
            return True
    return False


@njit(**HELPER)
def _round_trips(data, a, b, canon, c0, c1):
    """canonical(canon[c0:c1]) == data[a:b]?"""
    tmp = np.empty(c1 - c0, np.uint8)
    canonical_into(canon, c0, c1, tmp, np.int64(0))  # int64, not Literal[int](0): one signature
    for j in range(c1 - c0):
        if tmp[j] != data[a + j]:
            return False
    return True


@njit(cache=True, nogil=True)
def pack_url_run(data, offsets, order, canon_offsets, eos, vocab, classes, caches, canon, canon_read, scratch,
                 counts, irreversible, k0, k1):
    """Encode URLs ``order[k]``, ``k0 <= k < k1``, of the Arrow layout ``(data, offsets)``, each as
    ``[eos] ++ ids``: one task's share of a chunk (``fastenc.recipes.urls.encode`` runs the
    tasks on threads, each with its own ``caches``, a ``PieceCaches``; any split gives the same
    result).

    ``canon_offsets`` (int64[m + 1]) is the prefix sum of the ordered URLs' byte lengths, from 0.
    URL k is canonicalized into ``canon[canon_offsets[k]:canon_offsets[k + 1]]`` and its tokens go
    to its slot ``scratch[canon_offsets[k] + k:]`` (one slot per URL, one id more than its bytes:
    an id never covers less than one byte); ``counts[k]`` gets 1 + its number of ids. Gather the
    slots with ``gather_slots``. ``canon_read`` is a read-only view of ``canon``, which the
    encoder reads: so ``encode_narrow`` is compiled for the same (read-only) types as for
    ``Encoder.encode_arrays`` and Arrow columns, once for both recipes.

    ``irreversible[k]`` (uint8) is set to 1 when canonical(canonical(url)) != url: the card's
    canonical() is not self-inverse on some malformed hosts (``http://x:1.y``, ``http://a.[b``),
    so such a URL cannot be recovered from the bin. Only URLs whose authority holds ``:`` or ``[``
    are re-checked (all others are provably self-inverse), so the check costs next to nothing.
    """
    # Two passes: the first gathers the URLs (random reads: in hash order they are scattered all
    # over the column) into canon, in order; the second encodes canon front to back. A tight
    # gather loop keeps many cache misses in flight; interleaved with the encoder it measured
    # ~17% slower on the whole.
    for k in range(k0, k1):
        if k + 2 * _AHEAD < k1:
            prefetch(offsets, order[k + 2 * _AHEAD])
        if k + _AHEAD < k1:
            prefetch(data, offsets[order[k + _AHEAD]])
        i = order[k]
        a = offsets[i]
        b = offsets[i + 1]
        c0 = canon_offsets[k]
        c1 = canonical_into(data, a, b, canon, c0)
        irreversible[k] = 0
        if _authority_has_colon_or_bracket(data, a, b) and not _round_trips(data, a, b, canon_read, c0, c1):
            irreversible[k] = 1
    encode_docs(canon_read, canon_offsets, k0, k1, vocab, classes, caches, scratch, np.int64(0), counts, np.int64(eos))


@njit(cache=True, nogil=True)
def gather_slots(scratch, canon_offsets, counts, out, out_offsets, k0, k1):
    """Copy the slots ``pack_url_run`` filled, ``k0 <= k < k1``, to ``out[out_offsets[k]:]``: slot
    k starts at ``scratch[canon_offsets[k] + k]`` and holds ``counts[k]`` ids; ``out_offsets`` is
    the prefix sum of ``counts`` (int64[m + 1], from 0)."""
    for k in range(k0, k1):
        src = canon_offsets[k] + k
        dst = out_offsets[k]
        for j in range(counts[k]):
            out[dst + j] = scratch[src + j]


@njit(cache=True, parallel=True, nogil=True)
def gather_spans(tokens, tok_offsets, order, out, out_offsets, n_tasks):
    """Copy the token spans ``tokens[tok_offsets[i]:tok_offsets[i + 1]]`` of ``i = order[k]``,
    k = 0, 1, ..., one after the other into ``out``; span k lands at ``out[out_offsets[k]:]``.

    ``out_offsets`` (int64[m + 1]) is filled here; ``out`` needs their total. ``order`` must
    index valid spans of ``tok_offsets`` (ascending offsets within ``tokens``). The copies are
    split into ``n_tasks`` parallel runs (``span_offsets`` first, then ``gather_span_run``).
    """
    m = order.shape[0]
    starts = np.empty(m, np.int64)
    span_offsets(tok_offsets, order, out_offsets, starts)
    n_tasks = max(1, n_tasks)
    for task in prange(n_tasks):
        gather_span_run(tokens, starts, out, out_offsets, m * task // n_tasks, m * (task + 1) // n_tasks)


@njit(cache=True, nogil=True)
def span_offsets(tok_offsets, order, out_offsets, starts):
    """``gather_spans``' serial first step: ``out_offsets[k + 1] = out_offsets[k] + `` the length of
    span ``order[k]`` (from 0), and ``starts[k] = tok_offsets[order[k]]``, prefetching the random
    reads of ``tok_offsets``; returns the total.

    Why ``starts``: the copy loop then reads each span's start in sequence. Read from
    ``tok_offsets[order[k + ahead]]`` there, the prefetch address was itself a cache miss (a chunk's
    offsets, 1 M random lines, do not stay in L3), and the copy of a full shard's 36.6 M spans took
    twice as long (bench/RESULTS.md, "Issue 9: the URL bin's span gather")."""
    m = order.shape[0]
    out_offsets[0] = 0
    for k in range(m):
        if k + _AHEAD < m:
            prefetch(tok_offsets, order[k + _AHEAD])
        i = order[k]
        s = tok_offsets[i]
        starts[k] = s
        out_offsets[k + 1] = out_offsets[k] + (tok_offsets[i + 1] - s)
    return out_offsets[m]


@njit(cache=True, nogil=True)
def gather_span_run(tokens, starts, out, out_offsets, k0, k1):
    """``gather_spans``' copy loop for spans ``k0 <= k < k1`` (one task's share): span k,
    ``out_offsets[k + 1] - out_offsets[k]`` tokens from ``tokens[starts[k]:]``, to
    ``out[out_offsets[k]:]`` (both filled by ``span_offsets``); ``fastenc.recipes.urls.threads.gather_spans``
    runs the tasks on threads."""
    for k in range(k0, k1):
        if k + _AHEAD < k1:
            prefetch(tokens, starts[k + _AHEAD])
        s = starts[k]
        o = out_offsets[k]
        for j in range(out_offsets[k + 1] - o):
            out[o + j] = tokens[s + j]


# ----------------------------------------------------------------------------------------------
# Decoding a stretch of a bin
# ----------------------------------------------------------------------------------------------


@njit(cache=True)
def decoded_length(tokens, token_offsets, eos):
    """``(urls, nbytes)`` of ``tokens``: how many ``eos`` it holds and how many bytes the other
    ids decode to; ``(-1, -1)`` if an id is out of the vocabulary's range."""
    n_ids = token_offsets.shape[0] - 1
    urls = 0
    nbytes = 0
    for j in range(tokens.shape[0]):
        t = np.int64(tokens[j])
        if t == eos:
            urls += 1
        elif t < 0 or t >= n_ids:
            return -1, -1
        else:
            nbytes += token_offsets[t + 1] - token_offsets[t]
    return urls, nbytes


@njit(cache=True)
def decode_urls(tokens, token_bytes, token_offsets, eos, out, out_offsets):
    """Decode ``tokens`` into flat URL text: URL u (the ids after the u-th ``eos``) is
    ``out[out_offsets[u]:out_offsets[u + 1]]``. Ids before the first ``eos`` are skipped.

    ``out`` needs the ``nbytes`` and ``out_offsets`` the ``urls + 1`` that ``decoded_length``
    gives. Returns the number of URLs, or -1 (nothing trusted) on an out-of-range id or a
    buffer too small.
    """
    n_ids = token_offsets.shape[0] - 1
    u = -1
    o = 0
    out_offsets[0] = 0
    for j in range(tokens.shape[0]):
        t = np.int64(tokens[j])
        if t == eos:
            if u >= 0:
                out_offsets[u + 1] = o
            u += 1
            if u + 1 >= out_offsets.shape[0]:
                return -1
            out_offsets[u] = o
            continue
        if t < 0 or t >= n_ids:
            return -1
        if u < 0:
            continue
        a = token_offsets[t]
        b = token_offsets[t + 1]
        if o + (b - a) > out.shape[0]:
            return -1
        for q in range(a, b):
            out[o] = token_bytes[q]
            o += 1
    if u >= 0:
        out_offsets[u + 1] = o
    return u + 1


@njit(cache=True)
def find_eos_before(tokens, hi, eos):
    """The largest position ``p < hi`` with ``tokens[p] == eos``, or -1."""
    p = min(hi, tokens.shape[0]) - 1
    while p >= 0:
        if tokens[p] == eos:
            return p
        p -= 1
    return -1


@njit(cache=True)
def first_difference(data, offsets, order, other, other_offsets):
    """Compare URLs ``order[k]`` of ``(data, offsets)`` with URL k of ``(other, other_offsets)``
    for k < len(order); the first k that differs (length or bytes), or -1 if none does."""
    for k in range(order.shape[0]):
        i = order[k]
        a = offsets[i]
        n = offsets[i + 1] - a
        b = other_offsets[k]
        if other_offsets[k + 1] - b != n:
            return k
        for j in range(n):
            if data[a + j] != other[b + j]:
                return k
    return -1
