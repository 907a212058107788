"""tiktoken's rule with a pair table of each token's last merge only (``tables.last_merges``).

The kernels used to hold every split of every token (o200k_base: 446k pairs); they now hold one
pair per token, the last merge of the token's own bytes (200k). ``last_merges``' docstring says why
no id changes; these tests check it against tiktoken itself on random vocabularies full of the
cases the argument is about: tokens with several splits, tokens no merge can build, and tokens
ranked before their own parts.
"""
from __future__ import annotations

import base64

import numpy as np
import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from budget import examples
from reference import last_merge_ref
from test_encodings import _from_committed_files

import fastenc
from fastenc.kernels import tables

# o200k's split keeps a run of lower-case letters whole: each text below is one piece.
PATTERN = _from_committed_files("o200k_base")._pat_str


def _write_ranks(path, tokens) -> dict:
    ranks = {bytes([b]): b for b in range(256)}
    for token in tokens:
        ranks.setdefault(token, len(ranks))
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))
    return ranks


def _pair(enc, left, right) -> int:
    return tables.pair_rank(enc.vocab.pair_table, left, right)


tokens_st = st.lists(st.text(alphabet="abcd", min_size=2, max_size=7).map(str.encode), min_size=1, max_size=60)
texts_st = st.lists(st.text(alphabet="abcd", min_size=1, max_size=90), min_size=1, max_size=25)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=tokens_st, texts=texts_st)
def test_random_vocabularies_match_tiktoken(tmp_path, tokens, texts):
    # Pieces of 1..90 bytes: the short merge, the heap merge, the caches and the long-piece cuts.
    ranks = _write_ranks(tmp_path / "toy.tiktoken", tokens)
    ref = tiktoken.Encoding(name="toy", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    enc = fastenc.load(tmp_path / "toy.tiktoken", pattern="o200k")
    ids, offsets = enc.encode_batch(texts)
    for i, text in enumerate(texts):
        assert ids[offsets[i]:offsets[i + 1]].tolist() == ref.encode_ordinary(text), (tokens, text)


def test_the_table_holds_each_tokens_last_merge_and_nothing_else(tmp_path):
    names = [b"ab", b"bc", b"abc", b"cd", b"bcd", b"abcd", b"da", b"dab"]  # ids 256..263
    ranks = _write_ranks(tmp_path / "toy.tiktoken", names)
    enc = fastenc.load(tmp_path / "toy.tiktoken", pattern="o200k")
    a, b, c, d = (ord(x) for x in "abcd")
    ab, bc, abc, cd, bcd, abcd, da, dab = range(256, 264)
    # "abc" merges a+b (256) before b+c (257), then ab+c; "abcd": ab, then ab+c, then abc+d;
    # "dab": a+b (256) before d+a (262), then d+ab.
    last = {(a, b): ab, (b, c): bc, (ab, c): abc, (c, d): cd, (bc, d): bcd, (abc, d): abcd, (d, a): da, (d, ab): dab}
    assert {pair: _pair(enc, *pair) for pair in last} == last
    # The other splits of the same tokens are not there: a+bc, b+cd, ab+cd, a+bcd, da+b.
    for pair in ((a, bc), (b, cd), (ab, cd), (a, bcd), (da, b)):
        assert _pair(enc, *pair) == tables.NO_RANK, pair
    assert int((enc.vocab.pair_table != tables.EMPTY_PAIR_SLOT).sum()) == len(last)
    ref = tiktoken.Encoding(name="toy", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    for text in ("abcd", "dabc", "abcdab", "bcdabcd", "dddabcabcbcd", "dab" * 30):
        assert enc.encode(text) == ref.encode_ordinary(text), text


@pytest.mark.slow
def test_each_token_of_the_builtin_encodings_has_its_last_merge():
    # Against a plain-Python run of each token's own bytes (reference.last_merge_ref), for every
    # token of cl100k_base and o200k_base: its last merge is in the table and names it; a token
    # whose bytes merge to something else has no pair at all.
    for name in ("cl100k_base", "o200k_base"):
        enc, ranks = fastenc.load(name), _from_committed_files(name)._mergeable_ranks
        table = enc.vocab.pair_table
        merged = (table[table != tables.EMPTY_PAIR_SLOT] & np.uint64(tables.MAX_RANK)).astype(np.int64)
        assert len(np.unique(merged)) == len(merged), name  # one pair per token
        has_pair = np.zeros(len(ranks), dtype=bool)
        has_pair[merged] = True
        for token, rank in ranks.items():
            if len(token) < 2:
                continue
            last = last_merge_ref(token, ranks)
            if last is None or ranks[last[0] + last[1]] != rank:
                assert not has_pair[rank], (name, token)
            else:
                assert _pair(enc, ranks[last[0]], ranks[last[1]]) == rank, (name, token)
        assert has_pair.sum() == len(merged)
