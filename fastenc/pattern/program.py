"""Syntax trees of split patterns -> one flat ``int32`` program and a code-point class table.

The program is data for one kernel (``fastenc.kernels.pretok_regex``), so every pattern shares
one compiled scanner. Its layout (all offsets absolute indices into the array):

    [0] PROGRAM_MAGIC   [1] number of stages   [2, 3] the one-DFA shortcut (DFA base or -1, stride)
    [4] the last stage's window table (``_window_table``; -1: none)   [5 + k] offset of stage k
    stage: [flags, n_branches, sets_base, branches_base, code_base, first_any, dfa_base, dfa_stride]
      flags        KEEP_MATCHES | KEEP_GAPS | EOL_AT_NEWLINE
      sets_base    8 words (256 bits) per set: bit c = class c is in the set
      branches     2 words per top-level branch: its first instruction, its FIRST set (-1: any)
      code         4 words per instruction: op, a, b, c (the OP_* codes of the kernel)
      first_any    the set of every class some branch can start with (-1: any)
      dfa          the stage's DFA (``fastenc.pattern.dfa``; -1: none, the backtracking code runs),
                   ``dfa_stride`` = classes + 1 words a state

Code points are mapped to classes (``uint8[0x110000]``): two code points share a class when every
set of every stage treats them alike, so a set test is one bit of 256. Each set is resolved with
the tables of the engine that defines the pattern (``props``), never with Python's own.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fastenc.kernels import pretok_regex as k
from fastenc.pattern import props
from fastenc.pattern.dfa import NotRegular, build_dfa
from fastenc.pattern.parse import PatternError, parse

N_CODEPOINTS = 0x110000
MAX_CLASSES = 256


class Stage(NamedTuple):
    """One split of a pre-tokenizer: its regex, the engine that defines it, what it keeps."""

    pattern: str
    engine: str  # "tiktoken" (fancy-regex) or "hf" (Oniguruma)
    keep_matches: bool = True
    keep_gaps: bool = False  # tiktoken drops the text no match covers; HF's Isolated keeps it


class SplitProgram(NamedTuple):
    program: np.ndarray  # int32, see the module docstring
    classes: np.ndarray  # uint8[0x110000]: code point -> class


def compile_stages(stages: list[Stage]) -> SplitProgram:
    """The program and class table of a sequence of splits (each applied to the pieces of the
    one before, as HF's ``Sequence`` does). Raises ``PatternError`` for what cannot be exact."""
    if not stages:
        raise PatternError("a split program needs at least one pattern")
    sets = _SetTable()
    compilers = [_StageCompiler(stage, sets) for stage in stages]
    stage_codes = [c.build() for c in compilers]
    classes, bitmaps = sets.classes_and_bitmaps()
    for compiler, code in zip(compilers, stage_codes):
        code.dfa = compiler.dfa(classes, bitmaps)
    words = [k.PROGRAM_MAGIC, len(stages), -1, 0, -1] + [0] * len(stages)
    for i, (stage, code) in enumerate(zip(stages, stage_codes)):
        words[k.STAGES_AT + i] = len(words)
        words.extend(code.layout(len(words), bitmaps, stage))
    first = words[k.STAGES_AT]
    if len(stages) == 1 and words[first + 6] >= 0 and stages[0].keep_matches:
        words[2], words[3] = words[first + 6], words[first + 7]  # the kernel's shortcut: this DFA's match is the piece
    last = words[k.STAGES_AT + len(stages) - 1]
    if words[last + 6] >= 0 and stages[-1].keep_matches:
        # Below the pieces of the splits before it, the last split's matches are the pieces: its DFA's window.
        window = _window_table(stage_codes[-1].dfa, words[last + 7])
        if window is not None:
            head, body, entries = window
            words[4] = len(words)
            head[3] = len(words) + len(head) + len(body)  # the rows' base
            head[4], head[5] = words[last + 6], words[last + 7]  # the DFA's rows, for a piece walked again
            words.extend(head)
            words.extend(body.tolist())
            words.extend(entries.tolist())
    return SplitProgram(np.asarray(words, dtype=np.int32), classes)


class _SetTable:
    """Distinct sets of code points (bool arrays), numbered in the order first seen."""

    def __init__(self):
        self.arrays: list[np.ndarray] = []
        self.index: dict[bytes, int] = {}

    def add(self, member: np.ndarray) -> int:
        key = np.packbits(member).tobytes()
        if key not in self.index:
            self.index[key] = len(self.arrays)
            self.arrays.append(member)
        return self.index[key]

    def classes_and_bitmaps(self) -> tuple[np.ndarray, np.ndarray]:
        """Group code points by their membership in every set: the class table, and per set a
        256-bit map of the classes in it (``uint32[n_sets, 8]``)."""
        n = len(self.arrays)
        packed = np.packbits(np.stack(self.arrays), axis=0)  # (ceil(n/8), N)
        rows = np.ascontiguousarray(packed.T)
        view = rows.view(np.dtype((np.void, rows.shape[1])))[:, 0]
        _, first, inverse = np.unique(view, return_index=True, return_inverse=True)
        if first.shape[0] > MAX_CLASSES:
            raise PatternError(f"the split pattern needs {first.shape[0]} classes of code points; "
                               f"fastenc's scanner takes at most {MAX_CLASSES}")
        classes = inverse.reshape(-1).astype(np.uint8)
        member = np.stack(self.arrays)[:, first]  # (n, n_classes): set s holds class c
        bitmaps = np.zeros((n, 8), dtype=np.uint32)
        for c in range(first.shape[0]):
            bitmaps[member[:, c], c >> 5] |= np.uint32(1 << (c & 31))
        classes.flags.writeable = False
        return classes, bitmaps


class _Code:
    """A stage's instructions with set ids and jump targets still symbolic."""

    def __init__(self):
        self.ins: list[list[int]] = []
        self.branches: list[tuple[int, int]] = []  # (first instruction, FIRST set id or -1)
        self.first_any = -1
        self.used_sets: list[int] = []
        self.n_regs = 0
        self.dfa = None  # int32 table, or None: the backtracking code runs
        self.dfa_stride = 0

    def emit(self, op: int, a: int = 0, b: int = 0, c: int = 0) -> int:
        self.ins.append([op, a, b, c])
        return len(self.ins) - 1

    def layout(self, base: int, bitmaps: np.ndarray, stage: Stage) -> list[int]:
        """The stage's words, placed at ``base``: header, its sets' bitmaps (renumbered from 0),
        branches, code."""
        local = {s: i for i, s in enumerate(sorted(set(self.used_sets)))}
        flags = (k.KEEP_MATCHES if stage.keep_matches else 0) | (k.KEEP_GAPS if stage.keep_gaps else 0)
        if stage.engine == "hf":
            flags |= k.EOL_AT_NEWLINE
        header_len = 8
        sets_base = base + header_len
        branches_base = sets_base + 8 * len(local)
        code_base = branches_base + 2 * len(self.branches)
        dfa_base = code_base + 4 * len(self.ins) if self.dfa is not None else -1
        words = [flags, len(self.branches), sets_base, branches_base, code_base,
                 local.get(self.first_any, -1) if self.first_any >= 0 else -1, dfa_base, self.dfa_stride]
        for s in sorted(local, key=local.get):
            words.extend(int(w) for w in bitmaps[s].view(np.int32))
        for pc, first in self.branches:
            words.extend([pc, local[first] if first >= 0 else -1])
        for op, a, b, c in self.ins:
            if op in k.SET_OPS:
                a = local[a]
            words.extend([op, a, b, c])
        if self.dfa is not None:
            words.extend(self.dfa.tolist())
        return words


class _StageCompiler:
    def __init__(self, stage: Stage, sets: _SetTable):
        if stage.engine not in props.ENGINES:
            raise PatternError(f"unknown regex engine {stage.engine!r}; use one of {props.ENGINES}")
        self.stage = stage
        self.sets = sets
        self.code = _Code()
        self.memo: dict[tuple, int] = {}

    def build(self) -> _Code:
        tree = self.tree = parse(self.stage.pattern, self.stage.engine)
        branches = tree[1] if tree[0] == "alt" else (tree,)
        firsts = []
        for i, branch in enumerate(branches):
            if _nullable(branch):
                raise PatternError(f"split pattern {self.stage.pattern!r}: branch {i + 1} can match the empty "
                                   "string (the engines' rules for empty matches differ; fastenc refuses it)")
            pc = len(self.code.ins)
            self.node(branch)
            self.code.emit(k.OP_MATCH)
            first = self.first(branch)
            firsts.append(first)
            self.code.branches.append((pc, self.use(first) if first is not None else -1))
        if all(f is not None for f in firsts):
            self.code.first_any = self.use(np.logical_or.reduce(firsts))
        if self.stage.engine == "hf":
            self.use(_single(0x0A))  # Oniguruma's $ also holds before "\n": give it a class of its own
        return self.code

    def dfa(self, classes: np.ndarray, bitmaps: np.ndarray):
        """The stage's DFA over the final classes, or None where it needs backtracking."""
        n_classes = int(classes.max()) + 1
        self.code.dfa_stride = k.DFA_ASCII + n_classes + 1

        def in_set(s: int, c: int) -> int:
            return (int(bitmaps[s, c >> 5]) >> (c & 31)) & 1

        try:
            table = build_dfa(self.tree, lambda node: self.sets.add(self.member(node)), in_set, n_classes,
                              self.stage.engine == "hf", int(classes[0x0A]))
        except NotRegular:
            return None
        return _kernel_rows(table, classes, n_classes)

    # --- sets ------------------------------------------------------------------------------
    def member(self, node: tuple) -> np.ndarray:
        """bool[0x110000] of a ("set", items, negated) node."""
        key = node
        if key not in self.memo:
            out = np.zeros(N_CODEPOINTS, dtype=bool)
            for item in node[1]:
                out |= self.item(item)
            self.memo[key] = ~out if node[2] else out
        return self.memo[key]

    def item(self, item: tuple) -> np.ndarray:
        engine = self.stage.engine
        kind = item[0]
        if kind == "range":
            out = np.zeros(N_CODEPOINTS, dtype=bool)
            out[item[1] : item[2] + 1] = True
            return out
        if kind == "fold":
            out = np.zeros(N_CODEPOINTS, dtype=bool)
            out[np.asarray(props.casefold_set(item[1], engine), dtype=np.int64)] = True
            return out
        if kind == "prop":
            got = props.property_set(item[1], engine)
            return ~got if item[2] else got.copy()
        if kind == "esc":
            got = props.escape_set(item[1], engine)
            return ~got if item[2] else got.copy()
        if kind == "class":
            return self.member(("set", item[1], item[2]))
        if kind == "and":
            return self.item(item[1]) & self.item(item[2])
        raise AssertionError(item)

    def use(self, member: np.ndarray) -> int:
        s = self.sets.add(member)
        self.code.used_sets.append(s)
        return s

    def first(self, node: tuple):
        """bool[0x110000] of the code points a match of ``node`` can start with, or None (any)."""
        kind = node[0]
        if kind == "set":
            return self.member(node)
        if kind == "seq":
            acc = np.zeros(N_CODEPOINTS, dtype=bool)
            for item in node[1]:
                if item[0] in ("eol", "look"):
                    continue  # an assertion consumes nothing: the next item starts the match
                got = self.first(item)
                if got is None:
                    return None
                acc |= got
                if not _nullable(item):
                    return acc
            return None
        if kind == "alt":
            acc = np.zeros(N_CODEPOINTS, dtype=bool)
            for branch in node[1]:
                got = self.first(branch)
                if got is None:
                    return None
                acc |= got
            return acc
        if kind == "repeat":
            return self.first(node[1])
        if kind == "atomic":
            return self.first(node[1])
        return None

    # --- code ------------------------------------------------------------------------------
    def node(self, node: tuple) -> None:
        kind = node[0]
        emit = self.code.emit
        if kind == "set":
            emit(k.OP_SET, self.use(self.member(node)))
        elif kind == "seq":
            for item in node[1]:
                self.node(item)
        elif kind == "alt":
            self.alternation(node[1])
        elif kind == "repeat":
            self.repeat(*node[1:])
        elif kind == "eol":
            emit(k.OP_EOL)
        elif kind == "look":
            self.lookahead(node[1], node[2])
        elif kind == "atomic":
            self.atomic(lambda: self.node(node[1]))
        else:
            raise AssertionError(node)

    def alternation(self, branches) -> None:
        emit = self.code.emit
        jumps = []
        for i, branch in enumerate(branches):
            if i < len(branches) - 1:
                split = emit(k.OP_SPLIT)
                self.code.ins[split][1] = len(self.code.ins)
                self.node(branch)
                jumps.append(emit(k.OP_JMP))
                self.code.ins[split][2] = len(self.code.ins)
            else:
                self.node(branch)
        for j in jumps:
            self.code.ins[j][1] = len(self.code.ins)

    def repeat(self, body: tuple, lo: int, hi: int, mode: str) -> None:
        emit = self.code.emit
        if body[0] == "set":
            op = {"greedy": k.OP_RUN_GREEDY, "lazy": k.OP_RUN_LAZY, "possessive": k.OP_RUN_POSSESSIVE}[mode]
            emit(op, self.use(self.member(body)), lo, hi)
            return
        if mode == "possessive":
            self.atomic(lambda: self.repeat(body, lo, hi, "greedy"))
            return
        if hi == -1 and _nullable(body):
            raise PatternError(f"split pattern {self.stage.pattern!r}: a repeated group that can match the empty "
                               "string (the engines stop such loops differently)")
        for _ in range(lo):
            self.node(body)
        if hi == -1:
            loop = emit(k.OP_SPLIT)
            self.node(body)
            emit(k.OP_JMP, loop)
            out = len(self.code.ins)
            self._arms(loop, loop + 1, out, mode)
            return
        splits = []
        for _ in range(hi - lo):
            split = emit(k.OP_SPLIT)
            splits.append(split)
            self.node(body)
        out = len(self.code.ins)
        for split in splits:
            self._arms(split, split + 1, out, mode)

    def _arms(self, split: int, body: int, out: int, mode: str) -> None:
        first, second = (body, out) if mode == "greedy" else (out, body)
        self.code.ins[split][1] = first
        self.code.ins[split][2] = second

    def lookahead(self, body: tuple, negated: bool) -> None:
        items = body[1] if body[0] == "seq" else (body,)
        if not all(item[0] == "set" for item in items):
            raise PatternError(f"split pattern {self.stage.pattern!r}: a lookahead other than a fixed sequence of "
                               "characters or classes (such as (?!\\S))")
        self.code.emit(k.OP_LOOK, len(items), int(negated))
        for item in items:
            self.code.emit(k.OP_SET, self.use(self.member(item)))

    def atomic(self, body) -> None:
        reg = self.code.n_regs
        if reg >= k.MAX_REGS:
            raise PatternError(f"split pattern {self.stage.pattern!r}: more than {k.MAX_REGS} atomic groups")
        self.code.n_regs += 1
        self.code.emit(k.OP_MARK, reg)
        body()
        self.code.emit(k.OP_CUT, reg)


def _kernel_rows(table: np.ndarray, classes: np.ndarray, n_classes: int) -> np.ndarray:
    """The DFA as the kernel reads it: a row per state of ``DFA_ASCII`` entries by byte (ASCII skips
    the class table), then one per class, then the end of the text; an entry holds the next
    state's row offset (not its number: no multiply per code point) << 1 | matched."""
    rows = table.reshape(-1, n_classes + 1).astype(np.int64)
    stride = k.DFA_ASCII + n_classes + 1
    nxt = (rows >> 1) * stride << 1 | (rows & 1)
    ascii_part = nxt[:, classes[: k.DFA_ASCII].astype(np.int64)]
    out = np.concatenate([ascii_part, nxt], axis=1).reshape(-1)
    if out.max(initial=0) > np.iinfo(np.int32).max:
        raise NotRegular("a DFA too large for its table")
    return out.astype(np.int32)


WINDOW_QUAD_WORDS = 1 << 17  # the largest table of four-byte steps (larger ones take two bytes a step)


def _window_table(rows: np.ndarray, stride: int):
    """The window table of a DFA in kernel rows (``pretok_regex.dfa_window_starts``), or None where it
    would be too large. Layout: ``[step][row size][pair classes][rows' base][DFA base][DFA stride]
    [byte -> column * columns][byte -> column][column pair -> pair class][rows]``.

    First the DFA over single ASCII bytes run on from match to match: next state, and whether a
    piece ends before the byte. Where the state dies with its match ending before the byte, the
    entry is the start state's on that byte, with the end marked; where it dies past its last match,
    no match can start with the byte, or the byte is >= 0x80, the entry is dead. Bytes whose
    entries agree in every state share a column; pairs of columns whose two-byte steps agree in
    every state share a pair class. A row holds an entry per pair class (two bytes a step) or per
    two pair classes (four bytes a step, where that table is small enough): next row << 6 | the
    byte where the state died << 4 | bit i: a piece ends before byte i."""
    by_byte = rows.reshape(-1, stride)[:, : k.DFA_ASCII].astype(np.int64)
    n_states = by_byte.shape[0]
    nxt = (by_byte >> 1) // stride
    ended = (by_byte & 1) == 1
    step = np.where(nxt != 0, nxt, np.where(ended, nxt[1][None, :], 0))  # the start state's, after an end
    mark = ((nxt == 0) & ended).astype(np.int64)
    step[0] = 0
    mark[0] = 0
    single = np.concatenate([step << 1 | mark, np.zeros((n_states, 1), dtype=np.int64)], axis=1)  # column 128: >= 0x80
    columns, column_of = np.unique(single.T, axis=0, return_inverse=True)
    column_of = column_of.reshape(-1)
    n_cols = columns.shape[0]
    one_state, one_mark = columns.T >> 1, columns.T & 1  # (n_states, n_cols)
    # Two bytes: (next state, the byte it died at or -1, marks), for every state and column pair.
    s1 = one_state  # (n_states, c1)
    s2 = one_state[s1]  # (n_states, c1, c2)
    m2 = one_mark[s1]
    alive1 = (s1 != 0)[:, :, None]
    pair_state = np.where(alive1, s2, 0)
    pair_died = np.where(alive1, np.where(s2 == 0, 1, -1), 0)
    pair_marks = one_mark[:, :, None] | np.where(alive1, m2, 0) << 1
    pair_key = np.stack([pair_state, pair_died, pair_marks], axis=-1).reshape(n_states, n_cols * n_cols, 3)
    classes, class_of = np.unique(pair_key.transpose(1, 0, 2).reshape(n_cols * n_cols, -1), axis=0, return_inverse=True)
    class_of = class_of.reshape(-1)
    n_pair = classes.shape[0]
    by_class = classes.reshape(n_pair, n_states, 3).transpose(1, 0, 2)  # (n_states, n_pair, 3)
    p_state, p_died, p_marks = by_class[..., 0], by_class[..., 1], by_class[..., 2]
    quad = n_states * n_pair * n_pair <= WINDOW_QUAD_WORDS
    if quad:
        row_size = n_pair * n_pair
        a_state, a_died, a_marks = p_state[:, :, None], p_died[:, :, None], p_marks[:, :, None]
        b_state, b_died, b_marks = p_state[a_state[..., 0]], p_died[a_state[..., 0]], p_marks[a_state[..., 0]]
        alive = a_state != 0
        state = np.where(alive, b_state, 0)
        died = np.where(alive, np.where(b_died >= 0, 2 + b_died, -1), a_died)
        marks = a_marks | np.where(alive, b_marks, 0) << 2
    else:
        row_size = n_pair
        state, died, marks = p_state, p_died, p_marks
    if n_states * row_size << 6 > np.iinfo(np.int32).max:
        return None
    entries = (state * row_size) << 6 | np.where(died >= 0, died, 0) << 4 | marks
    entries = entries.reshape(n_states, row_size)
    entries[0] = 0
    byte_col = np.full(256, column_of[-1], dtype=np.int64)
    byte_col[: k.DFA_ASCII] = column_of[: k.DFA_ASCII]
    head = [4 if quad else 2, row_size, n_pair, 0, 0, 0]
    body = [byte_col * n_cols, byte_col, class_of]
    return head, np.concatenate(body), entries.reshape(-1)


def _single(cp: int) -> np.ndarray:
    out = np.zeros(N_CODEPOINTS, dtype=bool)
    out[cp] = True
    return out


def _nullable(node: tuple) -> bool:
    """Can ``node`` match the empty string?"""
    kind = node[0]
    if kind == "set":
        return False
    if kind == "seq":
        return all(_nullable(item) for item in node[1])
    if kind == "alt":
        return any(_nullable(b) for b in node[1])
    if kind == "repeat":
        return node[2] == 0 or _nullable(node[1])
    if kind in ("eol", "look"):
        return True
    if kind == "atomic":
        return _nullable(node[1])
    raise AssertionError(node)
