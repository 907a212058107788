"""The one allocator of large anonymous arrays: on huge pages where random access needs them, on
small pages where memory is written once in order.

- ``huge_array``: the piece caches (tens of MB filled in random order: with 4 kB pages that is
  thousands of first-touch page faults per thread, ~10 us each in a VM, and a TLB miss on most
  lookups; with 2 MB pages a few dozen) and the URL recipe's whole-shard offsets and source text
  (read at random positions in hash order: with 2 MB pages those reads miss the TLB far less,
  measured ~15% of that stage).
- ``small_page_empty``: the id output buffers (``OutputPool``, and a URL shard's ids: read back
  once in hash order, where 4 kB pages cost that gather 0.065 s of an 8.3 M-URL shard and saved
  its compaction 0.5 s), written front to back once, where huge pages save few TLB misses and cost
  more to fault in: NumPy asks for huge pages for every array
  of 4 MB or more, and on the KVM machines here a huge page's first touch often waits on the host
  (a 2-thread o200k first pass spent a fraction of the system time with its output on 4 kB pages;
  bench/RESULTS.md, "What landed: the id output buffers on 4 kB pages").

Either way memory is only backed once written: ``huge_array``'s anonymous mappings start zeroed,
``small_page_empty`` is ``np.empty`` (uninitialized).
"""
from __future__ import annotations

import contextlib
import functools
import mmap
import sys
import threading

import numpy as np

__all__ = ["huge_array", "small_page_empty", "OutputPool"]


_NUMPY_HUGE_FROM = 4 << 20  # NumPy advises huge pages for the data of arrays from this size up


def small_page_empty(count: int, dtype) -> np.ndarray:
    """``np.empty(count, dtype)`` on ordinary pages where the system allows (``MADV_NOHUGEPAGE``
    over the array's whole pages, undoing NumPy's advice), for memory written once in order.
    (``np.empty``, not a mapping of our own: an array that owns its memory is the base of every
    view of it, which is what ``OutputPool`` counts.)"""
    out = np.empty(count, dtype)
    advice = getattr(mmap, "MADV_NOHUGEPAGE", None)
    if out.nbytes >= _NUMPY_HUGE_FROM and advice is not None and (madvise := _libc_madvise()) is not None:
        start = -(-out.ctypes.data // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (out.ctypes.data + out.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
        madvise(start, end - start, advice)  # advice only: a failure leaves NumPy's pages
    return out


@functools.cache
def _libc_madvise():
    """libc's ``madvise`` through ctypes (loaded on first use, not at import), or None."""
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def huge_array(shape, dtype, *, min_bytes: int = 0) -> np.ndarray:
    """A zeroed array of ``shape``/``dtype`` on huge pages (``MADV_HUGEPAGE``) when it is at least
    ``min_bytes`` and the system offers anonymous mappings; else ``np.zeros`` (the same contract)."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    count = int(np.prod(shape))
    nbytes = count * np.dtype(dtype).itemsize
    if nbytes == 0 or nbytes < min_bytes:
        return np.zeros(shape, dtype)
    try:
        memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (AttributeError, OSError, ValueError):
        return np.zeros(shape, dtype)
    try:
        memory.madvise(mmap.MADV_HUGEPAGE)
    except (AttributeError, OSError):
        pass  # plain pages: still a zeroed, lazily backed array
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)  # the array keeps the mapping alive


class OutputPool:
    """Output buffers handed out again once no result uses them (``Encoder.encode_arrays``).

    A batch encode writes its ids into a buffer of one place per input byte and returns the
    buffer's head as the result (a view). Fresh memory is slow to fill: the kernel zeroes every 4 kB
    page at its first write (5% of a warm GPT-2 batch over 97 MB here), and when two threads fault
    pages in at once they queue on the process's page tables (a 2-thread warm batch took 1.1-1.7x
    longer than with a reused buffer). So buffers of at least
    ``min_bytes`` are pooled: ``buffer()`` hands out a pooled one that is big enough and that no
    result refers to any more (its only references are the pool's), else a new one (a quarter
    larger than asked, so that the next batch of about the same size finds it), which joins the
    pool while it has fewer than ``keep`` (buffers over ``max_bytes`` never do: a one-off giant batch
    should not pin its memory). A result keeps its buffer busy for as long as it, or any view of it,
    lives, so results never share memory. Smaller outputs are plain ``np.empty`` arrays, trimmed
    in place."""

    def __init__(self, keep: int = 2, min_bytes: int = 4 << 20, max_bytes: int = 1 << 30):
        self.keep, self.min_bytes, self.max_bytes = keep, min_bytes, max_bytes
        self._buffers: list[np.ndarray] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def buffer(self, count: int, dtype):
        """``with pool.buffer(n, dtype) as (out, trim):`` ``out`` has room for ``n`` elements;
        ``trim(k)`` returns the result, ``out[:k]``."""
        dtype = np.dtype(dtype)
        nbytes = count * dtype.itemsize
        if nbytes < self.min_bytes:
            out = np.empty(count, dtype)

            def trim(k):
                out.resize(k, refcheck=False)  # shrinks in place: the result owns its memory
                return out

            yield out, trim
            return
        out = self._take(nbytes)
        if out is None:
            # A quarter more room than asked: the next batch is seldom the same size, and one a
            # little larger should still find this buffer (and its pages) ready. Small pages: the
            # ids are written in order (see the module docstring).
            out = small_page_empty(nbytes + nbytes // 4, np.uint8)
            if nbytes <= self.max_bytes:
                with self._lock:
                    if len(self._buffers) < self.keep:
                        self._buffers.append(out)
        ids = out[:nbytes].view(dtype)
        yield ids, (lambda k: ids[:k])

    def _take(self, nbytes: int):
        """A pooled buffer of at least ``nbytes`` that nothing outside the pool refers to (the
        smallest such), or None. Holding the returned reference marks it busy."""
        with self._lock:
            free = [i for i in range(len(self._buffers))
                    if self._buffers[i].nbytes >= nbytes and sys.getrefcount(self._buffers[i]) == 2]
            if not free:
                return None
            return self._buffers[min(free, key=lambda i: self._buffers[i].nbytes)]
