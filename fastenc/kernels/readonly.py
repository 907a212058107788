"""One array type for the kernels' byte inputs, whoever calls them.

Numba compiles a kernel once per distinct argument type, and a read-only array is a type of its
own. fastenc's Python side hands the kernels read-only views (Arrow buffers are read-only), but a
user's ``@njit`` code may pass a writable array, and without this every kernel below the entry
point would be compiled again for it: the whole GPT-2 and wide encode loops, ~90 s on a 2-core
machine. ``as_readonly`` is a no-op at run time (the two types share one data model: the same
pointer, shape and strides); it only retypes the array, so the heavy kernels are compiled, and
cached, for read-only data alone.
"""
from __future__ import annotations

from numba import types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic

__all__ = ["as_readonly"]


@intrinsic
def as_readonly(typingctx, arr):
    """``arr`` typed as a read-only array of the same dtype, dimensions and layout (no copy)."""
    if not isinstance(arr, types.Array):
        return None
    target = arr if not arr.mutable else arr.copy(readonly=True)
    sig = target(arr)

    def codegen(context, builder, signature, args):
        return impl_ret_borrowed(context, builder, signature.return_type, args[0])

    return sig, codegen
