"""Settings for a process that runs fastenc's kernels only: the CLI and its map workers.

Two trim Numba's start-up, one moves Arrow's buffers to the C library's allocator, one has that
allocator keep freed memory for the next unit: settings a user's own process must not get unasked
(it may use Numba extensions, compile code that needs every registry, want its own Arrow pool or
its memory handed back), so they are applied by
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
    return. Never called on import: a user's own process keeps
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
    ``numba.np.linalg``, typed containers, ...): ~0.55 s of a warm CLI run,
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
    C library's allocator a worker's first unit took less system time, later units level
    (bench/RESULTS.md, "A worker's first unit, mimalloc against the C library's allocator").
    Arrow's buffers are read front to back, where huge pages save little.

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


_MALLOC_ENV = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")
_NUMPY_HUGE_ENV = "NUMPY_MADVISE_HUGEPAGE"
_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_MAX = -4


def _numpy_madvise_setter():
    """NumPy's switch for its huge-page advice (``_set_madvise_hugepage(on)``, which returns the
    previous setting; the function behind ``NUMPY_MADVISE_HUGEPAGE``), or None where it is missing."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):  # NumPy 2, NumPy 1
        try:
            return __import__(module, fromlist=["_set_madvise_hugepage"])._set_madvise_hugepage
        except (ImportError, AttributeError):
            continue
    return None


def keep_freed_memory() -> None:
    """Keep the memory a unit frees for the next unit, on small pages.

    glibc gives every block above its mmap threshold (32 MB at most) a mapping of its own and
    unmaps it when it is freed, and hands the top of its heap back once more than the trim
    threshold is free. A recipe's unit asks for the same large buffers as the one before (Arrow's
    decoded columns, NumPy's arrays), so every unit wrote into fresh memory again: a page fault
    and a zeroed page per 4 kB, ~35 k faults a 1 M-URL shard. With mappings off (``M_MMAP_MAX``
    0) and trimming off, a freed block stays in the heap and the next unit's is carved from it.

    NumPy asks for transparent huge pages for the data of every array of 4 MB or more. On a heap
    that advice spreads: the heap grows into the advised region, and Arrow's buffers then land on
    huge pages too, whose first touch costs several times that of small pages on the VMs measured
    (where the host backs the memory again; bench/RESULTS.md, "Fresh memory: ~0.45 ms a MB on 4 kB pages ...";
    ``system_arrow_pool``): a worker's first unit took 0.3 s more system time. So NumPy's advice is
    turned off as well. The tables whose random reads want huge pages
    (the piece caches, the URL recipe's shard-wide arrays) ask for them themselves
    (``fastenc.memory.huge_array``), in mappings of their own.

    Together (``bench/probes/scale_timeline.py --plan 1core``; bench/RESULTS.md, "Landed: the CLI and its workers
    keep freed memory for the next unit"): later units fault in a fraction of the pages. The cost: the
    process keeps its peak heap until it exits, a few percent higher.

    For processes that run fastenc only (the CLI, its workers); a user's own ``MALLOC_*``,
    ``GLIBC_TUNABLES`` or ``NUMPY_MADVISE_HUGEPAGE`` settings are kept. Elsewhere than glibc the
    allocator part changes nothing (musl's ``mallopt`` does nothing, macOS has none).
    """
    import os
    import sys

    if not sys.platform.startswith("linux"):
        return
    if _NUMPY_HUGE_ENV not in os.environ and (set_advice := _numpy_madvise_setter()) is not None:
        set_advice(False)
    if any(v in os.environ for v in _MALLOC_ENV):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc's parameter numbers: only on glibc
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    mallopt(_M_MMAP_MAX, 0)


def kernels_only_process() -> None:
    """Start-up settings for a process that runs fastenc's kernels only (the CLI, its map
    workers): no Numba extensions loaded, lean cache loads, Arrow on the C library's allocator,
    which keeps freed memory for the next unit. Never applied on ``import fastenc``."""
    skip_numba_extensions()
    lean_cache_loads()
    system_arrow_pool()
    keep_freed_memory()
