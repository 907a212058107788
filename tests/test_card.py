"""The dataset card OUT/README.md (issue 11, part 5): every recipe writes one, built from its files.

For each recipe, on tiny inputs run through the CLI: the card's counts equal what is measured on
the bins independently (memmap sizes, 0xFE separators, zeros, idx arrays); the card's reading
snippets run against the output as written and give the source's text back; `fastenc card OUT`
reproduces the written card byte for byte; a folder that is no output gets a one-line error.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from fastenc import cli

DATA = Path(__file__).resolve().parent / "data"


def fastenc(*argv, cwd: Path | None = None) -> int:
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        return cli.main([str(a) for a in argv])
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """One output per recipe, made by the CLI (so that the command line is recorded)."""
    root = tmp_path_factory.mktemp("card")
    docs = pq.read_table(DATA / "docs_fixture.parquet").slice(0, 40)
    pq.write_table(docs, root / "docs.parquet")
    pq.write_table(pq.read_table(DATA / "urls_fixture.parquet").slice(0, 300), root / "urls.parquet")
    cmds = {
        "bytes": ["bytes", DATA / "bytes_docs.parquet", "-o", "b", "--shard-bytes", "3kB", "--val-every", "10", "-q"],
        "gpt2": ["gpt2", "docs.parquet", "-o", "g", "--buckets", "b0,b1", "--part-tokens", "20000", "--decode-every", "5", "-q"],
        "urls": ["urls.parquet", "-o", "u", "--no-shard-check", "--shard", "3", "-q"],
    }
    for argv in cmds.values():
        assert fastenc(*argv, cwd=root) == 0
    # a second shard into the same folder: the card then covers both
    assert fastenc("urls.parquet", "-o", "u", "--no-shard-check", "--shard", "4", "-q", cwd=root) == 0
    return root, cmds


def card_of(out: Path) -> str:
    return (out / "README.md").read_text(encoding="utf-8")


def counts_table(card: str) -> dict[str, str]:
    """The first table of the card (``| name | value |``), as {name: value}."""
    rows = {}
    for line in card.split("\n## ")[0].splitlines():
        m = re.match(r"^\| ([^|]+?) \| (.+) \|$", line)
        if m and m.group(1).strip():
            rows[m.group(1)] = m.group(2)
    return rows


def first_int(text: str) -> int:
    return int(re.match(r"[\d,]+", text).group(0).replace(",", ""))


def run_snippets(out: Path, card: str, monkeypatch) -> dict:
    """Execute the card's python blocks in order, from the output folder, in one namespace."""
    blocks = re.findall(r"```python\n(.*?)```", card, re.S)
    assert blocks
    monkeypatch.chdir(out)
    ns: dict = {}
    for code in blocks:
        exec(compile(code, "README.md", "exec"), ns)
    return ns


def check_header(card: str) -> None:
    assert card.startswith("---\n")
    header = card.split("---\n")[1]
    assert "license:" in header and "size_categories:" in header
    for section in ("## Layout", "## Format", "## Verification", "## How it was built"):
        assert section in card


def check_command(card: str, root: Path, argv: list) -> None:
    assert shlex.join(["fastenc", *map(str, argv)]) in card
    assert f"`{root}`" in card  # the folder the command's relative paths are relative to


# -- bytes ---------------------------------------------------------------------------------------


def test_bytes_card_counts_snippet_and_command(outputs, monkeypatch):
    root, cmds = outputs
    out = root / "b"
    card = card_of(out)
    check_header(card)
    check_command(card, root, cmds["bytes"])
    table = counts_table(card)
    bins = sorted(out.glob("*.bin"))
    train = [p for p in bins if p.name.startswith("train_")]
    assert table["Shards"] == f"{len(train)} train, {len(bins) - len(train)} val"
    separators = sum(int(np.count_nonzero(np.memmap(p, dtype=np.uint8, mode="r") == 254)) for p in bins)
    assert first_int(table["Documents"]) == separators == pq.ParquetFile(DATA / "bytes_docs.parquet").metadata.num_rows
    assert first_int(table["Bytes (tokens)"]) == sum(p.stat().st_size for p in bins)

    ns = run_snippets(out, card, monkeypatch)
    texts = pq.read_table(DATA / "bytes_docs.parquet").column("text").to_pylist()
    shard = np.fromfile(out / "train_00000.bin", dtype=np.uint8)
    assert len(ns["docs"]) == int(np.count_nonzero(shard == 254))
    assert [d.decode("utf-8") for d in ns["docs"]] == texts[: len(ns["docs"])]  # train starts with documents 0, 1, ...


# -- gpt2 ----------------------------------------------------------------------------------------


def test_gpt2_card_counts_snippet_and_command(outputs, monkeypatch):
    root, cmds = outputs
    out = root / "g"
    card = card_of(out)
    check_header(card)
    check_command(card, root, cmds["gpt2"])
    table = counts_table(card)
    bins = sorted(out.glob("b*/part_*.bin"))
    idxs = [np.load(p.with_name(p.name.replace(".bin", ".idx.npy"))) for p in bins]
    assert first_int(table["Parts"]) == len(bins) >= 3
    assert first_int(table["Documents"]) == sum(len(i) - 1 for i in idxs)
    assert first_int(table["Tokens"]) == sum(np.memmap(p, dtype=np.uint16, mode="r").size for p in bins) == sum(int(i[-1]) for i in idxs)
    assert first_int(table["Vocabulary"]) == 50257

    # independently of fastenc's counts: the source's gpt2_tokens column says which documents are kept
    src = pq.read_table(root / "docs.parquet")
    counts = np.array(src.column("gpt2_tokens").to_pylist())
    assert first_int(table["Documents"]) == int(np.count_nonzero((counts >= 1) & (counts < 8192)))
    assert first_int(table["Tokens"]) == int(counts[(counts >= 1) & (counts < 8192)].sum())

    ns = run_snippets(out, card, monkeypatch)
    first = int(np.flatnonzero((counts >= 1) & (counts < 4096))[0])  # part_00 of b0 starts with it
    assert ns["stem"] == "b0_lt_4096/part_00"
    assert len(ns["doc_0"]) == counts[first]
    assert ns["enc"].decode(ns["doc_0"].tolist()) == src.column("text")[first].as_py()
    assert ns["n_docs"] == len(np.load(out / "b0_lt_4096" / "part_00.idx.npy")) - 1


# -- urls ----------------------------------------------------------------------------------------


def test_urls_card_counts_snippet_and_command(outputs, monkeypatch):
    import xxhash

    root, cmds = outputs
    out = root / "u"
    card = card_of(out)
    check_header(card)
    check_command(card, root, cmds["urls"])
    table = counts_table(card)
    bins = sorted(out.glob("tokens-s*.bin"))
    assert [p.name for p in bins] == ["tokens-s00003.bin", "tokens-s00004.bin"]
    assert table["Shards"].startswith("2 (shard 3-4 of 2,048)")
    tokens = [np.memmap(p, dtype=np.uint16, mode="r") for p in bins]
    assert first_int(table["URLs"]) == sum(int(np.count_nonzero(t == 0)) for t in tokens) == 2 * 300
    assert first_int(table["Tokens"]) == sum(t.size for t in tokens)
    assert first_int(table["Vocabulary"]) == 8192

    ns = run_snippets(out, card, monkeypatch)
    urls = pq.read_table(root / "urls.parquet").column("url").to_pylist()
    hashes = [xxhash.xxh3_64_intdigest(u.encode("utf-8")) for u in urls]
    assert ns["url"] == urls[int(np.argmin(hashes))]  # the bin's first URL: the smallest xxh3, given back whole
    assert len(ns["tokens"]) == json.loads((out / "tokens-s00003.json").read_text())["tokens"]


def test_urls_card_names_a_bin_without_its_sidecar(outputs, tmp_path):
    import shutil

    root, _ = outputs
    out = tmp_path / "u"
    shutil.copytree(root / "u", out)
    (out / "tokens-s00004.json").unlink()  # as a kill -9 between the bin's and the sidecar's renames leaves it
    assert fastenc("card", out, "-q") == 0
    card = card_of(out)
    assert counts_table(card)["Shards"].startswith("1 (shard 3 of")
    assert "**Not part of this dataset:** `tokens-s00004.bin`" in card


# -- fastenc card --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["b", "g", "u"])
def test_fastenc_card_reproduces_the_written_card(outputs, name, capsys):
    out = outputs[0] / name
    written = (out / "README.md").read_bytes()
    assert fastenc("card", out, "--check") == 0
    (out / "README.md").unlink()
    assert fastenc("card", out, "--check") == 1
    assert fastenc("card", out) == 0
    assert (out / "README.md").read_bytes() == written
    capsys.readouterr()
    assert fastenc("card", out, "--print") == 0
    assert capsys.readouterr().out.encode() == written
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]


def test_card_of_a_folder_that_is_no_output_is_one_line(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    for target in (tmp_path, tmp_path / "missing"):
        assert fastenc("card", target) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("fastenc: error:") and "\n" not in err
    assert not (tmp_path / "README.md").exists()


def test_card_refuses_an_output_whose_bins_disagree_with_the_manifest(outputs, tmp_path, capsys):
    import shutil

    out = tmp_path / "b"
    shutil.copytree(outputs[0] / "b", out)
    with open(out / "train_00001.bin", "ab") as f:
        f.write(b"\xfe extra")
    assert fastenc("card", out) == 1
    err = capsys.readouterr().err.strip()
    assert "train_00001.bin" in err and "fastenc verify" in err and "\n" not in err


def test_api_runs_record_no_command_and_cli_runs_do_not_leak_it(outputs, tmp_path):
    """The CLI hands the command line to the run as an argument: an API run after a CLI run records none."""
    from fastenc.recipes.bytes import encode_bytes

    meta = encode_bytes([DATA / "bytes_docs.parquet"], tmp_path / "api", shard_bytes=3000, val_every=10, quiet=True)
    assert "build" not in meta
    assert "through the Python API (`fastenc.recipes.bytes.encode_bytes`" in card_of(tmp_path / "api")
    recorded = json.loads((outputs[0] / "b" / "meta.json").read_text())["build"]
    assert recorded["command"][:2] == ["fastenc", "bytes"] and recorded["cwd"] == str(outputs[0])
    assert "build" not in recorded.get("request", {})  # the request, which reruns compare, is unchanged
