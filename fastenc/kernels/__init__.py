"""Numba kernels: ``@njit(cache=True)`` functions of arrays and scalars only.

No I/O, no Python objects, no module-level tables: every table is an argument, so one
compiled kernel serves every vocabulary and other people's ``@njit`` code can call them.
"""
