"""``fastenc tokens`` (issue 61) end to end: each format written by the recipe and read back by the
trainer's own reader (tests/test_trainer_formats.py's helpers: megatron-core's IndexedDataset source,
datatrove's DatatroveFolderDataset, llm.c / modded-nanogpt's shard loader), ids equal to the reference
encoder's (tiktoken; the model rank files' oracle) with the delimiters where the format puts them;
``--workers 1`` vs ``2`` byte-identical; shuffle and shard rules; resume after kill -9; one-line errors.

Inputs: every 80th document of ../shared/data/text/docs.parquet (the committed docs fixture in a fresh
clone, where the model rank files' cases skip; CI=true makes missing shared data an error: conftest).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from test_trainer_formats import (MODELS, OPENAI, datatrove_read, encoded, expected_stream, llmc_load_data_shard,
                                  megatron_read)
from test_trainer_formats import datatrove_dataset, megatron, texts  # noqa: F401  (fixtures)
from fastenc.errors import FastencError
from fastenc.recipes.tokens import delimit
from fastenc.recipes.tokens import build
from fastenc.recipes.tokens.build import encode_tokens
from fastenc.recipes.tokens.layout import MANIFEST
from fastenc.recipes.tokens.verify import verify_output
from fastenc.run import faults

REPO = Path(__file__).resolve().parents[1]
FORMATS = ("megatron", "datatrove", "llmc")


def _inputs(folder: Path, texts: list, parts: int = 2) -> list[Path]:
    """``texts`` as ``parts`` parquet files (several units), small row groups (several batches)."""
    folder.mkdir(parents=True, exist_ok=True)
    cuts = np.linspace(0, len(texts), parts + 1).astype(int)
    paths = []
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        paths.append(folder / f"part{k}.parquet")
        pq.write_table(pa.table({"text": pa.array(texts[a:b], pa.string())}), paths[-1], row_group_size=16)
    return paths


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, texts):
    return texts, _inputs(tmp_path_factory.mktemp("tokens-in"), texts)


def _tokenizer_args(enc, name: str) -> dict:
    if name in OPENAI:
        return {"tokenizer": name}
    return {"tokenizer": enc.info.path, "pattern": {"llama3": "llama3", "qwen": "qwen2", "llama4": "llama4"}[name]}


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _read_split(fmt: str, out: Path, m: dict, split: str, megatron, datatrove_dataset):
    """A split's ids and document offsets as the trainer reads them."""
    shards = m["splits"][split]["shards"]
    if fmt == "megatron":
        parts = [megatron_read(megatron[0][1], out / s["base"]) for s in shards]
        assert all(p[2] == np.dtype(m["dtype"]) for p in parts)
        ids = np.concatenate([p[0] for p in parts])
        offsets = np.concatenate([[0]] + [p[1][1:] + b for p, b in zip(parts, np.cumsum([0] + [len(p[0]) for p in parts]))])
        return ids, offsets
    if fmt == "datatrove":
        assert len(shards) == 1  # one .ds per split folder: what DatatroveFolderDataset reads
        return datatrove_read(datatrove_dataset, out / split, np.dtype(m["dtype"]).itemsize)
    ids = np.concatenate([llmc_load_data_shard(out / f"{s['base']}.bin") for s in shards])
    return ids, None


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", OPENAI + MODELS[:2])
def test_each_format_end_to_end_through_the_trainers_reader(tmp_path, tmp_path_factory, shared_data, corpus, megatron,
                                                           datatrove_dataset, name, fmt):
    texts, paths = corpus
    enc, _, want, _, _ = encoded(name, texts, shared_data, tmp_path_factory)
    out = tmp_path / "out"
    m = encode_tokens(paths, out, fmt=fmt, val_every=5, quiet=True, **_tokenizer_args(enc, name))
    delims = delimit.resolve(enc, fmt)
    assert m["delimiters"] == delims.as_dict() and m["dtype"] == delims.dtype.name
    for split, keep in (("val", lambda i: i % 5 == 4), ("train", lambda i: i % 5 != 4)):
        docs = [w for i, w in enumerate(want) if keep(i)]
        stream, offsets = expected_stream(docs, delims)
        ids, got_offsets = _read_split(fmt, out, m, split, megatron, datatrove_dataset)
        assert np.array_equal(ids, stream), split
        # (DatatroveFolderDataset hands out torch longs; its token_size, read from the file, is the dtype)
        assert ids.dtype == delims.dtype or fmt == "datatrove", split
        if got_offsets is not None:
            assert np.array_equal(got_offsets, offsets), split
        else:
            assert np.array_equal(delims.split(ids), offsets), split  # llm.c: documents found by their delimiter
        sp = m["splits"][split]
        assert (sp["documents"], sp["tokens"], sp["max_id"]) == (len(docs), len(stream), int(stream.max()))
        assert sp["bytes_in"] == sum(len(t.encode()) for i, t in enumerate(texts) if keep(i))
    assert verify_output(out, None)["ok"]
    card = (out / "README.md").read_text()
    assert fmt in card and m["dtype"] in card and delims.describe().replace("|", "\\|") in card


def test_llmc_shards_are_cut_exactly_and_val_comes_first(tmp_path, corpus):
    _, paths = corpus
    m = encode_tokens(paths, tmp_path / "out", fmt="llmc", shard_tokens=20_000, val_every=4, quiet=True)
    names = sorted(p.name for p in (tmp_path / "out").glob("*.bin"))
    n_val = len(m["splits"]["val"]["shards"])
    assert [s["base"] for s in m["splits"]["val"]["shards"]] == [f"data_val_{i:06d}" for i in range(n_val)]
    assert m["splits"]["train"]["shards"][0]["base"] == f"data_train_{n_val:06d}"
    assert len(names) == n_val + len(m["splits"]["train"]["shards"])
    for split in ("val", "train"):
        tokens = [s["tokens"] for s in m["splits"][split]["shards"]]
        assert all(t == 20_000 for t in tokens[:-1]) and 0 < tokens[-1] <= 20_000
    assert verify_output(tmp_path / "out", None)["ok"]


def test_megatron_shards_keep_documents_whole(tmp_path, corpus, megatron):
    texts, paths = corpus
    m = encode_tokens(paths, tmp_path / "out", fmt="megatron", shard_tokens=30_000, quiet=True)
    shards = m["splits"]["train"]["shards"]
    assert len(shards) > 2 and sum(s["documents"] for s in shards) == len(texts)
    assert all(s["tokens"] <= 30_000 or s["documents"] == 1 for s in shards)
    assert verify_output(tmp_path / "out", None)["ok"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_workers_1_and_2_are_byte_identical_with_and_without_shuffle(tmp_path, corpus, fmt):
    _, paths = corpus
    paths = _inputs(tmp_path / "in", pq.read_table(paths[0]).column("text").to_pylist()
                    + pq.read_table(paths[1]).column("text").to_pylist(), parts=4)
    for shuffle in (None, 7):
        outs = [tmp_path / f"s{shuffle}-w{w}" for w in (1, 2)]
        for w, out in zip((1, 2), outs):
            encode_tokens(paths, out, fmt=fmt, workers=w, threads=2 // w, shuffle=shuffle, val_every=3,
                          shard_tokens=25_000, quiet=True)
        assert _files(outs[0]) == _files(outs[1]), shuffle


def test_shuffle_is_a_permutation_drawn_from_the_seed(tmp_path, corpus):
    _, paths = corpus

    def docs(seed):
        out = tmp_path / f"seed{seed}"
        m = encode_tokens(paths, out, fmt="datatrove", shuffle=seed, val_every=6, quiet=True)
        from fastenc.recipes.tokens import read_tokens

        return {s: [bytes(d) for d in map(read_tokens("datatrove", out / f"{s}/00000").document,
                                          range(m["splits"][s]["documents"]))] for s in ("train", "val")}

    plain, a, a2, b = docs(None), docs(1), docs(1), docs(2)
    assert a == a2 and a != b and a["train"] != plain["train"]
    for s in ("train", "val"):  # the same documents in each split, whatever the seed
        assert sorted(a[s]) == sorted(b[s]) == sorted(plain[s])


def test_a_rerun_finds_the_output_done_and_verify_and_decode_read_it(tmp_path, corpus, texts):
    _, paths = corpus
    out = tmp_path / "out"
    args = [sys.executable, "-m", "fastenc", "tokens", *map(str, paths), "-o", str(out), "--format", "megatron", "-q"]
    subprocess.run(args, check=True, cwd=REPO)
    before = _files(out)
    rerun = subprocess.run(args[:-1], capture_output=True, text=True, cwd=REPO)
    assert rerun.returncode == 0 and "nothing to do" in rerun.stderr and _files(out) == before
    ok = subprocess.run([sys.executable, "-m", "fastenc", "verify", str(out)], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0 and "documents_reencoded" in ok.stderr + ok.stdout
    dec = subprocess.run([sys.executable, "-m", "fastenc", "decode", str(out), "-n", "2", "--json"], capture_output=True,
                         text=True, cwd=REPO, check=True)
    assert [json.loads(line) for line in dec.stdout.splitlines()] == texts[:2]


def test_verify_finds_a_changed_shard(tmp_path, corpus):
    _, paths = corpus
    out = tmp_path / "out"
    encode_tokens(paths, out, fmt="llmc", val_every=0, quiet=True)
    shard = out / "data_train_000000.bin"
    data = bytearray(shard.read_bytes())
    data[2000] ^= 1
    shard.write_bytes(bytes(data))
    report = verify_output(out, None)
    assert not report["ok"] and any("xxh3_64" in p for p in report["problems"])


# ----------------------------------------------------------------------------------------------
# Errors: one line, a non-zero exit, nothing under a final name
# ----------------------------------------------------------------------------------------------


def _cli(paths, out, *extra):
    return subprocess.run([sys.executable, "-m", "fastenc", "tokens", *map(str, paths), "-o", str(out), "-q", *extra],
                          capture_output=True, text=True, cwd=REPO)


def _nothing_left(out: Path) -> None:
    assert not out.exists()
    assert not [p.name for p in out.parent.iterdir() if p.name.startswith(out.name)], "a temporary or work folder"


@pytest.mark.parametrize("extra, says", [
    (["--format", "megatron", "--bos", "<|begin_of_text|>"], "no such token"),
    (["--format", "llmc", "--eos", "70000"], "past the vocabulary"),
    (["--format", "datatrove", "--column", "nope"], "nope"),
    (["--format", "parquet"], "invalid choice"),
])
def test_bad_options_are_one_line_and_leave_nothing(tmp_path, corpus, extra, says):
    _, paths = corpus
    proc = _cli(paths, tmp_path / "out", *extra)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and says in lines[-1] and "Traceback" not in proc.stderr
    assert len(lines) == 1 or lines[0].startswith("usage:")  # (argparse prints the usage first)
    _nothing_left(tmp_path / "out")


@pytest.mark.parametrize("values, says", [(["a", None, "b"], "null"), ([], "no document")])
def test_null_texts_and_an_empty_input_are_refused(tmp_path, values, says):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": pa.array(values, pa.string())}), src)
    proc = _cli([src], tmp_path / "out", "--format", "megatron")
    assert proc.returncode != 0 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    _nothing_left(tmp_path / "out")


def test_an_id_past_the_dtype_is_refused_and_nothing_is_published(tmp_path, corpus, monkeypatch):
    _, paths = corpus
    monkeypatch.setattr(delimit, "format_dtype", lambda n_ids, fmt: np.dtype(np.uint16))  # o200k ids in uint16
    monkeypatch.setattr(build, "_TOOLS", {})  # (delimiters resolved afresh, and the cached ones back after)
    with pytest.raises(FastencError, match="past uint16"):  # its EOS 199999 first
        encode_tokens(paths, tmp_path / "a", tokenizer="o200k_base", fmt="datatrove", quiet=True)
    with pytest.raises(FastencError, match="uint16"):  # without delimiters: the first batch's ids
        encode_tokens(paths, tmp_path / "b", tokenizer="o200k_base", fmt="datatrove", bos="none", eos="none", quiet=True)
    _nothing_left(tmp_path / "a")
    _nothing_left(tmp_path / "b")


# ----------------------------------------------------------------------------------------------
# Stops: kill -9 or Ctrl-C, then a plain rerun finishes byte-identical
# ----------------------------------------------------------------------------------------------

KILL = """
import os, signal, sys
from pathlib import Path
from fastenc.run import faults
from fastenc.recipes.tokens.build import encode_tokens
op, n, out, *paths = sys.argv[1:]
with faults.inject(faults.FailAt(int(n), lambda: os.kill(os.getpid(), signal.SIGKILL), ops=(op,))):
    encode_tokens(paths, Path(out), fmt="llmc", shard_tokens=30_000, val_every=5, shuffle=3, quiet=True)
"""


def _run(paths, out):
    return encode_tokens(paths, out, fmt="llmc", shard_tokens=30_000, val_every=5, shuffle=3, quiet=True)


@pytest.mark.slow  # (test_atomic_output's kill -9 matrix covers every rename of a tokens run too, also slow)
def test_kill_9_at_renames_then_a_plain_rerun_is_byte_identical(tmp_path, corpus):
    _, paths = corpus
    _run(paths, tmp_path / "ref")
    want = _files(tmp_path / "ref")
    rec = faults.Recorder(ops=("rename", faults.RENAMED))
    with faults.inject(rec):
        _run(paths, tmp_path / "count")
    renames = sum(op == "rename" for op, _ in rec.steps)
    for op, n in sorted({("rename", 1), ("rename", renames), (faults.RENAMED, renames), ("rename", renames // 2)}):
        out = tmp_path / f"{op}{n}" / "out"
        proc = subprocess.run([sys.executable, "-c", KILL, op, str(n), str(out), *map(str, paths)], cwd=REPO,
                              capture_output=True, text=True)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert not out.exists() or _files(out) == want, f"killed at {op} {n}: a partial output"
        _run(paths, out)
        assert _files(out) == want, f"rerun after kill at {op} {n}"
        assert not [p for p in out.parent.iterdir() if p.name != "out"], "a temporary or work folder was left"


def test_kill_9_of_a_worker_then_a_rerun_resumes_the_finished_units(tmp_path, corpus):
    _, paths = corpus
    paths = _inputs(tmp_path / "in", pq.read_table(paths[0]).column("text").to_pylist(), parts=4)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "fastenc", "tokens", *map(str, paths), "-o", str(out), "--format", "megatron",
            "--workers", "2", "-q"]
    subprocess.run(args, check=True, cwd=REPO)
    want = _files(out)  # (the same command line: the manifest and the card record it)
    shutil.rmtree(out)
    env = {**os.environ, faults.ENV: "rename:1:kill"}  # the spawned worker kills itself at its first unit's commit
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode != 0 and not out.exists()
    done = [p for p in (tmp_path / "out.fastenc-work").glob("unit-*") if "." not in p.name]
    assert done, "no finished unit to resume"
    subprocess.run(args, check=True, cwd=REPO)
    assert _files(out) == want


def test_distributed_steps_give_the_one_process_output(tmp_path, corpus):
    """The recipe's ``Steps`` (what ``fastenc.datatrove``'s map and finalize steps call): two ranks
    map the units, the finalize publishes the same files as one ``encode_tokens`` run."""
    from fastenc.recipes.registry import recipe

    _, paths = corpus
    paths = _inputs(tmp_path / "in", pq.read_table(paths[0]).column("text").to_pylist(), parts=3)
    options = {"fmt": "datatrove", "val_every": 4, "shuffle": 5, "shard_tokens": 20_000}
    encode_tokens(paths, tmp_path / "one", quiet=True, **options)
    steps, counts = recipe("tokens").steps, []
    for rank in (1, 0):
        steps.map_rank(paths, tmp_path / "dist", options, rank, 2, counts.append)
    assert counts == ["units_mapped"] * 3
    steps.finalize(paths, tmp_path / "dist", options)
    assert _files(tmp_path / "dist") == _files(tmp_path / "one")
    from datatrove.executor import LocalPipelineExecutor

    from fastenc.datatrove import Finalize, Map

    logs = str(tmp_path / "logs")
    LocalPipelineExecutor([Map("tokens", paths, tmp_path / "dt", **options)], tasks=2, workers=1, logging_dir=logs + "-map").run()
    LocalPipelineExecutor([Finalize("tokens", paths, tmp_path / "dt", **options)], tasks=1, logging_dir=logs + "-fin").run()
    assert _files(tmp_path / "dt") == _files(tmp_path / "one")


def _tekken() -> Path:
    import mistral_common

    return sorted(Path(mistral_common.__file__).parent.rglob("tekken*.json"))[0]


@pytest.mark.parametrize("which", ["tokenizer.json", "tekken.json"])
def test_tokenizer_json_and_tekken_ids_are_fastenc_loads_with_the_delimiters(tmp_path, corpus, which):
    import fastenc
    from fastenc.recipes.tokens import read_tokens

    texts, paths = corpus
    path = REPO / "vocab" / "gpt2" / "tokenizer.json" if which == "tokenizer.json" else _tekken()
    m = encode_tokens(paths, tmp_path / "out", tokenizer=str(path), fmt="datatrove", quiet=True)
    enc = fastenc.load(path)
    delims = delimit.resolve(enc, "datatrove")
    assert (delims.bos, delims.eos) == ((None, 50256) if which == "tokenizer.json" else (1, 2))
    docs = read_tokens("datatrove", tmp_path / "out" / "train" / "00000")
    assert docs.n_docs == len(texts) == m["documents"]
    for i in range(0, len(texts), 7):
        assert docs.document(i).tolist() == [t for t in (delims.bos,) if t is not None] + enc.encode(texts[i]) + \
            [t for t in (delims.eos,) if t is not None]
    assert verify_output(tmp_path / "out", None)["ok"]
