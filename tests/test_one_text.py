"""The one-text lane (``Encoder.encode``, ``encode_bytes`` and small ``encode_batch`` calls, ``kernels.solo``)
and ``encode_batch``'s conversion of a ``list[str]`` (``encoder.texts_to_flat``).

Checked here: the lane is what a lone caller's ``encode`` runs on (and no task slot), its ids equal
tiktoken's (fuzzed; empty text; texts longer than its output buffer and than the buffer it keeps; pieces
that need more merge room than its scratch holds; non-ASCII; lone surrogates), several threads calling
``encode`` at once (the lane busy: the others take task slots) stay exact, batches on both sides of the
lane's size limit agree, ``clear_caches`` drops the lane, and the list conversion gives each string's
own UTF-8 and offsets (ASCII, non-ASCII, empty strings, mixed, surrogates, a non-str item).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastenc
from fastenc import encoder as encoder_module
from fastenc.encoder import Encoder, texts_to_flat
from fastenc.errors import InputError


def _fresh(name: str = "gpt2") -> Encoder:
    loaded = fastenc.load(name)
    return Encoder(loaded.vocab, loaded.info)  # (a lane and caches of its own)


@pytest.fixture(scope="module")
def gpt2():
    return _fresh()


def _no_slots(enc: Encoder, monkeypatch) -> None:
    """Fail the test if a call takes a task slot (the lane was not used)."""

    def refuse(*args, **kwargs):
        raise AssertionError("took a task slot: the one-text lane was not used")

    monkeypatch.setattr(enc, "_take_slots", refuse)


def test_a_lone_callers_encode_runs_on_the_lane(monkeypatch, tiktoken_gpt2):
    enc = _fresh()
    assert not enc._solo_built
    _no_slots(enc, monkeypatch)
    for text in ["hello world", "", "x" * 10_000, "é" * 5000]:
        assert enc.encode(text) == tiktoken_gpt2.encode_ordinary(text)
        assert enc.encode_bytes(text.encode()).tolist() == tiktoken_gpt2.encode_ordinary(text)
    assert enc._solo_built and len(enc._idle) == 1  # built once, handed back after every call
    ids, offsets = enc.encode_batch(["a b", "", "c"])  # a small batch runs on it too
    assert ids.tolist() == tiktoken_gpt2.encode_ordinary("a b") + tiktoken_gpt2.encode_ordinary("c")
    assert offsets.tolist() == [0, 2, 2, 3]


TEXTS = [
    "",
    " ",
    "hello world",
    "héllo wörld, 日本語のテキスト, русский текст, العربية 🎉👍🏽",
    "a\ud800b\udfffc",  # lone surrogates: U+FFFD, as tiktoken
    "\ud83d",
    "x" * 5_000,  # one piece longer than the lane's merge scratch: grown, the text encoded again
    " " * 3_000 + "y" + "\n" * 3_000,
    "1" * 2_000 + "中" * 2_000,
    "word " * 1_000,  # longer than the lane's first output buffer
    "ab " * 400_000,  # longer than the buffer the lane keeps: a buffer for the call
]


@pytest.mark.parametrize("text", TEXTS, ids=lambda t: repr(t[:10]) + f"..{len(t)}")
def test_lane_matches_tiktoken(gpt2, tiktoken_gpt2, text):
    want = tiktoken_gpt2.encode_ordinary(text)
    for _ in range(2):  # (cold, then warm caches)
        assert gpt2.encode(text) == want
    assert gpt2.encode("after a long one") == tiktoken_gpt2.encode_ordinary("after a long one")


def test_lane_keeps_no_giant_buffer(gpt2):
    gpt2.encode("ab " * 400_000)
    (solo,) = gpt2._idle
    assert len(solo.out) <= encoder_module._SOLO_KEEP


def test_grown_scratch_is_kept_and_stays_exact(tiktoken_gpt2):
    enc = _fresh()
    enc.encode("warm")
    (solo,) = enc._idle
    text = "z" * 20_000
    assert solo.one(solo.lane, text.encode()) < 0  # (the lane asks for more merge room for this piece)
    assert enc.encode(text) == tiktoken_gpt2.encode_ordinary(text)
    assert solo.one(solo.lane, text.encode()) >= 0  # (and has it now)


PIECES = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=20),
    st.text(alphabet=" \t\n\r\u00a0\u3000", min_size=1, max_size=8),
    st.sampled_from(["'s", "'ll", " the", "hello", "中文", "ไทย", "русский", "<|endoftext|>", "x" * 300]),
)


@settings(max_examples=3_000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(parts=st.lists(PIECES, max_size=10))
def test_fuzz_lane_against_tiktoken(gpt2, tiktoken_gpt2, parts):
    text = "".join(parts)
    assert gpt2.encode(text) == tiktoken_gpt2.encode_ordinary(text)


def test_threads_calling_encode_at_once_stay_exact(docs_fixture, tiktoken_gpt2):
    """Four threads, each encoding every text one call at a time: one holds the lane at a time,
    the others find it busy and take task slots; every call's ids are tiktoken's."""
    enc = _fresh()
    texts = docs_fixture.column("text").to_pylist()[:120] + TEXTS[:8]
    want = [tiktoken_gpt2.encode_ordinary(t) for t in texts]
    took_slots = []
    in_slot = enc._encode_in_slot

    def counted(data):
        took_slots.append(1)
        return in_slot(data)

    enc._encode_in_slot = counted
    barrier = threading.Barrier(4, timeout=60)
    errors = []

    def run(k):
        try:
            barrier.wait()
            for _ in range(3):
                for i in range(len(texts)):
                    j = (i + 37 * k) % len(texts)
                    got = enc.encode(texts[j])
                    if got != want[j]:
                        errors.append((k, j))
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a call never returned"
    assert errors == []
    assert len(enc._idle) == 1  # the lane was handed back
    assert enc._free_slots == set(range(len(enc._free_slots))) and len(enc._free_slots) >= 1  # every slot too


def test_a_busy_lane_sends_the_call_to_a_slot(gpt2, tiktoken_gpt2):
    gpt2.encode("built")
    held = gpt2._idle.pop()  # (as if another thread were in a call)
    try:
        assert gpt2.encode("while the lane is busy") == tiktoken_gpt2.encode_ordinary("while the lane is busy")
        assert 0 in gpt2._memos_ready  # (the call ran on task slot 0)
        ids, offsets = gpt2.encode_batch(["a", "b c"])
        assert ids.tolist() == tiktoken_gpt2.encode_ordinary("a") + tiktoken_gpt2.encode_ordinary("b c")
    finally:
        gpt2._idle.append(held)


def test_batches_on_either_side_of_the_lanes_limit_agree(gpt2, docs_fixture, tiktoken_gpt2):
    texts = docs_fixture.column("text").to_pylist()
    limit = encoder_module._SOLO_BATCH_BYTES
    sizes = np.cumsum([len(t.encode()) for t in texts])
    small = int(np.searchsorted(sizes, limit, side="right"))  # the most texts that fit the lane
    assert 1 <= small < len(texts)
    for part in (texts[:1], texts[:16], texts[:small], texts[: small + 1], texts):
        ids, offsets = gpt2.encode_batch(part)
        assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(part))] == tiktoken_gpt2.encode_ordinary_batch(part)
        ids2, offsets2 = gpt2.encode_batch(part)  # (results never share the lane's buffer)
        assert np.array_equal(ids, ids2) and not np.shares_memory(ids, ids2)


def test_clear_caches_drops_the_lane(tiktoken_gpt2):
    enc = _fresh()
    enc.encode("one")
    (old,) = enc._idle
    enc.clear_caches()
    assert not enc._idle and not enc._solo_built
    assert enc.encode("two words") == tiktoken_gpt2.encode_ordinary("two words")
    assert enc._idle and enc._idle[0] is not old


def test_wide_lane_matches_tiktoken():
    from test_encodings import _from_committed_files

    enc = fastenc.load("cl100k_base")
    oracle = _from_committed_files("cl100k_base")
    for text in ["", "hello world", "héllo 日本語 🎉", "x" * 20_000, "word " * 2_000]:
        assert enc.encode(text) == oracle.encode_ordinary(text)
    texts = ["a", "", "b c d", "ñ" * 100]
    ids, offsets = enc.encode_batch(texts)
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == oracle.encode_ordinary_batch(texts)


# --- list[str] -> (data, offsets) -------------------------------------------------------------------


def _by_hand(texts):
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    return b"".join(encoded), np.concatenate([[0], np.cumsum([len(b) for b in encoded])]).astype(np.int64)


@pytest.mark.parametrize("texts", [
    [],
    [""],
    ["", "", ""],
    ["hello", "world"],
    ["a" * 9, "", "b" * 17, "c"],
    ["é", "", "日本語", "🎉"],
    ["ascii first", "then ñon-ascii", "", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 at the end 🎉", "plain"],
    ["🎉" * 20, "x", "é" * 33, "中" * 9, ""],
    ["a" * 7 + "é" + "b" * 16, "c" * 8],  # a multi-byte character next to eight-byte words
], ids=repr)
def test_list_conversion_gives_each_strings_utf8(texts):
    data, offsets = texts_to_flat(texts)
    want_data, want_offsets = _by_hand(texts)
    assert data.tobytes() == want_data
    assert offsets.tolist() == want_offsets.tolist()
    assert not data.flags.writeable  # (the kernels' one type for input bytes)


@settings(max_examples=1_000, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=40), max_size=20))
def test_fuzz_list_conversion(texts):
    data, offsets = texts_to_flat(texts)
    want_data, want_offsets = _by_hand(texts)
    assert data.tobytes() == want_data and offsets.tolist() == want_offsets.tolist()


def test_list_conversion_replaces_lone_surrogates_per_string(gpt2, tiktoken_gpt2):
    texts = ["ok", "a\ud800", "\udfffb", "é"]
    data, offsets = texts_to_flat(texts)
    assert [data[offsets[i]:offsets[i + 1]].tobytes() for i in range(4)] == [b"ok", b"a\xef\xbf\xbd", b"\xef\xbf\xbdb", "é".encode()]
    ids, id_offsets = gpt2.encode_batch(texts)
    assert [ids[id_offsets[i]:id_offsets[i + 1]].tolist() for i in range(4)] == tiktoken_gpt2.encode_ordinary_batch(texts)


def test_list_conversion_names_a_non_str_item(gpt2):
    with pytest.raises(InputError, match="item 2 is bytes"):
        gpt2.encode_batch(["a", "b", b"c"])
    with pytest.raises(InputError, match="item 0 is NoneType"):
        gpt2.encode_batch([None])


def test_list_input_equals_arrow_input(gpt2, docs_fixture):
    column = docs_fixture.column("text")
    texts = column.to_pylist()
    a_ids, a_offsets = gpt2.encode_batch(column)
    l_ids, l_offsets = gpt2.encode_batch(texts)
    assert np.array_equal(a_ids, l_ids) and np.array_equal(a_offsets, l_offsets)
    t_ids, t_offsets = gpt2.encode_batch(tuple(texts))  # (any iterable of str)
    assert np.array_equal(a_ids, t_ids) and np.array_equal(a_offsets, t_offsets)
