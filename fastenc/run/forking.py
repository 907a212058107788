"""How ``--workers`` starts its processes: ``fork`` where that is safe, ``spawn`` otherwise.

A spawned worker starts a new interpreter: it imports Python, pyarrow, Numba and fastenc, loads
the vocabulary and the kernels (one to a few CPU-seconds) before its first
unit. A forked worker is a copy of the command's process, which has done all of that already.

``fork`` copies only the calling thread. Any other thread's locks and half-done work are copied
as they are, frozen, and a child that touches them hangs. So the map forks only when nothing can
be caught that way (``fork_is_safe``):

- no Python thread but this one (a progress bar's monitor, a feeder, a reduce or a task pool
  would each be copied as a dead thread that still holds its state);
- no native thread that was not there when this module was imported (by ``import
  fastenc.run``, which every recipe does before any work). The ones that are there then,
  numpy's BLAS pool and pyarrow's allocator thread, stop and restart around a fork themselves
  (``pthread_atfork``). A thread started since then -- Arrow's or Numba's thread pool
  (``workqueue`` starts its threads at launch, OpenMP at its first parallel region), a
  library's own -- may not, so its presence means ``spawn``. In practice a command's process
  forks (it has run nothing threaded before its map); a process that has already run a recipe
  (a notebook, a test session, an in-process benchmark) has such pools and spawns. (A process
  that started native thread pools *before* importing fastenc counts them in the baseline:
  ``FASTENC_START_METHOD=spawn`` is the way out there.)

The map starts its workers before any of its own threads (the feeder, the streamed reduce), and
fastenc's progress bars run no monitor thread (``fastenc.progress``). Only Linux forks: macOS's
system libraries are not fork-safe (Python's default there is spawn too), Windows cannot.
``FASTENC_START_METHOD=spawn`` forces spawn (tests run the drills both ways).
"""
from __future__ import annotations

import os
import sys
import threading

import numpy  # noqa: F401  (their threads exist before the baseline below is taken)
import pyarrow  # noqa: F401

__all__ = ["START_METHOD_ENV", "start_method", "fork_is_safe"]

START_METHOD_ENV = "FASTENC_START_METHOD"


def _os_threads() -> int | None:
    """This process's threads, as the kernel counts them (None where /proc is not there)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


_BASELINE = _os_threads()


def fork_is_safe() -> bool:
    """Whether a fork now copies no thread but ones that handle a fork themselves (module docstring)."""
    if threading.active_count() > 1:
        return False
    now = _os_threads()
    return now is not None and _BASELINE is not None and now <= _BASELINE


def start_method() -> str:
    """``"fork"`` on Linux when ``fork_is_safe()`` and not turned off by ``FASTENC_START_METHOD=spawn``,
    else ``"spawn"``. Call it right before the workers start: a thread started in between would
    be copied."""
    import multiprocessing

    if os.environ.get(START_METHOD_ENV, "").strip().lower() == "spawn":
        return "spawn"
    if not sys.platform.startswith("linux") or "fork" not in multiprocessing.get_all_start_methods():
        return "spawn"
    return "fork" if fork_is_safe() else "spawn"
