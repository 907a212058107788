"""canonical(): the Numba kernels and the public wrapper against the card's function (canonical_ref)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

from fastenc.arrow_io import arrow_to_flat
from fastenc.url_canonical import canonical, canonical_bytes
from fastenc.kernels.canonical import canonical_batch, canonical_into
from reference import canonical_ref

URLS = Path(__file__).resolve().parents[2] / "shared" / "data" / "urls" / "urls.parquet"
FIXTURE = Path(__file__).parent / "data" / "urls_synthetic.txt"
needs_urls = pytest.mark.skipif(not URLS.exists(), reason="shared corpus ../shared/data/urls not present (fresh clone)")

# The card's own test cases (its `if __name__ == "__main__":` block), verbatim.
CARD_CASES = [
    "https://www.example.com/blog/2024/01/post.html?utm_source=x&id=42#top",
    "http://example.com",
    "https://a.b.c.d.e.f/",
    "https://user:pass@www.example.com:8443/p?q=1",
    "https://1.2.3.4/path",            # IPv4: untouched
    "https://[::1]:8080/x",            # IPv6: untouched
    "https://example.com./trailing",   # trailing dot
    "https://example..com/empty",      # empty label
    "https://localhost/",              # single label
    "https:///no-host",                # empty authority
    "ftp://weird.example.com/x",       # unknown scheme: untouched
    "http://129.222.104.0/25,US,US-CA,San",
    "not a url at all",
    "https://xn--80ak6aa92e.com/é中",  # punycode + raw UTF-8
    "https://WWW.Example.COM/Case",
]


def kernel_bytes(b: bytes, pad: int = 0) -> bytes:
    """canonical_into on b placed at offset `pad` of the input and `pad + 1` of the output."""
    data = np.frombuffer(b"\x2e" * pad + b + b"./@:", np.uint8)  # junk around: must not be read
    out = np.full(len(b) + pad + 3, 0xAA, np.uint8)
    end = canonical_into(data, pad, pad + len(b), out, pad + 1)
    assert end == pad + 1 + len(b)
    assert (out[: pad + 1] == 0xAA).all() and (out[end:] == 0xAA).all(), "wrote outside its slot"
    return out[pad + 1 : end].tobytes()


def kernel(url: str) -> str:
    return kernel_bytes(url.encode()).decode()


def check_all(url: str, involution: bool = True) -> None:
    want = canonical_ref(url)
    assert kernel(url) == want, url
    assert canonical(url) == want, url
    assert canonical_bytes(url.encode()) == want.encode(), url
    twice = canonical_ref(want)
    assert kernel(want) == twice and canonical(want) == twice, url
    if involution:
        assert twice == url, f"not an involution: {url!r}"


def involution_expected(url: str) -> bool:
    """Where the card's canonical() really is self-inverse, derived independently of it.

    The card calls it an involution, and it is one on every real URL we have, but not on
    two kinds of malformed host (H = the host, no port split off):
    1. no port, and H's FIRST label ends in ":<ASCII digits>": after reversal that label is
       last, so the second pass reads those digits as a port ("http://x:1.y" -> "http://y.x:1");
    2. H has 2+ labels and its LAST label starts with "[": after reversal the host starts with
       "[" and the second pass leaves it alone ("http://a.[b" -> "http://[b.a").
    """
    for scheme in ("https://", "http://"):
        if url.startswith(scheme):
            break
    else:
        return True
    rest = url[len(scheme):]
    cut = min([i for i in (rest.find(c) for c in "/?#") if i != -1] + [len(rest)])
    hostport = rest[:cut].rpartition("@")[2]
    h, colon, port = hostport.rpartition(":")
    has_port = bool(colon) and port.isascii() and port.isdigit()
    host = h if has_port else hostport
    labels = host.split(".")
    if host.startswith("[") or len(labels) == 1:
        return True
    if all(0 < len(x) <= 3 and x.isascii() and x.isdigit() and int(x) < 256 for x in labels) and len(labels) == 4:
        return True
    first_port = labels[0].rpartition(":")[2]
    if not has_port and ":" in labels[0] and first_port.isascii() and first_port.isdigit():
        return False
    return not labels[-1].startswith("[")


def _fixture_urls() -> list[str]:
    lines = FIXTURE.read_text(encoding="utf-8").split("\n")
    return [ln for ln in lines if ln and not ln.startswith("# ")]


def test_card_cases():
    for u in CARD_CASES:
        check_all(u)


def test_card_prose_examples():
    # stated in the card's text
    assert canonical("https://www.example.com/a") == "https://com.example.www/a"
    assert kernel("https://www.example.com/a") == "https://com.example.www/a"
    assert kernel("https://news.bbc.co.uk/") == "https://uk.co.bbc.news/"


def test_synthetic_fixture():
    urls = _fixture_urls()
    assert len(urls) > 50
    assert any("\t" in u for u in urls) and any(u.endswith(" ") for u in urls), "fixture lost its whitespace"
    changed = 0
    for u in urls:
        check_all(u)
        changed += canonical_ref(u) != u
    assert changed > 20  # the fixture exercises reversal, not only pass-through


def test_fixture_batch_and_sliced_offsets():
    items = [u.encode() for u in _fixture_urls()]
    offsets = np.zeros(len(items) + 1, np.int64)
    offsets[1:] = np.cumsum([len(b) for b in items])
    data = np.frombuffer(b"".join(items), np.uint8)
    out = canonical_batch(data, offsets)
    assert out.tobytes() == b"".join(canonical_ref(b.decode()).encode() for b in items)
    # a slice of the offsets: only the items inside change, the bytes around are copied
    part = canonical_batch(data, offsets[10:20])
    want = data.tobytes()[: offsets[10]] + out.tobytes()[offsets[10] : offsets[19]] + data.tobytes()[offsets[19] :]
    assert part.tobytes() == want
    assert canonical_batch(data, offsets[:1]).tobytes() == data.tobytes()
    assert canonical_batch(np.empty(0, np.uint8), np.zeros(1, np.int64)).shape == (0,)


@needs_urls
@pytest.mark.slow
def test_every_corpus_url():
    col = pq.read_table(URLS, columns=["url"])["url"]
    data, offsets = arrow_to_flat(col)
    urls = col.to_pylist()
    want = [canonical_ref(u) for u in urls]
    out = canonical_batch(data, offsets)
    assert out.tobytes() == "".join(want).encode(), "canonical_batch differs from the card's function"
    back = canonical_batch(out, offsets)
    assert back.tobytes() == data.tobytes(), "canonical_batch is not an involution on the corpus"
    assert [canonical(u) for u in urls] == want
    assert [canonical(c) for c in want] == urls
    assert sum(w != u for w, u in zip(want, urls)) > len(urls) // 2  # most real URLs do change


# ---------------------------------------------------------------------------------------------
# fuzzing with URL-ish alphabets

_PIECES = (
    ["http://", "https://", "http:/", "https:", "HTTP://", "ftp://"]
    + list("@:.[]/?#%") * 3
    + list("0123456789") * 2
    + ["25", "255", "256", "1.2.3.4", "www", "example", "com", "a", "Z", "xn--", "-", "_", " ", "\t"]
    + ["é", "中", "٣", "²", "\u00a0", "😀"]
)
_HOST_PIECES = ["www", "example", "com", "a", "b", "xn--p1ai", "é", "中", "1", "25", "255", "256", "٣", "-"] + list(".:.:.[]@0")
free_form = st.tuples(
    st.sampled_from(["http://", "https://", "", "http:/", "Https://"]),
    st.lists(st.sampled_from(_PIECES), max_size=25).map("".join),
).map("".join)
# scheme, userinfo, host, port, tail: most of these reach the host-reversal code
structured = st.tuples(
    st.sampled_from(["http://", "https://"]),
    st.sampled_from(["", "", "u@", "u:p@", "@", "a@b@"]),
    st.lists(st.sampled_from(_HOST_PIECES), min_size=2, max_size=12).map("".join),
    st.sampled_from(["", "", ":", ":80", ":8443", ":x", ":٣"]),
    st.sampled_from(["", "/", "/p?q=1#f", "?a.b", "#x.y", "/a:1.b"]),
).map("".join)
url_ish = st.one_of(structured, free_form)


@settings(max_examples=examples(3000), deadline=None)
@given(url_ish)
def test_fuzz_urlish(url):
    check_all(url, involution=False)
    assert (canonical_ref(canonical_ref(url)) == url) == involution_expected(url), url


def test_where_the_card_function_is_not_an_involution():
    # The card's canonical() itself is not self-inverse on these malformed hosts; the kernel and
    # the wrapper must reproduce it byte for byte anyway (they are checked on twice-applied too).
    cases = {
        "http://:1.2.3.4": "http://4.3.2.:1",
        "https://x:1.y/": "https://y.x:1/",
        "https://a.[b/p": "https://[b.a/p",
        "https://u@a.b.[c:80/": "https://u@[c.b.a:80/",
    }
    for url, once in cases.items():
        assert canonical_ref(url) == once
        check_all(url, involution=False)
        assert canonical_ref(once) != url and not involution_expected(url)


@settings(max_examples=examples(1000), deadline=None)
@given(
    st.tuples(
        st.sampled_from([b"http://", b"https://", b""]),
        st.lists(st.one_of(st.sampled_from([p.encode() for p in _PIECES]), st.binary(max_size=2)), max_size=20).map(b"".join),
    ).map(b"".join),
    st.integers(0, 4),
)
def test_fuzz_bytes_not_utf8(b, pad):
    # Any bytes: the card's function over the surrogateescape decoding is the reference
    # (escaped bytes are none of the ASCII characters it looks at).
    text = b.decode("utf-8", "surrogateescape")
    want = canonical_ref(text).encode("utf-8", "surrogateescape")
    assert kernel_bytes(b, pad) == want
    assert canonical_bytes(b) == want
    if involution_expected(text):
        assert kernel_bytes(want, pad) == b
