"""fastenc.load(path) follows HF tokenizers' BPE exactly, with and without ignore_merges."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

import fastenc
from fastenc.vocab import builtin_tokenizer_dir

tokenizers = pytest.importorskip("tokenizers")
FIXTURES = builtin_tokenizer_dir("gpt2").parents[1] / "tests" / "data"


def _pair(tmp_path, name: str, ignore_merges: bool):
    spec = json.loads((builtin_tokenizer_dir(name) / "tokenizer.json").read_text(encoding="utf-8"))
    spec["model"]["ignore_merges"] = ignore_merges
    path = tmp_path / f"{name}-{ignore_merges}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.encode_special_tokens = True  # added tokens' text is ordinary text, as in fastenc
    return fastenc.load(path), hf


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_url_vocabulary_matches_hf(tmp_path, ignore_merges):
    ours, hf = _pair(tmp_path, "urls", ignore_merges)
    urls = pq.read_table(FIXTURES / "urls_fixture.parquet").column("url").to_pylist()
    ids, offsets = ours.encode_batch(urls)
    reference = hf.encode_batch(urls, add_special_tokens=False)
    bad = [u for i, (u, r) in enumerate(zip(urls, reference)) if ids[offsets[i] : offsets[i + 1]].tolist() != r.ids]
    assert bad == []


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_gpt2_file_under_the_hf_rule_matches_hf(tmp_path, ignore_merges, docs_fixture):
    ours, hf = _pair(tmp_path, "gpt2", ignore_merges)
    assert ours.info.merge_rule == "hf"
    texts = docs_fixture.column("text").to_pylist()[:60]
    ids, offsets = ours.encode_batch(texts)
    reference = hf.encode_batch(texts, add_special_tokens=False)
    assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == [r.ids for r in reference]


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab.-/:%?=&_~ \u00e9\u4e2d0123456789httpswww")), max_size=60))
def test_fuzz_url_vocabulary_with_ignore_merges(tmp_path_factory, text):
    ours, hf = _pair(tmp_path_factory.mktemp("v"), "urls", True)
    assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids
