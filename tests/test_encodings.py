"""cl100k_base and o200k_base against tiktoken's encode_ordinary: corpora, fuzzing, adversarial inputs.

The oracle is the real tiktoken, offline: with ../shared/data present its `make_cache.py` fills a
temporary TIKTOKEN_CACHE_DIR and `tiktoken.get_encoding` reads it (tiktoken checks each file's
pinned sha256); in a fresh clone the Encodings are built by tiktoken's own `openai_public`
functions from the rank files committed in vocab/, whose sha256 is checked against the hash
tiktoken pins. Either way nothing is skipped.
"""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import unicodedata
from unittest import mock

import numpy as np
import pyarrow.parquet as pq
import pytest
import tiktoken  # the oracle, in the test extra: a parity file must never skip for want of it
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from budget import examples
from numba import njit

import fastenc
from fastenc.errors import VocabError
from fastenc.kernels.encode_wide import encode_text_wide
from fastenc.kernels.loads import element_address
from fastenc.kernels.piece_cache_wide import wide_slot
from fastenc.kernels.piece_memo import _HEADER as _MEMO_HEADER
from fastenc.kernels.piece_memo import memo_hash
from fastenc.unicode_classes import o200k_class_table
from fastenc.vocab import builtin_tiktoken_file

NAMES = ["cl100k_base", "o200k_base"]


def _from_committed_files(name: str):
    """tiktoken's own definition of the encoding, its rank file read from vocab/ (hash-checked)."""
    import tiktoken.load
    import tiktoken_ext.openai_public as op

    def load(url, expected_hash=None):
        path = builtin_tiktoken_file(name)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == expected_hash, f"{path} is not tiktoken's file"
        return tiktoken.load.load_tiktoken_bpe(str(path))

    with mock.patch.object(op, "load_tiktoken_bpe", load):
        return tiktoken.Encoding(**getattr(op, name)())


@pytest.fixture(scope="session")
def oracle(shared_data, tmp_path_factory):
    """name -> tiktoken Encoding, built offline (see the module docstring)."""
    make_cache = shared_data / "tiktoken" / "make_cache.py" if shared_data is not None else None
    if make_cache is None or not make_cache.is_file():
        return {name: _from_committed_files(name) for name in NAMES}
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    subprocess.run([sys.executable, str(make_cache), str(cache)], check=True, capture_output=True)
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return {name: tiktoken.get_encoding(name) for name in NAMES}
    finally:
        if old is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


@pytest.fixture(scope="module", params=NAMES)
def pair(request, oracle):
    """(fastenc Encoder, tiktoken Encoding) for one encoding."""
    return fastenc.load(request.param), oracle[request.param]


def _bad_docs(enc, ref, texts):
    ids, offsets = enc.encode_batch(texts)
    expected = ref.encode_ordinary_batch(texts, num_threads=2)
    return [i for i, want in enumerate(expected) if ids[offsets[i]:offsets[i + 1]].tolist() != want], ids


def test_committed_rank_files_are_tiktokens(oracle):
    for name in NAMES:
        enc = _from_committed_files(name)  # asserts the sha256 tiktoken pins
        assert enc.n_vocab == oracle[name].n_vocab


@pytest.mark.slow
def test_every_shared_document_matches_tiktoken(pair, shared_data):
    if shared_data is None:
        pytest.skip("../shared/data is absent (fresh clone); the committed fixture tests still run")
    enc, ref = pair
    texts = pq.read_table(shared_data / "text" / "docs.parquet", columns=["text"]).column("text").to_pylist()
    bad, _ = _bad_docs(enc, ref, texts)
    assert bad == [], f"{len(bad)} of {len(texts)} documents differ from tiktoken {ref.name}, first: {bad[:5]}"


def test_every_fixture_document_matches_tiktoken_and_round_trips(pair, docs_fixture):
    enc, ref = pair
    texts = docs_fixture.column("text").to_pylist()
    bad, ids = _bad_docs(enc, ref, texts)
    assert bad == []
    assert ids.dtype == np.uint32  # both have ids above 65,535
    assert enc.decode(enc.encode(texts[0])) == texts[0]


def test_builtin_facts(oracle):
    cl, o2 = fastenc.load("cl100k_base"), fastenc.load("o200k_base")
    assert cl.dtype == np.uint32 and o2.dtype == np.uint32
    assert cl.vocab_size == oracle["cl100k_base"].n_vocab and o2.vocab_size == oracle["o200k_base"].n_vocab
    for enc, ref in ((cl, oracle["cl100k_base"]), (o2, oracle["o200k_base"])):
        for special, tid in ref._special_tokens.items():
            assert enc.decode([tid]) == special  # decode only: encode treats their text as ordinary
            assert tid not in enc.encode(special)


def test_rank_file_by_path_with_each_pattern(tmp_path, oracle):
    copy = tmp_path / "ranks.tiktoken"
    copy.write_bytes(builtin_tiktoken_file("cl100k_base").read_bytes())
    text = "Hello  world's 12345 ſtuff\r\n\n  x/y"
    assert fastenc.load(copy, pattern="cl100k").encode(text) == oracle["cl100k_base"].encode_ordinary(text)
    # The same ranks with o200k's split: tiktoken agrees with a hand-built Encoding.
    other = tiktoken.Encoding(name="x", pat_str=oracle["o200k_base"]._pat_str,
                              mergeable_ranks=oracle["cl100k_base"]._mergeable_ranks, special_tokens={})
    assert fastenc.load(copy, pattern="o200k").encode(text) == other.encode_ordinary(text)


def test_bad_rank_files_and_patterns_are_refused(tmp_path):
    good = builtin_tiktoken_file("cl100k_base")
    with pytest.raises(VocabError, match="pattern="):
        fastenc.load(good)  # a .tiktoken file needs its split pattern
    with pytest.raises(VocabError, match="unknown"):
        fastenc.load(good, pattern="p50k")
    with pytest.raises(VocabError, match="defined with pattern"):
        fastenc.load("cl100k_base", pattern="o200k")
    broken = tmp_path / "broken.tiktoken"
    broken.write_text("IQ== 0\nnot-base64!! 1\n")
    with pytest.raises(VocabError, match=r"broken.tiktoken:2"):
        fastenc.load(broken, pattern="gpt2")
    repeated = tmp_path / "repeated.tiktoken"
    repeated.write_text("IQ== 0\nIg== 0\n")
    with pytest.raises(VocabError, match="repeats"):
        fastenc.load(repeated, pattern="gpt2")
    few = tmp_path / "few.tiktoken"
    few.write_text("IQ== 0\n")
    with pytest.raises(VocabError, match="no token for byte"):
        fastenc.load(few, pattern="gpt2")


ADVERSARIAL = [
    "",
    "x" * 1_000_000,
    "AbC" * 300_000,
    "1" * 1_000_000,
    " " * 1_000_000,
    "\n" * 1_000_000,
    "\r\n " * 300_000,
    "'s" * 400_000,
    "a/" * 400_000,
    "!\n/" * 300_000,
    "e\u0301" * 300_000,
    "\u0301" * 300_000,
    "中" * 300_000,
    "ǅǅǆ" * 100_000,
    "\U0001f600" * 200_000,
    " \u3000\u0085\u00a0" * 100_000,
]


# The fast suite runs each pattern at SHORT characters; the slow half at up to LONG (tiktoken's merge of
# one piece is quadratic: a megabyte piece took minutes of CI for each case, and LONG already takes the
# heap merge and every cache's overflow path many times over).
SHORT = 20_000
LONG = 100_000


def _adversarial_cases():
    def case(t, *marks):
        return pytest.param(t, marks=marks, id=repr(t[:6]) + f"..{len(t)}")
    return ([case(t) for t in ADVERSARIAL if len(t) <= SHORT] + [case(t[:SHORT]) for t in ADVERSARIAL if len(t) > SHORT]
            + [case(t[:LONG], pytest.mark.slow) for t in ADVERSARIAL if len(t) > SHORT])


@pytest.mark.parametrize("text", _adversarial_cases())
def test_adversarial_inputs_match_tiktoken(pair, text):
    enc, ref = pair
    ids = enc.encode(text)
    want = ref.encode_ordinary(text)
    assert ids == want
    assert enc.decode(ids) == text


def test_a_long_part_mid_batch_grows_the_merge_room(pair):
    """A document with a part longer than the wide loop's merge room (parts of up to 124 bytes at
    first) is encoded again with more room (``encode_wide.wide_loop``), in the middle of a batch:
    it and the documents before and after it are tiktoken's, on one thread and on two."""
    import numba

    _, ref = pair
    texts = ["Hello, world!", "x" * 5_000 + " tail", " short one", "ab" * 3_000, "1" * 700, "y" * 200, "end."] * 3
    want = [ref.encode_ordinary(t) for t in texts]
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            ids, offsets = fastenc.load(ref.name).encode_batch(texts)  # (fresh caches: the parts are merged)
            assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == want
    finally:
        numba.set_num_threads(before)


def _new_codepoints() -> str:
    """Letters, marks and numbers that Python's unicodedata (Unicode 14 here) does not know but
    tiktoken's regex (Unicode 16) does: found from the shipped table, not hard-coded."""
    table = o200k_class_table()
    found = [c for c in np.flatnonzero(table != 0).tolist()
             if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) == "Cn"]
    return "".join(chr(c) for c in found[:: max(1, len(found) // 300)])


NEW = _new_codepoints()
TRAPS = st.one_of(
    st.sampled_from(["'s", "'S", "'ſ", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL",
                     "'lL", "'d", "'D", "'", "''", "'x", "'ſt"]),
    st.text(alphabet="0123456789٠١٢³½Ⅻ\U0001e4f0", min_size=1, max_size=10),
    st.text(alphabet="\r\n \t/\u00a0\u3000\u0085\u2028\u000b\u000c", min_size=1, max_size=8),
    st.text(alphabet="aAbBzZéÉǅǈᾈʰ中ア\u0301\u0308\u064b\u0903\u20dd'", min_size=1, max_size=10),
    st.text(alphabet=NEW, min_size=1, max_size=6),
    st.text(alphabet=".,!?-_/\\\"'()[]$%😀\U0001cc00", min_size=1, max_size=6),
    st.sampled_from(["Hello", " world", "HTML", "iPhone", "McDonald's", "DON'T", "don't", " Ǆemal", "ǅungla"]),
    st.text(min_size=1, max_size=12),
)


@settings(max_examples=examples(500), deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts=st.lists(st.lists(TRAPS, max_size=10).map("".join), min_size=20, max_size=20))
def test_fuzz_against_tiktoken(oracle, texts):
    # 500 examples x 20 texts = 10,000 cases per encoding under the ci profile (tests/budget.py), in batches.
    for name in NAMES:
        enc, ref = fastenc.load(name), oracle[name]
        ids, offsets = enc.encode_batch(texts)
        for i, want in enumerate(ref.encode_ordinary_batch(texts, num_threads=1)):
            assert ids[offsets[i]:offsets[i + 1]].tolist() == want, (name, texts[i])


def test_encode_cli_writes_uint32_ids(tmp_path, oracle, capsys):
    import json

    from fastenc.cli import main

    text = "GPT-4o's tokenizer: 12345 \r\n\n  x/y"
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    for name in NAMES:
        out = tmp_path / name  # -o DIR: DIR/ids.bin + DIR/meta.json
        assert main(["encode", str(src), "-t", name, "-o", str(out), "-q"]) == 0
        assert np.fromfile(out / "ids.bin", dtype="<u4").tolist() == oracle[name].encode_ordinary(text)
        assert json.loads((out / "meta.json").read_text())["dtype"] == "uint32"
    # A .tiktoken path with --pattern: the pattern is recorded, so that verify loads it the same way.
    out = tmp_path / "by-path"
    path = str(builtin_tiktoken_file("o200k_base"))
    assert main(["encode", str(src), "-t", path, "--pattern", "o200k", "-o", str(out), "-q"]) == 0
    assert json.loads((out / "meta.json").read_text())["tokenizer_pattern"] == "o200k"
    assert main(["verify", str(out), "-q"]) == 0
    capsys.readouterr()
    assert main(["encode", str(src), "-t", str(builtin_tiktoken_file("o200k_base")), "--pattern", "o200k"]) == 0
    assert capsys.readouterr().out.split() == [str(i) for i in oracle["o200k_base"].encode_ordinary(text)]


@pytest.mark.parametrize("name", NAMES)
def test_bucketed_recipe_with_another_encoding(tmp_path, oracle, docs_fixture, name):
    import json

    from fastenc.recipes.gpt2 import encode_gpt2, verify_output

    src = tmp_path / "docs.parquet"
    pq.write_table(docs_fixture.select(["text"]).slice(0, 60), src)
    out = tmp_path / "out"
    summary = encode_gpt2([src], out, encoding=name, part_tokens=20_000, decode_every=7, quiet=True)
    sha = hashlib.sha256(builtin_tiktoken_file(name).read_bytes()).hexdigest()
    assert (summary["tokenizer"], summary["dtype"], summary["tokenizer_sha256"]) == (name, "uint32", sha)
    report = verify_output(out, source=[src])
    assert report["ok"], report["problems"]
    texts = docs_fixture.column("text").to_pylist()[:60]
    want = {len(ids): ids for ids in oracle[name].encode_ordinary_batch(texts)}
    seen = 0
    for bucket in summary["kept_buckets"]:
        for part in summary["buckets"][bucket]["parts"]:
            meta = json.loads((out / (part["stem"] + ".meta.json")).read_text())
            assert (meta["tokenizer"], meta["dtype"], meta["tokenizer_sha256"]) == (name, "uint32", sha)
            ids = np.fromfile(out / (part["stem"] + ".bin"), dtype="<u4")
            idx = np.load(out / (part["stem"] + ".idx.npy"))
            for a, z in zip(idx[:-1], idx[1:]):
                assert ids[a:z].tolist() == want[z - a]  # (token counts of these documents are distinct)
                seen += 1
    assert seen == sum(1 for t in texts if t)
    # A sidecar that names another encoding than the bins were made with is caught.
    s = json.loads((out / "summary.json").read_text())
    s["tokenizer"] = "gpt2"
    (out / "summary.json").write_text(json.dumps(s))
    assert not verify_output(out)["ok"]


def test_wide_piece_caches_round_trip_18_bit_ids():
    from fastenc.kernels.piece_cache import ELSEWHERE, new_piece_cache
    from fastenc.kernels.piece_cache_wide import WIDE_MAX_ID, wide_cache_lookup, wide_cache_store, wide_max_piece_ids

    rng = np.random.default_rng(5)
    data = np.frombuffer(bytes(rng.integers(0, 256, 4096, dtype=np.uint8)), dtype=np.uint8)
    caches = [(new_piece_cache(64, 4), 6, 15), (new_piece_cache(64, 8), 12, 31)]
    assert [wide_max_piece_ids(c) for c, *_ in caches] == [6, 12]
    for cache, max_ids, max_bytes in caches:
        store = wide_cache_store

        def lookup(*args):
            return wide_cache_lookup(*args, False)

        seen = set()  # a cache memoizes a function: one key is never stored with two values
        for trial in range(40):
            n = int(rng.integers(1, max_bytes + 1))
            start = int(rng.integers(0, 4096 - n)) if trial % 2 else 4096 - n  # also at the buffer's end
            if data[start:start + n].tobytes() in seen:
                continue
            seen.add(data[start:start + n].tobytes())
            count = int(rng.integers(0, max_ids + 1))
            ids = rng.integers(0, WIDE_MAX_ID + 1, count).astype(np.uint32)
            ids[: min(count, 2)] = [WIDE_MAX_ID, 65536][: min(count, 2)]
            store(cache, data, start, start + n, ids, 0, count, trial % 4 < 2)  # shared or not: same entries
            for room in (count, 64):  # exact room (the careful copy) and plenty (the fast one)
                out = np.zeros(64, dtype=np.uint32)
                got = lookup(cache, data, start, start + n, out, 0, room)
                if count:
                    assert got == count and out[:count].tolist() == ids.tolist()
                else:
                    assert got == ELSEWHERE  # a marker


@njit
def _wide_home_index(cache, data, start, n):
    """The slot index of ``wide_slot``'s address (the hot path's home slot)."""
    return np.int64((wide_slot(cache, data, start, n) - element_address(cache, 0)) // np.uint64(32))


def test_wide_lookup_promotes_a_piece_to_its_home_slot():
    """Two pieces with one home slot: the second stored sits past it, where the encode loop's hot
    path does not look; a lookup with ``promote`` swaps the two, and both are still found."""
    from fastenc.kernels.piece_cache import new_piece_cache
    from fastenc.kernels.piece_cache_wide import wide_cache_lookup, wide_cache_store

    rng = np.random.default_rng(11)
    data = np.frombuffer(bytes(rng.integers(0, 256, 4096, dtype=np.uint8)), dtype=np.uint8)
    cache = new_piece_cache(8, 4)
    homes = {}
    for start in range(0, 4000, 16):  # pieces of 1..15 bytes until two share a home slot
        n = 1 + start % 15
        home = int(_wide_home_index(cache, data, np.int64(start), np.int64(n)))
        if home in homes:
            a, b = homes[home], (start, n)
            break
        homes[home] = (start, n)
    ids = {a: np.array([70000, 5], np.uint32), b: np.array([1, 2, 3, 262143], np.uint32)}
    for (start, n), value in ids.items():
        wide_cache_store(cache, data, np.int64(start), np.int64(start + n), value, np.int64(0), np.int64(len(value)), False)

    def first_word(piece):
        start, n = piece
        return int.from_bytes(data[start:start + min(n, 8)].tobytes(), "little")

    def found(piece, promote):
        out = np.zeros(16, np.uint32)
        start, n = piece
        got = wide_cache_lookup(cache, data, np.int64(start), np.int64(start + n), out, np.int64(0), np.int64(16), promote)
        return out[:got].tolist()

    assert int(cache[home, 0]) == first_word(a)
    assert found(b, False) == ids[b].tolist() and int(cache[home, 0]) == first_word(a)  # found, not moved
    assert found(b, True) == ids[b].tolist() and int(cache[home, 0]) == first_word(b)  # moved home
    assert found(a, False) == ids[a].tolist()  # the entry it displaced is still on its probe run


def test_long_home_is_where_a_long_piece_is_stored():
    """``long_home`` (the slot the encode loop prefetches for a piece of 16..31 bytes) is the slot
    ``wide_cache_store`` puts the piece in, in an empty long cache, for every length."""
    from fastenc.kernels.piece_cache import LONG_WORDS, new_piece_cache
    from fastenc.kernels.piece_cache_wide import long_home, wide_cache_store

    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 4096).astype(np.uint8)
    for n in range(16, 32):
        for _ in range(8):
            cache = new_piece_cache(1 << 12, LONG_WORDS)
            start = int(rng.integers(0, 4096 - 32))
            wide_cache_store(cache, data, np.int64(start), np.int64(start + n), np.array([7, 8], np.uint32), np.int64(0),
                             np.int64(2), True)
            (stored,) = np.nonzero(cache[:, LONG_WORDS // 2 - 1])[0]
            assert long_home(data, np.int64(start), np.int64(n), np.int64(cache.shape[0] - 1)) == stored, n


def test_a_uint16_vocabulary_split_by_the_wide_patterns(tmp_path, tiktoken_gpt2, oracle, docs_fixture):
    """GPT-2's 50,256 ranks split by cl100k's or o200k's pattern: uint16 ids, yet the wide loop
    (``encode.takes_wide_loop``: the GPT-2/URL loop only walks its own two pre-tokenizers)."""
    ranks = tiktoken_gpt2._mergeable_ranks
    path = tmp_path / "gpt2.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda x: x[1])))
    texts = docs_fixture.column("text").to_pylist()[:60] + ["Hello  world's 12345 ſtuff\r\n\n  x/y", "", "日本語 🙂 ﬁ"]
    for name, pattern in (("cl100k_base", "cl100k"), ("o200k_base", "o200k")):
        ref = tiktoken.Encoding(name=f"gpt2-ranks-{pattern}", pat_str=oracle[name]._pat_str, mergeable_ranks=ranks,
                                special_tokens={})
        enc = fastenc.load(path, pattern=pattern)
        assert enc.dtype == np.uint16
        ids, offsets = enc.encode_batch(texts)
        got = [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))]
        assert got == ref.encode_ordinary_batch(texts)
        assert enc.encode(texts[-3]) == ref.encode_ordinary(texts[-3])


def _u8(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.uint8).copy()


@njit
def _memo_hash(data, start, end):
    return memo_hash(data, start, end)


def test_the_wide_memo_gives_back_21_bit_ids_and_refuses_what_is_not_the_piece(pair):
    """piece_cache_wide's memo (the piece's bytes, then three 21-bit ids to a word): what it stores
    comes back across word boundaries; an entry that is not the piece's (a tag collision: another
    piece of the same length, or one a byte longer or shorter) is refused; an id past 21 bits is never
    stored; a full memo stores nothing more."""
    from fastenc.kernels.piece_cache_wide import WIDE_MEMO_MAX_ID, wide_memo_emit, wide_memo_has_room, wide_memo_store
    from fastenc.kernels.piece_memo import memo_find, new_piece_memo

    enc, ref = pair
    pieces = ["中文字符串没有空格的一段话".encode(), b" " * 40, "ภาษาไทยไม่มีช่องว่าง".encode(), "😀".encode() * 7,
              " internationalization".encode()]
    memo = new_piece_memo(1 << 8, 1 << 12, 1 << 4)
    stored = {}
    for piece in pieces:
        ids = np.asarray(ref._encode_single_piece(piece), dtype=np.int64)
        data = _u8(piece)
        assert wide_memo_store(memo, np.uint64(_memo_hash(data, 0, len(data))), data, 0, len(data), ids, 0, len(ids))
        stored[piece] = ids.tolist()
    assert sum(len(v) for v in stored.values()) > 3 * len(pieces)  # (ids that straddle arena words)

    def emit(piece, table=None):
        data = _u8(piece)
        slot = memo_find(memo, np.uint64(_memo_hash(data, 0, len(data))))
        if slot < 0:
            return None
        out = np.full(len(data), 7, dtype=np.uint32)
        end = wide_memo_emit(memo, slot, data, 0, len(data), out, 0)
        return -1 if end < 0 else out[:end].tolist()

    for piece, ids in stored.items():
        assert emit(piece) == ids
    assert emit(b" " * 41) is None
    # A tag collision: the entry of a piece of the same length pointed at another piece's ids.
    a, b = b" " * 40, b"\t" * 40
    hb = int(_memo_hash(_u8(b), 0, 40))
    table = _MEMO_HEADER + int(memo[3])
    entry_a = int(memo[table + memo_find(memo, np.uint64(_memo_hash(_u8(a), 0, 40)))])
    memo[table + (hb & 255)] = np.uint64((hb >> 40) << 40 | (entry_a & ((1 << 40) - 1)))
    memo[4:table] = np.uint64(0xFFFFFFFFFFFFFFFF)  # every filter bit: the probe reaches the table
    assert emit(b) == -1 and emit(a) == stored[a]
    before = memo.copy()
    for other in (b" " * 39 + b"\t", b"\t" + b" " * 39, b" " * 39, b" " * 41, b" " * 35 + b"\t" * 5):
        h = int(_memo_hash(_u8(other), 0, len(other)))
        memo[table + (h & 255)] = np.uint64((h >> 40) << 40 | (entry_a & ((1 << 40) - 1)))
        assert emit(other) == -1, other
        memo[:] = before
    # Ids past 21 bits, and a memo without room: nothing stored.
    big = np.array([5, WIDE_MEMO_MAX_ID + 1], dtype=np.int64)
    entries = int(memo[2])
    piece = _u8(b"abcdefghijklmnopqrstuvwx")  # 24 bytes: 1 + 3 + 2 arena words with 5 ids, 1 + 3 + 8 to have room
    assert not wide_memo_store(memo, np.uint64(12345), piece, 0, 24, big, 0, 2)
    small = new_piece_memo(1 << 8, 4 * 12, 1 << 4)  # 12 arena words
    assert wide_memo_has_room(small, 24) and not wide_memo_has_room(small, 25)
    five = np.array([1, 2, 3, 4, 5], dtype=np.int64)
    assert wide_memo_store(small, np.uint64(1), piece, 0, 24, five, 0, 5)
    assert wide_memo_has_room(small, 9) and not wide_memo_has_room(small, 10)  # 6 words left
    assert not wide_memo_store(small, np.uint64(2), _u8(b"x" * 40), 0, 40, five, 0, 5)  # 1 + 5 + 2 words
    assert int(memo[2]) == entries and int(small[2]) == 1


@njit
def _encode_all_wide(data, offsets, vocab, classes, caches, out):
    at = 0
    for d in range(offsets.shape[0] - 1):
        at = encode_text_wide(data, offsets[d], offsets[d + 1], vocab, classes, caches, out, at)
    return at


_WIDE_LONG = ["中文字符串没有空格的一段话", "日本語のテキストです", " " * 37, "\n" * 20, "1" * 25, "=" * 40,
              "ภาษาไทยไม่มีช่องว่าง", " internationalization", "😀" * 6, "a" * 300, "é" * 30, " " * 17,
              " Donaudampfschiffahrtsgesellschaft", "x"]


def test_the_wide_loop_is_exact_cold_warm_and_with_a_scrambled_memo(pair):
    """Small caches (collisions, evictions, markers, probes past the home slot) and repeated long
    pieces: the first pass, the warm ones (the hot path, the memo) and a pass with every memo id
    scrambled (each entry refused by its bytes check) all give tiktoken's ids."""
    from fastenc.kernels.piece_cache import new_piece_caches

    enc, ref = pair
    rng = np.random.default_rng(12)
    words = _WIDE_LONG + [" the", " of", ",", " and", "'s", " 123", "\r\n", "  ", " Ǆemal", "ab", "abcdefghijk"]
    texts = ["".join(rng.choice(words, 60)) for _ in range(30)] * 2
    raw = [t.encode() for t in texts]
    data = _u8(b"".join(raw))
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    expected = [i for t in texts for i in ref.encode_ordinary(t)]
    caches = new_piece_caches(1 << 6, 1 << 4, 1 << 6, 1 << 8, 1 << 12)
    out = np.empty(len(data), dtype=np.uint32)
    for _ in range(3):
        n = _encode_all_wide(data, offsets, enc.vocab, enc.classes, caches, out)
        assert out[:n].tolist() == expected
    memo = caches.memo
    assert memo[2] >= 5  # long pieces were memoized (and read by the warm passes)
    arena = _MEMO_HEADER + int(memo[3]) + int(memo[1])
    memo[arena:] = (memo[arena:] * np.uint64(7) + np.uint64(13)) & np.uint64((1 << 63) - 1)
    n = _encode_all_wide(data, offsets, enc.vocab, enc.classes, caches, out)
    assert out[:n].tolist() == expected
    # data is writable here: encode_text_wide retypes it, so its loop is compiled for read-only data only
    from fastenc.kernels.encode_wide import wide_loop

    # compiled here, or loaded from Numba's cache (a kernel loaded with a caller is in neither list;
    # with a warm cache wide_loop.signatures alone is empty)
    sigs = list(wide_loop.signatures) + [key[0] for key in wide_loop._cache._cache_file._load_index()]
    assert data.flags.writeable and sigs
    assert all(not sig[0].mutable for sig in sigs), sigs


CJK_WORDS = ["中文", "日本語", "テキスト", "한국어", "ภาษาไทย", "的", "是", "了", "ー", "ก", "我们", "中华人民共和国",
             "東京都", "株式会社", "です", "ます", "한국", "ที่", "\u0301"]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.lists(st.one_of(st.sampled_from(CJK_WORDS),
                                         st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
                                         st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),
                                         st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),
                                         st.characters(min_codepoint=0x0E00, max_codepoint=0x0E7F)),
                               min_size=1, max_size=80).map("".join), min_size=20, max_size=20))
def test_long_runs_without_spaces_match_tiktoken(oracle, texts):
    # Runs of CJK, kana, Hangul and Thai without spaces are single pieces far longer than the
    # caches hold: cut by byte pairs, then where no token spans (kernels/segments.py); the ids
    # must not change. 150 x 20 = 3,000 runs per encoding.
    for name in NAMES:
        enc, ref = fastenc.load(name), oracle[name]
        ids, offsets = enc.encode_batch(texts)
        for i, want in enumerate(ref.encode_ordinary_batch(texts, num_threads=1)):
            assert ids[offsets[i]:offsets[i + 1]].tolist() == want, (name, texts[i])


def test_span_cuts_keep_a_token_that_does_not_merge_to_itself_whole(tmp_path, oracle):
    # "abc" is a token no merge can build (neither "ab" nor "bc" is one): tiktoken gives [abc] for
    # the piece "abc" but a, b, c inside a longer piece. No token spans the boundaries around
    # "abc" in "xx...xabcxx...", so without SPAN_GUARD the span rule would cut there and hand the
    # part "abc" to the whole-piece lookup.
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b"xx", b"xxxx", b"abc"):
        ranks[token] = len(ranks)
    path = tmp_path / "toy.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))
    for pattern, name in (("o200k", "o200k_base"), ("cl100k", "cl100k_base")):
        ref = tiktoken.Encoding(name="toy", pat_str=oracle[name]._pat_str, mergeable_ranks=ranks, special_tokens={})
        enc = fastenc.load(path, pattern=pattern)
        for word in ("abc", "xabc", "abcx", "x" * 17 + "abc" + "x" * 16, "x" * 40 + "abc", "abc" + "x" * 40,
                     "abc" * 12, "xxbxxabcxx" * 4):
            assert enc.encode(word) == ref.encode_ordinary(word), (pattern, word)



def _long_piece_texts(rng, n_texts: int) -> list[str]:
    """Texts of long pieces (16..100 characters from small alphabets: the long cache, the memo of
    pieces of 24+ bytes, cut parts) that come back, often changed in one character (a memo entry
    whose hash or first bytes match a different piece), in many scripts."""
    alphabet = ["a", "b", "e", "n", "t", "s", "A", "N", "é", "ö", "ж", "д", "中", "国", "ア", "1", "2", "0", " ", "'",
                "-", "_", ".", "/", "\n", "\u0301", "😀", "ǅ", "x", "th", "ing", "tion", "'s", "'LL"]
    pool: list[str] = []
    texts = []
    for _ in range(n_texts):
        parts = []
        for _ in range(rng.randint(1, 30)):
            if pool and rng.random() < 0.5:
                w = rng.choice(pool)
                if rng.random() < 0.3:  # one character changed, dropped or added
                    i, op = rng.randrange(len(w)), rng.randint(0, 2)
                    w = w[:i] + (rng.choice(alphabet) if op != 1 else "") + w[i + (op != 2):]
            else:
                letters = alphabet[:rng.randint(3, len(alphabet))]
                w = "".join(rng.choice(letters) for _ in range(rng.choice([3, 8, 16, 20, 24, 28, 32, 40, 64, 100])))
                pool.append(w)
            parts.append(w + rng.choice(["", " ", "  ", "\n", ",", " the "]))
        texts.append("".join(parts))
    return texts


@pytest.mark.parametrize("name", NAMES + ["gpt2"])
def test_long_and_near_duplicate_pieces_match_tiktoken(name, oracle, tiktoken_gpt2):
    """Fresh caches each round (a first pass, then warm passes at 1 and 2 threads) over texts of long
    pieces that recur, exact or one character off: the memo's bytes check and the long cache under
    real hits. (An ad hoc run of 270,000 such texts per encoding passed; the suite runs 3,600 per
    encoding, a new seed each run, printed on failure.)"""
    import random

    import numba

    seed = random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    ref = tiktoken_gpt2 if name == "gpt2" else oracle[name]
    base = fastenc.load(name)
    threads = numba.get_num_threads()
    try:
        for _ in range(4):
            enc = fastenc.Encoder(base.vocab, base.info)
            texts = _long_piece_texts(rng, 300)
            want = ref.encode_ordinary_batch(texts, num_threads=1)
            for n_threads in (1, 2, 1):
                numba.set_num_threads(min(n_threads, numba.config.NUMBA_NUM_THREADS))
                ids, offsets = enc.encode_batch(texts)
                for i, w in enumerate(want):
                    assert ids[offsets[i]:offsets[i + 1]].tolist() == w, (seed, n_threads, texts[i][:300])
    finally:
        numba.set_num_threads(threads)
