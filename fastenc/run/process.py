"""Settings for a process that runs fastenc's kernels only: the CLI and its map workers.

Two trim Numba's start-up, one moves Arrow's buffers to the C library's allocator: settings a
user's own process must not get unasked (it may use Numba extensions, compile code that needs
every registry, or want its own Arrow pool), so they are applied by
``kernels_only_process()`` from ``fastenc.cli.main`` and the workers' initializer, never on
``import fastenc``. They live outside ``fastenc/kernels`` on purpose: an edit of a kernel file
wipes the kernels' Numba cache (``kernels/cache_guard.py``), and nothing here is kernel code.
"""
from __future__ import annotations


def skip_numba_extensions() -> None:
    """Tell Numba not to load the ``numba_extensions`` entry points of the installed packages.

    For processes that run fastenc's kernels only (the CLI, the map workers): the kernels use no
    Numba extension, and Numba imports every installed one (awkward, where installed, takes
    ~0.3 s) at the first kernel it compiles or loads from the cache: start-up cost with nothing in
    return (bench/RESULTS.md, "Session 9"). Never called on import: a user's own process keeps
    its extensions. Numba keeps the "already loaded" flag in a private name; if that changes, this
    does nothing.
    """
    try:
        from numba.core import entrypoints
    except ImportError:
        return
    if getattr(entrypoints, "_already_initialized", None) is False:
        entrypoints._already_initialized = True


def lean_cache_loads() -> None:
    """Load cached kernels without re-registering all of Numba's implementations first.

    Numba's ``Cache.load_overload`` calls ``target_context.refresh()`` before every load, which
    imports and registers Numba's typing and lowering registries (``numba.cpython.*``,
    ``numba.np.linalg``, typed containers, ...): ~0.55 s of a warm CLI run on the AMD EPYC VM,
    a third of it, for nothing a loaded kernel uses. Rebuilding a cached kernel needs only
    Numba's runtime (NRT) in place: its machine code is linked, not lowered again. Numba's
    own compile path (``compile_extra``) refreshes the contexts itself, so a kernel that misses
    the cache, and any user code compiled later in the process, still gets the full registries.

    For processes that run fastenc's kernels only (the CLI, its workers), like
    ``skip_numba_extensions``. The method is private to Numba: if its shape changes, this does
    nothing (the loads stay as they were).
    """
    try:
        from numba.core import caching
        from numba.core.runtime import rtsys
    except ImportError:
        return
    cache = getattr(caching, "Cache", None)
    if cache is None or getattr(cache.load_overload, "_fastenc_lean", False):
        return
    if not all(hasattr(cache, name) for name in ("_guard_against_spurious_io_errors", "_load_overload")):
        return

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload._fastenc_lean = True
    cache.load_overload = load_overload


ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def system_arrow_pool() -> None:
    """Arrow's buffers from the C library's allocator, not the mimalloc that pyarrow bundles.

    mimalloc asks for transparent huge pages for its arenas. A process's first touch of a huge page
    costs ~4x that of small pages on the VMs measured (2 MB pages 1.3-3.0 ms per MB, 4 kB pages
    0.4-0.65: the host backs freed memory again), and every ``--workers`` process pays it at its
    first unit: a URL worker held ~90 MB of Arrow's buffers on huge pages after one shard. With the
    C library's allocator, in fresh processes, alternating (bench/RESULTS.md, session 37): a URL
    worker's first shard 1.87 -> 1.67 s (system time 0.43 -> 0.20 s), a gpt2 worker's first file
    2.16 -> 2.03 s; later units level. Arrow's buffers are read front to back, where huge pages
    save little.

    For processes that run fastenc only (the CLI, its workers), like the Numba settings here; a
    user's own choice (``ARROW_DEFAULT_MEMORY_POOL``) is kept. Where pyarrow is not imported yet,
    the variable is set instead, and Arrow reads it when it makes its default pool.
    """
    import os
    import sys

    if os.environ.get(ARROW_POOL_ENV):
        return
    if "pyarrow" not in sys.modules:
        os.environ[ARROW_POOL_ENV] = "system"
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def kernels_only_process() -> None:
    """Start-up settings for a process that runs fastenc's kernels only (the CLI, its map
    workers): no Numba extensions loaded, lean cache loads, Arrow on the C library's allocator.
    Never applied on ``import fastenc``."""
    skip_numba_extensions()
    lean_cache_loads()
    system_arrow_pool()
