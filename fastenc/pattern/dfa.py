"""A split pattern -> a DFA with the reference engines' leftmost-first rule, where one exists.

Backtracking engines (fancy-regex, Oniguruma) take the first branch, in pattern order, that
matches; a DFA over *ordered* sets of NFA states gives the same answer (as RE2 does): a state
lists the live threads highest priority first, a thread that reaches the end marks a match and
drops every thread below it, and the threads above it go on and may replace it with their own
match. So the scan is one table load per code point, where the backtracking scanner interprets
the pattern at every piece.

Assertions look at the next code point only (``$``, a one-class lookahead such as ``(?!\\S)``):
each transition is taken on the next class (or the end of the text) and first settles the
assertions against it, so that a match it marks ends *before* that class. What a DFA cannot do
(atomic groups, possessive repeats, longer lookaheads) raises ``NotRegular``; the stage then
keeps the backtracking scanner.

Table: ``int32[n_states * (n_classes + 1)]``, column ``n_classes`` is the end of the text; an
entry is ``next_state << 1 | matched_before_this_class``; state 0 is dead, state 1 the start.
"""
from __future__ import annotations

import numpy as np

MAX_STATES = 4096


class NotRegular(Exception):
    """The pattern needs the backtracking scanner (named construct)."""


class _Nfa:
    """Thompson NFA: ``kind[i]`` in char/split/match/eol/look, with its operands."""

    def __init__(self):
        self.kind: list[str] = []
        self.arg: list = []

    def add(self, kind: str, arg) -> int:
        self.kind.append(kind)
        self.arg.append(arg)
        return len(self.kind) - 1


def build_dfa(tree: tuple, set_of, in_set, n_classes: int, eol_at_newline: bool, newline_class: int) -> np.ndarray:
    """The DFA table of a parsed pattern. ``set_of(node)`` gives a set node's id, ``in_set(id, c)``
    whether class c is in it; ``newline_class``: the class of "\\n" (Oniguruma's ``$`` before it)."""
    nfa = _Nfa()
    match = nfa.add("match", None)
    start = _build(nfa, tree, match, set_of)
    eot = n_classes
    ids = {(): 0, (start,): 1}
    order = [(), (start,)]
    rows = []
    i = 0
    while i < len(order):
        state = order[i]
        row = np.zeros(n_classes + 1, dtype=np.int64)
        if state:
            for c in range(n_classes + 1):
                nxt, matched = _step(nfa, state, c, eot, in_set, eol_at_newline, newline_class)
                if nxt not in ids:
                    if len(order) >= MAX_STATES:
                        raise NotRegular(f"more than {MAX_STATES} DFA states")
                    ids[nxt] = len(order)
                    order.append(nxt)
                row[c] = ids[nxt] << 1 | int(matched)
        rows.append(row)
        i += 1
    return np.concatenate(rows).astype(np.int32)


def _build(nfa: _Nfa, node: tuple, nxt: int, set_of) -> int:
    """Entry state of ``node`` followed by ``nxt``."""
    kind = node[0]
    if kind == "set":
        return nfa.add("char", (set_of(node), nxt))
    if kind == "seq":
        for item in reversed(node[1]):
            nxt = _build(nfa, item, nxt, set_of)
        return nxt
    if kind == "alt":
        return nfa.add("split", [_build(nfa, b, nxt, set_of) for b in node[1]])
    if kind == "repeat":
        body, lo, hi, mode = node[1:]
        if mode == "possessive":
            raise NotRegular("a possessive repeat")
        greedy = mode == "greedy"
        if hi == -1:
            loop = nfa.add("split", [])
            entry = _build(nfa, body, loop, set_of)
            nfa.arg[loop] = [entry, nxt] if greedy else [nxt, entry]
            tail = loop
        else:
            tail = nxt
            for _ in range(hi - lo):
                entry = _build(nfa, body, tail, set_of)
                tail = nfa.add("split", [entry, nxt] if greedy else [nxt, entry])
        for _ in range(lo):
            tail = _build(nfa, body, tail, set_of)
        return tail
    if kind == "eol":
        return nfa.add("eol", nxt)
    if kind == "look":
        body, negated = node[1], node[2]
        if body[0] != "set":
            raise NotRegular("a lookahead longer than one character")
        return nfa.add("look", (set_of(body), negated, nxt))
    raise NotRegular(f"the construct {kind!r}")


def _step(nfa: _Nfa, state: tuple, c: int, eot: int, in_set, eol_at_newline: bool, newline_class: int):
    """The threads after class ``c`` (none at the end of the text), and whether a thread matched
    before it. Threads are visited in priority order; the first to reach a state owns it."""
    seen = set()
    out = []

    def visit(s: int) -> None:
        stack = [s]
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind = nfa.kind[s]
            if kind in ("char", "match"):
                out.append(s)
            elif kind == "split":
                stack.extend(reversed(nfa.arg[s]))
            elif kind == "eol":
                if c == eot or (eol_at_newline and c == newline_class):
                    stack.append(nfa.arg[s])
            else:  # look
                sid, negated, nxt = nfa.arg[s]
                if (c != eot and bool(in_set(sid, c))) != negated:
                    stack.append(nxt)

    for s in state:
        visit(s)
    nxt = []
    matched = False
    for s in out:
        if nfa.kind[s] == "match":
            matched = True
            break
        sid, target = nfa.arg[s]
        if c != eot and in_set(sid, c) and target not in nxt:
            nxt.append(target)
    return tuple(nxt), matched
