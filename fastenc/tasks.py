"""Calling kernels from Python: a batch's tasks on threads (``run_tasks``), and one type per
argument (``read_only``).

Why not ``@njit(parallel=True)`` with ``prange(n_tasks)``: every such kernel is compiled twice
over (the loop body becomes a separate "gufunc" that links and re-optimizes the whole call tree
again), which costs each big kernel seconds of extra first-run compile. The task loops here are
coarse (one byte-balanced run of the batch per thread), so plain threads calling a ``nogil`` kernel run them just as fast, and the kernels are
compiled once. The result never depends on the number of tasks.

Also here, for work that is not a kernel: ``each_on_threads``, independent file I/O (a recipe's
buckets, its spill folders) on a thread per usable CPU (``usable_cpus``), and ``Behind``, a
caller's writes in order on a thread of their own while it goes on.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child (a ``--workers`` process, ``fastenc.run.forking``): the parent's pool
    threads were not copied, so its pool would queue tasks that never run; start afresh."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fastenc-task")
        return _pool


def n_tasks() -> int:
    """How many tasks to cut a batch into: Numba's thread count (``NUMBA_NUM_THREADS``,
    ``numba.set_num_threads``), so the same settings govern both kinds of parallel kernel."""
    import numba

    return max(1, numba.get_num_threads())


def run_tasks(fn, count: int) -> None:
    """``fn(t)`` for ``t`` in ``range(count)``, concurrently; returns when all are done and
    re-raises the first error. ``fn`` should call a ``nogil`` kernel (else the tasks take turns
    on the GIL). One task runs in the calling thread (no hand-off for small batches)."""
    if count <= 1:
        if count == 1:
            fn(0)
        return
    futures = [_executor(count - 1).submit(fn, t) for t in range(1, count)]
    error = None
    try:
        fn(0)
    except BaseException as exc:  # still wait for the others: they write into shared buffers
        error = exc
    for f in futures:
        try:
            f.result()
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: ``taskset``, a cgroup's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity call on this platform
        return max(1, os.cpu_count() or 1)


def each_on_threads(fn, items) -> None:
    """``fn(item)`` for every item, on up to one thread per usable CPU (one CPU: in this thread, in
    order); returns when all are done and then re-raises the first error in the items' order. For
    I/O-bound work on independent files (each gpt2 bucket's part, each unit's spill folder) whose
    calls release the GIL: a run's last steps then use every core the map used. Threads of their
    own, started and joined here, not ``run_tasks``' pool: the encoder's tasks never queue behind
    file I/O, and no thread outlives the call."""
    items = list(items)
    threads = min(len(items), usable_cpus())
    if threads <= 1:
        outcomes = [_call(fn, item) for item in items]
    else:
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fastenc-io")
        try:
            futures = [pool.submit(_call, fn, item) for item in items]
            wait(futures)
        finally:
            # also on Ctrl-C while waiting: the items not started are dropped, and the running ones
            # finish before the caller goes on to delete what they write into (a run's staging folder)
            pool.shutdown(wait=True, cancel_futures=True)
        outcomes = [f.result() for f in futures]  # (an item's KeyboardInterrupt is raised here)
    error = next((e for e in outcomes if e is not None), None)
    if error is not None:
        raise error


class Behind:
    """Calls run in order on a thread of their own, one at most behind the caller, which goes on
    meanwhile (the gpt2 map spills batch k while it encodes batch k + 1). ``submit(fn, *args)``
    first waits for the previous call and re-raises its error; ``finish()`` waits for the last one
    likewise; ``close()`` (in a ``finally``) waits for a call still running, also on Ctrl-C, and
    raises nothing: nothing of it writes after the caller cleans up. No thread outlives ``close()``.
    ``inline``: each call runs in ``submit``, in the caller's thread (where no core is left for
    another thread, the hand-offs only cost)."""

    def __init__(self, name: str, inline: bool = False):
        self._pool = None if inline else ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._last = None

    def submit(self, fn, *args) -> None:
        if self._pool is None:
            fn(*args)
            return
        self.finish()
        self._last = self._pool.submit(fn, *args)

    def finish(self) -> None:
        last, self._last = self._last, None
        if last is not None:
            last.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _call(fn, item) -> Exception | None:
    """``fn(item)``'s error, or None (Ctrl-C and exits are raised, not kept)."""
    try:
        fn(item)
    except Exception as exc:
        return exc
    return None


def read_only(data):
    """A read-only view of ``data``. Numba compiles a kernel once per distinct argument type, and
    read-only is a type of its own: Arrow buffers are read-only, so the kernels' byte inputs are
    always handed over read-only, and one compile serves every caller."""
    view = data.view()
    view.flags.writeable = False
    return view
