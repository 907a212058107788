"""fastenc.load("gpt2") against tiktoken's encode_ordinary: corpora, fuzzing, adversarial inputs."""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from budget import examples
from numba import njit, types

import fastenc
from fastenc.errors import InputError
from fastenc.kernels.encode import encode_text
from fastenc.kernels.piece_cache import new_piece_caches


@pytest.fixture(scope="module")
def gpt2():
    return fastenc.load("gpt2")


@pytest.fixture(scope="module")
def shared_docs(shared_data):
    if shared_data is None:
        pytest.skip("../shared/data is absent (fresh clone); the committed fixture tests still run")
    return pq.read_table(shared_data / "text" / "docs.parquet", columns=["id", "text", "gpt2_tokens"])


def _mismatches(enc, texts_column, tiktoken_gpt2):
    ids, offsets = enc.encode_batch(texts_column)
    texts = texts_column.to_pylist()
    reference = tiktoken_gpt2.encode_ordinary_batch(texts, num_threads=2)
    assert len(offsets) == len(texts) + 1
    return [i for i, ref in enumerate(reference) if ids[offsets[i] : offsets[i + 1]].tolist() != ref], ids, offsets


@pytest.mark.slow
def test_every_shared_document_matches_tiktoken(gpt2, shared_docs, tiktoken_gpt2):
    bad, ids, offsets = _mismatches(gpt2, shared_docs.column("text"), tiktoken_gpt2)
    assert bad == [], f"{len(bad)} documents differ from tiktoken, first ids: {[shared_docs['id'][i] for i in bad[:5]]}"
    # The corpus's own counts were made with tiktoken too: a second, independent witness.
    assert np.array_equal(np.diff(offsets), shared_docs.column("gpt2_tokens").to_numpy())


def test_every_fixture_document_matches_tiktoken(gpt2, docs_fixture, tiktoken_gpt2):
    bad, _, offsets = _mismatches(gpt2, docs_fixture.column("text"), tiktoken_gpt2)
    assert bad == []
    assert np.array_equal(np.diff(offsets), docs_fixture.column("gpt2_tokens").to_numpy())


def test_single_encode_equals_batch_and_decodes_back(gpt2, docs_fixture):
    texts = docs_fixture.column("text").to_pylist()[:40]
    ids, offsets = gpt2.encode_batch(texts)
    for i, text in enumerate(texts):
        one = gpt2.encode(text)
        assert one == ids[offsets[i] : offsets[i + 1]].tolist()
        assert gpt2.decode(one) == text
        assert gpt2.decode_bytes(one) == text.encode("utf-8")


def test_batch_is_identical_for_any_thread_count(gpt2, docs_fixture):
    column = docs_fixture.column("text")
    before = numba.get_num_threads()
    results = []
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            results.append(gpt2.encode_batch(column))
    finally:
        numba.set_num_threads(before)
    for ids, offsets in results[1:]:
        assert np.array_equal(ids, results[0][0]) and np.array_equal(offsets, results[0][1])


ADVERSARIAL = [
    "",
    "x" * 1_000_000,
    "1" * 100_000,
    " " * 100_000,
    "\n" * 100_000,
    "中" * 50_000,
    "ก" * 20_000,
    "a\r\nb\r\n\r\n  c\r\n\n\r" * 5_000,
    "<|endoftext|>",
    "hello <|endoftext|> world<|endoftext|>",
    "\ufeff \ufeffword \ufeff",
    "42°S 174°E\ufeff / \ufeff42°S",
    "'s'S'll'LL'd'm've're't 'x '",
    "   leading and trailing   ",
    "tab\tand\u00a0nbsp\u2028line\u2029para\u0085next\u180emongolian",
    "é" * 1000 + "e\u0301" * 1000,
    "👍🏽👨‍👩‍👧‍👦🏳️‍🌈" * 200,
    "\U0001f600" * 10_000,
    "\x00\x01\x7f",
    "12345678901234567890 1.5e-10 ١٢٣ ⅷ ²³",
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:12]) + f"..{len(t)}")
def test_adversarial_inputs_match_tiktoken_and_round_trip(gpt2, tiktoken_gpt2, text):
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode_ordinary(text)
    assert gpt2.decode(ids) == text


def test_endoftext_is_ordinary_text(gpt2):
    ids = gpt2.encode("<|endoftext|>")
    assert 50256 not in ids and len(ids) > 1
    assert gpt2.decode([50256]) == "<|endoftext|>"


def test_lone_surrogates_are_replaced_like_tiktoken(gpt2, tiktoken_gpt2):
    text = "a\ud800b\udfffc"
    assert gpt2.encode(text) == tiktoken_gpt2.encode_ordinary(text)


WHITESPACE = st.sampled_from([" ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b", "\u000c", "\ufeff", "\u180e", "\u200b"])
PIECES = st.one_of(
    st.text(min_size=0, max_size=30),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.lists(WHITESPACE, min_size=1, max_size=8).map("".join),
    st.sampled_from(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'", "''", "'x"]),
    st.text(alphabet="0123456789٠١٢³½Ⅻ", min_size=1, max_size=12),
    st.text(alphabet="aeiouAEIOU\u0301\u0308\u0327\u200d\ufe0f", min_size=1, max_size=12),
    st.text(alphabet="😀👍🏽🇫🇷🀄\U0001f9ea\U000e0001\U0010fffd", min_size=1, max_size=6),
    st.sampled_from(["hello", " world", "The", " the", "ing", "中文", "ไทย", "русский", "<|endoftext|>"]),
)


@settings(max_examples=examples(10_000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(PIECES, max_size=8))
def test_fuzz_against_tiktoken(gpt2, tiktoken_gpt2, parts):
    text = "".join(parts)
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode_ordinary(text)
    assert gpt2.decode(ids) == text


@njit
def _users_own_loop(data, offsets, vocab, classes, caches, out):
    # What a user's Numba pipeline does: call fastenc's kernel per document, in its own loop.
    pos = 0
    counts = np.zeros(offsets.shape[0] - 1, dtype=np.int64)
    for i in range(offsets.shape[0] - 1):
        new_pos = encode_text(data, offsets[i], offsets[i + 1], vocab, classes, caches, out, pos)
        counts[i] = new_pos - pos
        pos = new_pos
    return pos, counts


@pytest.mark.slow
def test_users_njit_code_can_call_the_kernel(gpt2, docs_fixture):
    from fastenc.arrow_io import arrow_to_flat

    data, offsets = arrow_to_flat(docs_fixture.column("text"))
    out = np.empty(len(data), dtype=np.uint16)
    n, counts = _users_own_loop(data, offsets, gpt2.vocab, gpt2.classes, new_piece_caches(1 << 12, 4), out)
    ids, id_offsets = gpt2.encode_batch(docs_fixture.column("text"))
    assert np.array_equal(out[:n], ids) and np.array_equal(counts, np.diff(id_offsets))


@pytest.mark.slow
def test_the_loops_are_compiled_for_read_only_data_and_int64_positions_only(gpt2):
    # encode_with retypes its input (readonly.as_readonly, int64 positions) before the loops: a
    # user's writable array or int32 offsets must not compile them again (a minute or two each).
    from fastenc.kernels.encode import encode_narrow, encode_run

    data = np.frombuffer(b"Hello, world! Hello again.", dtype=np.uint8).copy()  # writable
    offsets = np.array([0, 13, len(data)], dtype=np.int32)
    out = np.empty(len(data), dtype=np.uint16)
    n, counts = _users_own_loop(data, offsets, gpt2.vocab, gpt2.classes, new_piece_caches(1 << 12, 4), out)
    assert out[:n].tolist() == gpt2.encode("Hello, world!") + gpt2.encode(" Hello again.")
    for kernel in (encode_narrow, encode_run):
        # compiled here, or loaded from Numba's cache (a kernel loaded with a caller is in neither list)
        sigs = list(kernel.signatures) + [key[0] for key in kernel._cache._cache_file._load_index()]
        assert sigs, kernel
        for sig in sigs:
            assert not sig[0].mutable, (kernel, sig)
            assert sig[1] == types.int64 and sig[2] == types.int64, (kernel, sig)


def test_batch_results_never_share_memory(gpt2, docs_fixture):
    # Encoder.encode_arrays reuses output buffers (fastenc.memory.OutputPool) only once no earlier
    # result refers to them: results that are kept (or views of them) must survive later calls.
    column = docs_fixture.column("text")
    first, _ = gpt2.encode_batch(column)
    kept = first.copy()
    part = first[10:20]
    del first
    for _ in range(3):
        again, _ = gpt2.encode_batch(column)
        again[:] = 0  # scribble over each new result
    assert np.array_equal(part, kept[10:20])


def test_batch_input_validation(gpt2):
    with pytest.raises(InputError, match="null"):
        gpt2.encode_batch(pa.array(["a", None, "b"]))
    with pytest.raises(InputError, match="string"):
        gpt2.encode_batch(pa.array([1, 2]))
    with pytest.raises(InputError, match="item 1"):
        gpt2.encode_batch(["a", b"b"])
    with pytest.raises(TypeError):
        gpt2.encode(b"bytes")
    ids, offsets = gpt2.encode_batch([])
    assert len(ids) == 0 and offsets.tolist() == [0]


def test_arrow_inputs_of_every_layout_agree(gpt2):
    texts = ["alpha beta", "", "γάμμα δέλτα", "end."]
    expected = gpt2.encode_batch(texts)
    sliced = pa.array(["junk"] + texts + ["junk"], type=pa.large_string()).slice(1, len(texts))
    chunked = pa.chunked_array([pa.array(texts[:2]), pa.array(texts[2:])])
    for variant in (pa.array(texts), sliced, chunked):
        ids, offsets = gpt2.encode_batch(variant)
        assert np.array_equal(ids, expected[0]) and np.array_equal(offsets, expected[1])


def test_decode_rejects_out_of_range_ids(gpt2):
    with pytest.raises(ValueError, match="out of range"):
        gpt2.decode([50257])
    with pytest.raises(ValueError, match="out of range"):
        gpt2.decode([-1])
    assert gpt2.decode([]) == ""


def test_decode_kernel_from_njit_code(gpt2, docs_fixture):
    from fastenc.kernels.decode import decode_into, decoded_length

    @njit
    def decode_all(ids, id_offsets, token_bytes, token_offsets):
        out = np.empty(decoded_length(ids, token_offsets), dtype=np.uint8)
        pos = 0
        ends = np.empty(id_offsets.shape[0] - 1, dtype=np.int64)
        for i in range(id_offsets.shape[0] - 1):
            pos = decode_into(ids[id_offsets[i] : id_offsets[i + 1]], token_bytes, token_offsets, out, pos)
            ends[i] = pos
        return out, ends

    texts = docs_fixture.column("text").to_pylist()[:30]
    ids, id_offsets = gpt2.encode_batch(texts)
    out, ends = decode_all(ids.astype(np.int64), id_offsets, gpt2.vocab.token_bytes, gpt2.vocab.token_offsets)
    assert out.tobytes() == "".join(texts).encode("utf-8")
    assert np.array_equal(ends, np.cumsum([len(t.encode("utf-8")) for t in texts]))
    assert decode_into(np.array([50257]), gpt2.vocab.token_bytes, gpt2.vocab.token_offsets, out, 0) == -1
    assert decode_into(ids[:10].astype(np.int64), gpt2.vocab.token_bytes, gpt2.vocab.token_offsets, out[:1], 0) == -1
