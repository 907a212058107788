"""Read eight bytes of a ``uint8`` array as one little-endian ``uint64``, in one instruction.

The piece caches build their keys, and the pre-tokenizer scans ASCII letters, eight bytes at a
time. An ``@intrinsic`` is emitted straight into the calling kernel (no call, so no reference
counting of the array) as a single unaligned load, byte-swapped on a big-endian machine. The
caller checks the range: ``data[i:i + 8]`` must lie inside the array.
"""
from __future__ import annotations

import sys

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def load_word(typingctx, data, i):
    """``sum(data[i + k] << 8 * k for k in range(8))`` as a ``uint64``; no bounds check."""
    sig = types.uint64(data, types.intp)

    def codegen(context, builder, signature, args):
        array, index = args
        base = context.make_array(signature.args[0])(context, builder, array).data
        i64 = ir.IntType(64)
        pointer = builder.bitcast(builder.gep(base, [index]), i64.as_pointer())
        word = builder.load(pointer, align=1)
        if sys.byteorder == "big":
            word = builder.call(cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64]), "llvm.bswap.i64"), [word])
        return word

    return sig, codegen
