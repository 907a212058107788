"""Memory intrinsics: an 8-byte little-endian load in one instruction (``load_word``), a
prefetch hint (``prefetch``), and the piece caches' slot hash (``hash_words``: CRC32C where the
CPU has it).

``load_word`` reads eight bytes of a ``uint8`` array as one little-endian ``uint64``.

The piece caches build their keys, and the pre-tokenizer scans ASCII letters, eight bytes at a
time. An ``@intrinsic`` is emitted straight into the calling kernel (no call, so no reference
counting of the array) as a single unaligned load, byte-swapped on a big-endian machine. The
caller checks the range: ``data[i:i + 8]`` must lie inside the array.
"""
from __future__ import annotations

import os
import platform
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



@intrinsic
def load_flat(typingctx, table, i):
    """Element ``i`` of a C-contiguous ``table`` counted as if it were flat (``table.ravel()[i]``,
    for a 2-D table ``row * table.shape[1] + column``); no bounds check, the caller checks.

    For the piece caches' probes: ``table[row, col]`` costs a multiply by ``shape[1]`` (read from
    memory: Numba does not know the row width) and wraparound code for a signed row, on the
    address of the load that every lookup waits for; here the caller's width is a constant.
    Only for C-contiguous arrays (another layout does not type: a compile error, never a wrong read)."""
    if not isinstance(table, types.Array) or table.layout != "C":
        return None
    sig = table.dtype(table, types.intp)

    def codegen(context, builder, signature, args):
        array, index = args
        base = context.make_array(signature.args[0])(context, builder, array).data
        return builder.load(builder.gep(base, [index]))

    return sig, codegen


@intrinsic
def prefetch(typingctx, arr, index):
    """Hint the CPU to start loading the cache line of element ``index`` of ``arr``, counted
    from its first element (for a C-contiguous 2-D table, ``row * arr.shape[1]``). It never
    faults, whatever the index, and returns nothing (``llvm.prefetch``: read, keep in every
    cache level). Used where reads are random: a few items ahead, their misses overlap
    instead of queueing (the piece-cache probes, the URL gathers)."""
    sig = types.void(arr, types.intp)

    def codegen(context, builder, signature, args):
        a, i = args
        ptr = builder.gep(context.make_array(signature.args[0])(context, builder, a).data, [i])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def _window_vector(context, builder, signature, args):
    """The shared start of ``ascii_masks64`` and ``wide_masks64``: ``data[i:i + 64]`` as one
    ``<64 x i8>`` load (unaligned), ``splat(c)`` (c in every lane) and ``bits(flags)`` (``<64 x i1>``
    -> i64, lane k -> bit k)."""
    array, index = args
    base = context.make_array(signature.args[0])(context, builder, array).data
    vec = ir.VectorType(ir.IntType(8), 64)
    v = builder.load(builder.bitcast(builder.gep(base, [index]), vec.as_pointer()), align=1)

    def splat(c):
        return ir.Constant(vec, [c] * 64)

    def bits(flags):
        return builder.bitcast(flags, ir.IntType(64))

    return v, splat, bits


@intrinsic
def ascii_masks64(typingctx, data, i):
    """Six bitmasks of ``data[i:i + 64]`` (bit k for byte ``i + k``), for the block
    pre-tokenizer: ASCII letters, digits, whitespace (``\\t\\n\\v\\f\\r`` and space), the space
    0x20, the apostrophe, and bytes >= 0x80. No bounds check: the caller checks the range.

    Written as LLVM vector code (one 64-byte load, compares, ``<64 x i1>`` to ``i64``), which
    LLVM lowers for the CPU at hand: AVX2 compares and ``vpmovmskb`` here, SSE2 or NEON
    elsewhere, so there is no CPU-specific path to choose at run time. Little-endian only (the
    bit order of the mask); ``ASCII_MASKS`` says whether it may be used.
    """
    sig = types.UniTuple(types.uint64, 6)(data, types.intp)

    def codegen(context, builder, signature, args):
        v, splat, bits = _window_vector(context, builder, signature, args)

        letter = builder.icmp_unsigned("<", builder.sub(builder.or_(v, splat(0x20)), splat(0x61)), splat(26))
        digit = builder.icmp_unsigned("<", builder.sub(v, splat(0x30)), splat(10))
        space = builder.icmp_unsigned("==", v, splat(0x20))
        control = builder.icmp_unsigned("<", builder.sub(v, splat(0x09)), splat(5))
        apostrophe = builder.icmp_unsigned("==", v, splat(0x27))
        high = builder.icmp_signed("<", v, splat(0))
        masks = [bits(letter), bits(digit), bits(builder.or_(space, control)), bits(space), bits(apostrophe), bits(high)]
        return context.make_tuple(builder, signature.return_type, masks)

    return sig, codegen


@intrinsic
def wide_masks64(typingctx, data, i):
    """Three more bitmasks of ``data[i:i + 64]`` for the cl100k/o200k windows, whose patterns
    treat some bytes apart from ``ascii_masks64``'s classes: CR and LF (``[\\r\\n]``), the slash
    (o200k's ``[\\r\\n/]*`` after punctuation) and the upper-case letters A-Z (o200k splits
    letter runs by case). Same vector code, load and bit order as ``ascii_masks64`` (LLVM merges
    the two loads of one address and drops a mask that is not used); no bounds check."""
    sig = types.UniTuple(types.uint64, 3)(data, types.intp)

    def codegen(context, builder, signature, args):
        v, splat, bits = _window_vector(context, builder, signature, args)

        crlf = builder.or_(builder.icmp_unsigned("==", v, splat(0x0D)), builder.icmp_unsigned("==", v, splat(0x0A)))
        slash = builder.icmp_unsigned("==", v, splat(0x2F))
        upper = builder.icmp_unsigned("<", builder.sub(v, splat(0x41)), splat(26))
        return context.make_tuple(builder, signature.return_type, [bits(crlf), bits(slash), bits(upper)])

    return sig, codegen


ASCII_MASKS = sys.byteorder == "little"  # ascii_masks64's bit order holds on little-endian machines


@intrinsic
def element_address(typingctx, arr, i):
    """The address (as ``uint64``) of element ``i`` of ``arr``, counted from its first element as
    if it were flat; no bounds check. With ``load_at`` it lets a kernel choose *which table* to read
    by a register select instead of a branch (``piece_cache.piece_slot``)."""
    if not isinstance(arr, types.Array):
        return None
    sig = types.uint64(arr, types.intp)

    def codegen(context, builder, signature, args):
        a, index = args
        ptr = builder.gep(context.make_array(signature.args[0])(context, builder, a).data, [index])
        return builder.ptrtoint(ptr, ir.IntType(64))

    return sig, codegen


@intrinsic
def load_at(typingctx, address):
    """The ``uint64`` at ``address`` (8-byte aligned: an ``element_address`` of a ``uint64`` table)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        return builder.load(builder.inttoptr(args[0], i64.as_pointer()), align=8)

    return sig, codegen


# --- Slots that several threads read and fill (piece_cache's "Shared caches") ---
# A writer claims an empty slot (``claim_at``: 0 -> a claim mark, one compare-and-swap, so two
# writers never fill the same slot), writes its words, and stores the slot's key-closing word
# last (``store_release_at``); a reader loads that word first (``load_acquire_at``). Release and
# acquire make every word written before the release visible to a reader whose acquire saw it,
# and keep the compiler from moving the reader's other loads above it. On x86 both are plain
# moves (only the compiler is held back); on Arm they are ldar/stlr.


@intrinsic
def load_acquire_at(typingctx, address):
    """``load_at`` with acquire ordering: the loads after it see every store made before the
    ``store_release_at`` whose value it read."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        return builder.load_atomic(builder.inttoptr(args[0], i64.as_pointer()), "acquire", 8)

    return sig, codegen


@intrinsic
def store_release_at(typingctx, address, value):
    """Store the ``uint64`` ``value`` at ``address`` (8-byte aligned) with release ordering: the
    stores before it are visible to a reader that sees this one (``load_acquire_at``)."""
    sig = types.void(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        builder.store_atomic(args[1], builder.inttoptr(args[0], i64.as_pointer()), "release", 8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def claim_at(typingctx, address, expected, value):
    """Atomically: if the ``uint64`` at ``address`` is ``expected``, make it ``value`` and return
    True; else change nothing and return False (one ``lock cmpxchg`` on x86)."""
    sig = types.boolean(types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        ptr = builder.inttoptr(args[0], i64.as_pointer())
        pair = builder.cmpxchg(ptr, args[1], args[2], "acq_rel", "acquire")
        return builder.extract_value(pair, 1)

    return sig, codegen


@intrinsic
def prefetch_at(typingctx, address):
    """``prefetch`` of a raw address (an ``element_address``)."""
    sig = types.void(types.uint64)

    def codegen(context, builder, signature, args):
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.inttoptr(args[0], i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def _store_element(builder, base, index, k, value):
    """Store the i64 ``value`` into element ``index + k`` of an integer array whose data starts at
    ``base``, narrowed or widened to the element's width (the id stores' path for any output type)."""
    element = base.type.pointee
    if element.width < 64:
        value = builder.trunc(value, element)
    elif element.width > 64:
        value = builder.zext(value, element)
    builder.store(value, builder.gep(base, [builder.add(index, ir.Constant(index.type, k))]))


@intrinsic
def store_ids8(typingctx, out, pos, low, high):
    """Write the eight 16-bit ids packed in ``low`` (ids 0-3, id k in bits 16k..16k+15) and ``high``
    (ids 4-7) to ``out[pos:pos + 8]``; no bounds check. For a 16-bit ``out`` that is two unaligned
    8-byte stores (little-endian machines; a big-endian one stores id by id), for any other integer
    ``out`` eight element stores: one branch-free emit for a cache hit, whatever its id count (the
    places past the count are scratch that the next piece overwrites)."""
    if not isinstance(out, types.Array) or not isinstance(out.dtype, types.Integer):
        return None
    sig = types.void(out, types.intp, types.uint64, types.uint64)
    packed = out.dtype.bitwidth == 16 and sys.byteorder == "little"

    def codegen(context, builder, signature, args):
        a, index, lo, hi = args
        base = context.make_array(signature.args[0])(context, builder, a).data
        i64 = ir.IntType(64)
        first = builder.gep(base, [index])
        if packed:
            builder.store(lo, builder.bitcast(first, i64.as_pointer()), align=1)
            second = builder.gep(base, [builder.add(index, ir.Constant(index.type, 4))])
            builder.store(hi, builder.bitcast(second, i64.as_pointer()), align=1)
        else:
            for k in range(8):
                word = lo if k < 4 else hi
                value = builder.and_(builder.lshr(word, ir.Constant(i64, 16 * (k % 4))), ir.Constant(i64, 0xFFFF))
                _store_element(builder, base, index, k, value)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def store_wide_ids8(typingctx, out, pos, low, high):
    """Write the ids packed three to a word, 18 bits each (id k of a word in bits 18k..18k+17), of
    ``low`` (ids 0-2) and ``high`` (ids 3-5) to ``out[pos:pos + 8]``; places 6 and 7 get ids 0 and 1
    of ``high`` again. No bounds check. The wide piece caches' id words (piece_cache_wide.py): one
    branch-free emit for a cache hit, whatever its id count (the places past the count are scratch
    that the next piece overwrites).

    For a 32-bit ``out`` it is one vector shift, mask and truncation of ``[low] * 3 + [high] * 5``
    and one unaligned 32-byte store (LLVM lowers it for the CPU: AVX-512 or AVX2 shifts here, SSE2
    or NEON elsewhere; element order is the vector's, so any byte order); for any other integer
    ``out`` the same vector, stored element by element."""
    if not isinstance(out, types.Array) or not isinstance(out.dtype, types.Integer):
        return None
    sig = types.void(out, types.intp, types.uint64, types.uint64)
    width = out.dtype.bitwidth

    def codegen(context, builder, signature, args):
        a, index, lo, hi = args
        base = context.make_array(signature.args[0])(context, builder, a).data
        i64 = ir.IntType(64)
        v8 = ir.VectorType(i64, 8)
        vec = ir.Constant(v8, ir.Undefined)
        for k in range(8):
            vec = builder.insert_element(vec, lo if k < 3 else hi, ir.Constant(ir.IntType(32), k))
        shifts = ir.Constant(v8, [18 * (k % 3) for k in range(8)])
        ids = builder.and_(builder.lshr(vec, shifts), ir.Constant(v8, [(1 << 18) - 1] * 8))
        element = base.type.pointee
        if width == 32:
            packed = builder.trunc(ids, ir.VectorType(element, 8))
            pointer = builder.bitcast(builder.gep(base, [index]), ir.VectorType(element, 8).as_pointer())
            builder.store(packed, pointer, align=1)
        else:
            for k in range(8):
                _store_element(builder, base, index, k, builder.extract_element(ids, ir.Constant(ir.IntType(32), k)))
        return context.get_dummy_value()

    return sig, codegen


def _has_crc32c() -> bool:
    """Whether ``hash_words`` compiles to SSE4.2's ``crc32`` on this machine (every x86-64 CPU
    since 2008); ``FASTENC_PORTABLE_HASH=1`` forces the portable mix (for its test: give that
    process its own ``NUMBA_CACHE_DIR``, since Numba's cache index does not see the variable)."""
    if os.environ.get("FASTENC_PORTABLE_HASH") == "1" or platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    from llvmlite import binding

    return "+sse4.2" in binding.get_host_cpu_features().flatten().split(",")


HAS_CRC32C = _has_crc32c()
_MIX1 = 0x9E3779B97F4A7C15
_MIX2 = 0xC2B2AE3D27D4EB4F


@intrinsic
def hash_words(typingctx, a, b):
    """A 64-bit hash of the two words ``a``, ``b`` (``uint64``), for the piece caches' home slots:
    ``crc32c(crc32c(0, a), b)`` where ``HAS_CRC32C`` (two instructions of 3 cycles; every output bit
    depends on every input bit, so any mask of its low bits is a good slot index), else a
    multiply-xorshift mix (``((a * M1) ^ b) * M2``, folded ``h ^ h >> 31`` so the low bits see the
    high input bytes). Either is fine for a memo: the hash only places entries, it never changes
    an output; within one process every lookup and store uses the same one."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        x, y = args
        if HAS_CRC32C:
            crc = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64, i64]), "llvm.x86.sse42.crc32.64.64")
            return builder.call(crc, [builder.call(crc, [ir.Constant(i64, 0), x]), y])
        h = builder.mul(builder.xor(builder.mul(x, ir.Constant(i64, _MIX1)), y), ir.Constant(i64, _MIX2))
        return builder.xor(h, builder.lshr(h, ir.Constant(i64, 31)))

    return sig, codegen
