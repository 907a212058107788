"""Every recipe path takes the tokenizers modern models publish: a tekken.json (mistral-common ships
it), a rank file with a model's own pattern string, a tokenizer.json with a Sequence of Splits.
The gpt2 recipe writes their bins (uint32 past 65,535 ids), --workers 2 equals one worker byte for
byte, verify re-checks them, decode gives the text back, and the card names the split."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastenc
from fastenc.pattern import QWEN2
from pattern_support import BYTE_LEVEL, gpt2_ranks, gpt2_tokenizer_json, split, write_rank_file

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "docs_fixture.parquet"


def _fastenc(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "fastenc", *map(str, args)], cwd=cwd, capture_output=True, text=True)


def _inputs(tmp_path) -> Path:
    """The docs fixture in four files, so that --workers 2 has units to share."""
    table = pq.read_table(FIXTURE, columns=["text"])
    folder = tmp_path / "in"
    folder.mkdir()
    step = -(-table.num_rows // 4)
    for k in range(4):
        pq.write_table(table.slice(k * step, step), folder / f"part-{k}.parquet")
    return folder


def _tree(out: Path) -> dict:
    """Every file's sha256; summary.json without its build record (the command line differs)."""
    tree = {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in ("README.md", "summary.json")}
    summary = json.loads((out / "summary.json").read_text())
    summary.pop("build")
    tree["summary.json"] = summary
    return tree


def _tekken() -> str:
    mc = pytest.importorskip("mistral_common")
    files = sorted(glob.glob(os.path.join(os.path.dirname(mc.__file__), "data", "tekken*.json")))
    if not files:
        pytest.skip("mistral-common ships no tekken.json")
    return files[-1]


@pytest.fixture(scope="module")
def tokenizers_(tmp_path_factory):
    """name -> (-t value, --pattern value or None)."""
    d = tmp_path_factory.mktemp("tok")
    rank_file = write_rank_file(gpt2_ranks(), d / "gpt2.tiktoken")
    seq = d / "seq.json"
    seq.write_text(json.dumps(gpt2_tokenizer_json({"type": "Sequence", "pretokenizers": [
        split(r"\p{N}{1,3}"), split(r"[一-龥぀-ゟ゠-ヿ]+"), split(QWEN2), BYTE_LEVEL]}, ignore_merges=True)))
    return {"tekken": (_tekken(), None), "rank-file-regex": (rank_file, QWEN2), "sequence-json": (seq, None)}


@pytest.mark.parametrize("name", ["tekken", "rank-file-regex", "sequence-json"])
def test_gpt2_recipe_with_modern_tokenizers(tmp_path, tokenizers_, name):
    tok, pattern = tokenizers_[name]
    extra = ["--pattern", pattern] if pattern else []
    src = _inputs(tmp_path)
    outs = {}
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        r = _fastenc("gpt2", src, "-o", out, "-t", tok, *extra, "--buckets", "b0,b1", "--workers", workers, "-q")
        assert r.returncode == 0, r.stderr
        outs[workers] = out
    assert _tree(outs[1]) == _tree(outs[2])
    r = _fastenc("verify", outs[1], "--source", src)
    assert r.returncode == 0 and "OK" in r.stderr, r.stderr
    card = (outs[1] / "README.md").read_text()
    assert "pre-tokenizer split" in card and (pattern is None or f"pattern={json.dumps(pattern)}" in card)
    r = _fastenc("decode", outs[1], "--limit", "3", "--json")
    assert r.returncode == 0, r.stderr
    texts = [json.loads(line) for line in r.stdout.splitlines()]
    assert texts and all(t in set(pq.read_table(FIXTURE).column("text").to_pylist()) for t in texts)


def test_tekken_encode_command_writes_uint32_ids_equal_to_mistral_common(tmp_path):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    path = _tekken()
    text = "\n\n".join(pq.read_table(FIXTURE).column("text").to_pylist()[:20])
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    r = _fastenc("encode", tmp_path / "t.txt", "-t", path, "-o", tmp_path / "e", "-q")
    assert r.returncode == 0, r.stderr
    want = np.asarray(Tekkenizer.from_file(path).encode(text, bos=False, eos=False), np.uint32)
    got = np.fromfile(tmp_path / "e" / "ids.bin", dtype=np.uint32)
    assert np.array_equal(got, want)


def test_a_pattern_that_cannot_be_exact_is_one_line(tmp_path):
    rank_file = write_rank_file(gpt2_ranks(), tmp_path / "gpt2.tiktoken")
    (tmp_path / "t.txt").write_text("hello", encoding="utf-8")
    r = _fastenc("encode", tmp_path / "t.txt", "-t", rank_file, "--pattern", r"(?<=a)b|\s", "-o", tmp_path / "x")
    assert r.returncode == 1 and "lookbehind" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()
