"""Decorator options shared by the kernels.

``HELPER``: for private helpers (``_name``) that only compiled kernels call. Numba gives every
``@njit`` function a Python-callable and a C-callable wrapper; a helper needs neither, and
leaving them out saves 10-20% of each helper's compile (xxh3's helpers: 5.1-5.9 -> 4.8-4.9 s of
CPU; bench/RESULTS.md, "Start-up"). Such a helper cannot be called from Python, only from
``@njit`` code. (Inlining helpers at the Numba level instead, ``inline="always"``, made the
same compile ~4x slower: the inlined body is typed again at every call site.)
"""
HELPER = dict(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
