"""The GPT-2 long-context recipe: tiktoken parity of every document, bucket membership and order,
part rule, sidecars and their counters, determinism, errors, reruns, verify, CLI."""
from __future__ import annotations

import json
import os
import shutil
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

from fastenc.cli import main as cli_main
from fastenc.errors import InputError, VerificationError
from fastenc.recipes.gpt2 import BUCKETS, encode_gpt2, verify_output
from fastenc.verify import verify_dir

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DOCS = SHARED / "text" / "docs.parquet"
FIXTURE = REPO / "tests" / "data" / "docs_fixture.parquet"
_skip_without_shared = pytest.mark.skipif(not DOCS.exists(), reason="shared corpus ../shared/data not present (fresh clone)")


def needs_shared(test):
    """A test over the full shared corpus: slow (README's test command leaves it out, .ci/run runs it),
    and skipped in a clone without ../shared/data."""
    return pytest.mark.slow(_skip_without_shared(test))

# the card's bucket names and half-open ranges, spelled out independently of the implementation
RANGES = [(1, 4096), (4096, 8192), (8192, 16384), (16384, 32768), (32768, 65536), (65536, 131072), (131072, 1 << 62)]
assert [r[0] for r in RANGES[1:]] == [4096, 8192, 16384, 32768, 65536, 131072]


def expected_bucket(n: int) -> int | None:
    for b, (lo, hi) in enumerate(RANGES):
        if lo <= n < hi:
            return b
    return None  # empty document


# ---------------------------------------------------------------------------------------------
# A slow, obvious reference of the layout, and the card's reading code
# ---------------------------------------------------------------------------------------------


def reference_layout(docs: list[np.ndarray], kept: list[int], part_tokens: int) -> dict[str, list[list[np.ndarray]]]:
    """{bucket name: [part: [document ids, ...], ...]} that the recipe must write, document by document."""
    out: dict[str, list[list[np.ndarray]]] = {BUCKETS[b]: [] for b in kept}
    fill = {b: 0 for b in kept}
    for ids in docs:
        b = expected_bucket(len(ids))
        if b is None or b not in kept:
            continue
        parts = out[BUCKETS[b]]
        if not parts or (parts[-1] and fill[b] + len(ids) > part_tokens):
            parts.append([])
            fill[b] = 0
        parts[-1].append(ids)
        fill[b] += len(ids)
    return out


def read_part(stem: Path) -> list[np.ndarray]:
    """The card's usage code: np.load of the idx, np.memmap of the bin."""
    idx = np.load(str(stem) + ".idx.npy")
    tok = np.memmap(str(stem) + ".bin", dtype=np.uint16, mode="r")
    assert idx.dtype == np.int64 and idx[0] == 0 and idx[-1] == len(tok)
    return [np.array(tok[idx[i] : idx[i + 1]]) for i in range(len(idx) - 1)]


def read_layout(out: Path) -> dict[str, list[list[np.ndarray]]]:
    got = {}
    for name in BUCKETS:
        d = out / name
        if not d.is_dir():
            continue
        stems = sorted({p.name.split(".")[0] for p in d.iterdir()}, key=lambda s: int(s.split("_")[1]))
        assert stems == [f"part_{k:02d}" for k in range(len(stems))]
        for s in stems:
            assert sorted(p.name for p in d.glob(s + ".*")) == [s + ".bin", s + ".idx.npy", s + ".meta.json"]
        got[name] = [read_part(d / s) for s in stems]
    return got


def assert_layout_equal(got, want) -> None:
    assert {k: len(v) for k, v in got.items() if v} == {k: len(v) for k, v in want.items() if v}
    for name, parts in want.items():
        for k, docs in enumerate(parts):
            g = got[name][k]
            assert len(g) == len(docs), (name, k)
            for i, (a, b) in enumerate(zip(g, docs)):
                assert np.array_equal(a, b), f"{name} part {k} document {i} differs"


def tiktoken_ids(enc, texts: list[str]) -> list[np.ndarray]:
    return [np.array(x, dtype=np.uint16) for x in enc.encode_ordinary_batch(texts, num_threads=2)]


def tree_bytes(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def write_docs(path: Path, texts, counts=None, **kw) -> Path:
    cols = {"text": pa.array(texts, type=pa.string())}
    if counts is not None:
        cols["gpt2_tokens"] = pa.array(counts, type=pa.int64())
    pq.write_table(pa.table(cols), path, **kw)
    return path


def a_doc(n: int) -> str:
    """A text of exactly n GPT-2 tokens ('a' then ' a' n-1 times)."""
    return "" if n == 0 else "a" + " a" * (n - 1)


def all_files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")) if out.exists() else []


# ---------------------------------------------------------------------------------------------
# The shared corpus: every document against tiktoken, in its bucket, in order
# ---------------------------------------------------------------------------------------------

SHARED_PART_TOKENS = 3_000_000  # b0 (5.95 M tokens) and b6 (7.66 M, documents up to 621 k) roll over


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    if not DOCS.exists():
        pytest.skip("shared corpus ../shared/data not present (fresh clone)")
    out = tmp_path_factory.mktemp("gpt2") / "out"
    summary = encode_gpt2([DOCS], out, part_tokens=SHARED_PART_TOKENS, decode_every=50, quiet=True)
    return out, summary


@needs_shared
def test_shared_every_document_equals_tiktoken_in_its_bucket_in_order(shared_run, tiktoken_gpt2):
    out, summary = shared_run
    readers = {name: iter([d for part in parts for d in part]) for name, parts in read_layout(out).items()}
    lengths: dict[int, list[int]] = {b: [] for b in range(7)}
    pf = pq.ParquetFile(DOCS)
    n = 0
    for rg in range(pf.metadata.num_row_groups):
        t = pf.read_row_group(rg, columns=["text", "gpt2_tokens"])
        texts, counts = t.column("text").to_pylist(), t.column("gpt2_tokens").to_pylist()
        for start in range(0, len(texts), 64):  # small tiktoken batches: bounded memory
            for text, count, ids in zip(texts[start : start + 64], counts[start : start + 64],
                                        tiktoken_ids(tiktoken_gpt2, texts[start : start + 64])):
                assert len(ids) == count  # the corpus's own column agrees with the oracle
                b = expected_bucket(len(ids))
                got = next(readers[BUCKETS[b]], None)
                assert got is not None and np.array_equal(got, ids), f"document {n} ({BUCKETS[b]}) differs from tiktoken"
                lengths[b].append(len(ids))
                n += 1
    assert n == 6626
    for name, rest in readers.items():
        assert next(rest, None) is None, f"{name} holds more documents than the source gives it"
    # every bucket is populated (the corpus was chosen so) and the summary's counts are exact
    for b, name in enumerate(BUCKETS):
        assert lengths[b], name
        assert summary["buckets"][name]["docs"] == len(lengths[b])
        assert summary["buckets"][name]["tokens"] == sum(lengths[b])
    assert summary["total"] == {"docs": 6626, "tokens": sum(map(sum, lengths.values()))}
    assert summary["checks"]["count_checked"] == 6626 and summary["checks"]["count_mismatches"] == 0
    # the part rule, from the lengths alone
    for b, name in enumerate(BUCKETS):
        fills, cur = [], None
        for L in lengths[b]:
            if cur is None or (cur and cur + L > SHARED_PART_TOKENS):
                fills.append(0)
                cur = 0
            cur += L
            fills[-1] = cur
        assert [p["tokens"] for p in summary["buckets"][name]["parts"]] == fills
    assert len(summary["buckets"]["b6_gte_131072"]["parts"]) >= 3 and len(summary["buckets"]["b0_lt_4096"]["parts"]) >= 2


@needs_shared
def test_shared_sidecars_and_verify_with_source(shared_run):
    out, summary = shared_run
    assert json.loads((out / "summary.json").read_text()) == summary
    tsv = (out / "summary.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[:3] == ["bucket", "docs", "tokens"]
    assert tsv[-1].split("\t")[:3] == ["total", "6626", str(summary["total"]["tokens"])]
    n_round = 0
    for name in BUCKETS:
        for k, part in enumerate(summary["buckets"][name]["parts"]):
            meta = json.loads((out / name / f"part_{k:02d}.meta.json").read_text())
            c = meta["checks"]
            assert meta["bucket"] == name and meta["docs"] == part["docs"] and meta["tokens"] == part["tokens"]
            assert meta["tokenizer_sha256"] == summary["tokenizer_sha256"] and len(meta["tokenizer_sha256"]) == 64
            assert meta["fastenc_version"] and Path(meta["sources"][0]["path"]).resolve() == DOCS.resolve()
            assert c["len_bin_eq_idx_last"] and c["idx0_eq_0"] and c["idx_strictly_increasing"] and c["max_token_id_lt_vocab"]
            assert c["count_checked"] == meta["docs"] and c["count_mismatches"] == 0
            assert c["roundtrip_mismatches"] == 0 and c["roundtrip_checked"] == len(meta["roundtrip_samples"])
            # the sample: every 50th document of each bucket, counted within its input file (one here)
            assert all((meta["first_bucket_doc"] + doc) % 50 == 0 for doc, _, _ in meta["roundtrip_samples"])
            n_round += c["roundtrip_checked"]
    assert n_round == summary["checks"]["roundtrip_checked"] >= 6626 // 50
    report = verify_dir(out, [DOCS])
    assert report["ok"], report["problems"]
    assert report["count_order_checked"] == 6626 and report["roundtrip_checked"] == n_round
    assert report["documents"] == 6626 and report["parts"] == sum(len(summary["buckets"][n]["parts"]) for n in BUCKETS)


@needs_shared
def test_shared_output_identical_for_one_thread_and_small_batches(shared_run, tmp_path):
    out, _ = shared_run
    other = tmp_path / "out"
    encode_gpt2([DOCS], other, part_tokens=SHARED_PART_TOKENS, decode_every=50, threads=1, batch_bytes=3 << 20, quiet=True)
    assert tree_bytes(other) == tree_bytes(out)


# ---------------------------------------------------------------------------------------------
# The committed fixture and synthetic inputs
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_ids(tiktoken_gpt2):
    texts = pq.read_table(FIXTURE, columns=["text"]).column(0).to_pylist()
    return tiktoken_ids(tiktoken_gpt2, texts)


@pytest.mark.parametrize(
    "part_tokens, buckets, kept",
    [
        (1 << 28, None, list(range(7))),
        (1, None, list(range(7))),  # every document a part of its own
        (20_000, "b1,b2,b3", [1, 2, 3]),  # the published dataset's buckets
        (100_000, "b0_lt_4096,b5", [0, 5]),
    ],
)
def test_fixture_layout_equals_reference(tmp_path, fixture_ids, part_tokens, buckets, kept):
    out = tmp_path / "out"
    summary = encode_gpt2([FIXTURE], out, part_tokens=part_tokens, buckets=buckets, decode_every=3, quiet=True)
    want = reference_layout(fixture_ids, kept, part_tokens)
    assert_layout_equal(read_layout(out), want)
    assert summary["kept_buckets"] == [BUCKETS[b] for b in kept]
    for b, name in enumerate(BUCKETS):
        mine = [d for d in fixture_ids if expected_bucket(len(d)) == b]
        info = summary["buckets"][name]
        assert (info["docs"], info["tokens"], info["kept"]) == (len(mine), sum(map(len, mine)), b in kept)
        assert (out / name).is_dir() == (b in kept and bool(mine))
    assert summary["total"]["docs"] == 150 and summary["kept"]["docs"] == sum(len(d) for p in want.values() for d in p)
    # the round-trip sample: every 3rd document of each bucket (counted within the input file),
    # recorded with the source row it came from
    rows_of = {b: [i for i, d in enumerate(fixture_ids) if expected_bucket(len(d)) == b] for b in kept}
    for b in kept:
        name, seen, firsts = BUCKETS[b], set(), set()
        for k, part in enumerate(want[name]):
            meta = json.loads((out / name / f"part_{k:02d}.meta.json").read_text())
            firsts.add(meta["first_bucket_doc"])
            for doc, src, row in meta["roundtrip_samples"]:
                ordinal = meta["first_bucket_doc"] + doc
                assert src == 0 and row == rows_of[b][ordinal]
                seen.add(ordinal)
        assert seen == {o for o in range(len(rows_of[b])) if o % 3 == 0}
    report = verify_output(out, [FIXTURE])
    assert report["ok"], report["problems"]


def test_part_rule_exact_fit(tmp_path):
    sizes = [4, 6, 5, 6, 10, 11, 1, 9, 3]
    src = write_docs(tmp_path / "p.parquet", [a_doc(n) for n in sizes])
    out = tmp_path / "out"
    encode_gpt2([src], out, part_tokens=10, quiet=True)
    got = [[len(d) for d in part] for part in read_layout(out)["b0_lt_4096"]]
    assert got == [[4, 6], [5], [6], [10], [11], [1, 9], [3]]
    assert verify_output(out, [src])["ok"]


def test_fixture_output_identical_for_threads_and_batch_sizes(tmp_path):
    outs = []
    for threads, batch_bytes in [(1, 64 << 20), (2, 1), (2, 50_000), (1, 300_000)]:
        out = tmp_path / f"out-{threads}-{batch_bytes}"
        encode_gpt2([FIXTURE], out, part_tokens=30_000, threads=threads, batch_bytes=batch_bytes, decode_every=4, quiet=True)
        outs.append(tree_bytes(out))
    assert len(outs[0]) > 20 and all(o == outs[0] for o in outs[1:])


def test_idx_is_exactly_what_np_save_writes(tmp_path):
    out = tmp_path / "out"
    encode_gpt2([FIXTURE], out, part_tokens=50_000, quiet=True)
    stems = sorted(out.glob("*/part_*.idx.npy"))
    assert len(stems) > 5
    for p in stems:
        a = np.load(p)
        np.save(tmp_path / "ref.npy", a)
        assert p.read_bytes() == (tmp_path / "ref.npy").read_bytes()


def test_bucket_edges_are_half_open(tmp_path, tiktoken_gpt2):
    sizes = [4095, 4096, 8191, 8192, 16383, 16384, 32767, 32768, 65535, 65536, 131071, 131072, 1, 0]
    texts = [a_doc(n) for n in sizes]
    ids = tiktoken_ids(tiktoken_gpt2, texts)
    assert [len(x) for x in ids] == sizes  # the construction gives exactly n tokens
    src = write_docs(tmp_path / "edges.parquet", texts, sizes)
    out = tmp_path / "out"
    summary = encode_gpt2([src], out, quiet=True)
    layout = read_layout(out)
    got = {name: [len(d) for p in parts for d in p] for name, parts in layout.items()}
    assert got == {
        "b0_lt_4096": [4095, 1],
        "b1_4096_8192": [4096, 8191],
        "b2_8192_16384": [8192, 16383],
        "b3_16384_32768": [16384, 32767],
        "b4_32768_65536": [32768, 65535],
        "b5_65536_131072": [65536, 131071],
        "b6_gte_131072": [131072],
    }
    assert summary["empty_documents_skipped"] == 1 and summary["documents_read"] == 14
    assert verify_output(out, [src])["ok"]


def test_empty_documents_endoftext_and_content_column(tmp_path, tiktoken_gpt2):
    content = ["", "hi<|endoftext|>there", "", "  \n\n", "<|endoftext|>", "naïve café 日本語 🙂", ""]
    decoy = ["decoy text"] * len(content)  # 'content' wins over 'text'
    counts = [len(tiktoken_gpt2.encode_ordinary(t)) for t in content]
    src = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": decoy, "content": content, "gpt2_tokens": counts}), src)
    out = tmp_path / "out"
    summary = encode_gpt2([src], out, decode_every=1, quiet=True)
    docs = read_layout(out)["b0_lt_4096"][0]
    want = [np.array(tiktoken_gpt2.encode_ordinary(t), np.uint16) for t in content if t]
    assert len(docs) == len(want) and all(np.array_equal(a, b) for a, b in zip(docs, want))
    assert all(50256 not in d for d in docs)  # <|endoftext|> is ordinary text
    assert summary["empty_documents_skipped"] == 3 and summary["buckets"]["b0_lt_4096"]["docs"] == 4
    assert summary["sources"][0]["column"] == "content" and summary["checks"]["roundtrip_checked"] == 4
    assert verify_output(out, [src])["ok"]
    # --column chooses explicitly
    summary = encode_gpt2([src], tmp_path / "o2", column="text", count_column=None, quiet=True)
    assert summary["buckets"]["b0_lt_4096"]["docs"] == len(content) and summary["checks"]["count_checked"] == 0


def test_several_inputs_keep_their_order_and_sources(tmp_path, tiktoken_gpt2):
    a = write_docs(tmp_path / "a.parquet", [a_doc(5000), "x", a_doc(4100)], row_group_size=2)
    e = write_docs(tmp_path / "e.parquet", [])
    b = write_docs(tmp_path / "b.parquet", [a_doc(4097), "y y"])
    out = tmp_path / "out"
    summary = encode_gpt2([a, e, b, a], out, buckets="b0,b1", part_tokens=9000, quiet=True)
    got = {n: [[len(d) for d in p] for p in parts] for n, parts in read_layout(out).items()}
    assert got == {"b0_lt_4096": [[1, 2, 1]], "b1_4096_8192": [[5000], [4100, 4097], [5000], [4100]]}
    metas = [json.loads((out / "b1_4096_8192" / f"part_{k:02d}.meta.json").read_text()) for k in range(4)]
    assert [[(s["source"], s["docs"]) for s in m["sources"]] for m in metas] == [[(0, 1)], [(0, 1), (2, 1)], [(3, 1)], [(3, 1)]]
    assert [s["rows"] for s in summary["sources"]] == [3, 0, 2, 3]
    assert verify_output(out, [a, e, b, a])["ok"]
    assert not verify_output(out, [a, b, a])["ok"]  # not the same inputs


def _doc_strategy():
    edge = st.sampled_from([4095, 4096, 4097, 8191, 8192, 16384, 32767])
    return st.one_of(st.text(max_size=12), st.integers(0, 40).map(a_doc), edge.map(a_doc))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    texts=st.lists(_doc_strategy(), max_size=14),
    part_tokens=st.integers(1, 20_000),
    kept=st.sets(st.integers(0, 6), min_size=1),
    batch_bytes=st.integers(1, 40_000),
    threads=st.sampled_from([1, 2]),
)
def test_fuzz_against_reference(tmp_path_factory, tiktoken_gpt2, texts, part_tokens, kept, batch_bytes, threads):
    d = tmp_path_factory.mktemp("fz")
    ids = tiktoken_ids(tiktoken_gpt2, texts)
    src = write_docs(d / "in.parquet", texts, [len(x) for x in ids], row_group_size=5)
    kept = sorted(kept)
    summary = encode_gpt2([src], d / "out", part_tokens=part_tokens, buckets=[BUCKETS[b] for b in kept],
                          batch_bytes=batch_bytes, threads=threads, decode_every=2, quiet=True)
    assert_layout_equal(read_layout(d / "out"), reference_layout(ids, kept, part_tokens))
    assert summary["empty_documents_skipped"] == sum(1 for x in ids if len(x) == 0)
    report = verify_output(d / "out", [src])
    assert report["ok"], report["problems"]


def test_memory_does_not_grow_with_the_input(tmp_path):
    peaks = []
    for copies in (1, 6):
        tracemalloc.start()
        try:
            encode_gpt2([FIXTURE] * copies, tmp_path / f"out{copies}", batch_bytes=100_000, part_tokens=1 << 20, quiet=True)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    # numpy's buffers are traced: 6x the input must not take more (a little slack for the part lists)
    assert peaks[1] < peaks[0] * 1.25 + (1 << 20), peaks


# ---------------------------------------------------------------------------------------------
# Failures: mismatches, invalid input; nothing left under a final name
# ---------------------------------------------------------------------------------------------


def _cli(argv, capsys) -> tuple[int, str]:
    rc = cli_main(argv)
    return rc, capsys.readouterr().err


def test_count_mismatch_fails_naming_the_document(tmp_path, capsys):
    t = pq.read_table(FIXTURE)
    counts = t.column("gpt2_tokens").to_numpy().copy()
    counts[77] += 1
    bad = tmp_path / "bad.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("gpt2_tokens"), "gpt2_tokens", pa.array(counts)), bad, row_group_size=40)
    out = tmp_path / "out"
    rc, err = _cli(["gpt2", str(bad), "-o", str(out), "--part-tokens", "20000", "-q"], capsys)
    assert rc == 1
    doc_id = t.column("id")[77].as_py()
    assert "row 77" in err and str(bad) in err and doc_id in err and "--no-count-check" in err
    assert all_files(out) == []
    # the same input with the check off goes through
    rc, _ = _cli(["gpt2", str(bad), "-o", str(out), "--no-count-check", "-q"], capsys)
    assert rc == 0 and (out / "summary.json").is_file()


def test_roundtrip_mismatch_fails_naming_the_document(tmp_path, monkeypatch):
    from fastenc.encoder import Encoder

    real = Encoder.decode_bytes

    def corrupt(self, ids):
        data = real(self, ids)
        return data[:-1] + b"#" if len(ids) > 5000 else data  # break one long document

    monkeypatch.setattr(Encoder, "decode_bytes", corrupt)
    out = tmp_path / "out"
    with pytest.raises(VerificationError, match=r"round trip failed for .*docs_fixture.parquet row \d+ \(id "):
        encode_gpt2([FIXTURE], out, decode_every=1, quiet=True)
    assert all_files(out) == []



@pytest.mark.parametrize("which, message", [(".bin", "the .bin read back differs from the ids written"),
                                            (".idx.npy", "the .idx.npy read back differs from the offsets written")])
def test_a_part_changed_between_its_write_and_its_read_back_fails_the_run(which, message, tmp_path):
    """Each part is re-read as it closes (after its last write, before its fsync): a part changed on
    disk in between (here: by the fault hook, as its write-back starts) fails the run, and nothing is
    published."""
    from fastenc.run import faults

    def scribble(op, path):
        if op == faults.WRITE_BACK and path.name == f"part_01{which}":
            with open(path, "r+b") as f:
                f.seek(200)  # (past the .idx.npy header, whose rewrite with the final length comes before)
                byte = f.read(1)
                f.seek(200)
                f.write(bytes([byte[0] ^ 1]))

    out = tmp_path / "out"
    with faults.inject(scribble), pytest.raises(VerificationError, match=f"part_01: the part failed its checks after writing: .*{message}"):
        encode_gpt2([FIXTURE], out, part_tokens=20_000, quiet=True)
    assert all_files(out) == []

@pytest.mark.parametrize(
    "table, args, pattern",
    [
        (pa.table({"body": ["x"]}), [], r"none of the columns \['content', 'text'\].*'body'"),
        (pa.table({"text": ["x"]}), ["--column", "nope"], r"no column 'nope'.*\['text'\]"),
        (pa.table({"text": [1, 2]}), [], r"column 'text' has type int64"),
        (pa.table({"text": ["a", None, "b"]}), [], r"column 'text' has a null at row 1"),
        (pa.table({"text": ["a"], "gpt2_tokens": ["1"]}), [], r"'gpt2_tokens' has type string, not an integer"),
        (pa.table({"text": ["a", "b"], "gpt2_tokens": pa.array([1, None], pa.int64())}), [], r"'gpt2_tokens' has a null at row 1"),
    ],
)
def test_invalid_input_clear_error_nothing_written(tmp_path, capsys, table, args, pattern):
    import re

    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out"
    rc, err = _cli(["gpt2", str(src), "-o", str(out), "-q", *args], capsys)
    assert rc == 1 and str(src) in err and re.search(pattern, err), err
    assert all_files(out) == []


def test_null_late_in_the_stream_leaves_nothing(tmp_path, capsys):
    texts = [a_doc(5000 + i) for i in range(30)] + [None] + ["tail"]
    src = tmp_path / "late.parquet"
    # no statistics: the null is found only when its row group is read, after parts were written
    pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), src, row_group_size=8, write_statistics=False)
    out = tmp_path / "out"
    out.mkdir()
    rc, err = _cli(["gpt2", str(src), "-o", str(out), "--part-tokens", "6000", "--batch-bytes", "1000"], capsys)
    assert rc == 1 and "has a null at row 30" in err
    assert all_files(out) == []  # no part, no temporary, no bucket directory (OUT itself was there)


def test_bad_options(tmp_path):
    with pytest.raises(InputError, match="unknown bucket 'b9'"):
        encode_gpt2([FIXTURE], tmp_path / "o", buckets="b1,b9")
    with pytest.raises(InputError, match="part-tokens"):
        encode_gpt2([FIXTURE], tmp_path / "o", part_tokens=0)
    with pytest.raises(InputError, match="decode-every"):
        encode_gpt2([FIXTURE], tmp_path / "o", decode_every=0)
    with pytest.raises(InputError, match="--threads"):
        encode_gpt2([FIXTURE], tmp_path / "o", threads=100000)
    assert all_files(tmp_path / "o") == []


def test_rerun_policy(tmp_path):
    out = tmp_path / "out"
    first = encode_gpt2([FIXTURE], out, part_tokens=20_000, quiet=True)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    again = encode_gpt2([FIXTURE], out, part_tokens=20_000, quiet=True)  # the same request: nothing to do
    assert again == first and {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == stamps
    with pytest.raises(InputError, match="not empty.*--overwrite"):
        encode_gpt2([FIXTURE], out, part_tokens=10**9, quiet=True)
    (out / "NOTES.txt").write_text("mine")
    summary = encode_gpt2([FIXTURE], out, part_tokens=10**9, buckets="b1", overwrite=True, quiet=True)
    assert (out / "NOTES.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["NOTES.txt", "README.md", "b1_4096_8192", "summary.json", "summary.tsv"]
    assert sorted(p.name for p in (out / "b1_4096_8192").iterdir()) == ["part_00.bin", "part_00.idx.npy", "part_00.meta.json"]
    assert summary["buckets"]["b1_4096_8192"]["docs"] == 38
    assert verify_output(out)["ok"]


def test_progress_and_summary_on_stderr_unless_quiet(tmp_path, capsys):
    encode_gpt2([FIXTURE], tmp_path / "a", quiet=False)
    err = capsys.readouterr().err
    assert "gpt2" in err and "150 docs" in err and "MB" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("fastenc gpt2: 150 documents") and "0 mismatches" in last
    encode_gpt2([FIXTURE], tmp_path / "b", quiet=True)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


# ---------------------------------------------------------------------------------------------
# verify catches what it should
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("good") / "out"
    encode_gpt2([FIXTURE], out, part_tokens=40_000, decode_every=5, quiet=True)
    assert verify_output(out, [FIXTURE])["ok"]
    return out


@pytest.fixture
def copy_out(good_out, tmp_path):
    dst = tmp_path / "out"
    shutil.copytree(good_out, dst)
    return dst


def _problems(out, source=None) -> str:
    report = verify_dir(out, source)
    assert not report["ok"]
    return "\n".join(report["problems"])


def test_verify_token_changed(copy_out):
    p = copy_out / "b1_4096_8192" / "part_00.bin"
    a = np.fromfile(p, dtype=np.uint16)
    a[100] = (int(a[100]) + 1) % 50000
    a.tofile(p)
    assert "xxh3" in _problems(copy_out)


def test_verify_token_out_of_vocab(copy_out):
    p = copy_out / "b0_lt_4096" / "part_01.bin"
    a = np.fromfile(p, dtype=np.uint16)
    a[3] = 60000
    a.tofile(p)
    assert "max token id is 60000" in _problems(copy_out)


def test_verify_truncated_bin_and_bad_idx(copy_out):
    p = copy_out / "b1_4096_8192" / "part_01.bin"
    p.write_bytes(p.read_bytes()[:-2])
    q = copy_out / "b0_lt_4096" / "part_00.idx.npy"
    idx = np.load(q)
    idx[[2, 3]] = idx[[3, 2]]
    np.save(q, idx)
    z = copy_out / "b2_8192_16384" / "part_00.idx.npy"
    idx = np.load(z)
    np.save(z, idx[1:])  # idx[0] != 0
    text = _problems(copy_out)
    assert "len(bin) is" in text and "not strictly increasing" in text and "idx[0] is" in text


def test_verify_missing_extra_and_renamed_parts(copy_out):
    (copy_out / "b0_lt_4096" / "part_01.idx.npy").unlink()
    shutil.copy(copy_out / "b1_4096_8192" / "part_00.bin", copy_out / "b1_4096_8192" / "part_09.bin")
    text = _problems(copy_out)
    assert "missing part_01.idx.npy" in text and "part_09.bin is on disk but not in summary.json" in text


def test_part_check_catches_a_document_in_the_wrong_bucket(good_out):
    from fastenc.recipes.gpt2 import check_part_files

    stem = good_out / "b2_8192_16384" / "part_00"
    bin_path, idx_path = Path(str(stem) + ".bin"), Path(str(stem) + ".idx.npy")
    assert check_part_files(bin_path, idx_path, 2)["problems"] == []
    for b in (1, 3):  # the same files checked as another bucket's
        checks = check_part_files(bin_path, idx_path, b)
        assert checks["outside_range"] == 3 and any("outside the bucket's range" in p for p in checks["problems"])


def test_verify_sidecar_counts(copy_out):
    m = copy_out / "b1_4096_8192" / "part_00.meta.json"
    meta = json.loads(m.read_text())
    meta["docs"] += 1
    m.write_text(json.dumps(meta))
    s = copy_out / "summary.json"
    summary = json.loads(s.read_text())
    summary["total"]["tokens"] += 5
    s.write_text(json.dumps(summary))
    text = _problems(copy_out)
    assert "summary.json says" in text and "total" in text


def test_verify_tokenizer_sha(copy_out):
    m = copy_out / "b0_lt_4096" / "part_00.meta.json"
    meta = json.loads(m.read_text())
    meta["tokenizer_sha256"] = "0" * 64
    m.write_text(json.dumps(meta))
    assert "tokenizer sha256 000" in _problems(copy_out)


def test_verify_against_a_different_source(good_out, tmp_path):
    t = pq.read_table(FIXTURE)
    texts = t.column("text").to_pylist()
    meta = json.loads((good_out / "b1_4096_8192" / "part_00.meta.json").read_text())
    _, _, row = meta["roundtrip_samples"][0]
    texts[row] = texts[row][:-1] + ("x" if texts[row][-1] != "x" else "y")
    edited = tmp_path / "edited.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("text"), "text", pa.array(texts)), edited)
    assert f"differs from {edited} row {row}" in _problems(good_out, [edited])
    # two documents swapped: the counts no longer come in the order the buckets hold them
    order = list(range(150))
    b1 = [i for i, n in enumerate(t.column("gpt2_tokens").to_pylist()) if 4096 <= n < 8192]
    order[b1[0]], order[b1[1]] = order[b1[1]], order[b1[0]]
    swapped = tmp_path / "swapped.parquet"
    pq.write_table(t.take(order), swapped)
    assert "do not match the source's token counts in order" in _problems(good_out, [swapped])
    # without a count column the source is encoded again: every document is compared, not a sample
    no_counts = tmp_path / "no_counts.parquet"
    pq.write_table(t.take(order).drop_columns(["gpt2_tokens"]), no_counts)
    assert "do not match the source's token counts in order" in _problems(good_out, [no_counts])
    plain = tmp_path / "plain.parquet"
    pq.write_table(t.drop_columns(["gpt2_tokens"]), plain)
    report = verify_dir(good_out, [plain])
    assert report["ok"] and report["count_order_checked"] == 150 and "encoding it again" in report["source_compared"]


def test_verify_malformed_summary(copy_out):
    (copy_out / "summary.json").write_text("{\"format\": \"fastenc-gpt2\", \"format_version\": 1}")
    assert "malformed" in _problems(copy_out)


# ---------------------------------------------------------------------------------------------
# Command line, in a subprocess
# ---------------------------------------------------------------------------------------------


def test_cli_round_trip_and_verify(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "fastenc", "gpt2", str(FIXTURE), "-o", str(out), "--buckets", "b1,b2,b3",
                        "--part-tokens", "100k", "--threads", "1"], cwd=REPO, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "fastenc gpt2: 150 documents" in r.stderr and "b0 106/166,806 (dropped)" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "b1_4096_8192", "b2_8192_16384", "b3_16384_32768", "summary.json",
                                                     "summary.tsv"]
    r = subprocess.run([sys.executable, "-m", "fastenc", "verify", str(out), "--source", str(FIXTURE)],
                       cwd=REPO, capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "OK" in r.stderr and "fastenc-gpt2" in r.stderr, r.stderr


def test_empty_input_writes_only_the_summaries(tmp_path):
    e = write_docs(tmp_path / "e.parquet", [])
    z = write_docs(tmp_path / "z.parquet", ["", ""])
    out = tmp_path / "out"
    summary = encode_gpt2([e, z], out, quiet=True)
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "summary.json", "summary.tsv"]  # + the dataset card
    assert summary["total"] == {"docs": 0, "tokens": 0} and summary["empty_documents_skipped"] == 2
    assert (out / "summary.tsv").read_text().splitlines()[-1] == "total\t0\t0\t\t0"
    report = verify_output(out, [e, z])
    assert report["ok"] and report["parts"] == 0, report["problems"]


def test_verify_names_the_failed_checks(copy_out):
    """Issue 10, item 7: a meta.json recording a failed check says which one (not "[]")."""
    p = copy_out / "b1_4096_8192" / "part_00.meta.json"
    meta = json.loads(p.read_text())
    meta["checks"]["roundtrip_mismatches"] = 2
    p.write_text(json.dumps(meta))
    problems = _problems(copy_out)
    assert "roundtrip_mismatches is 2" in problems and "[]" not in problems
