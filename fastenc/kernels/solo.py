"""One call's worth of work in one thread, for ``Encoder.encode`` and small batches: a *lane*.

A lane is a Numba ``StructRef`` holding everything the encode loop takes besides the text (the
vocabulary, the class table, a set of piece caches, the scratch, a two-entry offsets array, a count
and an output buffer), so that a one-text call passes two arguments instead of ~25 arrays. Why:
Numba's dispatcher types and unboxes every argument on every call, and the batch kernel's argument
list (a 13-array ``Vocab``, a 4-array ``PieceCaches``, ...) cost more than encoding a short text. A
lane's compiled entry point is called directly (``entry``), which skips the typing too, and the
narrow kernels read the lane's fields without reference counting (``_lane_fields``): with it, each
call paid an atomic update per array, twice.

The kernels call the batch path's own code (``runs._encode_span``; ``runs.encode_docs_wide`` for the
wide loop) with the same argument types, so Numba links the code compiled (or cached) for it instead
of compiling the loops again. A lane is used by one thread at a time (``Encoder`` hands it out);
its scratch is reused from call to call.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.core.runtime.nrtdynmod import _meminfo_struct_type
from numba.extending import intrinsic
from numba.experimental import structref

from fastenc.kernels.bpe import grown_work
from fastenc.kernels.encode import EncodeScratch, check_narrow_classes, new_scratch
from fastenc.kernels.jit import HELPER, NO_REFCOUNTING
from fastenc.kernels.runs import _STOP_OUT, _encode_span, encode_docs_wide


@structref.register
class LaneType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Lane(structref.StructRefProxy):
    """A lane (module docstring); build it with ``new_lane`` / ``new_wide_lane``."""


structref.define_proxy(Lane, LaneType, ["vocab", "classes", "caches", "scratch", "offsets", "counts", "out"])

NO_ROOM = -(1 << 62)  # ``lane_one``'s answer when the text may have more ids than the lane's ``out`` holds


@njit(cache=True)
def new_lane(vocab, classes, caches, out):
    """A lane for the narrow loop (``runs.encode_docs``' vocabularies)."""
    check_narrow_classes(vocab, classes)
    return Lane(vocab, classes, caches, new_scratch(), np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.int64), out)


@njit(cache=True)
def new_wide_lane(vocab, classes, caches, out):
    """A lane for the wide loop (``runs.encode_docs_wide``' vocabularies, which allocates its scratch
    per call: the lane's is an empty placeholder)."""
    return Lane(vocab, classes, caches, np.zeros(0, dtype=np.int64), np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.int64),
                out)


@intrinsic
def _bytes_as_array(typingctx, data):
    """``bytes`` seen as a read-only uint8 array (no copy, no allocation: the two types share one data
    model; the caller's ``bytes`` outlives the call)."""
    if not isinstance(data, types.Bytes):
        return None

    def codegen(context, builder, signature, args):
        return impl_ret_borrowed(context, builder, signature.return_type, args[0])

    return types.Array(types.uint8, 1, "C", readonly=True)(data), codegen


@intrinsic
def _lane_fields(typingctx, lane):
    """A lane's fields as a tuple, read straight from its memory: in a kernel compiled without
    reference counting, with none (the lane outlives the call); in others, counted as borrowed."""
    if not isinstance(lane, LaneType):
        return None
    payload = lane.get_data_type()
    names = list(payload.field_dict)
    result = types.Tuple([payload.field_dict[n] for n in names])

    def codegen(context, builder, signature, args):
        meminfo = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0]).meminfo
        header = builder.bitcast(meminfo, _meminfo_struct_type.as_pointer())
        data = builder.load(cgutils.gep(builder, header, 0, 3))  # (NRT_MemInfo_data)
        struct = cgutils.create_struct_proxy(payload)(
            context, builder, ref=builder.bitcast(data, context.get_value_type(payload).as_pointer()))
        fields = context.make_tuple(builder, signature.return_type, [getattr(struct, n) for n in names])
        return impl_ret_borrowed(context, builder, signature.return_type, fields)

    return result(lane), codegen


@njit(**HELPER, **NO_REFCOUNTING)
def _lane_run(vocab, classes, caches, scratch, data, offsets, first, last, out, at, counts):
    """``runs.encode_docs`` (``eos < 0``) with a lane's fields: documents ``first..last-1`` back to back
    into ``out`` from ``at``; returns the end position, or minus the merge room a long part needs when
    that is more than the lane's work array holds: then ``grow_lane`` and call again (the call starts
    over; the caches only memoize)."""
    if first >= last:
        return at
    state = scratch.state
    state[5] = 0  # (a run resumes a memo store only within one call)
    pos = offsets[first]
    doc = _encode_span(data, offsets, first, last, pos, pos, at, at, np.int64(-1), vocab, classes, caches,
                       scratch.ranks, scratch.work, scratch.ring, state, out, counts)
    if doc < last:
        return -state[2]
    return state[_STOP_OUT]


@njit(cache=True, nogil=True, **NO_REFCOUNTING)
def lane_docs(lane, data, offsets, first, last, out, at, counts):
    """``_lane_run`` on a lane. Without reference counting: with it, reading the lane's ~25 arrays
    cost an atomic count update each way, more than encoding a short text."""
    vocab, classes, caches, scratch, _, _, _ = _lane_fields(lane)
    return _lane_run(vocab, classes, caches, scratch, data, offsets, first, last, out, at, counts)


@njit(cache=True, nogil=True, **NO_REFCOUNTING)
def lane_one(lane, data):
    """The ids of one text (``bytes`` of UTF-8) into the lane's ``out``; returns their count, or minus
    the merge room it needs (``_lane_run``), or ``NO_ROOM`` (then ``lane_docs`` with a bigger ``out``)."""
    vocab, classes, caches, scratch, offsets, counts, out = _lane_fields(lane)
    text = _bytes_as_array(data)
    if text.shape[0] > out.shape[0]:
        return NO_ROOM
    offsets[1] = text.shape[0]
    return _lane_run(vocab, classes, caches, scratch, text, offsets, np.int64(0), np.int64(1), out, np.int64(0), counts)


@njit(cache=True)
def set_lane_out(lane, out):
    """Give a lane a new output buffer (a bigger one: ``lane_one`` answers ``NO_ROOM`` for a text longer than it)."""
    lane.out = out


@njit(cache=True)
def grow_lane(lane, need):
    """Give a narrow lane a work array of at least ``need`` places (``bpe.grown_work``)."""
    s = lane.scratch
    lane.scratch = EncodeScratch(s.ranks, grown_work(s.work, need), s.ring, s.state)


@njit(**HELPER)
def _wide_lane_run(vocab, classes, caches, scratch, data, offsets, first, last, out, at, counts):
    """``runs.encode_docs_wide`` itself (the wide loop is inlined there: calling it links that code,
    where a loop of the lane's own would compile the wide loop a second time); ``scratch`` unused."""
    return encode_docs_wide(data, offsets, first, last, vocab, classes, caches, out, at, counts)


@njit(cache=True, nogil=True)
def wide_lane_docs(lane, data, offsets, first, last, out, at, counts):
    """``lane_docs`` for a wide lane (with reference counting: ``encode_docs_wide`` allocates)."""
    vocab, classes, caches, scratch, _, _, _ = _lane_fields(lane)
    return _wide_lane_run(vocab, classes, caches, scratch, data, offsets, first, last, out, at, counts)


@njit(cache=True, nogil=True)
def wide_lane_one(lane, data):
    """``lane_one`` for a wide lane."""
    vocab, classes, caches, scratch, offsets, counts, out = _lane_fields(lane)
    text = _bytes_as_array(data)
    if text.shape[0] > out.shape[0]:
        return NO_ROOM
    offsets[1] = text.shape[0]
    return _wide_lane_run(vocab, classes, caches, scratch, text, offsets, np.int64(0), np.int64(1), out, np.int64(0), counts)


def entry(kernel, *args):
    """``kernel``'s compiled entry point for the types of ``args`` (compiling it if need be; ``args`` are
    also run once): a Python callable that unboxes its arguments as those types without typing them
    again. Only ever call it with arguments of exactly those types."""
    kernel(*args)
    types_ = tuple(kernel.typeof_pyval(a) for a in args)
    return kernel.overloads[types_].entry_point
