"""Decorator options shared by the kernels.

``HELPER``: for private helpers (``_name``) that only compiled kernels call. Numba gives every
``@njit`` function a Python-callable and a C-callable wrapper; a helper needs neither, and
leaving them out saves part of each helper's compile. Such a helper cannot be called from Python, only from
``@njit`` code. (Inlining helpers at the Numba level instead, ``inline="always"``, made the
same compile ~4x slower: the inlined body is typed again at every call site.)

Small hot kernels that must not cost a call are ``forceinline=True``: compiled once, then inlined
by LLVM into each caller (Numba marks them ``alwaysinline``), which gives the same machine code as
Numba-level inlining without typing and lowering the body again at every call site (a cold
``fastenc gpt2`` compiles in half the CPU time; docs/compile.md). The reference-count pairs they would add are pruned after the inlining, as
within one function.
"""
HELPER = dict(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)


def _no_refcounting() -> dict:
    """``{"_nrt": False}`` where this Numba takes it, else ``{}``.

    ``_nrt=False`` compiles a kernel without Numba's reference counting: no ``NRT_incref`` /
    ``NRT_decref`` calls (an atomic add each) around the arrays it touches. The GPT-2 encode
    loop paid two such calls per piece, ~20% of a warm pass.
    Such a kernel must not allocate (no ``np.empty``): its scratch is passed in. The flag is
    private to Numba, so it is probed here: without it the kernels compile and give the same
    ids, only slower.
    """
    from numba.core.options import DefaultOptions

    return {"_nrt": False} if hasattr(DefaultOptions, "_nrt") else {}


NO_REFCOUNTING = _no_refcounting()
