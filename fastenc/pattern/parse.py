"""Split-pattern regex -> syntax tree, for the dialect tokenizers' pre-tokenizers are written in.

Accepted: literals and escapes (``\\r \\n \\t \\f \\v \\xHH \\x{H..} \\uHHHH``, escaped punctuation),
character classes (``[...]`` with ranges, negation, nested classes, ``\\p{..}`` / ``\\P{..}`` /
``\\pL``, ``\\s \\S \\d \\D \\w \\W``, ``.``), groups (``(...)``, ``(?:...)``, named groups,
``(?i:...)``, ``(?i)``, atomic ``(?>...)``), alternation, quantifiers (``? * + {n} {n,} {n,m}``,
greedy, lazy ``?`` and possessive ``+``), ``$``, and lookaheads ``(?=...)`` / ``(?!...)``.

Class intersections ``[A&&B]`` are accepted. Everything else (backreferences, lookbehinds, word
boundaries, ``^``, inline flags other than ``i``, ...) raises ``PatternError`` naming the construct: fastenc refuses what
it cannot make exact rather than encode differently.

Nodes are tuples, so the tree can be compared and hashed:

    ("set", items, negated)      one code point; items: ("range", lo, hi) | ("prop", name, neg)
                                 | ("esc", letter, neg) | ("fold", char) | ("class", items, neg)
                                 | ("and", class, class)
    ("seq", (node, ...))
    ("alt", (node, ...))
    ("repeat", node, lo, hi, mode)   hi = -1: unbounded; mode "greedy" | "lazy" | "possessive"
    ("eol",)                     ``$``
    ("look", node, negated)      lookahead
    ("atomic", node)
"""
from __future__ import annotations

from fastenc.errors import VocabError

_SIMPLE_ESCAPES = {"r": 0x0D, "n": 0x0A, "t": 0x09, "f": 0x0C, "v": 0x0B, "a": 0x07, "e": 0x1B, "0": 0x00}
_CLASS_ESCAPES = "sSdDwW"
_REFUSED_ESCAPES = {
    "b": "a word boundary \\b", "B": "a non-word-boundary \\B", "A": "the start-of-text anchor \\A",
    "z": "the end-of-text anchor \\z", "Z": "the end-of-text anchor \\Z", "G": "the \\G anchor",
    "k": "a named backreference \\k", "g": "a subroutine call \\g", "h": "\\h (its meaning differs between engines)",
    "H": "\\H (its meaning differs between engines)", "R": "\\R", "X": "\\X", "K": "\\K", "Q": "\\Q...\\E quoting",
}
MAX_REPEAT = 1000  # a counted repeat of a group is unrolled: bound the program it makes


class PatternError(VocabError):
    """A split pattern fastenc cannot encode exactly (names the construct and where it is)."""


def parse(pattern: str, engine: str = "tiktoken") -> tuple:
    """The syntax tree of ``pattern`` as ``engine`` reads it ("tiktoken": fancy-regex; "hf":
    Oniguruma's Ruby syntax, where ``{n,m}+`` and ``{n}?`` are not possessive/lazy)."""
    if not isinstance(pattern, str) or not pattern:
        raise PatternError(f"split pattern {pattern!r} must be a non-empty string")
    parser = _Parser(pattern, engine)
    node = parser.alternation(fold=False)
    if parser.i < len(pattern):
        parser.fail("an unmatched ')'")
    return node


class _Parser:
    def __init__(self, text: str, engine: str):
        self.text = text
        self.engine = engine
        self.i = 0

    def fail(self, what: str):
        raise PatternError(f"split pattern {self.text!r}: {what} at offset {self.i} is not supported "
                           "(fastenc refuses what it cannot encode exactly)")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def take(self) -> str:
        ch = self.peek()
        if not ch:
            self.fail("an unexpected end of pattern")
        self.i += 1
        return ch

    # --- structure -------------------------------------------------------------------------
    def alternation(self, fold: bool) -> tuple:
        if self.text.startswith("(?i)", self.i):  # a flag for the whole group (or pattern)
            self.i += 4
            fold = True
        branches = [self.sequence(fold)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence(fold))
        return branches[0] if len(branches) == 1 else ("alt", tuple(branches))

    def sequence(self, fold: bool) -> tuple:
        items = []
        while self.peek() not in ("", "|", ")"):
            if self.text.startswith("(?i)", self.i):
                self.fail("an inline flag (?i) after the start of a group (write (?i:...))")
            atom = self.atom(fold)
            if atom is None:
                continue
            items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else ("seq", tuple(items))

    def quantified(self, atom: tuple) -> tuple:
        while True:
            ch = self.peek()
            counted = False
            if ch == "?":
                lo, hi = 0, 1
            elif ch == "*":
                lo, hi = 0, -1
            elif ch == "+":
                lo, hi = 1, -1
            elif ch == "{" and self._counted_ahead():
                lo, hi = self._counted()
                self.i -= 1  # (the common step below takes the closing brace's place)
                counted = True
            else:
                return atom
            self.i += 1
            mode = "greedy"
            if counted and self.engine == "hf" and self.peek() in ("+", "?"):
                self.fail(f"'{self.peek()}' after a counted repeat (Oniguruma's Ruby syntax reads it as another "
                          "repeat or an optional group, not as a possessive or lazy modifier)")
            if self.peek() == "?":
                if self.engine == "tiktoken":
                    self.fail("a lazy quantifier under tiktoken's engine (fancy-regex's leftmost-first choice "
                              "between lazy branches differs from backtracking in corner cases)")
                mode, self.i = "lazy", self.i + 1
            elif self.peek() == "+":
                mode, self.i = "possessive", self.i + 1
            if atom[0] in ("eol", "look"):
                self.fail("a quantified assertion")
            if atom[0] == "repeat":
                self.fail("a quantifier on a quantifier (write a group)")
            atom = ("repeat", atom, lo, hi, mode)

    def _counted_ahead(self) -> bool:
        j = self.text.find("}", self.i)
        body = self.text[self.i + 1 : j] if j > 0 else ""
        return bool(body) and all(c.isdigit() or c == "," for c in body) and body.count(",") <= 1

    def _counted(self) -> tuple[int, int]:
        j = self.text.index("}", self.i)
        body = self.text[self.i + 1 : j]
        if body.startswith(","):
            self.fail("a {,n} quantifier (the engines read it differently)")
        lo_s, _, hi_s = body.partition(",")
        lo = int(lo_s)
        hi = lo if "," not in body else (-1 if hi_s == "" else int(hi_s))
        if hi != -1 and hi < lo:
            self.fail(f"a quantifier {{{body}}} whose maximum is below its minimum")
        if max(lo, hi) > MAX_REPEAT:
            self.fail(f"a count above {MAX_REPEAT} in {{{body}}}")
        self.i = j + 1
        return lo, hi

    def atom(self, fold: bool):
        ch = self.take()
        if ch == "(":
            return self.group(fold)
        if ch == "[":
            return ("set",) + self.char_class(fold)
        if ch == ".":
            return ("set", (("range", 0x0A, 0x0A),), True)
        if ch == "$":
            return ("eol",)
        if ch == "^":
            self.i -= 1
            self.fail("the line-start anchor ^")
        if ch in "*+?":
            self.i -= 1
            self.fail(f"a quantifier {ch!r} with nothing to repeat")
        if ch == "{" and self._counted_ahead():
            self.i -= 1
            self.fail("a counted quantifier with nothing to repeat")
        if ch == "\\":
            return self.escape(fold, in_class=False)
        return _literal(ord(ch), fold)

    def group(self, fold: bool) -> tuple:
        kind = "plain"
        if self.peek() == "?":
            self.i += 1
            nxt = self.take()
            if nxt == ":":
                pass
            elif nxt == "=":
                kind = "ahead"
            elif nxt == "!":
                kind = "not-ahead"
            elif nxt == ">":
                kind = "atomic"
            elif nxt == "P" and self.peek() == "<" or nxt == "<" and self.peek() not in "=!":
                end = self.text.find(">", self.i)
                if end < 0:
                    self.fail("an unterminated group name")
                self.i = end + 1
            elif nxt == "<":
                self.i -= 2
                self.fail("a lookbehind")
            elif nxt == "i" and self.peek() == ":":
                self.i += 1
                fold = True
            elif nxt == "#":
                self.i -= 2
                self.fail("a comment group")
            else:
                self.i -= 2
                self.fail(f"the group or inline flag '(?{nxt}'")
        body = self.alternation(fold)
        if self.peek() != ")":
            self.fail("an unclosed group")
        self.i += 1
        if kind == "ahead":
            return ("look", body, False)
        if kind == "not-ahead":
            return ("look", body, True)
        if kind == "atomic":
            return ("atomic", body)
        return ("seq", (body,)) if body[0] == "repeat" else body  # (a group may be quantified again)

    # --- escapes and classes -----------------------------------------------------------------
    def escape(self, fold: bool, in_class: bool):
        ch = self.take()
        if ch in _SIMPLE_ESCAPES:
            if ch == "0" and self.peek().isdigit():
                self.fail("an octal escape")
            return _literal(_SIMPLE_ESCAPES[ch], fold) if not in_class else ("cp", _SIMPLE_ESCAPES[ch])
        if ch in _CLASS_ESCAPES:
            if ch in "wW" and self.engine == "hf":
                self.i -= 2
                self.fail(f"\\{ch} under Oniguruma (whether it matches U+00B2 and its kin depends on the text around "
                          "them)")
            item = ("esc", ch.lower(), ch.isupper())
            return ("set", (item,), False) if not in_class else item
        if ch in "pP":
            item = ("prop", self._prop_name(), ch == "P")
            if fold:
                self.fail("a Unicode property under (?i) (case folding changes what it matches)")
            return ("set", (item,), False) if not in_class else item
        if ch == "x":
            cp = self._hex_escape()
            return _literal(cp, fold) if not in_class else ("cp", cp)
        if ch == "u":
            cp = self._hex_digits(4)
            return _literal(cp, fold) if not in_class else ("cp", cp)
        if ch.isdigit():
            self.i -= 2
            self.fail("a backreference")
        if ch in _REFUSED_ESCAPES:
            self.i -= 2
            self.fail(_REFUSED_ESCAPES[ch])
        if ch.isalnum():
            self.i -= 2
            self.fail(f"the escape \\{ch}")
        return _literal(ord(ch), fold) if not in_class else ("cp", ord(ch))

    def _prop_name(self) -> str:
        if self.peek() == "{":
            end = self.text.find("}", self.i)
            if end < 0:
                self.fail("an unterminated \\p{")
            name = self.text[self.i + 1 : end]
            self.i = end + 1
            if name.startswith("^"):
                self.fail("a negated property written \\p{^...} (write \\P{...})")
            return name
        return self.take()

    def _hex_escape(self) -> int:
        if self.peek() == "{":
            end = self.text.find("}", self.i)
            if end < 0:
                self.fail("an unterminated \\x{")
            digits = self.text[self.i + 1 : end]
            self.i = end + 1
        else:
            digits = self.text[self.i : self.i + 2]
            self.i += 2
        return self._code_point(digits)

    def _hex_digits(self, n: int) -> int:
        digits = self.text[self.i : self.i + n]
        self.i += n
        return self._code_point(digits)

    def _code_point(self, digits: str) -> int:
        try:
            cp = int(digits, 16)
        except ValueError:
            self.fail(f"a malformed hex escape {digits!r}")
        if not digits or cp > 0x10FFFF or 0xD800 <= cp < 0xE000:
            self.fail(f"the code point escape {digits!r}")
        return cp

    def char_class(self, fold: bool) -> tuple[tuple, bool]:
        """The items of a class after its ``[`` (and whether it is negated), up to its ``]``;
        ``A&&B`` intersects the unions on either side (lowest precedence, as in both engines)."""
        negated = False
        if self.peek() == "^":
            negated, self.i = True, self.i + 1
        items = self._class_union(fold, first=True)
        while self.text.startswith("&&", self.i):
            self.i += 2
            right = self._class_union(fold, first=False)
            items = [("and", ("class", tuple(items), False), ("class", tuple(right), False))]
        self.take()  # the closing ]
        return tuple(items), negated

    def _class_union(self, fold: bool, first: bool) -> list:
        """Items up to (not taking) the class's ``]`` or a ``&&``."""
        items = []
        while True:
            ch = self.peek()
            if not ch:
                self.fail("an unterminated character class")
            if (ch == "]" and not first) or self.text.startswith("&&", self.i):
                return items
            self.i += 1
            first = False
            if ch == "[":
                if self.peek() == ":":
                    self.fail("a POSIX class [:name:]")
                sub_items, sub_neg = self.char_class(fold)
                items.append(("class", sub_items, sub_neg))
                continue
            if ch in "-~|" and self.peek() == ch and ch != "-":
                self.fail(f"a class operator {ch * 2}")
            if ch == "\\":
                lo_item = self.escape(fold, in_class=True)
            else:
                lo_item = ("cp", ord(ch))
            if lo_item[0] == "cp" and self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi_ch = self.take()
                if hi_ch == "[":
                    self.fail("a range ending in a class")
                hi_item = self.escape(fold, in_class=True) if hi_ch == "\\" else ("cp", ord(hi_ch))
                if hi_item[0] != "cp":
                    self.fail("a range ending in a class escape")
                if hi_item[1] < lo_item[1]:
                    self.fail("a range whose end is below its start")
                items.extend(_range_items(lo_item[1], hi_item[1], fold, self))
            elif lo_item[0] == "cp":
                items.extend(_range_items(lo_item[1], lo_item[1], fold, self))
            else:
                items.append(lo_item)


def _is_ascii_letter(cp: int) -> bool:
    return 0x41 <= cp <= 0x5A or 0x61 <= cp <= 0x7A


def _literal(cp: int, fold: bool) -> tuple:
    if fold and _is_ascii_letter(cp):
        return ("set", (("fold", chr(cp).lower()),), False)
    if fold and cp >= 0x80 and chr(cp).lower() != chr(cp).upper():
        raise PatternError(f"split pattern: case-insensitive matching of the non-ASCII letter {chr(cp)!r} is not "
                           "supported (the engines fold it differently)")
    return ("set", (("range", cp, cp),), False)


def _range_items(lo: int, hi: int, fold: bool, parser: _Parser) -> list:
    """A class range; under (?i) its ASCII letters become their case-fold sets."""
    if not fold:
        return [("range", lo, hi)]
    items = []
    for cp in range(lo, hi + 1) if hi - lo < 256 else ():
        if _is_ascii_letter(cp):
            items.append(("fold", chr(cp).lower()))
        elif cp >= 0x80 and chr(cp).lower() != chr(cp).upper():
            parser.fail("a case-insensitive class with non-ASCII letters")
        else:
            items.append(("range", cp, cp))
    if hi - lo >= 256:
        parser.fail("a case-insensitive class range wider than 256 code points")
    return items
