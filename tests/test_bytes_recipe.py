"""The raw-bytes recipe: exact round trip, val rule, shard rule, counts, errors, verify, CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from budget import examples

from fastenc.errors import InputError
from fastenc.kernels.bytes_pack import count_high_bytes, pack_documents
from fastenc.recipes.options import parse_size
from fastenc.recipes.bytes import encode_bytes, verify_output
from fastenc.verify import verify_dir

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DOCS = SHARED / "text" / "docs.parquet"
FIXTURE = REPO / "tests" / "data" / "bytes_docs.parquet"
_skip_without_shared = pytest.mark.skipif(not DOCS.exists(), reason="shared corpus ../shared/data not present (fresh clone)")


def needs_shared(test):
    """A test over the full shared corpus: slow (README's test command leaves it out, .ci/run runs it),
    and skipped in a clone without ../shared/data."""
    return pytest.mark.slow(_skip_without_shared(test))


# ---------------------------------------------------------------------------------------------
# A slow, obvious reference of the whole recipe (kept here, independent of the implementation)
# ---------------------------------------------------------------------------------------------


def reference_shards(docs: list[bytes], shard_bytes: int, val_every: int) -> dict[str, list[bytes]]:
    """The shard contents the recipe must write, computed document by document."""
    out: dict[str, list[bytes]] = {"train": [], "val": []}
    current: dict[str, bytearray | None] = {"train": None, "val": None}
    for i, doc in enumerate(docs):
        split = "val" if val_every and (i + 1) % val_every == 0 else "train"
        piece = b"\xfe" + doc.translate(None, b"\xfe\xff")  # drop bytes 254 and 255
        shard = current[split]
        if shard is None or (len(shard) and len(shard) + len(piece) > shard_bytes):
            if shard is not None:
                out[split].append(bytes(shard))
            shard = current[split] = bytearray()
        shard += piece
    for split, shard in current.items():
        if shard is not None:
            out[split].append(bytes(shard))
    return out


def read_out(out_dir: Path) -> dict[str, list[bytes]]:
    got = {}
    for split in ("train", "val"):
        names = sorted(p.name for p in out_dir.glob(f"{split}_*.bin"))
        assert names == [f"{split}_{k:05d}.bin" for k in range(len(names))]
        got[split] = [(out_dir / n).read_bytes() for n in names]
    return got


def docs_of_shard(shard: bytes) -> list[bytes]:
    """The card's reading code: every shard on its own starts with 254 and splits into documents."""
    arr = np.memmap(shard, dtype=np.uint8, mode="r") if isinstance(shard, Path) else np.frombuffer(shard, np.uint8)
    assert arr[0] == 254
    parts = bytes(arr).split(b"\xfe")
    assert parts[0] == b""
    return parts[1:]


def source_docs(path: Path, column: str = "text") -> list[bytes]:
    col = pq.read_table(path, columns=[column]).column(0)
    return [v if isinstance(v, bytes) else v.encode() for v in col.to_pylist()]


def check_meta(meta: dict, out_dir: Path, docs: list[bytes], val_every: int, shard_bytes: int) -> None:
    on_disk = json.loads((out_dir / "meta.json").read_text())
    assert on_disk == meta
    n = len(docs)
    n_val = sum(1 for i in range(n) if val_every and i % val_every == val_every - 1)
    assert meta["documents"] == n
    assert meta["splits"]["val"]["documents"] == n_val and meta["splits"]["train"]["documents"] == n - n_val
    kept = sum(len(d) - d.count(b"\xfe") - d.count(b"\xff") for d in docs)
    assert meta["bytes"] == kept + n and meta["text_bytes"] == kept
    assert meta["stripped_bytes"] == sum(len(d) for d in docs) - kept
    assert meta["separator"] == 254 and meta["val_every"] == val_every and meta["shard_bytes"] == shard_bytes
    assert meta["format"] == "fastenc-bytes" and str(val_every - 1) in meta["val_rule"] if val_every else True
    for split in ("train", "val"):
        for s in meta["splits"][split]["shards"]:
            p = out_dir / s["file"]
            assert p.stat().st_size == s["bytes"]
            assert len(docs_of_shard(p.read_bytes())) == s["documents"]


def encode_and_check(inputs, out_dir, docs, *, shard_bytes, val_every, **kw):
    meta = encode_bytes(inputs, out_dir, shard_bytes=shard_bytes, val_every=val_every, quiet=True, **kw)
    assert read_out(out_dir) == reference_shards(docs, shard_bytes, val_every)
    check_meta(meta, out_dir, docs, val_every, shard_bytes)
    report = verify_dir(out_dir, inputs)
    assert report["ok"], report["problems"]
    return meta


def write_parquet(path: Path, values, type_=pa.string(), **kw) -> Path:
    pq.write_table(pa.table({"text": pa.array(values, type=type_)}), path, **kw)
    return path


# ---------------------------------------------------------------------------------------------
# Exactness
# ---------------------------------------------------------------------------------------------


@needs_shared
def test_shared_corpus_default_shards(tmp_path):
    docs = source_docs(DOCS)
    meta = encode_and_check([DOCS], tmp_path / "out", docs, shard_bytes=500_000_000, val_every=1000)
    # the rule, spelled out: the 1000th, 2000th, ... documents are val, in order
    val = docs_of_shard(tmp_path / "out" / "val_00000.bin")
    assert val == [docs[999], docs[1999], docs[2999], docs[3999], docs[4999], docs[5999]]
    assert [s["first_document"] for s in meta["splits"]["val"]["shards"]] == [999]


@needs_shared
def test_shared_corpus_many_small_shards(tmp_path):
    docs = source_docs(DOCS)
    shard_bytes = 1_000_000  # the corpus has documents up to 1.7 MB: some are longer than a shard
    assert max(map(len, docs)) + 1 > shard_bytes
    meta = encode_and_check([DOCS], tmp_path / "out", docs, shard_bytes=shard_bytes, val_every=1000)
    shards = meta["splits"]["train"]["shards"]
    assert len(shards) > 50
    oversized = [s for s in shards if s["bytes"] > shard_bytes]
    assert oversized and all(s["documents"] == 1 for s in oversized)
    # interleave train and val back by the rule: the source documents, in order
    train = [d for s in shards for d in docs_of_shard(tmp_path / "out" / s["file"])]
    val = [d for s in meta["splits"]["val"]["shards"] for d in docs_of_shard(tmp_path / "out" / s["file"])]
    merged, ti, vi = [], iter(train), iter(val)
    for i in range(len(docs)):
        merged.append(next(vi) if i % 1000 == 999 else next(ti))
    assert merged == docs


def test_fixture_many_boundaries(tmp_path):
    docs = source_docs(FIXTURE)
    assert max(map(len, docs)) > 20_000
    for shard_bytes, val_every in [(3000, 5), (1, 3), (2_000_000, 1000), (40_000, 1), (5000, 0)]:
        out = tmp_path / f"out-{shard_bytes}-{val_every}"
        meta = encode_and_check([FIXTURE], out, docs, shard_bytes=shard_bytes, val_every=val_every)
        assert meta["sources"][0]["rows"] == len(docs)


def test_multiple_inputs_counted_globally(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    docs = [f"doc {i}".encode() for i in range(2100)]
    for k in range(3):
        write_parquet(d / f"part-{k}.parquet", [x.decode() for x in docs[700 * k : 700 * (k + 1)]], row_group_size=128)
    meta = encode_and_check([str(d)], tmp_path / "out", docs, shard_bytes=1000, val_every=1000)
    val = [x for s in meta["splits"]["val"]["shards"] for x in docs_of_shard(tmp_path / "out" / s["file"])]
    assert val == [b"doc 999", b"doc 1999"]  # file 1 row 299 and file 2 row 599
    assert [s["first_document"] for s in meta["sources"]] == [0, 700, 1400]


def test_same_file_twice_and_empty_documents_and_files(tmp_path):
    a = write_parquet(tmp_path / "a.parquet", ["", "x", "", "ü" * 10, ""])
    e = write_parquet(tmp_path / "e.parquet", [])
    docs = source_docs(a) * 2
    meta = encode_and_check([a, e, a], tmp_path / "out", docs, shard_bytes=4, val_every=3)
    assert [s["first_document"] for s in meta["sources"]] == [0, 5, 5]


def test_empty_input_writes_only_meta(tmp_path):
    e = write_parquet(tmp_path / "e.parquet", [])
    meta = encode_and_check([e], tmp_path / "out", [], shard_bytes=10, val_every=2)
    # no shard: only the manifest and the dataset card (docs/card.md)
    assert meta["documents"] == 0 and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["README.md", "meta.json"]


def test_bytes_254_255_are_stripped_and_counted(tmp_path):
    raw = [b"ok", b"\xfe\xfe", b"a\xffb\xfec", b"", b"\xff", b"caf\xc3\xa9"]
    binary = write_parquet(tmp_path / "bin.parquet", raw, pa.binary())
    meta = encode_and_check([binary], tmp_path / "b", raw, shard_bytes=3, val_every=4)
    assert meta["stripped_bytes"] == 5 and meta["documents_with_stripped_bytes"] == 3
    assert meta["sources"][0]["column_type"] == "binary"
    # a string column that is not valid UTF-8 (parquet does not check) is treated the same way
    bad = pa.array(raw, type=pa.large_binary()).view(pa.large_string())
    path = tmp_path / "badstr.parquet"
    pq.write_table(pa.table({"text": bad}), path)
    meta = encode_and_check([path], tmp_path / "s", raw, shard_bytes=3, val_every=4)
    assert meta["stripped_bytes"] == 5


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(st.binary(max_size=40), max_size=60),
    shard_bytes=st.integers(1, 120),
    val_every=st.integers(0, 7),
    batch_bytes=st.integers(1, 200),
    binary=st.booleans(),
)
def test_fuzz_against_reference(tmp_path_factory, docs, shard_bytes, val_every, batch_bytes, binary):
    tmp = tmp_path_factory.mktemp("fuzz")
    if binary:
        path = write_parquet(tmp / "in.parquet", docs, pa.binary(), row_group_size=17)
    else:
        docs = [d.decode("utf-8", "replace").encode() for d in docs]
        path = write_parquet(tmp / "in.parquet", [d.decode() for d in docs], row_group_size=17)
    meta = encode_bytes([path], tmp / "out", shard_bytes=shard_bytes, val_every=val_every, batch_bytes=batch_bytes, quiet=True)
    assert read_out(tmp / "out") == reference_shards(docs, shard_bytes, val_every)
    check_meta(meta, tmp / "out", docs, val_every, shard_bytes)
    assert verify_output(tmp / "out", [path])["ok"]


def _outputs_for_batch_sizes(tmp_path, source, shard_bytes, batch_sizes):
    outs = []
    for batch_bytes in batch_sizes:
        out = tmp_path / f"b{batch_bytes}"
        encode_bytes([source], out, shard_bytes=shard_bytes, val_every=7, batch_bytes=batch_bytes, quiet=True)
        outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert len(outs[0]) > 3  # several shards per split, and meta.json
    return outs


def test_output_identical_for_any_batch_size_fixture(tmp_path):
    outs = _outputs_for_batch_sizes(tmp_path, FIXTURE, 5000, (1, 100, 4096, 70_000, 64 << 20))
    assert all(o == outs[0] for o in outs[1:])


@needs_shared
def test_output_identical_for_any_batch_size_shared(tmp_path):
    outs = _outputs_for_batch_sizes(tmp_path, DOCS, 2_000_000, (300_000, 1 << 20, 64 << 20))
    assert all(o == outs[0] for o in outs[1:])


@needs_shared
def test_memory_stays_bounded(tmp_path):
    """Python/numpy allocations stay near the batch size, far below the 97 MB output shard."""
    # Compile (or load) the kernels first: Numba's compiler allocates tens of MB of Python
    # objects on a cold cache, which is not the recipe's memory.
    encode_bytes([FIXTURE], tmp_path / "warm", quiet=True)
    tracemalloc.start()
    try:
        encode_bytes([DOCS], tmp_path / "out", batch_bytes=1 << 20, quiet=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / "out" / "train_00000.bin").stat().st_size > 90_000_000
    assert peak < 24 << 20, peak


# ---------------------------------------------------------------------------------------------
# Invalid input, atomicity, reruns
# ---------------------------------------------------------------------------------------------


def _final_names(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir()) if out.exists() else []


@pytest.mark.parametrize(
    "table, column, pattern",
    [
        (pa.table({"body": ["a"]}), "text", r"no column 'text'; its columns are \['body'\].*--column"),
        (pa.table({"text": [1, 2]}), "text", r"column 'text' has type int64"),
        (pa.table({"text": ["a", None, "b"]}), "text", r"null at row 1 "),
    ],
)
def test_invalid_input_clear_error_nothing_written(tmp_path, table, column, pattern):
    p = tmp_path / "bad.parquet"
    pq.write_table(table, p)
    with pytest.raises(InputError, match=pattern):
        encode_bytes([p], tmp_path / "out", column=column, quiet=True)
    assert _final_names(tmp_path / "out") == []


def test_error_late_in_stream_leaves_no_file(tmp_path):
    good = write_parquet(tmp_path / "good.parquet", ["x" * 100] * 50)
    # no statistics: the null is found only while streaming, after shards were started
    bad = write_parquet(tmp_path / "bad.parquet", ["y"] * 10 + [None], write_statistics=False)
    with pytest.raises(InputError, match=r"bad.parquet: column 'text' has a null at row 10 "):
        encode_bytes([good, bad], tmp_path / "out", shard_bytes=500, quiet=True)
    assert _final_names(tmp_path / "out") == []


def test_rerun_policy(tmp_path):
    docs = source_docs(FIXTURE)
    out = tmp_path / "out"
    encode_bytes([FIXTURE], out, shard_bytes=3000, quiet=True)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    # the very same request: already complete, nothing rewritten
    encode_bytes([FIXTURE], out, shard_bytes=3000, quiet=True)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    # another request into a non-empty directory: refused, untouched
    with pytest.raises(InputError, match="not empty.*--overwrite"):
        encode_bytes([FIXTURE], out, shard_bytes=30_000, quiet=True)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    # --overwrite: replaced, the extra old shards are gone, a foreign file is kept
    (out / "NOTES.txt").write_text("mine")
    encode_bytes([FIXTURE], out, shard_bytes=30_000, overwrite=True, quiet=True)
    assert read_out(out) == reference_shards(docs, 30_000, 1000)
    assert (out / "NOTES.txt").read_text() == "mine"
    assert verify_dir(out)["ok"]


def test_progress_and_summary_on_stderr_unless_quiet(tmp_path, capsys):
    encode_bytes(str(FIXTURE), tmp_path / "a", shard_bytes=3000)  # a single path is accepted too
    cap = capsys.readouterr()
    assert cap.out == ""
    last = cap.err.strip().splitlines()[-1]
    assert last.startswith("fastenc bytes: 44 documents") and "train 44 docs in" in last and "bytes 254/255 stripped" in last
    assert "bytes: 100%" in cap.err and "kB" in cap.err  # the tqdm bar, counting bytes in decimal units
    encode_bytes([FIXTURE], tmp_path / "b", quiet=True)
    assert capsys.readouterr() == ("", "")


def test_bad_options(tmp_path):
    with pytest.raises(InputError, match="shard-bytes"):
        encode_bytes([FIXTURE], tmp_path / "o", shard_bytes=0)
    with pytest.raises(InputError, match="val-every"):
        encode_bytes([FIXTURE], tmp_path / "o", val_every=-1)
    assert parse_size("500MB") == 500_000_000 and parse_size("64MiB") == 64 << 20 and parse_size("123") == 123
    with pytest.raises(ValueError):
        parse_size("12 parsecs")


# ---------------------------------------------------------------------------------------------
# verify finds what is wrong
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def good_out(tmp_path) -> Path:
    out = tmp_path / "out"
    encode_bytes([FIXTURE], out, shard_bytes=3000, val_every=5, quiet=True)
    return out


def _problems(out: Path, source=None) -> str:
    report = verify_dir(out, source)
    assert not report["ok"]
    return "\n".join(report["problems"])


def test_verify_flipped_byte(good_out):
    p = good_out / "train_00003.bin"
    data = bytearray(p.read_bytes())
    data[10] = (data[10] + 1) % 254
    p.write_bytes(bytes(data))
    assert "train_00003.bin: xxh3_64" in _problems(good_out)


def test_verify_truncated_and_missing_and_extra(good_out):
    p = good_out / "val_00001.bin"
    p.write_bytes(p.read_bytes()[:-1])
    (good_out / "train_00002.bin").unlink()
    (good_out / "train_99999.bin").write_bytes(b"\xfe")
    text = _problems(good_out)
    assert "val_00001.bin: " in text and "bytes on disk" in text
    assert "train_00002.bin is listed in meta.json but missing" in text
    assert "train_99999.bin is on disk but not in meta.json" in text


def test_verify_separator_and_reserved(good_out):
    p = good_out / "train_00000.bin"
    data = bytearray(p.read_bytes())
    data[0] = ord("x")
    data[5] = 255
    p.write_bytes(bytes(data))
    text = _problems(good_out)
    assert "does not start with byte 254" in text and "byte 255 occurs 1 times" in text and "separators" in text


def test_verify_counts_in_meta(good_out):
    meta = json.loads((good_out / "meta.json").read_text())
    meta["splits"]["val"]["documents"] += 1
    meta["splits"]["train"]["shards"][1]["first_document"] += 1
    (good_out / "meta.json").write_text(json.dumps(meta))
    text = _problems(good_out)
    assert "val: meta.json says" in text and "train_00001.bin: first_document" in text


def test_verify_shard_rule(tmp_path):
    out = tmp_path / "out"
    encode_bytes([FIXTURE], out, shard_bytes=3000, val_every=0, quiet=True)
    meta = json.loads((out / "meta.json").read_text())
    meta["shard_bytes"] = 10**9  # now every shard boundary is one that the rule would not make
    (out / "meta.json").write_text(json.dumps(meta))
    assert "would have fitted" in _problems(out)


def test_verify_against_other_source(good_out, tmp_path):
    docs = [d.decode() for d in source_docs(FIXTURE)]
    docs[7] = docs[7][:-1] + "#"
    other = write_parquet(tmp_path / "other.parquet", docs)
    assert verify_dir(good_out, [FIXTURE])["ok"]
    assert "content differs from the source" in _problems(good_out, [other])


def test_verify_malformed_meta(good_out):
    meta = json.loads((good_out / "meta.json").read_text())
    meta["splits"]["train"]["shards"][0]["file"] = "../../elsewhere.bin"
    del meta["splits"]["val"]["shards"][0]["bytes"]
    (good_out / "meta.json").write_text(json.dumps(meta))
    text = _problems(good_out)
    assert "train shard 0 is named '../../elsewhere.bin'" in text and "meta.json is malformed (KeyError" in text


def test_verify_unknown_directory(tmp_path):
    with pytest.raises(InputError, match="does not look like fastenc output"):
        verify_dir(tmp_path)


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


@settings(max_examples=examples(200), deadline=None)
@given(docs=st.lists(st.binary(max_size=30), max_size=20), strip=st.booleans())
def test_pack_kernel_against_reference(docs, strip):
    data = np.frombuffer(b"".join(docs), np.uint8)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    out = np.full(data.size + len(docs), 7, np.uint8)
    n = pack_documents(data, offsets, np.uint8(254), np.int64(254 if strip else 256), out)
    keep = (lambda d: bytes(b for b in d if b < 254)) if strip else (lambda d: d)
    assert out[:n].tobytes() == b"".join(b"\xfe" + keep(d) for d in docs)
    counts = np.zeros(len(docs), np.int64)
    total = count_high_bytes(data, offsets, np.uint8(254), counts)
    assert counts.tolist() == [sum(b >= 254 for b in d) for d in docs] and total == counts.sum()


def test_kernels_refuse_bad_arguments():
    data = np.frombuffer(b"abcdef", np.uint8)
    out = np.empty(100, np.uint8)
    for bad in ([0, 7], [3, 2], [-1, 2]):
        assert pack_documents(data, np.array(bad, np.int64), np.uint8(254), np.int64(256), out) == -1
        assert count_high_bytes(data, np.array(bad, np.int64), np.uint8(254), np.empty(1, np.int64)) == -1
    assert pack_documents(data, np.array([0, 6], np.int64), np.uint8(254), np.int64(256), np.empty(6, np.uint8)) == -1
    assert pack_documents(data, np.array([0, 6], np.int64), np.uint8(254), np.int64(256), np.empty(7, np.uint8)) == 7
    assert count_high_bytes(data, np.array([0, 3, 6], np.int64), np.uint8(254), np.empty(1, np.int64)) == -1


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "fastenc", *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd)


def test_cli_round_trip_and_verify(tmp_path):
    out = tmp_path / "out"
    r = _cli("bytes", FIXTURE, "-o", out, "--shard-bytes", "3kB", "--val-every", "5")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert "fastenc bytes: 44 documents" in r.stderr.splitlines()[-1]
    assert read_out(out) == reference_shards(source_docs(FIXTURE), 3000, 5)
    r = _cli("verify", out, "--source", FIXTURE)
    assert r.returncode == 0 and "OK" in r.stderr, r.stderr
    (out / "val_00000.bin").write_bytes(b"\xfe")
    r = _cli("verify", out)
    assert r.returncode == 1 and "FAILED" in r.stderr and "val_00000.bin" in r.stderr


def test_cli_quiet_and_errors(tmp_path):
    out = tmp_path / "out"
    r = _cli("bytes", FIXTURE, "-o", out, "--quiet")
    assert r.returncode == 0 and r.stderr == "" and r.stdout == ""
    r = _cli("verify", out, "--quiet")
    assert r.returncode == 0 and r.stderr == ""
    bad = tmp_path / "ints.parquet"
    pq.write_table(pa.table({"text": [1, 2, 3]}), bad)
    r = _cli("bytes", bad, "-o", tmp_path / "o2")
    assert r.returncode == 1 and "has type int64" in r.stderr and "Traceback" not in r.stderr
    assert _final_names(tmp_path / "o2") == []
    r = _cli("bytes", FIXTURE, "-o", tmp_path / "o3", "--column", "nope")
    assert r.returncode == 1 and "no column 'nope'" in r.stderr and "--column" in r.stderr


def test_every_shard_is_read_back_after_it_is_written(tmp_path):
    """Issue 10, item 7: the bytes recipe re-reads what it wrote. A shard changed on disk between
    its write and its read-back (here: through the fault hook, as its write-back starts) fails the run."""
    from fastenc.errors import VerificationError
    from fastenc.run import faults

    def scribble(op, path):
        if op == faults.WRITE_BACK and path.name == "train_00001.bin":
            with open(path, "r+b") as f:
                f.write(b"\x00")

    with faults.inject(scribble), pytest.raises(VerificationError, match="train_00001.bin: the file read back differs"):
        encode_bytes([FIXTURE], tmp_path / "o", shard_bytes=3000, quiet=True)
    # nothing under a final name; the verified spills stay in the work folder for a rerun (docs/scale.md)
    assert [p.name for p in tmp_path.iterdir()] == ["o.fastenc-work"]
