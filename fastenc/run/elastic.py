"""The cores of map workers that ran out of units, lent to the workers still encoding.

A map phase on N processes of T threads each (``--workers``, ``fastenc.run.units``) ends unevenly:
units take different times, so once the last ones are under way the workers that find nothing
left to do sit idle while the others finish on T threads each. Every worker instead takes a share
of the idle cores at its next batch: the parent counts the units not finished yet in one integer
of memory shared with its workers (``MapCount``), and a worker calls ``adjust()`` between batches
to run the next one on ``N * T // busy`` threads (``busy``: the units not finished, at most N), never
fewer than T and never more than Numba's pool holds (``NUMBA_NUM_THREADS``). The count only falls,
and a worker grows only as others stop, so the workers together never use more threads than the
N * T they were given. Results never depend on the thread count (``fastenc.tasks``), so the output
does not either. A spawned worker's pool holds T threads (its ``NUMBA_NUM_THREADS``): it keeps T.

Outside a map phase (one process, a datatrove rank) nothing is attached and ``adjust()`` does nothing.
"""
from __future__ import annotations

import contextlib
import threading

__all__ = ["MapCount", "attach", "detach", "attached", "adjust", "one_of_many"]

_count = None  # the shared count of unfinished units (a ctypes int), while this process is a map worker
_budget = 0  # threads of all the map's workers together
_base = 1  # this worker's own threads
_workers = 1


class MapCount:
    """The parent's side: the map's unfinished units, in memory its workers share (created before
    they start: a forked worker inherits it, a spawned one gets it with its start-up arguments)."""

    def __init__(self, ctx, units: int):
        self.shared = ctx.RawValue("i", units)
        self._lock = threading.Lock()  # the parent's main thread and its feeder thread both count

    def finished(self) -> None:
        """One more unit finished (or stopped: the phase is ending)."""
        with self._lock:
            self.shared.value = max(0, self.shared.value - 1)


def attach(shared, workers: int, threads: int) -> None:
    """This process is one of ``workers`` map workers of ``threads`` threads each; ``shared``: ``MapCount.shared``."""
    global _count, _budget, _base, _workers
    _count, _budget, _base, _workers = shared, workers * threads, threads, workers


def detach() -> None:
    global _count
    _count = None


@contextlib.contextmanager
def attached(shared, workers: int, threads: int):
    """``attach`` inside (the command's process, a worker while the map runs), ``detach`` after."""
    attach(shared, workers, threads)
    try:
        yield
    finally:
        detach()


def one_of_many() -> bool:
    """Whether this process is now one of several map workers, among which the cores are shared out."""
    return _count is not None and _workers > 1


def adjust() -> None:
    """Between two batches of a unit: this worker's Numba threads set to its share of the map's
    threads (see the module docstring). Outside a map phase: nothing."""
    if _count is None:
        return
    import numba

    busy = min(_workers, max(1, _count.value))
    n = min(numba.config.NUMBA_NUM_THREADS, max(_base, _budget // busy))
    if n != numba.get_num_threads():
        numba.set_num_threads(n)
