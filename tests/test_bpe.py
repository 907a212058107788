"""The BPE merge kernel against the textbook reference, under both merge rules."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

from fastenc.kernels.bpe import HEAP_THRESHOLD, bpe_piece, merge_long_piece, merge_short_piece
from reference import bpe_ref
from fastenc.vocab import builtin_tokenizer_dir, bytes_to_unicode, load_vocab

GPT2_JSON = builtin_tokenizer_dir("gpt2") / "tokenizer.json"


@pytest.fixture(scope="module")
def gpt2_tables():
    spec = json.loads(GPT2_JSON.read_text(encoding="utf-8"))
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    to_bytes = lambda tok: bytes(byte_of[c] for c in tok)  # noqa: E731
    token_ids = {to_bytes(t): i for t, i in spec["model"]["vocab"].items()}
    merges = {}
    for rank, m in enumerate(spec["model"]["merges"]):
        a, b = m.split(" ") if isinstance(m, str) else m
        merges.setdefault((to_bytes(a), to_bytes(b)), rank)
    return token_ids, merges


def _kernel(vocab, piece: bytes, fn=bpe_piece) -> list[int]:
    data = np.frombuffer(piece, dtype=np.uint8)
    out = np.empty(len(piece), dtype=np.int64)
    if fn is merge_short_piece:
        n = fn(data, 0, len(data), vocab, np.empty(len(data), dtype=np.int64), out, 0)
    elif fn is merge_long_piece:
        n = fn(data, 0, len(data), vocab, np.empty(7 * len(data), dtype=np.int64), out, 0)
    else:
        n = fn(data, 0, len(data), vocab, out, 0)
    return out[:n].tolist()


@pytest.fixture(scope="module")
def tiktoken_rule():
    return load_vocab(GPT2_JSON, merge_rule="tiktoken")[0]


@pytest.fixture(scope="module")
def hf_rule():
    return load_vocab(GPT2_JSON, merge_rule="hf")[0]


PIECES = st.one_of(
    st.binary(min_size=1, max_size=40),
    st.text(alphabet=st.sampled_from(list("aeiou thnrsl'0123456789")), min_size=1, max_size=90).map(str.encode),
    st.text(min_size=1, max_size=30).map(lambda s: s.encode("utf-8", "replace")).filter(bool),
)


@settings(max_examples=examples(1500), deadline=None)
@given(piece=PIECES)
def test_both_rules_match_reference(piece, tiktoken_rule, hf_rule, gpt2_tables):
    token_ids, merges = gpt2_tables
    # tiktoken's mergeable ranks hold no special token: "<|endoftext|>" is never merged or looked up.
    ranks = {t: i for t, i in token_ids.items() if t != b"<|endoftext|>"}
    tk_parts = bpe_ref(piece, lambda a, b: ranks.get(a + b))
    hf_parts = bpe_ref(piece, lambda a, b: merges.get((a, b)))
    # tiktoken emits a piece that is itself a token directly.
    expected_tk = [ranks[piece]] if piece in ranks else [ranks[p] for p in tk_parts]
    assert _kernel(tiktoken_rule, piece) == expected_tk
    assert _kernel(hf_rule, piece) == [token_ids[p] for p in hf_parts]
    # The flat hot-path merge used on cache misses gives the same ids under both rules.
    assert _kernel(tiktoken_rule, piece, merge_short_piece) == expected_tk
    assert _kernel(hf_rule, piece, merge_short_piece) == [token_ids[p] for p in hf_parts]


@settings(max_examples=examples(500), deadline=None)
@given(piece=PIECES)
def test_heap_merge_matches_reference(piece, tiktoken_rule, hf_rule, gpt2_tables):
    # merge_long_piece is the merge loop alone (its caller does the whole-piece lookup), so it
    # must equal the textbook loop under both pair rules, and the rescanning loop under HF's.
    token_ids, merges = gpt2_tables
    ranks = {t: i for t, i in token_ids.items() if t != b"<|endoftext|>"}  # tiktoken never merges a special token
    tk_parts = bpe_ref(piece, lambda a, b: ranks.get(a + b))
    hf_parts = bpe_ref(piece, lambda a, b: merges.get((a, b)))
    assert _kernel(tiktoken_rule, piece, merge_long_piece) == [ranks[p] for p in tk_parts]
    assert _kernel(hf_rule, piece, merge_long_piece) == [token_ids[p] for p in hf_parts]
    assert _kernel(hf_rule, piece, merge_long_piece) == _kernel(hf_rule, piece, merge_short_piece)


def test_long_repetitive_pieces_are_exact_and_not_quadratic(tiktoken_rule, gpt2_tables):
    token_ids, _ = gpt2_tables
    rng = random.Random(7)
    cases = [b"a" * 5000, b"1" * 3001, b" " * 2048, bytes(rng.choice(b"ab ") for _ in range(700))]
    for piece in cases:
        assert len(piece) > HEAP_THRESHOLD
        expected = [token_ids[p] for p in bpe_ref(piece, lambda a, b: token_ids.get(a + b))]
        assert _kernel(tiktoken_rule, piece) == expected
        assert _kernel(tiktoken_rule, piece, merge_long_piece) == expected
    # A megabyte in one piece: the heap path finishes (the quadratic loop would take hours).
    ids = _kernel(tiktoken_rule, b"x" * 1_000_000)
    assert 0 < len(ids) < 1_000_000
    assert _kernel(tiktoken_rule, b"x" * 1_000_000, merge_long_piece) == ids


def test_gpt2_every_token_merges_back_to_itself_under_both_rules(tiktoken_rule, hf_rule):
    # Finding: GPT-2's merges are self-consistent, so tiktoken's whole-piece shortcut and HF's
    # merge-only rule agree on every token (the toy vocabulary in test_vocab.py shows where the
    # rules differ in general). If this ever fails, fastenc.load("gpt2") must keep the
    # tiktoken rule, and test_vocab_files.py must list the inputs where HF differs.
    vocab = tiktoken_rule
    for tid in range(50256):
        piece = vocab.token_bytes[vocab.token_offsets[tid] : vocab.token_offsets[tid + 1]].tobytes()
        assert _kernel(hf_rule, piece) == [tid]
        assert _kernel(tiktoken_rule, piece) == [tid]


@pytest.mark.parametrize("name", ["gpt2", "urls", "cl100k_base"])
def test_the_pair_filter_has_every_pair_and_few_others(name):
    # merge_short_piece skips the pair table's probe where the filter's bit is clear: a pair of
    # the table whose bit were clear would never merge (wrong ids), so every one must be set.
    import fastenc
    from fastenc.kernels.tables import EMPTY_PAIR_SLOT, RANK_BITS, pair_filter_bit

    vocab = fastenc.load(name).vocab
    entries = vocab.pair_table[vocab.pair_table != EMPTY_PAIR_SLOT]
    words = vocab.pair_filter.shape[0]
    assert words & (words - 1) == 0 and words * 64 >= 8 * len(entries)
    for key in (entries >> np.uint64(RANK_BITS))[:: max(1, len(entries) // 20000)]:
        word, bit = pair_filter_bit(key, words)
        assert vocab.pair_filter[word] & bit, key
    set_bits = sum(bin(int(w)).count("1") for w in vocab.pair_filter)
    assert set_bits / (words * 64) < 0.15  # so most pairs that are not there are answered by the filter


def test_rank_is_id_is_set_exactly_where_a_merges_rank_is_the_merged_id(tiktoken_rule, hf_rule, gpt2_tables):
    # With config.RANK_IS_ID the merge loops write a merge's rank as the merged id and skip
    # merge_result. That holds in tiktoken's vocabularies (a rank is the id of the token a merge
    # makes) and not for an HF merges list (rank = line number): the flag must follow the tables.
    from fastenc.kernels import config as cfg

    for vocab, expected in ((tiktoken_rule, 1), (hf_rule, 0)):
        identity = np.array_equal(vocab.merge_result, np.arange(len(vocab.merge_result)))
        assert int(vocab.config[cfg.RANK_IS_ID]) == int(identity) == expected
    token_ids, _ = gpt2_tables
    ranks = {t: i for t, i in token_ids.items() if t != b"<|endoftext|>"}
    pieces = [b" internationalization", b"Hello, world", b"x" * 200, "ノーベル賞".encode()]
    # Off, the tiktoken tables give the same ids the long way; on, the HF ones go wrong.
    off = tiktoken_rule._replace(config=tiktoken_rule.config.copy())
    off.config[cfg.RANK_IS_ID] = 0
    for fn in (merge_short_piece, merge_long_piece):
        for piece in pieces:
            if fn is merge_short_piece and len(piece) > HEAP_THRESHOLD:
                continue
            expected = [ranks[p] for p in bpe_ref(piece, lambda a, b: ranks.get(a + b))]
            assert _kernel(off, piece, fn) == _kernel(tiktoken_rule, piece, fn) == expected
    wrong = hf_rule._replace(config=hf_rule.config.copy())
    wrong.config[cfg.RANK_IS_ID] = 1
    assert _kernel(wrong, b" internationalization", merge_short_piece) != _kernel(hf_rule, b" internationalization", merge_short_piece)
