"""cl100k_window_starts and o200k_window_starts (the wide encode loop's 64-byte ASCII path)
against the pieces that walking cl100k_piece_end / o200k_piece_end gives: fuzzed text biased to
the patterns' traps, bytes >= 0x80 at every offset, hand-checked windows, the committed docs
fixture and (when present) the corpus; and the wide loop's ids on such text against tiktoken."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples
from numba import njit

import fastenc
from fastenc.arrow_io import arrow_to_flat
from fastenc.kernels.pretok_cl100k import cl100k_piece_end, cl100k_window_starts
from fastenc.kernels.pretok_gpt2 import WINDOW
from fastenc.kernels.pretok_o200k import o200k_piece_end, o200k_window_starts
from fastenc.unicode_classes import gpt2_class_table, o200k_class_table
from test_encodings import oracle  # noqa: F401 (the tiktoken oracle fixture, built offline)

DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "text" / "docs.parquet"
DOCS_FIXTURE = Path(__file__).parent / "data" / "docs_fixture.parquet"
needs_docs = pytest.mark.skipif(not DOCS.exists(), reason="shared corpus ../shared/data/text not present (fresh clone)")

DECIDABLE = (1 << 61) - 2  # bits 1..60: the only ones a window may set


def _mismatch_kernel(piece_end, window_starts):
    """A kernel that, from every piece start with a whole window before ``end``, compares the
    window's bits 1 up to its highest set one with the starts that walking ``piece_end`` gives
    (0 and 1 alike: the caller takes every piece up to the highest bit). It returns (offset of
    the first window that differs or -1, windows that decided a start, starts decided in all).
    Not cache=True: Numba's cache of this file would keep the kernels it was compiled with after
    an edit of them (the cache guard wipes only the kernels' own cache files)."""

    @njit
    def mismatch(data, start, end, classes):
        is_start = np.zeros(end - start + 1, np.uint8)
        pos = start
        while pos < end:
            is_start[pos - start] = 1
            pos = piece_end(data, pos, end, classes)
        windows = 0
        bits = 0
        pos = start
        while pos < end:
            if pos + WINDOW <= end:
                mask = window_starts(data, pos)
                if mask != 0:
                    windows += 1
                if (mask & ~np.uint64(DECIDABLE)) != 0:
                    return pos - start, windows, bits
                top = 0
                for k in range(1, WINDOW):
                    if (mask >> np.uint64(k)) & np.uint64(1):
                        top = k
                        bits += 1
                for k in range(1, top + 1):
                    if ((mask >> np.uint64(k)) & np.uint64(1)) != is_start[pos - start + k]:
                        return pos - start, windows, bits
            pos = piece_end(data, pos, end, classes)
        return -1, windows, bits

    return mismatch


# name -> (mismatch kernel, window function, class table)
WINDOWS = {
    "cl100k_base": (_mismatch_kernel(cl100k_piece_end, cl100k_window_starts), cl100k_window_starts, gpt2_class_table()),
    "o200k_base": (_mismatch_kernel(o200k_piece_end, o200k_window_starts), o200k_window_starts, o200k_class_table()),
}
NAMES = list(WINDOWS)
each = pytest.mark.parametrize("name", NAMES)


def window_mismatch(name: str, b: bytes) -> tuple[int, int, int]:
    kernel, _, classes = WINDOWS[name]
    return kernel(np.frombuffer(b, np.uint8), 0, len(b), classes)


def starts_of(name: str, b: bytes, pos: int = 0) -> list[int]:
    mask = int(WINDOWS[name][1](np.frombuffer(b, np.uint8), pos))
    return [k for k in range(64) if mask >> k & 1]


# The traps: contractions in every case, as pieces (cl100k) and as suffixes (o200k), after every
# kind of byte; digit runs of 1..10; CR/LF/space/tab mixes; punctuation before letters, digits,
# newlines and slashes; single prefixes; case changes inside words (o200k splits there).
TRAPS = ["'s", "'S", "'ll", "'LL", "'lL", "'ve", "'VE", "'re", "'Re", "'d", "'D", "'m", "'M", "'t", "'T", "'l", "'v",
         "'", "''", " '", "\t'", "x'", "'x", "don't", "DON'T", "McDonald's", "rock'n", "it's'", "'tis",
         *["0123456789"[:n] for n in range(1, 11)], " 7", "12.5", "3x", "a1",
         " ", "  ", "   ", "\t", " \t", "\t ", "\n", "\r", "\r\n", "\n\n", " \n", "\n ", " \n ", "\n\t", "\x0b", "\x0c",
         "\n \n", "  \n  ", "\r\n\r\n", " \r ",
         "(", ")", ".", "...", ",", "!?", " (", " --", "-", "\"", "$", "#", "\x00", "\x1c", "\x7f",
         ".\n", ".\n\n", "?\r\n", ":\n ", ";\n\n  ", "/", "//", "\n/", "./", ".\n/", "a/b", "http://",
         "word", "Word", "WORD", "a", "I", " the", "\tthe", "(the", "don", "e.g.", "U.S.", " x",
         "HTMLParser", "iPhone", "aB", "ABc", "camelCase", "XMLs"]
ASCII_TRAPS = st.lists(st.sampled_from(TRAPS), min_size=20, max_size=120).map("".join)
HIGH = ["é", "É", "ü", "日本", "\u3000", "\xa0", "\x85", "\u2028", "😀", "ſ", "٣", "\u0301", "—", "ʰ"]
MIXED = st.lists(st.sampled_from(TRAPS + HIGH), min_size=20, max_size=120).map("".join)


@each
@settings(max_examples=examples(3000), deadline=None)
@given(text=ASCII_TRAPS)
def test_window_equals_the_walk_ascii(name, text):
    where, _, _ = window_mismatch(name, text.encode())
    assert where == -1, repr(text.encode()[where:where + WINDOW])


@each
@settings(max_examples=examples(1500), deadline=None)
@given(text=MIXED)
def test_window_equals_the_walk_mixed(name, text):
    """Non-ASCII code points (whitespace, letters of each case, a digit, a mark, the long s of
    ``'ſ``) cut windows short; what is decided before them must still hold."""
    where, _, _ = window_mismatch(name, text.encode())
    assert where == -1, repr(text.encode()[where:where + WINDOW])


@pytest.mark.slow
@each
@settings(max_examples=examples(2000), deadline=None)
@given(text=ASCII_TRAPS, at=st.integers(0, 63), char=st.sampled_from(HIGH))
def test_high_byte_at_every_offset(name, text, at, char):
    """A byte >= 0x80 at window offset ``at``: no bit from ``at - 1`` on, and the rest exact."""
    b = text.encode()
    b = (b + b"x" * 64)[:at] + char.encode() + b[at:] + b" tail of the text"
    # the window at 0 (a piece start: the document's) must stop before the byte >= 0x80
    assert max(starts_of(name, b), default=0) < max(at - 1, 1)
    where, _, _ = window_mismatch(name, b)
    assert where == -1, repr(b[where:where + WINDOW])


def test_window_by_eye():
    b = b"Hello world's  end\n\nx 'sand 12345 (the\t.\n  Y'LL" + b" tail" * 8
    assert starts_of("cl100k_base", b)[:21] == [5, 11, 13, 14, 18, 20, 21, 23, 27, 28, 31, 33, 35, 38, 39, 41, 42, 44,
                                                47, 52, 57]
    # "Hello" " world" "'s" " " " end" "\n\n" "x" " '" "sand" " " "123" "45" " (" "the" "\t" ".\n" " " " Y"
    # "'LL" " tail"...: the space takes "'" (no contraction), " (" does not join "the", "'LL" is one
    assert starts_of("o200k_base", b)[:19] == [5, 13, 14, 18, 20, 21, 23, 27, 28, 31, 33, 35, 38, 39, 41, 42, 47, 52, 57]
    # o200k: "Hello" " world's" (a suffix) ... " Y'LL" " tail"
    for name in NAMES:
        assert starts_of(name, "é".encode() + b"a" * 62) == []
        assert window_mismatch(name, b)[1] > 0


def test_o200k_case_and_slashes_by_eye():
    b = b"HTMLParser iPhone camelCase DON'T don't's a/\n/.x" + b" pad" * 12
    assert starts_of("o200k_base", b)[:14] == [10, 12, 17, 23, 27, 33, 39, 41, 43, 46, 48, 52, 56, 60]
    # "HTMLParser" " i" "Phone" " camel" "Case" " DON'T" " don't" "'s" " a" "/\n/" ".x" " pad"


def test_window_digits_and_newlines_by_eye():
    for name in NAMES:
        b = b"1234567890 x\n \n y" + b" pad" * 12
        assert starts_of(name, b)[:8] == [3, 6, 9, 10, 12, 15, 17, 21]
        # "123" "456" "789" "0" " x" "\n \n" " y" " pad": up to the last CR/LF of the run, then " y"
        b = b"x\n   y\n\t\n\tz" + b" pad" * 14
        assert starts_of(name, b)[:6] == [1, 2, 4, 6, 9, 11]  # "x" "\n" "  " " y" "\n\t\n" "\tz" " pad"


@settings(max_examples=examples(300), deadline=None)
@given(texts=st.lists(ASCII_TRAPS, min_size=10, max_size=10))
def test_window_ids_equal_tiktoken(oracle, texts):  # noqa: F811
    """The wide loop's window path end to end: ASCII documents long enough for windows (the
    parity fuzz of test_encodings.py has mostly short, non-ASCII ones), ids against tiktoken."""
    for name in NAMES:
        enc, ref = fastenc.load(name), oracle[name]
        ids, offsets = enc.encode_batch(texts)
        for i, want in enumerate(ref.encode_ordinary_batch(texts, num_threads=1)):
            assert ids[offsets[i]:offsets[i + 1]].tolist() == want, (name, texts[i])


def _fixture_bytes() -> list[bytes]:
    return [t.encode() for t in pq.read_table(DOCS_FIXTURE, columns=["text"]).column("text").to_pylist()]


@each
def test_window_docs_fixture(name):
    """Every window at every piece start of the committed fixture (no skip: it is in the repo),
    and the window must decide most starts (it is mostly English text)."""
    windows = bits = 0
    for b in _fixture_bytes():
        where, w, n = window_mismatch(name, b)
        assert where == -1, repr(b[where:where + WINDOW])
        windows += w
        bits += n
    assert windows > 1000
    assert bits > 5 * windows  # a window takes several pieces, not one


@needs_docs
@pytest.mark.slow
@each
def test_window_corpus(name):
    kernel, _, classes = WINDOWS[name]
    col = pq.read_table(DOCS, columns=["text"]).column("text")
    data, offsets = arrow_to_flat(col)
    for d in range(len(offsets) - 1):
        where, _, _ = kernel(data, offsets[d], offsets[d + 1], classes)
        assert where == -1, (d, bytes(data[offsets[d] + where:offsets[d] + where + WINDOW]))
