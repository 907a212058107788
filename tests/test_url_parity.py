"""URL encoding parity: every URL encodes exactly as HF tokenizers does on canonical(url), and round-trips.

The fastenc side is the recipe's own path (``encode_url_chunk``: the fused canonical + BPE kernel
that writes ``[0] ++ ids`` per URL); the oracle is HF ``tokenizers`` with ``vocab/urls/tokenizer.json``
on the pure-Python ``canonical(url)``. Corpora: all of ``../shared/data/urls/urls.parquet`` (636,445
real URLs; skipped only when that folder is absent), the committed fixtures (``tests/data/
urls_fixture.parquet``, ``examples/part-00042.parquet``), the hand-written SYNTHETIC fixture
``tests/data/urls_synthetic.txt`` and SYNTHETIC long URLs made below (~10 kB and more).
Round trip: ``canonical(tok.decode(ids)) == url`` with HF's decoder, as the card's reader does it.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

import fastenc
from fastenc.arrow_io import arrow_to_flat
from fastenc.url_canonical import canonical
from fastenc.recipes.urls import encode_url_chunk

tokenizers = pytest.importorskip("tokenizers")

REPO = Path(__file__).resolve().parents[1]
URLS = REPO.parent / "shared" / "data" / "urls" / "urls.parquet"
TOKENIZER_JSON = REPO / "vocab" / "urls" / "tokenizer.json"
SYNTHETIC = REPO / "tests" / "data" / "urls_synthetic.txt"
COMMITTED = [REPO / "tests" / "data" / "urls_fixture.parquet", REPO / "examples" / "part-00042.parquet"]


@pytest.fixture(scope="module")
def hf():
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER_JSON))
    # fastenc encodes the text of added tokens ("<eos>") as ordinary text (tiktoken's
    # encode_ordinary); HF splits it out unless told not to (see test_literal_eos_text).
    tok.encode_special_tokens = True
    return tok


@pytest.fixture(scope="module")
def enc():
    return fastenc.load("urls")


# The card's own canonical() cases (its `if __name__ == "__main__":` block), verbatim.
CARD_CASES = [
    "https://www.example.com/blog/2024/01/post.html?utm_source=x&id=42#top",
    "http://example.com",
    "https://a.b.c.d.e.f/",
    "https://user:pass@www.example.com:8443/p?q=1",
    "https://1.2.3.4/path",
    "https://[::1]:8080/x",
    "https://example.com./trailing",
    "https://example..com/empty",
    "https://localhost/",
    "https:///no-host",
    "ftp://weird.example.com/x",
    "http://129.222.104.0/25,US,US-CA,San",
    "not a url at all",
    "https://xn--80ak6aa92e.com/é中",
    "https://WWW.Example.COM/Case",
]


def synthetic_urls() -> list[str]:
    """SYNTHETIC: the hand-written fixture's lines, the card's cases, plus long URLs made here."""
    lines = SYNTHETIC.read_text(encoding="utf-8").split("\n")
    urls = [line for line in lines if not line.startswith("# ")]
    if urls and urls[-1] == "":
        urls.pop()  # the file's final newline
    return urls + CARD_CASES + long_urls() + ["", "<eos>", "https://a.com/<eos>/x", "https://<eos>.example.com/"]


def long_urls() -> list[str]:
    """SYNTHETIC URLs of ~10 kB and more: long alphanumeric runs (BPE's heap path), many labels,
    long queries full of delimiters and escapes, raw UTF-8."""
    return [
        "https://www." + "a" * 10_000 + ".com/",
        "https://" + ".".join(f"l{i}" for i in range(3000)) + "/x",
        "https://www.example.com/" + "abc123" * 2000,
        "https://www.example.com/?" + "&".join(f"k{i}=v%2F{i}" for i in range(1200)),
        "https://www.example.com/" + "/http://x.y" * 1000 + "%",
        "https://www.example.com/" + "é中𝄞" * 1000,
        "https://www.example.com/" + "9" * 100_000,
        "https://user:p@ss@" + "x" * 5000 + ".example.com:8080/" + "%41" * 3000,
        "http://" + "b" * 50_000,
    ]


def fastenc_ids(enc, urls_data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat ids without the leading zeros, per-URL id counts, irreversible flags) from the recipe's kernel."""
    n = len(offsets) - 1
    tokens, tok_offsets, flags = encode_url_chunk(enc, urls_data, offsets, np.arange(n))
    tokens = tokens.copy()
    assert (tokens[tok_offsets[:-1]] == 0).all(), "every URL must start with <eos> (0)"
    keep = np.ones(len(tokens), bool)
    keep[tok_offsets[:-1]] = False
    return tokens[keep], np.diff(tok_offsets) - 1, flags.astype(bool)


def check_parity_and_round_trip(hf, enc, arr: pa.Array, what: str) -> int:
    """Assert ids == HF's on canonical(url) for every URL, and the round trip; returns how many
    URLs are irreversible (canonical() not self-inverse on them: then decode gives canonical(url)).

    Round trip: all ids are decoded at once through the vocabulary's byte table and must give
    exactly the canonical texts HF was given (so canonical() of them gives the URLs back wherever
    canonical() is self-inverse); HF's own decoder is checked on every 20th URL (it is the slow part).
    """
    urls = arr.to_pylist()
    canon = [canonical(u) for u in urls]
    data, offsets = arrow_to_flat(arr)
    got, got_counts, flags = fastenc_ids(enc, data, offsets)
    want_lists = [e.ids for e in hf.encode_batch(canon, add_special_tokens=False)]
    want = np.fromiter(itertools.chain.from_iterable(want_lists), dtype=np.int64)
    want_counts = np.array([len(x) for x in want_lists], dtype=np.int64)
    if not (np.array_equal(got_counts, want_counts) and np.array_equal(got, want)):
        starts = np.concatenate([[0], np.cumsum(got_counts)])
        bad = [i for i in range(len(urls)) if got[starts[i] : starts[i + 1]].tolist() != want_lists[i]]
        pytest.fail(f"{what}: {len(bad)} of {len(urls)} URLs differ from HF, first {urls[bad[0]]!r}: "
                    f"fastenc {got[starts[bad[0]]:starts[bad[0] + 1]].tolist()} HF {want_lists[bad[0]]}")
    # decode everything: the bytes, cut at each URL's ids, are exactly canonical(url)
    canon_bytes = [c.encode() for c in canon]
    assert enc.decode_bytes(got) == b"".join(canon_bytes), f"{what}: decoding does not give canonical(url) back"
    tok_len = np.diff(enc.vocab.token_offsets)[got]
    ends = np.cumsum(tok_len)[np.cumsum(got_counts) - 1] if len(got) else np.zeros(len(urls), np.int64)
    ends = np.where(got_counts > 0, ends, 0)
    per_url = np.diff(np.concatenate([[0], np.maximum.accumulate(ends)]))
    assert per_url.tolist() == [len(b) for b in canon_bytes], f"{what}: URL boundaries differ after decoding"
    sample = range(0, len(urls), 20)
    hf_back = hf.decode_batch([want_lists[i] for i in sample], skip_special_tokens=False)
    assert hf_back == [canon[i] for i in sample], f"{what}: HF's decoder does not give canonical(url) back"
    involutive = np.array([canonical(c) == u for c, u in zip(canon, urls)], dtype=bool)
    assert np.array_equal(flags, ~involutive), f"{what}: irreversible flags differ from canonical(canonical(u)) != u"
    return int(flags.sum())


# SYNTHETIC: malformed hosts on which the card's canonical() is not its own inverse (see
# tests/test_canonical.py): the bin stores canonical(url) as for any URL, decoding gives that
# back exactly, but canonical() of it is not the original. The recipe flags and lists them.
IRREVERSIBLE = ["https://x:1.y/", "http://host:8080.evil.example/p", "https://a.[b/p", "https://u@a.b.[c:80/", "http://:1.2.3.4"]


@pytest.mark.slow
@pytest.mark.skipif(not URLS.exists(), reason="shared corpus ../shared/data/urls not present (fresh clone)")
def test_whole_corpus_matches_hf_and_round_trips(hf, enc):
    arr = pq.read_table(URLS, columns=["url"]).column("url").combine_chunks()
    assert len(arr) == 636_445
    assert check_parity_and_round_trip(hf, enc, arr, "urls.parquet") == 0  # every real URL round-trips


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_fixtures_match_hf_and_round_trip(hf, enc, path):
    arr = pq.read_table(path, columns=["url"]).column("url").combine_chunks()
    assert len(arr) > 1000
    assert check_parity_and_round_trip(hf, enc, arr, path.name) == 0


def test_synthetic_fixture_and_long_urls_match_hf_and_round_trip(hf, enc):
    urls = synthetic_urls() + IRREVERSIBLE
    assert max(len(u.encode()) for u in urls) >= 100_000 and "" in urls
    assert check_parity_and_round_trip(hf, enc, pa.array(urls, pa.string()), "synthetic") >= len(IRREVERSIBLE)


def test_order_does_not_change_ids(hf, enc):
    """The recipe encodes URLs in hash order from anywhere in the buffer: ids per URL are the same."""
    arr = pq.read_table(COMMITTED[0], columns=["url"]).column("url").combine_chunks()
    data, offsets = arrow_to_flat(arr)
    n = len(offsets) - 1
    order = np.random.default_rng(7).permutation(n)
    tokens, tok_offsets, _ = encode_url_chunk(enc, data, offsets, order)
    urls = arr.to_pylist()
    encs = hf.encode_batch([canonical(urls[i]) for i in order], add_special_tokens=False)
    assert len(encs) == n
    for k, e in enumerate(encs):
        assert tokens[tok_offsets[k] : tok_offsets[k + 1]].tolist() == [0] + e.ids, urls[order[k]]


def test_literal_eos_text(hf, enc):
    """A URL holding the text "<eos>" is encoded as ordinary text: 0 never occurs inside a URL.

    HF's default splits added tokens out of the input (id 0 mid-URL, which would break the
    zero-delimited format); with encode_special_tokens=True it agrees with fastenc.
    """
    url = "https://example.com/a<eos>b"
    plain = tokenizers.Tokenizer.from_file(str(TOKENIZER_JSON))
    assert 0 in plain.encode(canonical(url)).ids  # the trap the option avoids
    data = np.frombuffer(url.encode(), np.uint8)
    tokens, tok_offsets, _ = encode_url_chunk(enc, data, np.array([0, len(data)]), np.array([0]))
    assert tokens[0] == 0 and 0 not in tokens[1:].tolist()
    assert tokens[1:].tolist() == hf.encode(canonical(url)).ids


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.one_of(
    st.text(alphabet=st.sampled_from(list("htps:/.%@[]?#0123456789abcXYZ-_~é中 \t\"'<>,")), max_size=60),
    st.builds(lambda a, b: f"https://{a}/{b}", st.text(alphabet="abc.:@[]1", max_size=20), st.text(max_size=30)),
), min_size=1, max_size=20))
def test_fuzz_matches_hf_and_round_trips(hf, enc, urls):
    check_parity_and_round_trip(hf, enc, pa.array(urls, pa.string()), "fuzz")


@pytest.mark.slow
def test_the_url_loop_of_its_own_matches_the_class_table_loop(enc):
    # A URL encoder hands fastenc's narrow loop classes=None (Encoder.kernel_classes): Numba then
    # compiles a loop with only the URL pre-tokenizer. A user's own code may pass Encoder.classes
    # (the loop with both pre-tokenizers): the same ids. classes=None with GPT-2's vocabulary is refused.
    import numpy as np
    from numba import njit

    from fastenc.kernels.encode import encode_with, new_scratch
    from fastenc.kernels.piece_cache import new_piece_caches

    @njit
    def run(data, vocab, classes, caches, out):
        # (encode_with: it hands encode_narrow read-only data and int64 positions, the loops' only
        # types, which tests/test_encoder_gpt2.py checks in the shared kernel cache)
        return encode_with(data, 0, data.shape[0], vocab, classes, caches, new_scratch(), out, 0)

    assert enc.kernel_classes is None and enc.classes is not None
    data = np.frombuffer(" ".join(CARD_CASES + synthetic_urls()[:200]).encode(), np.uint8)
    a, b = np.empty(len(data), np.uint16), np.empty(len(data), np.uint16)
    n = run(data, enc.vocab, enc.kernel_classes, new_piece_caches(1 << 12, 1 << 10), a)
    m = run(data, enc.vocab, enc.classes, new_piece_caches(1 << 12, 1 << 10), b)
    assert n == m and np.array_equal(a[:n], b[:m])
    assert a[:n].tolist() == enc.encode_bytes(data.tobytes()).tolist()
    gpt2 = fastenc.load("gpt2")
    assert gpt2.kernel_classes is gpt2.classes
    with pytest.raises(ValueError, match="classes=None"):
        run(data, gpt2.vocab, None, new_piece_caches(1 << 12, 1 << 10), a)
