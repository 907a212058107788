"""tokenizer.json loading: the two merge rules, and clear refusals of what is unsupported."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from fastenc.errors import VocabError
from fastenc.kernels.bpe import bpe_piece
from fastenc.vocab import URL_SPLIT_PATTERN, bytes_to_unicode, load_vocab

B2U = bytes_to_unicode()


def toy_spec(extra=("bc", "ab", "abc"), merges=(("b", "c"), ("a", "b"), ("ab", "c"))) -> dict:
    """A minimal byte-level BPE: the 256 bytes, then ``extra`` tokens (ids 256, 257, ...)."""
    vocab = {B2U[b]: b for b in range(256)}
    for token in extra:
        vocab[token] = len(vocab)
    return {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel"},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(m) for m in merges],
        },
    }


def write(tmp_path, spec, name="tokenizer.json"):
    path = tmp_path / name
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def encode_piece(vocab, piece: bytes) -> list[int]:
    data = np.frombuffer(piece, dtype=np.uint8)
    out = np.empty(len(piece), dtype=np.int64)
    return out[: bpe_piece(data, 0, len(data), vocab, out, 0)].tolist()


def test_merge_rules_differ_as_their_references_do(tmp_path):
    path = write(tmp_path, toy_spec())
    hf, info = load_vocab(path, merge_rule="hf")
    tk, _ = load_vocab(path, merge_rule="tiktoken")
    assert info.vocab_size == 259 and info.output_dtype == np.uint16
    # HF: (b, c) merges first (rank 0) and (a, bc) is no listed merge -> [a, bc].
    assert encode_piece(hf, b"abc") == [ord("a"), 256]
    # tiktoken: "abc" is itself a token -> emitted whole; and a + bc concatenates to a token.
    assert encode_piece(tk, b"abc") == [258]
    assert encode_piece(tk, b"abcx") == [258, ord("x")]
    assert encode_piece(hf, b"xabc") == [ord("x"), ord("a"), 256]


def test_hf_ignore_merges_looks_up_whole_piece(tmp_path):
    spec = toy_spec()
    spec["model"]["ignore_merges"] = True
    hf, _ = load_vocab(write(tmp_path, spec), merge_rule="hf")
    assert encode_piece(hf, b"abc") == [258]
    assert encode_piece(hf, b"abcd") == [ord("a"), 256, ord("d")]


def test_hf_duplicate_merge_takes_last_rank(tmp_path):
    # HF builds a HashMap from the merges list, so a repeated pair keeps its last index.
    spec = toy_spec(extra=("bc", "ab"), merges=(("a", "b"), ("b", "c"), ("a", "b")))
    hf, _ = load_vocab(write(tmp_path, spec), merge_rule="hf")
    assert encode_piece(hf, b"abc") == [ord("a"), 256]


def test_url_pretokenizer_is_recognised(tmp_path):
    spec = toy_spec()
    spec["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": URL_SPLIT_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }
    spec["added_tokens"] = [{"id": 0, "content": "<eos>", "special": True}]
    _, info = load_vocab(write(tmp_path, spec))
    assert info.pretokenizer == "url" and info.special_tokens == {"<eos>": 0}


def _mutations():
    def set_(path, value):
        def apply(spec):
            node = spec
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            return spec

        return apply

    def drop_byte(spec):
        del spec["model"]["vocab"][B2U[0x41]]
        spec["model"]["vocab"]["zz"] = 0x41
        return spec

    return {
        "normalizer": (set_(("normalizer",), {"type": "NFC"}), "normalizer"),
        "model type": (set_(("model", "type"), "WordPiece"), "model.type"),
        "dropout": (set_(("model", "dropout"), 0.1), "model.dropout"),
        "byte_fallback": (set_(("model", "byte_fallback"), True), "model.byte_fallback"),
        "prefix": (set_(("model", "continuing_subword_prefix"), "##"), "continuing_subword_prefix"),
        "suffix": (set_(("model", "end_of_word_suffix"), "</w>"), "end_of_word_suffix"),
        "pre_tokenizer": (set_(("pre_tokenizer",), {"type": "Whitespace"}), "pre_tokenizer"),
        "prefix space": (set_(("pre_tokenizer", "add_prefix_space"), True), "pre_tokenizer"),
        "template": (set_(("post_processor",), {"type": "TemplateProcessing"}), "post_processor"),
        "dangling merge": (set_(("model", "merges"), [["a", "q1"]]), "merges[0]"),
        "merged token missing": (set_(("model", "merges"), [["x", "y"]]), "not in model.vocab"),
        "bad merge shape": (set_(("model", "merges"), [["a", "b", "c"]]), "merges[0]"),
        "negative id": (set_(("model", "vocab", "bc"), -5), "non-negative"),
        "id hole": (set_(("model", "vocab", "abc"), 9999), "not dense"),
        "duplicate id": (set_(("model", "vocab", "abc"), 3), "two tokens"),
        "non byte-level token": (set_(("model", "vocab", "a b"), 259), "byte-level"),
        "missing byte": (drop_byte, "byte 0x41"),
        "non-special added token": (set_(("added_tokens",), [{"id": 5, "content": "x", "special": False}]), "special"),
    }


@pytest.mark.parametrize("case", sorted(_mutations()))
def test_unsupported_or_broken_tokenizer_json_is_refused_clearly(tmp_path, case):
    mutate, expected_words = _mutations()[case]
    spec = mutate(copy.deepcopy(toy_spec()))
    with pytest.raises(VocabError, match="(?s)" + expected_words.replace(".", r"\.").replace("[", r"\[")):
        load_vocab(write(tmp_path, spec))


def test_unreadable_files_are_refused_clearly(tmp_path):
    with pytest.raises(VocabError, match="cannot read"):
        load_vocab(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{oops", encoding="utf-8")
    with pytest.raises(VocabError, match="not valid JSON"):
        load_vocab(broken)
    with pytest.raises(VocabError, match="no 'model'"):
        load_vocab(write(tmp_path, {"version": "1.0"}))
    with pytest.raises(VocabError, match="merge_rule"):
        load_vocab(write(tmp_path, toy_spec()), merge_rule="sentencepiece")


def test_whole_piece_rule_applies_to_long_pieces_too(tmp_path):
    # A 40-byte token that BPE cannot build: under tiktoken's rule (and HF's ignore_merges) a
    # piece equal to it is emitted as that one id, at any length, also through Encoder.encode.
    import fastenc

    long_word = "q" * 40
    spec = toy_spec(extra=("qq", long_word), merges=(("q", "q"),))
    path = write(tmp_path, spec)
    for rule in ("tiktoken", "hf"):
        enc = fastenc.load(path, merge_rule=rule)
        ids = enc.encode(long_word)
        assert ids == ([257] if rule == "tiktoken" else [256] * 20)
        assert enc.encode(long_word + "q") == [256] * 20 + [ord("q")]
    spec["model"]["ignore_merges"] = True
    assert fastenc.load(write(tmp_path, spec, "ignore.json")).encode(long_word) == [257]


def test_pair_table_holds_exactly_the_merges(tmp_path):
    from fastenc.kernels.tables import NO_RANK, pair_rank

    spec = toy_spec()
    hf, _ = load_vocab(write(tmp_path, spec), merge_rule="hf")
    tk, _ = load_vocab(write(tmp_path, spec), merge_rule="tiktoken")
    a, b, c = ord("a"), ord("b"), ord("c")
    # HF: the listed merges with their index as rank.
    assert [pair_rank(hf.pair_table, x, y) for x, y in ((b, c), (a, b), (257, c))] == [0, 1, 2]
    assert pair_rank(hf.pair_table, a, 256) == NO_RANK  # a + bc makes a token, but is no listed merge
    # tiktoken: each token's last merge of its own bytes, ranked by the token's id. "abc" merges
    # b+c (256) before a+b (257), so its pair is a+bc; ab+c also spells it but never merges
    # (tests/test_last_merges.py).
    assert [pair_rank(tk.pair_table, x, y) for x, y in ((b, c), (a, b), (a, 256))] == [256, 257, 258]
    assert pair_rank(tk.pair_table, 257, c) == NO_RANK
    assert pair_rank(tk.pair_table, c, a) == NO_RANK
