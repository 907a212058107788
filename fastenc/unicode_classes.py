"""Code-point class table for the GPT-2 pre-tokenizer, exactly as tiktoken's regex sees it.

GPT-2's split pattern (tiktoken's ``r50k_pat_str``) only asks four questions of a code point:
is it ``\\p{L}``, ``\\p{N}``, ``\\s`` or none of them. The answer depends on the Unicode version
of the regex engine: tiktoken 0.14 uses the Rust ``regex`` crate's tables (Unicode 16), while
Python's ``unicodedata`` (3.11: Unicode 14) and the ``regex`` module (Unicode 17) disagree on
thousands of recently assigned code points, and ``str.isspace`` also accepts U+001C..U+001F.
So the table is not derived from Python: ``scripts/build_gpt2_classes.py`` probes tiktoken itself
and ships the result as ``fastenc/data/gpt2_classes.txt`` (ranges of the non-"other" classes,
small and reviewable); the tests re-check every code point against tiktoken.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

from fastenc.errors import FastencError

OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
N_CODEPOINTS = 0x110000
_CLASS_CODES = {"L": LETTER, "N": NUMBER, "S": SPACE}
_CLASS_LETTERS = {v: k for k, v in _CLASS_CODES.items()}

GPT2_CLASSES_PATH = Path(__file__).resolve().parent / "data" / "gpt2_classes.txt"

# o200k's pattern splits letters by case and counts marks with them:
# [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] ("upper side") and [\p{Ll}\p{Lm}\p{Lo}\p{M}] ("lower side").
# Each code point is in exactly one of these classes (Lm and Lo are on both sides; marks are on
# both sides but are not \p{L}, so they are also [^\r\n\p{L}\p{N}] and [^\s\p{L}\p{N}]).
O_OTHER, O_UPPER, O_LOWER, O_CASELESS, O_MARK, O_NUMBER, O_SPACE = 0, 1, 2, 3, 4, 5, 6
O200K_CODES = {"U": O_UPPER, "W": O_LOWER, "B": O_CASELESS, "M": O_MARK, "N": O_NUMBER, "S": O_SPACE}
O200K_CLASSES_PATH = Path(__file__).resolve().parent / "data" / "o200k_classes.txt"


def table_sha256(table: np.ndarray) -> str:
    """sha256 of the expanded uint8 table (the file's header records it, the loader re-checks it)."""
    return hashlib.sha256(np.ascontiguousarray(table, dtype=np.uint8).tobytes()).hexdigest()


def format_class_ranges(table: np.ndarray, header: str, codes: dict | None = None) -> str:
    """The shipped text format: ``# comments``, a ``# sha256 <hex>`` line, then ``FIRST LAST CLASS``
    lines (hex code points, inclusive, CLASS one of L N S) for every maximal run that is not "other"."""
    codes = codes or _CLASS_CODES
    letters = {v: k for k, v in codes.items()}
    table = np.asarray(table, dtype=np.uint8)
    if table.shape != (N_CODEPOINTS,) or int(table.max()) > max(letters):
        raise ValueError(f"table must be uint8[0x110000] with values 0..{max(letters)}")
    cuts = np.flatnonzero(np.diff(table)) + 1
    starts = np.concatenate(([0], cuts))
    lasts = np.concatenate((cuts - 1, [N_CODEPOINTS - 1]))
    lines = [f"# {line}".rstrip() for line in header.strip("\n").splitlines()]
    lines.append(f"# sha256 {table_sha256(table)}")
    for a, b in zip(starts.tolist(), lasts.tolist()):
        k = int(table[a])
        if k != OTHER:
            lines.append(f"{a:04X} {b:04X} {letters[k]}")
    return "\n".join(lines) + "\n"


def parse_class_ranges(text: str, source: str = "<string>", codes: dict | None = None,
                       script: str = "scripts/build_gpt2_classes.py") -> np.ndarray:
    """Inverse of :func:`format_class_ranges`; checks the recorded sha256."""
    codes = codes or _CLASS_CODES
    table = np.zeros(N_CODEPOINTS, dtype=np.uint8)
    expected = None
    try:
        for line in text.splitlines():
            if line.startswith("# sha256 "):
                expected = line.split()[2]
            elif line and not line.startswith("#"):
                first, last, cls = line.split()
                table[int(first, 16) : int(last, 16) + 1] = codes[cls]
    except (ValueError, KeyError, IndexError) as exc:
        raise FastencError(
            f"{source}: malformed class table line ({exc}); regenerate it with "
            f"`python {script}` or reinstall fastenc"
        ) from None
    if expected is None or table_sha256(table) != expected:
        raise FastencError(
            f"{source}: class table does not match its recorded sha256 (file damaged or edited); "
            f"regenerate it with `python {script}` or reinstall fastenc"
        )
    return table


@functools.lru_cache(maxsize=None)
def gpt2_class_table() -> np.ndarray:
    """uint8[0x110000], index = code point: 0 other, 1 letter (\\p{L}), 2 number (\\p{N}),
    3 whitespace (\\s), as tiktoken 0.14's ``r50k`` regex classifies it. Surrogates are "other".

    Loaded once from the shipped file (a few ms) and cached; the array is read-only because it is
    shared by every caller.
    """
    try:
        text = GPT2_CLASSES_PATH.read_text(encoding="ascii")
    except OSError as exc:
        raise FastencError(
            f"cannot read the GPT-2 class table {GPT2_CLASSES_PATH} ({exc}); reinstall fastenc or run "
            "`python scripts/build_gpt2_classes.py`"
        ) from None
    table = parse_class_ranges(text, str(GPT2_CLASSES_PATH))
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=None)
def o200k_class_table() -> np.ndarray:
    """uint8[0x110000], index = code point: the ``O_*`` classes above, as tiktoken 0.14's
    ``o200k_base`` regex sees them (probed by ``scripts/build_o200k_classes.py``). Read-only."""
    try:
        text = O200K_CLASSES_PATH.read_text(encoding="ascii")
    except OSError as exc:
        raise FastencError(
            f"cannot read the o200k class table {O200K_CLASSES_PATH} ({exc}); reinstall fastenc or run "
            "`python scripts/build_o200k_classes.py`"
        ) from None
    table = parse_class_ranges(text, str(O200K_CLASSES_PATH), O200K_CODES, "scripts/build_o200k_classes.py")
    table.flags.writeable = False
    return table


def class_table_for(pretokenizer: str) -> np.ndarray:
    """The class table a pre-tokenizer's kernel reads (``VocabInfo.pretokenizer`` names it).

    cl100k's pattern asks the same questions as GPT-2's (\\p{L}, \\p{N}, \\s), of the same regex
    engine, so it reads the GPT-2 table; o200k's also splits letters by case and asks about
    marks (``o200k_class_table``). The URL pre-tokenizer reads none (it gets the GPT-2 table)."""
    if pretokenizer == "o200k":
        return o200k_class_table()
    return gpt2_class_table()
