"""GPT-2 pre-tokenizer: the class table against tiktoken, the kernel against the references and
against tiktoken, on adversarial inputs, fuzzed text and bytes, and the shared corpus."""
from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples
from numba import njit

import reference as ref
from fastenc.arrow_io import arrow_to_flat
from fastenc.errors import FastencError
from fastenc.kernels.pretok_gpt2 import WINDOW, gpt2_piece_end, gpt2_split, gpt2_window_starts
from fastenc.unicode_classes import (
    GPT2_CLASSES_PATH,
    LETTER,
    N_CODEPOINTS,
    NUMBER,
    OTHER,
    SPACE,
    format_class_ranges,
    gpt2_class_table,
    parse_class_ranges,
)

DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "text" / "docs.parquet"
DOCS_FIXTURE = Path(__file__).parent / "data" / "docs_fixture.parquet"
needs_docs = pytest.mark.skipif(not DOCS.exists(), reason="shared corpus ../shared/data/text not present (fresh clone)")

CLASSES = gpt2_class_table()
NAMES = {OTHER: "other", LETTER: "letter", NUMBER: "number", SPACE: "space"}


# --- helpers -----------------------------------------------------------------------------------

@njit(cache=True)
def _walk(data, start, end, classes, out):
    """The way callers use gpt2_piece_end: one piece after another from the document start."""
    n = 0
    pos = start
    while pos < end:
        pos = gpt2_piece_end(data, pos, end, classes)
        out[n] = pos
        n += 1
    return n


def kernel_ends(b: bytes, pad: int = 3) -> list[int]:
    """Piece ends (relative to the start) of bytes `b`, run inside a larger buffer: bytes before
    `start` and after `end` (an apostrophe, letters, spaces) must not change anything."""
    buf = np.frombuffer(b"x '" [:pad] + b + b"s  a", np.uint8)
    start, end = pad, pad + len(b)
    out = np.full(len(b) + 1, -1, np.int64)
    n = gpt2_split(buf, start, end, CLASSES, out)
    assert np.all(out[n:] == -1), "gpt2_split wrote past the count it returned"
    ends = (out[:n] - start).tolist()
    # pieces are non-empty and tile [start, end) exactly
    assert all(a < b_ for a, b_ in zip([0] + ends, ends))
    assert (ends[-1] == len(b)) if ends else len(b) == 0
    again = np.full(len(b) + 1, -1, np.int64)
    assert _walk(buf, start, end, CLASSES, again) == n and np.array_equal(again, out)
    return ends


def kernel_pieces(text: str) -> list[str]:
    b = text.encode()
    ends = kernel_ends(b)
    return [b[s:e].decode() for s, e in zip([0] + ends, ends)]


def check_text(text: str) -> None:
    b = text.encode()
    assert kernel_ends(b) == ref.gpt2_piece_ends_ref(b), text[:200]


def regex_module_class(ch: str) -> int:
    if regex.match(r"\p{L}", ch):
        return LETTER
    if regex.match(r"\p{N}", ch):
        return NUMBER
    if regex.match(r"\s", ch):
        return SPACE
    return OTHER


@functools.lru_cache(maxsize=None)
def regex_module_table(prop: str = "") -> np.ndarray:
    """For every code point: regex_module_class, or (prop given) whether it matches prop;
    via finditer over one string of all non-surrogate code points (fast, no per-char call)."""
    cps = np.array([c for c in range(N_CODEPOINTS) if not 0xD800 <= c < 0xE000])
    everything = "".join(map(chr, cps.tolist()))

    def where(pattern):
        hit = np.zeros(N_CODEPOINTS, bool)
        hit[cps[[m.start() for m in regex.finditer(pattern, everything)]]] = True
        return hit

    if prop:
        return where(prop)
    table = np.full(N_CODEPOINTS, OTHER, np.uint8)
    for k, pattern in ((SPACE, r"\s"), (NUMBER, r"\p{N}"), (LETTER, r"\p{L}")):
        table[where(pattern)] = k
    return table


def unicodedata_class(ch: str) -> int:
    cat = unicodedata.category(ch)
    if cat[0] == "L":
        return LETTER
    if cat[0] == "N":
        return NUMBER
    if ch.isspace():
        return SPACE
    return OTHER


# --- the class table ---------------------------------------------------------------------------

def test_table_shape_cache_and_file_size():
    t = gpt2_class_table()
    assert t is CLASSES  # loaded once
    assert t.dtype == np.uint8 and t.shape == (N_CODEPOINTS,) and not t.flags.writeable
    assert int(t.max()) == SPACE
    assert GPT2_CLASSES_PATH.stat().st_size < 200_000
    # ASCII, which the kernel's SWAR letter path hard-codes as [A-Za-z]
    ascii_classes = [t[c] for c in range(128)]
    assert ascii_classes == [regex_module_class(chr(c)) for c in range(128)]
    assert [c for c in range(128) if t[c] == LETTER] == [c for c in range(128) if chr(c).isalpha()]


def test_table_file_roundtrip_and_corruption(tmp_path):
    text = GPT2_CLASSES_PATH.read_text(encoding="ascii")
    assert np.array_equal(parse_class_ranges(format_class_ranges(CLASSES, "h"), "x"), CLASSES)
    lines = text.splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("0041 "))
    lines[k] = "0041 005B L"  # one code point more
    with pytest.raises(FastencError, match="sha256"):
        parse_class_ranges("\n".join(lines), "edited")
    with pytest.raises(FastencError, match="malformed"):
        parse_class_ranges(text + "zz\n", "bad")


def test_table_equals_tiktoken_on_every_code_point():
    """Each code point is probed in tiktoken for the class the table gives it; the classes are
    disjoint, so all probes answering yes means the table is tiktoken's, code point for code point."""
    cps = np.arange(N_CODEPOINTS)
    ok = ref.tiktoken_class_probe(cps, CLASSES)
    bad = cps[~ok]
    assert len(bad) == 0, [(hex(c), NAMES[int(CLASSES[c])]) for c in bad[:20]]


def test_probe_says_no_to_wrong_classes():
    rng = np.random.default_rng(0)
    cps = np.concatenate([rng.integers(0, N_CODEPOINTS, 3000), np.flatnonzero(CLASSES != OTHER)[::50]])
    cps = cps[(cps < 0xD800) | (cps >= 0xE000)]
    for shift in (1, 2, 3):
        assert not ref.tiktoken_class_probe(cps, (CLASSES[cps] + shift) % 4).any()


# Code points where Unicode versions or Python and Rust disagree, with tiktoken 0.14's class
# (each is re-probed in tiktoken below, so this list cannot drift from the oracle).
DOCUMENTED = {
    0x1C: OTHER, 0x1D: OTHER, 0x1E: OTHER, 0x1F: OTHER,  # str.isspace() says yes; not White_Space
    0x85: SPACE, 0xA0: SPACE, 0x1680: SPACE, 0x2007: SPACE, 0x202F: SPACE, 0x205F: SPACE, 0x3000: SPACE,
    0x2028: SPACE, 0x2029: SPACE,
    0x180E: OTHER,  # MONGOLIAN VOWEL SEPARATOR: whitespace before Unicode 6.3
    0x200B: OTHER,  # ZERO WIDTH SPACE
    0xFEFF: OTHER,  # BOM: JavaScript's \s says space, tiktoken does not
    0x1C89: LETTER, 0x1C8A: LETTER,  # Cyrillic TJE, Unicode 16 (Python 3.11's unicodedata: unassigned)
    0x105C0: LETTER,  # Todhri, Unicode 16
    0x1E5F1: NUMBER,  # Ol Onal digit, Unicode 16
    0x0558: OTHER, 0xA7CE: OTHER, 0x1B123: OTHER,  # Unicode 17 letters (regex module): unassigned in tiktoken
    0x00B2: NUMBER, 0x00BD: NUMBER, 0x2160: NUMBER, 0x3007: NUMBER, 0x0660: NUMBER,  # No, Nl, Nd
    0x00AA: LETTER, 0x02B0: LETTER, 0x3005: LETTER,  # Lo, Lm
    0x0301: OTHER, 0x0903: OTHER,  # combining marks are not letters
    0x1F600: OTHER, 0xE000: OTHER, 0x0378: OTHER, 0x10FFFF: OTHER, 0xD800: OTHER, 0xDFFF: OTHER,
}


def test_documented_code_points():
    cps = np.array(sorted(DOCUMENTED))
    want = np.array([DOCUMENTED[c] for c in cps])
    assert {hex(c): NAMES[int(CLASSES[c])] for c in cps} == {hex(c): NAMES[int(k)] for c, k in zip(cps, want)}
    assert ref.tiktoken_class_probe(cps, want).all()


def test_differences_from_python_unicodedata_are_version_or_isspace():
    """Where Python's unicodedata disagrees, the code point is unassigned in Python's (older)
    Unicode, or is one of U+001C..U+001F that str.isspace() accepts and \\s does not."""
    diff = [c for c in range(N_CODEPOINTS) if not 0xD800 <= c < 0xE000
            and CLASSES[c] != unicodedata_class(chr(c))]
    explained = [c for c in diff if 0x1C <= c <= 0x1F
                 or (unicodedata.category(chr(c)) == "Cn" and CLASSES[c] in (LETTER, NUMBER))]
    assert diff == explained, [hex(c) for c in sorted(set(diff) - set(explained))[:20]]
    if unicodedata.unidata_version < "16":
        assert 0x1C89 in diff


def test_differences_from_regex_module_are_unicode_version_only():
    """The regex module has its own Unicode tables (17 here, tiktoken's Rust regex has 16): the
    whitespace sets agree, and letters/numbers differ only on code points that one of the two
    versions leaves unassigned (tiktoken then says "other", or the regex module says Cn)."""
    theirs = regex_module_table()
    diff = np.flatnonzero(CLASSES != theirs)
    assert not np.isin(diff, np.flatnonzero((CLASSES == SPACE) | (theirs == SPACE))).any()
    unassigned_there = regex_module_table(r"\p{Cn}")
    unexplained = diff[(CLASSES[diff] != OTHER) & ~unassigned_there[diff]]
    assert len(unexplained) == 0, [hex(c) for c in unexplained[:20]]
    assert ((CLASSES == SPACE) == (theirs == SPACE)).all()


# --- the kernel against the references ---------------------------------------------------------

ADVERSARIAL = [
    "", " ", "  ", "a", "'", "''", "x" * 1_000_000, "1" * 100_000, " " * 100_000, "\n" * 100_000,
    "\r\n" * 50_000, "a\r\n\r\nb \r\n c\r\n", "\t \r\n \u3000a", "  a", "a  ", " \n ", "a \n", "a \n b",
    "'s'S'll'LL've're'd'm't'x", "don't I'll we've they're he'd I'm it's", "''s", " 's", "'sand", "'",
    "a'", "'l", "'ll", "'lla", "'r", "'v'", " 12 345 6.7", "x1y2", "\u00bd\u2160 \u0661\u0662",
    "日本語の文章です。" * 20_000, "Привет, мир! " * 1000, "e\u0301 n\u0303o\u0308", "😀👍🏽 🇩🇪 a😀b",
    "a\ufeff b \ufeff", "42°S 174°E\ufeff / \ufeff42°S", "\u1c89\u1c8a \u180e \u200b\u2028\u2029x",
    "\x1c\x1d a \x1e\x1f", "a\x85b \xa0c", "trailing   ", "trailing\n\n", "tab\t\t", "mixed \t\n \u3000",
    "  \u3000a", " \u00a0a", "\u00a0 a",
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:24]) + (f"..{len(t)}" if len(t) > 24 else ""))
def test_adversarial(text):
    check_text(text)


def test_examples_by_eye():
    assert kernel_pieces("Hello world's  end\n") == ["Hello", " world", "'s", " ", " end", "\n"]
    assert kernel_pieces("  a") == [" ", " a"]
    assert kernel_pieces("a  ") == ["a", "  "]
    assert kernel_pieces(" \n ") == [" \n "]
    assert kernel_pieces("'s'S'll") == ["'s", "'", "S", "'ll"]
    assert kernel_pieces("x\n\ny") == ["x", "\n", "\n", "y"]
    assert kernel_pieces("x \n\ty") == ["x", " \n", "\t", "y"]
    assert kernel_pieces("1,234.5") == ["1", ",", "234", ".", "5"]


def test_letter_runs_stopped_by_every_character():
    """The 8-byte letter path: a run of k ASCII letters (k across several words of 8) followed by
    each ASCII byte and by non-ASCII letters and non-letters, at every alignment."""
    stops = [chr(c) for c in range(128)] + ["\u00e9", "\u00d7", "\u0416", "\u4e2d", "\u0301", "\U0001f600", "\u00a0"]
    for k in range(0, 19):
        for stop in stops:
            check_text("Ab" * k + stop + "cd" + stop)
            check_text(" " + "z" * k + stop)


INTERESTING = (
    "abcxyzABCXYZ sdmtlvreSDMTLVRE'''   \t\n\r\x0b\x0c\x1c\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f"
    "\u205f\u3000\ufeff\u180e\u200b0123456789\u00bd\u2160\u0661.,;:!?-_()[]{}\"#$%&*+/<=>@\\^`|~"
    "\u00e9\u00df\u0416\u044f\u05d0\u0627\u4e2d\u65e5\u3042\uac00\u0301\u0308\u0903\u200d\U0001f600"
    "\U0001f44d\U0001f3fd\U0001f1e9\U00020000\u1c89\u0558\ue000\U0010ffff\x00\x7f"
)
texts = st.one_of(
    st.text(alphabet=INTERESTING, max_size=60),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40),
    st.lists(st.sampled_from(["'s", "'ll", "'ve", "'re", "'d", "'m", "'t", "'S", " ", "  ", "\n", "\r\n", " \n",
                              "\t", "\u3000", "word", " word", "123", " 4", "?!", " ...", "é", "日本",
                              "\u0301", "😀"]), max_size=30).map("".join),
)


@settings(max_examples=examples(2500), deadline=None)
@given(texts)
def test_fuzz_text_vs_reference(text):
    b = text.encode()
    ends = kernel_ends(b)
    assert ends == ref.gpt2_piece_ends_ref(b)
    assert ends == ref.gpt2_piece_ends_ref(b, pieces=ref.gpt2_pieces_ref_classes)


@settings(max_examples=examples(1500), deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=6), st.sampled_from(INTERESTING).map(str.encode),
                          st.sampled_from([b"\xe0\xa0", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf",
                                           b"\xf0\x9f\x98", b"\x80", b"\xff", b"\xc3"])), max_size=20).map(b"".join))
def test_fuzz_invalid_utf8_vs_reference(b):
    assert kernel_ends(b) == ref.gpt2_piece_ends_ref(b)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=64), st.data())
def test_any_subrange_and_out_of_contract_arguments(b, data):
    """start/end anywhere (even inside a UTF-8 sequence): same as the reference on that slice.
    Arguments outside the contract read nothing and return max(pos, clipped end)."""
    buf = np.frombuffer(b, np.uint8)
    start = data.draw(st.integers(0, len(b)))
    end = data.draw(st.integers(start, len(b)))
    out = np.empty(len(b) + 1, np.int64)
    n = gpt2_split(buf, start, end, CLASSES, out)
    assert (out[:n] - start).tolist() == ref.gpt2_piece_ends_ref(b[start:end])
    assert gpt2_piece_end(buf, -1, end, CLASSES) == end
    assert gpt2_piece_end(buf, end + 5, end, CLASSES) == end + 5
    assert gpt2_piece_end(buf, end, end, CLASSES) == end
    if len(b):
        assert gpt2_piece_end(buf, 0, len(b) + 10, CLASSES) <= len(b)


def test_split_argument_errors():
    buf = np.frombuffer(b"abc", np.uint8)
    with pytest.raises(ValueError):
        gpt2_split(buf, 0, 4, CLASSES, np.empty(4, np.int64))
    with pytest.raises(ValueError):
        gpt2_split(buf, 2, 1, CLASSES, np.empty(4, np.int64))
    with pytest.raises(ValueError):
        gpt2_split(buf, 0, 3, CLASSES, np.empty(2, np.int64))
    with pytest.raises(ValueError):
        gpt2_split(buf, 0, 3, CLASSES[:1000], np.empty(3, np.int64))


agreeing = st.text(alphabet=st.characters(exclude_categories=["Cs"]).filter(
    lambda ch: CLASSES[ord(ch)] == regex_module_class(ch)), max_size=40)


@settings(max_examples=examples(500), deadline=None)
@given(st.one_of(agreeing, texts.filter(lambda t: all(CLASSES[ord(c)] == regex_module_class(c) for c in t))))
def test_reference_is_the_stock_pattern_where_classes_agree(text):
    """The stand-in trick in gpt2_pieces_ref changes nothing where the regex module's Unicode
    tables agree with tiktoken's: there it is plain regex.findall of tiktoken's pattern."""
    import tiktoken_ext.openai_public as openai_public

    assert ref.gpt2_pieces_ref(text) == regex.findall(openai_public.r50k_pat_str, text)


# --- the kernel against tiktoken ---------------------------------------------------------------

def tiktoken_agrees(enc, text: str) -> None:
    """Tokens never cross a piece boundary, and BPE over each piece alone (no regex) gives
    tiktoken's tokens for the whole text."""
    b = text.encode()
    ends = kernel_ends(b)
    tokens = enc.encode_ordinary(text)
    lengths = np.fromiter((len(enc.decode_single_token_bytes(t)) for t in tokens), np.int64, len(tokens))
    assert set(ends) <= set(np.cumsum(lengths).tolist())
    per_piece = [t for s, e in zip([0] + ends, ends) for t in enc._core_bpe.encode_single_piece(b[s:e])]
    assert per_piece == tokens


@settings(max_examples=examples(2000), deadline=None)
@given(texts)
def test_fuzz_text_vs_tiktoken(tiktoken_gpt2, text):
    tiktoken_agrees(tiktoken_gpt2, text)


@pytest.mark.parametrize("text", [t for t in ADVERSARIAL if len(t) < 2000])
def test_adversarial_vs_tiktoken(tiktoken_gpt2, text):
    tiktoken_agrees(tiktoken_gpt2, text)


def test_docs_fixture_vs_reference_and_tiktoken(tiktoken_gpt2):
    for text in pq.read_table(DOCS_FIXTURE, columns=["text"]).column("text").to_pylist():
        check_text(text)
        tiktoken_agrees(tiktoken_gpt2, text)


# --- the shared corpus -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus():
    """(texts, data, offsets, piece ends of every doc as absolute byte offsets, doc of each end)."""
    col = pq.read_table(DOCS, columns=["text"]).column("text")
    data, offsets = arrow_to_flat(col)
    out = np.empty(len(data), np.int64)
    counts = np.empty(len(offsets) - 1, np.int64)
    at = 0
    for d in range(len(offsets) - 1):
        counts[d] = gpt2_split(data, offsets[d], offsets[d + 1], CLASSES, out[at:])
        at += counts[d]
    return col.to_pylist(), data, offsets, out[:at], counts


@needs_docs
@pytest.mark.slow
def test_corpus_matches_reference(corpus):
    """Every document of docs.parquet, piece for piece (compared in code point offsets)."""
    texts, data, offsets, ends, counts = corpus
    cp_count = np.concatenate(([0], np.cumsum((data & 0xC0) != 0x80)))  # code points in data[:i]
    bounds = np.concatenate(([0], np.cumsum(counts)))
    bad = []
    for d, text in enumerate(texts):
        mine = cp_count[ends[bounds[d] : bounds[d + 1]]] - cp_count[offsets[d]]
        want = np.cumsum(np.fromiter(map(len, ref.gpt2_pieces_ref(text)), np.int64))
        if not np.array_equal(mine, want):
            bad.append(d)
    assert bad == [], f"{len(bad)} documents differ, first {bad[:5]}"


@needs_docs
@pytest.mark.slow
def test_corpus_vs_tiktoken(corpus, tiktoken_gpt2):
    """Every piece boundary of every document is a token boundary of tiktoken's encoding, and
    BPE piece by piece gives tiktoken's tokens (on every 10th document and the U+FEFF one)."""
    texts, data, offsets, ends, counts = corpus
    enc = tiktoken_gpt2
    token_len = np.array([len(enc.decode_single_token_bytes(t)) for t in range(enc.n_vocab)], np.int64)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    docs_tokens = enc.encode_ordinary_batch(texts, num_threads=2)
    bad = []
    for d, tokens in enumerate(docs_tokens):
        token_ends = offsets[d] + np.cumsum(token_len[np.asarray(tokens, np.int64)])
        mine = ends[bounds[d] : bounds[d + 1]]
        if not np.isin(mine, token_ends).all():
            bad.append(d)
        elif d % 10 == 0 or "\ufeff" in texts[d]:
            starts = np.concatenate(([offsets[d]], mine[:-1]))
            per_piece = [t for s, e in zip(starts, mine) for t in enc._core_bpe.encode_single_piece(data[s:e].tobytes())]
            if per_piece != tokens:
                bad.append(d)
    assert bad == [], f"{len(bad)} documents differ from tiktoken, first {bad[:5]}"


# --- the 64-byte window (gpt2_window_starts, the encode loop's ASCII path) -----------------------

@njit(cache=True)
def _window_mismatch(data, start, end, classes):
    """From every piece start with a whole window before ``end``: the window's decided starts
    (bits 1 up to its highest set bit) against the pieces gpt2_piece_end walks. Returns
    (first byte offset where they differ or -1, windows that decided something)."""
    is_start = np.zeros(end - start + 1, np.uint8)
    pos = start
    while pos < end:
        is_start[pos - start] = 1
        pos = gpt2_piece_end(data, pos, end, classes)
    decided = 0
    pos = start
    while pos < end:
        if pos + WINDOW <= end:
            mask = gpt2_window_starts(data, pos)
            if mask != 0:
                decided += 1
            top = 0
            for k in range(1, WINDOW):
                if (mask >> np.uint64(k)) & np.uint64(1):
                    top = k
            for k in range(1, top + 1):
                if ((mask >> np.uint64(k)) & np.uint64(1)) != is_start[pos - start + k]:
                    return pos - start, decided
        pos = gpt2_piece_end(data, pos, end, classes)
    return -1, decided


def window_mismatch(b: bytes) -> tuple[int, int]:
    return _window_mismatch(np.frombuffer(b, np.uint8), 0, len(b), CLASSES)


ASCII_HEAVY = st.lists(st.sampled_from(["'s", "'ll", "'ve", "'re", "'d", "'m", "'t", "'S", "'L", "'", "''", " '", " ",
                                        "  ", "\n", "\r\n", " \n", "\t", "\x0b", "\x0c", "\x1c", "\x7f", "\x00",
                                        "word", " word", "Ab", "123", " 4", "?!", " ...", ".'s", "é", "ü ", "日本",
                                        "\u3000", "\xa0", "😀"]),
                       min_size=20, max_size=120).map("".join)


@settings(max_examples=examples(1500), deadline=None)
@given(ASCII_HEAVY)
def test_window_starts_equal_the_walk(text):
    """Contractions at every offset (window start included), whitespace runs ending in every
    way, class changes, and non-ASCII bytes that cut a window short."""
    where, _ = window_mismatch(text.encode())
    assert where == -1, repr(text.encode()[where:where + WINDOW])


# Two-byte letters and symbols of Latin-1 and the ranges next to it (the window leaves every byte >= 0x80
# unknown, and stops two bytes before it), and byte strings that are not UTF-8: leads without their
# continuation, a continuation alone, two leads in a row.
LATIN_HEAVY = st.lists(st.one_of(
    st.sampled_from(["é", "ü", "ß", "ñ", "ł", "ő", "ș", "ə", "ʰ", "ʿ", "À", "ÿ", "×", "÷", "¿", "ˀ", "ˆ", "\xa0",
                     "caf", " caf", "é ", " é", "'s", "'é", " ", "  ", "\n", "1", " 2", "?", ".", "Ω", "д", "日",
                     "😀"]).map(lambda t: t.encode()),
    st.sampled_from([b"\xc3", b"\xca", b"\xa9", b"\xc3A", b"\xc3\xc3\xa9", b"\xc3\xa9\xa9", b"\xc3 "])),
    min_size=20, max_size=120).map(b"".join)


@settings(max_examples=examples(1500), deadline=None)
@given(LATIN_HEAVY)
def test_window_starts_equal_the_walk_latin(data):
    """Accented Latin text, symbols beside it, and invalid UTF-8 around them."""
    where, _ = window_mismatch(data)
    assert where == -1, repr(data[where:where + WINDOW])


def test_window_starts_by_eye():
    b = b"Hello world's  end\n\nx 'sand 12ab 'll" + b" " * 40
    mask = int(gpt2_window_starts(np.frombuffer(b, np.uint8), 0))
    starts = [k for k in range(1, 61) if mask >> k & 1]
    assert starts[:10] == [5, 11, 13, 14, 18, 19, 20, 21, 23, 27]  # " world" "'s" " " " end" "\n" "\n" "x" " '" "sand"
    assert int(gpt2_window_starts(np.frombuffer("é".encode() + b"a" * 62, np.uint8), 0)) == 0
    assert window_mismatch(b)[1] > 0


def test_window_starts_docs_fixture():
    decided = 0
    for text in pq.read_table(DOCS_FIXTURE, columns=["text"]).column("text").to_pylist():
        where, n = window_mismatch(text.encode())
        assert where == -1, repr(text.encode()[where:where + WINDOW])
        decided += n
    assert decided > 1000  # the fixture is mostly ASCII: the window path is exercised


@needs_docs
@pytest.mark.slow
def test_window_starts_corpus(corpus):
    _, data, offsets, _, _ = corpus
    for d in range(len(offsets) - 1):
        where, _ = _window_mismatch(data, offsets[d], offsets[d + 1], CLASSES)
        assert where == -1, (d, bytes(data[offsets[d] + where:offsets[d] + where + WINDOW]))
