"""Any split pattern, as data: a backtracking scanner over the program ``fastenc.pattern`` compiles.

One kernel serves every pattern (the program is an ``int32`` array, the code-point classes a
``uint8[0x110000]`` table), so a new tokenizer compiles nothing. The semantics are the reference
engines' (fancy-regex for tiktoken, Oniguruma for HF tokenizers): leftmost match, branches tried
in order, greedy runs that give back one code point at a time, possessive runs and atomic groups
that never do, lookaheads that consume nothing. A match never is empty (the compiler refuses
patterns that could match nothing).

A pre-tokenizer may be a sequence of splits (HF's ``Sequence``): stage k splits each piece of
stage k - 1, and sees that piece as its whole text (``$`` and lookaheads stop at its end). Text no
match covers (a gap) is a piece of its own where the stage keeps gaps (HF's ``Isolated``) and is
dropped where it does not (tiktoken encodes only what its pattern matches).

Bytes that are not valid UTF-8 are taken one at a time, each classed as U+FFFD (what a decoder
with ``errors="replace"`` makes of it); the reference engines only ever see valid text.

``regex_piece_end`` keeps its position between calls in ``state`` (``STATE_WORDS`` int64, all -1
at the start of each text) and backtracks on ``stack`` (int64, 4 words an entry).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros

from fastenc.kernels.jit import HELPER, NO_REFCOUNTING

PROGRAM_MAGIC = 0x52584732  # "RXG2"
KEEP_MATCHES = 1
KEEP_GAPS = 2
EOL_AT_NEWLINE = 4  # Oniguruma's (Ruby syntax) $ also matches before a "\n"

OP_MATCH = 0
OP_SET = 1  # a: set
OP_RUN_GREEDY = 2  # a: set, b: min, c: max (-1: no max)
OP_RUN_POSSESSIVE = 3
OP_RUN_LAZY = 4
OP_SPLIT = 5  # a: try first, b: on failure
OP_JMP = 6  # a: target
OP_EOL = 7
OP_LOOK = 8  # a: the n OP_SET that follow are its body, b: 1 if negative
OP_MARK = 9  # a: register (atomic group start: remember the stack depth)
OP_CUT = 10  # a: register (atomic group end: drop the backtrack points since)
SET_OPS = (OP_SET, OP_RUN_GREEDY, OP_RUN_POSSESSIVE, OP_RUN_LAZY)

MAX_STAGES = 8
MAX_REGS = 32
_CACHED_START = MAX_STAGES  # state: [piece end per stage][next match start][next match end][registers]
_CACHED_END = 2 * MAX_STAGES
_REGS = 3 * MAX_STAGES
STATE_WORDS = _REGS + MAX_REGS
STACK_ENTRY = 4
_PLAIN, _RUN, _LAZY = 0, 1, 2
_NO_MATCH = -1
OVERFLOW = -2  # the backtracking stack is full: the caller grows it and scans again
_REPLACEMENT = 0xFFFD
STAGES_AT = 5  # program header: magic, stages, the one-DFA shortcut (its base, its stride), its window table, stage offsets
DFA_ASCII = 128  # a DFA row's first entries are by ASCII byte (fastenc.pattern.program._kernel_rows)
_U1 = np.uint64(1)


@njit(forceinline=True, **HELPER)
def decode_at(data, pos, end):
    """``(code point, length)`` of the UTF-8 sequence at ``pos`` (before ``end``); an invalid
    byte is ``(-1, 1)``. Well-formed means RFC 3629: no overlongs, no surrogates, <= U+10FFFF."""
    b = np.int64(data[pos])
    if b < 0x80:
        return b, 1
    if b < 0xC2 or b > 0xF4:
        return -1, 1
    lo = 0x80
    hi = 0xBF
    if b < 0xE0:
        n = 2
        cp = b & 0x1F
    elif b < 0xF0:
        n = 3
        cp = b & 0x0F
        if b == 0xE0:
            lo = 0xA0
        elif b == 0xED:
            hi = 0x9F
    else:
        n = 4
        cp = b & 0x07
        if b == 0xF0:
            lo = 0x90
        elif b == 0xF4:
            hi = 0x8F
    if pos + n > end:
        return -1, 1
    b1 = np.int64(data[pos + 1])
    if b1 < lo or b1 > hi:
        return -1, 1
    cp = (cp << 6) | (b1 & 0x3F)
    for j in range(2, n):
        bj = np.int64(data[pos + j])
        if (bj & 0xC0) != 0x80:
            return -1, 1
        cp = (cp << 6) | (bj & 0x3F)
    return cp, n


@njit(forceinline=True, **HELPER)
def _class_at(data, pos, end, classes):
    """``(class, length)`` of the code point at ``pos``."""
    b = data[pos]
    if b < 0x80:
        return np.int64(classes[b]), 1
    cp, n = decode_at(data, pos, end)
    if cp < 0:
        cp = _REPLACEMENT
    return np.int64(classes[cp]), n


@njit(forceinline=True, **HELPER)
def _in_set(prog, sets_base, s, c):
    return (prog[sets_base + 8 * s + (c >> 5)] >> (c & 31)) & 1


@njit(forceinline=True, **HELPER)
def _step_back(data, pos, lo, end):
    """Start of the code point that ends at ``pos`` (``lo`` < ``pos``, both code point starts):
    the one forward decoding from ``lo`` reaches, since a well-formed sequence can only start at
    its lead byte and an invalid byte is one code point."""
    if data[pos - 1] < 0x80:
        return pos - 1
    for n in range(2, 5):
        q = pos - n
        if q < lo:
            break
        cp, m = decode_at(data, q, end)
        if cp >= 0 and m == n:
            return q
    return pos - 1


@njit(**HELPER, **NO_REFCOUNTING)
def _run_branch(data, pos, end, classes, prog, sets_base, code_base, pc, eol_nl, stack, state):
    """End of the match of the branch at ``pc`` that starts at ``pos``, ``_NO_MATCH``, or ``OVERFLOW``."""
    sp = 0
    cap = stack.shape[0] // STACK_ENTRY
    while True:
        ok = True
        ins = code_base + 4 * pc
        op = prog[ins]
        if op == OP_SET:
            ok = False
            if pos < end:
                c, n = _class_at(data, pos, end, classes)
                if _in_set(prog, sets_base, prog[ins + 1], c):
                    pos += n
                    pc += 1
                    ok = True
        elif op == OP_RUN_GREEDY or op == OP_RUN_POSSESSIVE:
            s = prog[ins + 1]
            lo = prog[ins + 2]
            hi = prog[ins + 3]
            count = 0
            p = pos
            min_pos = pos if lo == 0 else -1
            while p < end and (hi < 0 or count < hi):
                c, n = _class_at(data, p, end, classes)
                if not _in_set(prog, sets_base, s, c):
                    break
                p += n
                count += 1
                if count == lo:
                    min_pos = p
            if count < lo:
                ok = False
            else:
                if op == OP_RUN_GREEDY and p > min_pos:
                    if sp >= cap:
                        return OVERFLOW
                    e = STACK_ENTRY * sp
                    stack[e] = _RUN
                    stack[e + 1] = pc + 1
                    stack[e + 2] = p
                    stack[e + 3] = min_pos
                    sp += 1
                pos = p
                pc += 1
        elif op == OP_RUN_LAZY:
            s = prog[ins + 1]
            lo = prog[ins + 2]
            hi = prog[ins + 3]
            count = 0
            while count < lo and pos < end:
                c, n = _class_at(data, pos, end, classes)
                if not _in_set(prog, sets_base, s, c):
                    break
                pos += n
                count += 1
            if count < lo:
                ok = False
            else:
                if hi < 0 or count < hi:
                    if sp >= cap:
                        return OVERFLOW
                    e = STACK_ENTRY * sp
                    stack[e] = _LAZY
                    stack[e + 1] = pc
                    stack[e + 2] = pos
                    stack[e + 3] = count
                    sp += 1
                pc += 1
        elif op == OP_SPLIT:
            if sp >= cap:
                return OVERFLOW
            e = STACK_ENTRY * sp
            stack[e] = _PLAIN
            stack[e + 1] = prog[ins + 2]
            stack[e + 2] = pos
            stack[e + 3] = 0
            sp += 1
            pc = prog[ins + 1]
        elif op == OP_JMP:
            pc = prog[ins + 1]
        elif op == OP_EOL:
            ok = pos >= end or (eol_nl and data[pos] == 0x0A)
            pc += 1
        elif op == OP_LOOK:
            n_items = prog[ins + 1]
            p = pos
            seen = True
            for j in range(n_items):
                if p >= end:
                    seen = False
                    break
                c, n = _class_at(data, p, end, classes)
                if not _in_set(prog, sets_base, prog[ins + 4 * (j + 1) + 1], c):
                    seen = False
                    break
                p += n
            ok = seen != (prog[ins + 2] != 0)
            pc += 1 + n_items
        elif op == OP_MARK:
            state[_REGS + prog[ins + 1]] = sp
            pc += 1
        elif op == OP_CUT:
            sp = state[_REGS + prog[ins + 1]]
            pc += 1
        else:  # OP_MATCH
            return pos
        if not ok:
            resumed = False
            while sp > 0:
                sp -= 1
                e = STACK_ENTRY * sp
                kind = stack[e]
                if kind == _PLAIN:
                    pc = stack[e + 1]
                    pos = stack[e + 2]
                    resumed = True
                    break
                if kind == _RUN:
                    back = _step_back(data, stack[e + 2], stack[e + 3], end)
                    if back > stack[e + 3]:
                        stack[e + 2] = back
                        sp += 1  # (the entry stays: it may give back more)
                    pc = stack[e + 1]
                    pos = back
                    resumed = True
                    break
                # _LAZY: take one more code point, if the run may and it is in the set
                lazy = code_base + 4 * stack[e + 1]
                hi = prog[lazy + 3]
                at = stack[e + 2]
                count = stack[e + 3]
                if (hi < 0 or count < hi) and at < end:
                    c, n = _class_at(data, at, end, classes)
                    if _in_set(prog, sets_base, prog[lazy + 1], c):
                        stack[e + 2] = at + n
                        stack[e + 3] = count + 1
                        if hi < 0 or count + 1 < hi:
                            sp += 1
                        pc = stack[e + 1] + 1
                        pos = at + n
                        resumed = True
                        break
            if not resumed:
                return _NO_MATCH


@njit(forceinline=True, **HELPER)
def dfa_match(data, pos, end, classes, prog, dfa, stride):
    """End of the DFA's match at ``pos`` (``fastenc.pattern.dfa``: one load per code point, with
    no class lookup for ASCII), or ``_NO_MATCH``. Indices are unsigned: Numba adds negative-index
    code to every signed one."""
    base = np.uint64(dfa)
    row = np.uint64(stride)  # the start state's row
    eot = np.uint64(stride - 1)
    last = _NO_MATCH
    p = pos
    while True:
        n = 0
        if p < end:
            b = data[p]
            if b < 0x80:
                t = prog[base + row + np.uint64(b)]
                n = 1
                if np.uint64(t >> 1) == row:
                    # A run that loops on this state (letters of a word, spaces): its entries do not
                    # depend on one another, so the loads overlap where a state-to-state chain cannot.
                    q = p + 1
                    while q < end and data[q] < 0x80 and prog[base + row + np.uint64(data[q])] == t:
                        q += 1
                    if t & 1:
                        last = q - 1
                    p = q
                    continue
            else:
                cp, n = decode_at(data, p, end)
                if cp < 0:
                    cp = _REPLACEMENT
                t = prog[base + row + np.uint64(DFA_ASCII) + np.uint64(classes[cp])]
        else:
            t = prog[base + row + eot]
        if t & 1:
            last = p
        row = np.uint64(t >> 1)
        if row == 0 or n == 0:
            return last
        p += n


DFA_WINDOW = 64  # the bytes dfa_window_starts reads at most (a piece start is a bit of a uint64)
_U0 = np.uint64(0)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U4 = np.uint64(4)
_U15 = np.uint64(15)
_U63 = np.uint64(63)


@njit(forceinline=True, **HELPER)
def dfa_window_starts(data, pos, prog):
    """The pieces that start in ``data[pos + 1:pos + 64]``, as a bitmask (bit k: a piece starts at
    ``pos + k``), for a program with a window table (``prog[4] >= 0``: its last split has a DFA):
    the contract of ``pretok_cl100k.cl100k_window_starts``, for any pattern with a DFA. ``pos``
    must be a piece start and ``pos + 64`` at most the end of the text the last split sees (the
    text, or the piece of the split before it: ``window_end``). Bits past the last piece it
    settles are 0.

    The window table (``fastenc.pattern.program._window_table``) is the DFA over two or four ASCII
    bytes a step, run on from match to match: where a piece's state dies with its match ending
    before a byte, the entry marks that end and goes on as the start state would, so most pieces
    cost no branch; the state-to-state chain of loads is the cost, a load per step. A state that
    dies past its last match (``\\s+(?!\\S)`` before a word) stops the table: the piece is walked
    again with the DFA's rows to find that match. It stops at a byte >= 0x80 and where no match
    starts (a gap: ``regex_piece_end`` decides those)."""
    win = np.uint64(prog[4])
    quad = prog[win] == 4
    row_size = np.uint64(prog[win + _U1])
    n_pair = np.uint64(prog[win + _U2])
    rows = np.uint64(prog[win + _U3])
    first = win + np.uint64(6)
    second = first + np.uint64(256)
    pair_class = second + np.uint64(256)
    upos = np.uint64(pos)
    limit = upos + np.uint64(DFA_WINDOW)
    starts = _U0
    row = row_size  # the start state's
    p = upos
    while True:
        t = 0
        if quad:
            while p + _U3 < limit:
                x = np.uint64(prog[pair_class + np.uint64(prog[first + np.uint64(data[p])])
                                   + np.uint64(prog[second + np.uint64(data[p + _U1])])])
                y = np.uint64(prog[pair_class + np.uint64(prog[first + np.uint64(data[p + _U2])])
                                   + np.uint64(prog[second + np.uint64(data[p + _U3])])])
                t = prog[rows + row + x * n_pair + y]
                starts |= np.uint64(t & 15) << (p - upos)
                row = np.uint64(t >> 6)
                if row == 0:
                    break
                p += _U4
        else:
            while p + _U1 < limit:
                x = np.uint64(prog[pair_class + np.uint64(prog[first + np.uint64(data[p])])
                                   + np.uint64(prog[second + np.uint64(data[p + _U1])])])
                t = prog[rows + row + x]
                starts |= np.uint64(t & 15) << (p - upos)
                row = np.uint64(t >> 6)
                if row == 0:
                    break
                p += _U2
        if row != 0:
            break  # the window's end: the last piece is not settled
        p += np.uint64((t >> 4) & 3)  # the byte where the state died
        if data[p] >= 0x80 or ((starts >> (p - upos)) & _U1) != 0:
            break  # a byte the table does not take, or a gap after the piece that ended here
        # The piece died past its last match: walk it again with the DFA's rows for that match's end.
        piece = upos if starts == 0 else upos + _U63 - np.uint64(leading_zeros(starts))
        dfa = np.uint64(prog[win + _U4])
        r = np.uint64(prog[win + np.uint64(5)])
        last = _U0
        q = piece
        while q < p:
            u = prog[dfa + r + np.uint64(data[q])]
            if u & 1:
                last = q
            r = np.uint64(u >> 1)
            q += _U1
        if last == 0:
            break  # no match at the piece's start: a gap
        starts |= _U1 << (last - upos)
        p = last
        row = row_size
    return starts


@njit(forceinline=True, **HELPER)
def window_end(prog, state, end):
    """The end of the text that the last split sees at a piece start where ``regex_piece_end``
    has left ``state``: ``end`` for one split, else the end of the piece of the split before it
    (-1 where none is known: call ``regex_piece_end`` first). Below it the last split's pieces are
    the pieces, so ``dfa_window_starts`` may take them while ``pos + 64`` is at most this end."""
    n_stages = prog[1]
    return end if n_stages == 1 else state[n_stages - 2]


@njit(forceinline=True, **HELPER)
def _match_at(data, pos, end, classes, prog, st, stack, state):
    """End of the stage's leftmost-first match at ``pos``, ``_NO_MATCH`` or ``OVERFLOW``."""
    if prog[st + 6] >= 0:
        return dfa_match(data, pos, end, classes, prog, prog[st + 6], prog[st + 7])
    n_branches = prog[st + 1]
    sets_base = prog[st + 2]
    branches = prog[st + 3]
    code_base = prog[st + 4]
    eol_nl = (prog[st] & EOL_AT_NEWLINE) != 0
    c, _ = _class_at(data, pos, end, classes)
    for b in range(n_branches):
        first = prog[branches + 2 * b + 1]
        if first >= 0 and not _in_set(prog, sets_base, first, c):
            continue
        r = _run_branch(data, pos, end, classes, prog, sets_base, code_base, prog[branches + 2 * b], eol_nl, stack,
                        state)
        if r != _NO_MATCH:
            return r
    return _NO_MATCH


@njit(forceinline=True, **HELPER)
def _next_match(data, pos, end, classes, prog, st, stack, state, k):
    """The stage's next match at or after ``pos`` into ``state`` (start ``end``: none); False on
    ``OVERFLOW``."""
    sets_base = prog[st + 2]
    first_any = prog[st + 5]
    p = pos
    while p < end:
        c, n = _class_at(data, p, end, classes)
        if first_any < 0 or _in_set(prog, sets_base, first_any, c):
            r = _match_at(data, p, end, classes, prog, st, stack, state)
            if r == OVERFLOW:
                return False
            if r != _NO_MATCH:
                state[_CACHED_START + k] = p
                state[_CACHED_END + k] = r
                return True
        p += n
    state[_CACHED_START + k] = end
    state[_CACHED_END + k] = end
    return True


@njit(forceinline=True, **HELPER, **NO_REFCOUNTING)
def _stage_piece(data, pos, end, classes, prog, k, stack, state):
    """Stage k's piece at ``pos`` (its text ends at ``end``): its end, or ``-(q) - 1`` to drop
    the bytes up to q, or ``pos`` on ``OVERFLOW``."""
    st = prog[STAGES_AT + k]
    if state[_CACHED_START + k] < pos:
        if not _next_match(data, pos, end, classes, prog, st, stack, state, k):
            return pos
    start = state[_CACHED_START + k]
    flags = prog[st]
    if start == pos:
        state[_CACHED_START + k] = -1
        stop = state[_CACHED_END + k]
        return stop if flags & KEEP_MATCHES else -stop - 1
    return start if flags & KEEP_GAPS else -start - 1


@njit(**HELPER, **NO_REFCOUNTING)
def regex_piece_end(data, pos, end, classes, prog, state, stack):
    """The piece that starts at byte ``pos`` of the text ``data[..end]``: its exclusive end
    (> ``pos``); or ``-(q) - 1``: the bytes ``pos..q`` are in no piece (dropped); or ``pos``:
    ``stack`` is too small (grow it, reset ``state``, scan the text again).

    Calls for one text must come in order, each at the end the one before gave (its start
    first), with ``state`` all -1 before the first. A caller in a hot loop first tries
    ``dfa_match(data, pos, end, classes, prog, prog[2], prog[3])`` where ``prog[2] >= 0`` (one
    split with a DFA, most models: its match is the piece) and calls this only where that gives
    none. Compiled without reference counting, as the general scanner it inlines (it allocates
    nothing): with it, each call paid an incref and a decref of every array at each level."""
    if prog[2] >= 0:
        r = dfa_match(data, pos, end, classes, prog, prog[2], prog[3])
        if r > pos:
            return r
    return _piece_end_general(data, pos, end, classes, prog, state, stack)


@njit(forceinline=True, **HELPER, **NO_REFCOUNTING)
def _piece_end_general(data, pos, end, classes, prog, state, stack):
    """``regex_piece_end`` for sequences of splits, gaps and backtracking."""
    n_stages = prog[1]
    limit = end
    for k in range(n_stages):
        if pos >= state[k]:
            r = _stage_piece(data, pos, limit, classes, prog, k, stack, state)
            for j in range(k + 1, n_stages):
                state[j] = -1
                state[_CACHED_START + j] = -1
            if r <= pos:
                state[k] = -1
                return r
            state[k] = r
        limit = state[k]
    return limit


@njit(cache=True)
def regex_split(data, start, end, classes, prog):
    """Every piece of ``data[start:end]``: ``int64[n, 2]`` of (start, end). For tests and for
    code that wants the pieces themselves."""
    state = np.full(STATE_WORDS, -1, dtype=np.int64)
    stack = np.empty(STACK_ENTRY * 64, dtype=np.int64)
    out = np.empty((max(end - start, 1), 2), dtype=np.int64)
    n = 0
    pos = start
    while pos < end:
        r = regex_piece_end(data, pos, end, classes, prog, state, stack)
        if r == pos:
            stack = np.empty(2 * stack.shape[0], dtype=np.int64)
            state[:] = -1
            n = 0
            pos = start
            continue
        if r < 0:
            pos = -r - 1
            continue
        out[n, 0] = pos
        out[n, 1] = r
        n += 1
        pos = r
    return out[:n].copy()


@njit(cache=True)
def regex_split_windowed(data, start, end, classes, prog):
    """``regex_split`` taking pieces from ``dfa_window_starts`` wherever the wide encode loop would
    (64 bytes to ``window_end``, an ASCII byte first): the same pieces, for tests of the window."""
    state = np.full(STATE_WORDS, -1, dtype=np.int64)
    stack = np.empty(STACK_ENTRY * 64, dtype=np.int64)
    out = np.empty((max(end - start, 1), 2), dtype=np.int64)
    n = 0
    pos = start
    while pos < end:
        if prog[4] >= 0 and pos + DFA_WINDOW <= window_end(prog, state, end) and data[pos] < 0x80:
            starts = dfa_window_starts(data, pos, prog)
            if starts != 0:
                at = pos
                while starts != 0:
                    r = at + np.int64(trailing_zeros(starts))
                    starts &= starts - _U1
                    out[n, 0] = pos
                    out[n, 1] = r
                    n += 1
                    pos = r
                continue
        r = regex_piece_end(data, pos, end, classes, prog, state, stack)
        if r == pos:
            stack = np.empty(2 * stack.shape[0], dtype=np.int64)
            state[:] = -1
            n = 0
            pos = start
            continue
        if r < 0:
            pos = -r - 1
            continue
        out[n, 0] = pos
        out[n, 1] = r
        n += 1
        pos = r
    return out[:n].copy()
