"""The committed vocabularies (vocab/gpt2, vocab/urls) and fixtures (tests/data, examples) are what
their READMEs say: checksums, shapes, the oracles agreeing, fixtures being real rows of the corpora.

Tests marked `needs_shared` compare against ../shared/data and run whenever it exists.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

from conftest import EOT, REPO, SHARED_DATA, gpt2_byte_decoder

sys.path.insert(0, str(REPO / "scripts"))
import build_gpt2_tokenizer  # noqa: E402
import make_fixtures  # noqa: E402

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Tokenizer  # noqa: E402

from reference import canonical_ref  # noqa: E402

GPT2_DIR = REPO / "vocab" / "gpt2"
URLS_DIR = REPO / "vocab" / "urls"
URLS_FIXTURE = REPO / "tests" / "data" / "urls_fixture.parquet"
SHARD = REPO / "examples" / f"part-{make_fixtures.SHARD_INDEX:05d}.parquet"
DOCS = SHARED_DATA / "text" / "docs.parquet"
URLS = SHARED_DATA / "urls" / "urls.parquet"

needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared corpus ../shared/data not present (fresh clone)")

# The only documents of docs.parquet where HF tokenizers and tiktoken's encode_ordinary differ. Each
# contains the literal text "<|endoftext|>": HF always splits added tokens out of the input (giving
# id 50256), while encode_ordinary encodes it as plain text. fastenc follows encode_ordinary.
HF_TIKTOKEN_DISAGREE = (
    "code/tiktoken/tiktoken/core.py",
    "code/tiktoken/tiktoken/load.py",
    "code/tiktoken/tiktoken_ext/openai_public.py",
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def gpt2_hf():
    return Tokenizer.from_file(str(GPT2_DIR / "tokenizer.json"))


@pytest.fixture(scope="module")
def url_hf():
    return Tokenizer.from_file(str(URLS_DIR / "tokenizer.json"))


def hf_ids(tok, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


# ---- GPT-2 vocabulary ------------------------------------------------------------------------------

def read_sums(path: Path) -> dict[str, str]:
    return {name: h for h, name in (line.split() for line in path.read_text().splitlines() if line.strip())}


def test_gpt2_tokenizer_json_sha256_is_recorded():
    assert read_sums(GPT2_DIR / "SOURCES.sha256")["tokenizer.json"] == sha256(GPT2_DIR / "tokenizer.json")


@needs_shared
def test_gpt2_sources_sha256_match_shared_data():
    sums = read_sums(GPT2_DIR / "SOURCES.sha256")
    for name in ("encoder.json", "vocab.bpe"):
        assert sums[name] == sha256(SHARED_DATA / "gpt2" / name), name


@needs_shared
def test_gpt2_build_is_reproducible():
    vocab, merges = build_gpt2_tokenizer.read_sources(SHARED_DATA / "gpt2")
    build_gpt2_tokenizer.check_sources(vocab, merges)
    assert build_gpt2_tokenizer.build(vocab, merges).encode() == (GPT2_DIR / "tokenizer.json").read_bytes()


def test_gpt2_tokenizer_json_shape():
    spec = json.loads((GPT2_DIR / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec["normalizer"] is None
    assert spec["pre_tokenizer"] == {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    assert spec["decoder"]["type"] == "ByteLevel"
    assert [(t["id"], t["content"], t["special"]) for t in spec["added_tokens"]] == [(50256, EOT, True)]
    model = spec["model"]
    assert model["type"] == "BPE" and model["unk_token"] is None and model["dropout"] is None
    assert sorted(model["vocab"].values()) == list(range(50257))
    assert len(model["merges"]) == 50000


@needs_shared
def test_fresh_clone_oracle_equals_the_shared_one():
    # conftest rebuilds tiktoken's ranks from vocab/gpt2/tokenizer.json when ../shared is absent.
    import tiktoken.load

    from conftest import GPT2_TOKENIZER_JSON, mergeable_ranks_from_tokenizer_json

    gpt2 = SHARED_DATA / "gpt2"
    assert mergeable_ranks_from_tokenizer_json(GPT2_TOKENIZER_JSON) == tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(gpt2 / "vocab.bpe"), encoder_json_file=str(gpt2 / "encoder.json"))


def test_gpt2_oracles_share_one_vocabulary(gpt2_hf, tiktoken_gpt2):
    # Every id means the same bytes in both oracles.
    dec = gpt2_byte_decoder()
    for token, i in gpt2_hf.get_vocab(with_added_tokens=False).items():
        if token != EOT:
            assert tiktoken_gpt2.decode_single_token_bytes(i) == bytes(dec[c] for c in token)


def test_gpt2_hf_equals_tiktoken_on_docs_fixture(gpt2_hf, tiktoken_gpt2, docs_fixture):
    ids, texts, counts = (docs_fixture.column(c).to_pylist() for c in ("id", "text", "gpt2_tokens"))
    hf = hf_ids(gpt2_hf, texts)
    differ = []
    for doc_id, text, n, got in zip(ids, texts, counts, hf):
        want = tiktoken_gpt2.encode_ordinary(text)
        assert len(want) == n, f"{doc_id}: gpt2_tokens column disagrees with tiktoken"
        if got != want:
            differ.append(doc_id)
    assert sorted(differ) == sorted(HF_TIKTOKEN_DISAGREE)


@pytest.mark.parametrize("doc_id", HF_TIKTOKEN_DISAGREE)
def test_gpt2_hf_splits_out_literal_endoftext(doc_id, gpt2_hf, tiktoken_gpt2, docs_fixture):
    # Documented disagreement: HF treats "<|endoftext|>" in the text as the special token, tiktoken's
    # encode_ordinary as text. HF matches tiktoken's encode(..., allowed_special="all") instead.
    text = docs_fixture.column("text").to_pylist()[docs_fixture.column("id").to_pylist().index(doc_id)]
    assert EOT in text
    got = hf_ids(gpt2_hf, [text])[0]
    assert 50256 in got
    assert 50256 not in tiktoken_gpt2.encode_ordinary(text)
    assert got != tiktoken_gpt2.encode_ordinary(text)
    assert got == tiktoken_gpt2.encode(text, allowed_special="all")


ADVERSARIAL = [
    "", " ", "  ", "\n", "\r\n", "\t\t x", "x" * 100_000, "1" * 5000, " " * 1000 + "a", "a" + " " * 1000,
    "I'm he's we'll they've I'd it's 'S 'LL", "\ufeff", "42°S 174°E\ufeff / \ufeff42°S", "\u00a0\u00a0x",
    "\u3000日本語\u3000", "👨‍👩‍👧‍👦 family", "e\u0301\u0301", "x\u2028y\u0085z", "\x0b\x0c\x1c\x1d\x1e\x1f",
    "<|endoftext|>".replace("|", "| "), "   \n\n   \n", "a\r\rb",
]


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_gpt2_hf_equals_tiktoken_adversarial(text, gpt2_hf, tiktoken_gpt2):
    assert hf_ids(gpt2_hf, [text])[0] == tiktoken_gpt2.encode_ordinary(text)


def sweep_code_points() -> list[int]:
    """Planes 0, 1 and 14 whole (where almost every script, space and number lives, and where new
    Unicode versions add letters), every 16th of the CJK planes 2-3 (all one class), every 4096th of
    the rest (unassigned or private use). A sweep of all 1.1 M took ~150 s (HF's pre-tokenizer is slow
    on exotic scripts) and found no disagreement either."""
    plane = lambda c: c >> 16  # noqa: E731
    step = {0: 1, 1: 1, 14: 1, 2: 16, 3: 16}
    return [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and c % step.get(plane(c), 4096) == 0]


@pytest.mark.slow
def test_gpt2_hf_equals_tiktoken_on_every_code_point(gpt2_hf, tiktoken_gpt2):
    # Catches any code point that the two regex engines (Oniguruma in HF, fancy-regex in tiktoken)
    # class differently as letter / number / whitespace: each appears doubled, after a space, before
    # a letter and a digit, and before a newline.
    cps = sweep_code_points()
    texts = []
    for start in range(0, len(cps), 2048):
        texts.append("".join(f"{chr(c)}{chr(c)} {chr(c)}a1\n" for c in cps[start:start + 2048]))
    hf = hf_ids(gpt2_hf, texts)
    bad = [i for i, (t, got) in enumerate(zip(texts, hf)) if got != tiktoken_gpt2.encode_ordinary(t)]
    assert bad == []


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)
       | st.text(alphabet=" \t\n\r\u00a0\u3000\ufeff'sdmtlvre1a.!é日", max_size=60))
def test_gpt2_hf_equals_tiktoken_fuzz(gpt2_hf, tiktoken_gpt2, text):
    if EOT in text:  # the documented disagreement above
        return
    assert hf_ids(gpt2_hf, [text])[0] == tiktoken_gpt2.encode_ordinary(text)


@needs_shared
@pytest.mark.slow
def test_gpt2_hf_equals_tiktoken_on_docs_corpus(gpt2_hf, tiktoken_gpt2):
    """The gpt2_tokens column against tiktoken on every document; HF's ids against tiktoken's on
    every 4th document and on every one with the literal special token (HF is slow: all 6,626
    documents took 75 s of CI; fastenc itself is compared with tiktoken on all of them in
    test_encoder_gpt2)."""
    table = pq.read_table(DOCS, columns=["id", "text", "gpt2_tokens"])
    ids, texts, counts = (table.column(c).to_pylist() for c in ("id", "text", "gpt2_tokens"))
    want = tiktoken_gpt2.encode_ordinary_batch(texts, num_threads=2)
    assert [i for i, n, w in zip(ids, counts, want) if len(w) != n] == [], "gpt2_tokens column disagrees with tiktoken"
    sample = [k for k, text in enumerate(texts) if k % 4 == 0 or EOT in text]
    hf = hf_ids(gpt2_hf, [texts[k] for k in sample])
    differ = []
    for k, got in zip(sample, hf):
        if got != want[k]:
            assert got == tiktoken_gpt2.encode(texts[k], allowed_special="all"), ids[k]
            differ.append(ids[k])
    assert len(sample) > len(texts) // 4 and sorted(differ) == sorted(HF_TIKTOKEN_DISAGREE)


# ---- URL vocabulary --------------------------------------------------------------------------------

def url_meta() -> dict:
    return json.loads((URLS_DIR / "training_meta.json").read_text(encoding="utf-8"))


def test_url_tokenizer_json_sha256_is_recorded():
    assert url_meta()["tokenizer_json_sha256"] == sha256(URLS_DIR / "tokenizer.json")


@needs_shared
def test_url_training_corpus_is_the_shared_one():
    # If this fails, urls.parquet changed since training: retrain (see vocab/urls/README.md).
    assert url_meta()["corpus"]["parquet_sha256"] == sha256(URLS)


def test_url_vocab_shape(url_hf):
    vocab = url_hf.get_vocab(with_added_tokens=True)
    assert len(vocab) == url_hf.get_vocab_size(with_added_tokens=True) == 8192
    assert sorted(vocab.values()) == list(range(8192))
    assert url_hf.token_to_id("<eos>") == 0
    assert set(gpt2_byte_decoder()) <= set(vocab)  # all 256 byte symbols
    dec = gpt2_byte_decoder()
    assert max(len(t) for t in vocab if t != "<eos>") <= 24  # max_token_length, in bytes
    assert all(all(c in dec for c in t) for t in vocab if t != "<eos>")


def test_url_tokenizer_json_structure():
    spec = json.loads((URLS_DIR / "tokenizer.json").read_text(encoding="utf-8"))
    assert [(t["id"], t["content"], t["special"]) for t in spec["added_tokens"]] == [(0, "<eos>", True)]
    assert spec["normalizer"] is None and spec["post_processor"] is None
    split, byte_level = spec["pre_tokenizer"]["pretokenizers"]
    assert split["type"] == "Split" and split["behavior"] == "Isolated" and not split["invert"]
    # The card's pattern, character for character.
    assert split["pattern"]["Regex"] == r"https?://|%[0-9A-Fa-f]{2}|[!#$%&'()*+,\-./:;=?@\[\\\]\^_`{|}~]"
    assert byte_level["type"] == "ByteLevel" and not byte_level["add_prefix_space"] and not byte_level["use_regex"]
    assert spec["decoder"]["type"] == "ByteLevel"
    config = json.loads((URLS_DIR / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["eos_token"] == "<eos>" and config["clean_up_tokenization_spaces"] is False


def test_url_pretokenizer_splits_like_the_card(url_hf):
    pieces = [p for p, _ in url_hf.pre_tokenizer.pre_tokenize_str("https://uk.co.bbc.news/a%C3%A9?x=100%&y")]
    dec = gpt2_byte_decoder()
    assert [bytes(dec[c] for c in p).decode() for p in pieces] == [
        "https://", "uk", ".", "co", ".", "bbc", ".", "news", "/", "a", "%C3", "%A9", "?", "x", "=", "100", "%", "&", "y"]


def round_trip_failures(tok, urls: list[str]) -> list[str]:
    enc = tok.encode_batch([canonical_ref(u) for u in urls], add_special_tokens=False)
    assert not any(0 in e.ids for e in enc)  # <eos> never comes out of a URL
    dec = tok.decode_batch([e.ids for e in enc], skip_special_tokens=False)
    return [u for u, d in zip(urls, dec) if canonical_ref(d) != u]


def test_url_round_trip_on_fixture(url_hf):
    urls = pq.read_table(URLS_FIXTURE).column("url").to_pylist()
    assert round_trip_failures(url_hf, urls) == []


@needs_shared
@pytest.mark.slow
def test_url_round_trip_on_a_quarter_of_the_corpus(url_hf):
    """HF's own round trip, on every 4th URL (all 636,445 took 30 s of CI; fastenc's ids are compared
    with HF's, and round-tripped, on every URL in test_url_parity)."""
    urls = pq.read_table(URLS, columns=["url"]).column("url").to_pylist()[::4]
    assert len(urls) > 150_000 and round_trip_failures(url_hf, urls) == []


# ---- fixtures --------------------------------------------------------------------------------------

def test_docs_fixture_content(docs_fixture):
    rows = docs_fixture.to_pylist()
    assert docs_fixture.column_names == ["id", "text", "source", "lang", "gpt2_tokens"]
    assert not any(r["source"] in make_fixtures.EXCLUDED_SOURCES for r in rows)  # web_dragnet is AGPL
    assert {r["id"] for r in rows} >= set(make_fixtures.REQUIRED_DOCS)
    assert any("\ufeff" in r["text"] for r in rows) and any("\r\n" in r["text"] for r in rows)
    assert any(r["gpt2_tokens"] >= 4096 for r in rows) and any(r["gpt2_tokens"] >= 8192 for r in rows)
    assert (REPO / "tests" / "data" / "docs_fixture.parquet").stat().st_size <= 1_500_000


@needs_shared
def test_docs_fixture_rows_are_whole_corpus_rows(docs_fixture):
    corpus = {r["id"]: r for r in pq.read_table(DOCS).to_pylist()}
    for row in docs_fixture.to_pylist():
        assert row == corpus[row["id"]], row["id"]


@needs_shared
def test_urls_fixture_is_an_ordered_subset_of_the_corpus():
    corpus = pq.read_table(URLS, columns=["url"]).column("url").to_pylist()
    position = {u: i for i, u in enumerate(corpus)}
    fixture = pq.read_table(URLS_FIXTURE).column("url").to_pylist()
    where = [position[u] for u in fixture]  # KeyError: a fixture URL that is not in the corpus
    assert where == sorted(set(where))      # SURT (file) order kept, no duplicates


def test_example_shard_membership():
    table = pq.read_table(SHARD)
    assert table.column_names == ["url"]
    urls = table.column("url").to_pylist()
    assert len(urls) > 5000 and len(set(urls)) == len(urls)
    # The URL card's membership rule over the ORIGINAL url, written out (not the generator's helper).
    assert all((xxhash.xxh3_64_intdigest(u.encode("utf-8")) * 64) >> 64 == 42 for u in urls)


@needs_shared
def test_example_shard_is_the_whole_shard_in_source_order():
    corpus = pq.read_table(URLS, columns=["url"]).column("url").to_pylist()
    want = [u for u in corpus if (xxhash.xxh3_64_intdigest(u.encode("utf-8")) * 64) >> 64 == 42]
    assert pq.read_table(SHARD).column("url").to_pylist() == want


def test_committed_fixtures_stay_small():
    files = [p for d in ("tests/data", "examples") for p in (REPO / d).rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 3_000_000
