"""URL pre-split kernels against HF tokenizers' Split(Regex(pattern), "isolated") (the oracle)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples
from tokenizers import Regex, pre_tokenizers

from fastenc.arrow_io import arrow_to_flat
from fastenc.kernels.canonical import canonical_batch
from fastenc.kernels.pretok_url import URL_PATTERN, is_url_delim, url_piece_end, url_split, url_split_batch
from reference import URL_SPLIT_PATTERN, url_pieces_ref

SHARED = Path(__file__).resolve().parents[2] / "shared"
URLS = SHARED / "data" / "urls" / "urls.parquet"
CARD = SHARED / "seeds" / "urls-tokenized.md"
FIXTURE = Path(__file__).parent / "data" / "urls_synthetic.txt"
needs_urls = pytest.mark.skipif(not URLS.exists(), reason="shared corpus ../shared/data/urls not present (fresh clone)")

HF_SPLIT = pre_tokenizers.Split(Regex(URL_PATTERN), behavior="isolated")


def hf_pieces(text: str) -> list[str]:
    pieces = HF_SPLIT.pre_tokenize_str(text)
    # the offsets must tile the string: nothing dropped, nothing duplicated
    assert [o for _, o in pieces] == [(s, s + len(p)) for p, (s, _) in pieces]
    assert "".join(p for p, _ in pieces) == text
    return [p for p, _ in pieces]


def kernel_pieces_bytes(b: bytes, pad: int = 0) -> list[bytes]:
    buf = np.frombuffer(bytes(pad) + b + b"http://", np.uint8)  # bytes past `end` must not matter
    start, end = pad, pad + len(b)
    out = np.full(len(b), -1, np.int64)  # the documented maximum: one piece per byte
    n = url_split(buf, start, end, out)
    ends = out[:n].tolist()
    assert np.all(out[n:] == -1), "url_split wrote past the n it returned"
    starts = [start] + ends[:-1]
    assert all(s < e for s, e in zip(starts, ends)) and (ends[-1] == end if ends else len(b) == 0)
    # url_piece_end called piece after piece gives the same ends
    pos, again = start, []
    while pos < end:
        pos = url_piece_end(buf, pos, end)
        again.append(pos)
    assert again == ends
    return [buf[s:e].tobytes() for s, e in zip(starts, ends)]


def kernel_pieces(text: str) -> list[str]:
    return [p.decode() for p in kernel_pieces_bytes(text.encode())]


def _fixture_urls() -> list[str]:
    lines = FIXTURE.read_text(encoding="utf-8").split("\n")
    return [ln for ln in lines if ln and not ln.startswith("# ")]


# ---------------------------------------------------------------------------------------------
# the pattern and the delimiter set


@pytest.mark.skipif(not CARD.exists(), reason="dataset card ../shared/seeds not present (fresh clone)")
def test_pattern_is_the_cards():
    card = CARD.read_text(encoding="utf-8")
    m = re.search(r"The full pattern:\s*```\s*\n(.*?)\n```", card, re.S)
    assert m, "could not find the pattern block in the card"
    assert m.group(1).strip() == URL_PATTERN == URL_SPLIT_PATTERN


def test_delimiter_mask_matches_pattern_class():
    cls = regex.compile(URL_PATTERN.split("|", 2)[2])  # the third alternative: the character class
    for b in range(256):
        want = b < 128 and cls.fullmatch(chr(b)) is not None
        assert bool(is_url_delim(np.uint8(b))) == want, (b, chr(b))
    assert sum(bool(is_url_delim(np.uint8(b))) for b in range(256)) == 29


# ---------------------------------------------------------------------------------------------
# examples from the card, then the oracle on hand-written and real URLs


def test_card_examples():
    assert kernel_pieces("100%") == ["100", "%"]
    assert kernel_pieces("a%C3b") == ["a", "%C3", "b"]
    assert kernel_pieces("https://uk.co.bbc.news/") == ["https://", "uk", ".", "co", ".", "bbc", ".", "news", "/"]


def test_edge_cases_against_hf():
    cases = [
        "", "h", "http", "http:", "http:/", "http://", "https://", "https:/", "httpss://", "hhttp://",
        "http://http://", "xhttps://y", "%", "%%", "%4", "%41", "%4g", "%%41", "%G1", "%aF%",
        "a b\tc", '"quoted"', "<tag>", "é中%E4", "http://x/y?z=http://w", "~!@#$^&*()_+`-=[]{}|;':,./<>?\\",
    ]
    for s in cases:
        assert kernel_pieces(s) == hf_pieces(s) == url_pieces_ref(s), s


def test_synthetic_fixture_against_hf():
    urls = _fixture_urls()
    assert len(urls) > 50
    for u in urls:
        assert kernel_pieces(u) == hf_pieces(u), u


def _hf_ends(urls: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(piece counts per URL, every piece's UTF-8 byte end relative to its URL) from HF."""
    counts = np.empty(len(urls), np.int64)
    ends: list[int] = []
    for i, u in enumerate(urls):
        e = [end for _, (_, end) in HF_SPLIT.pre_tokenize_str(u)]
        if not u.isascii():  # HF offsets count characters; the kernel's count bytes
            byte_at = np.r_[0, np.cumsum([len(c.encode("utf-8", "surrogatepass")) for c in u])]
            e = byte_at[e].tolist()
        counts[i] = len(e)
        ends.extend(e)
    return counts, np.array(ends, np.int64)


@needs_urls
@pytest.mark.slow
@pytest.mark.parametrize("form", ["original", "canonical"])
def test_every_corpus_url_against_hf(form):
    col = pq.read_table(URLS, columns=["url"])["url"]
    data, offsets = arrow_to_flat(col)
    if form == "canonical":
        data = canonical_batch(data, offsets)
    urls = [data[offsets[i] : offsets[i + 1]].tobytes().decode() for i in range(len(offsets) - 1)]
    piece_ends, piece_offsets = url_split_batch(data, offsets)
    assert piece_offsets[0] == 0 and piece_offsets[-1] == len(piece_ends)
    counts, want = _hf_ends(urls)
    bad_url = np.flatnonzero(np.diff(piece_offsets) != counts)
    assert bad_url.size == 0, f"{bad_url.size} URLs split into a different number of pieces, first {urls[bad_url[0]]!r}"
    got = piece_ends - np.repeat(offsets[:-1], counts)
    bad = np.flatnonzero(got != want)
    if bad.size:
        url = np.searchsorted(piece_offsets, bad[0], side="right") - 1
        pytest.fail(f"{bad.size} piece ends differ; first in URL {urls[url]!r}")
    # and the piece strings themselves, through url_split/url_piece_end, on a stride
    for u in urls[::50]:
        assert kernel_pieces(u) == hf_pieces(u), u


def test_batch_layout_and_sliced_offsets():
    items = [b"https://a.b/c", b"", b"100%", b"\xff\xfe%41http://", b"x" * 300]
    offsets = np.zeros(len(items) + 1, np.int64)
    offsets[1:] = np.cumsum([len(b) for b in items])
    data = np.frombuffer(b"".join(items), np.uint8)
    ends, poff = url_split_batch(data, offsets)
    for i, b in enumerate(items):
        got = ends[poff[i] : poff[i + 1]] - offsets[i]
        starts = np.r_[0, got[:-1]]
        assert [b[s:e] for s, e in zip(starts, got)] == kernel_pieces_bytes(b), b
    ends2, poff2 = url_split_batch(data, offsets[2:5])
    assert ends2.tolist() == ends[poff[2] : poff[4]].tolist()
    e0, p0 = url_split_batch(data, offsets[:1])
    assert e0.shape == (0,) and p0.tolist() == [0]


# ---------------------------------------------------------------------------------------------
# fuzzing: the oracle on strings dense in the characters the pattern cares about

_TOKENS = (
    list("!#$%&'()*+,-./:;=?@[\\]^_`{|}~")
    + list("%%%%")
    + list("0123456789abcdefABCDEFgGzZ")
    + ["http", "https", "http://", "https://", "://", "h", "ttp", "s", ":/", "%4", "%e", "%C3%A9"]
    + [" ", "\t", '"', "'", "<", ">", "\n", "\x00", "\x7f"]
    + ["é", "中", "€", "😀", "\u00a0", "\u2028", "\ufeff", "ß"]
)
url_like = st.lists(st.sampled_from(_TOKENS), max_size=40).map("".join)


@settings(max_examples=examples(2500), deadline=None)
@given(st.one_of(url_like, st.text(alphabet=[t for t in _TOKENS if len(t) == 1], max_size=30)))
def test_fuzz_against_hf(s):
    assert kernel_pieces(s) == hf_pieces(s)


@settings(max_examples=examples(1000), deadline=None)
@given(st.lists(st.one_of(st.sampled_from([t.encode() for t in _TOKENS]), st.binary(max_size=3)), max_size=30).map(b"".join), st.integers(0, 5))
def test_fuzz_invalid_utf8_against_bytes_regex(b, pad):
    # HF takes only str; on arbitrary bytes the same pattern applied to bytes is the reference
    # (the kernel never decodes: non-ASCII bytes are content, valid UTF-8 or not).
    assert kernel_pieces_bytes(b, pad) == url_pieces_ref(b)
