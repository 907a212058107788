"""Numba kernels: ``@njit(cache=True)`` functions of arrays and scalars only.

No I/O, no Python objects, no module-level tables: every table is an argument, so one
compiled kernel serves every vocabulary and other people's ``@njit`` code can call them.
"""

# Numba's cache follows only each kernel's own file, so wipe it when any kernel file changed (cache_guard).
from fastenc.kernels.cache_guard import check_kernel_cache

check_kernel_cache()
