"""fastenc.arrow_io: inputs, zero-copy batches, errors, atomic output."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

from fastenc.arrow_io import (
    StringBatch,
    arrow_to_flat,
    inspect_inputs,
    iter_column_chunks,
    iter_string_batches,
    read_column_rows,
    resolve_inputs,
)
from fastenc.errors import InputError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DOCS = SHARED / "text" / "docs.parquet"
_skip_without_shared = pytest.mark.skipif(not DOCS.exists(), reason="shared corpus ../shared/data not present (fresh clone)")


def needs_shared(test):
    """A test over the full shared corpus: slow (README's test command leaves it out, .ci/run runs it),
    and skipped in a clone without ../shared/data."""
    return pytest.mark.slow(_skip_without_shared(test))


def _docs(batches) -> list[bytes]:
    out = []
    for b in batches:
        assert isinstance(b, StringBatch)
        assert b.offsets.dtype == np.int64 and b.data.dtype == np.uint8
        assert b.offsets[0] == 0 and b.offsets[-1] == b.data.size and len(b.offsets) == b.num_rows + 1
        raw = b.data.tobytes()
        out.extend(raw[b.offsets[i] : b.offsets[i + 1]] for i in range(b.num_rows))
    return out


def _write(path: Path, table: pa.Table, **kw) -> Path:
    pq.write_table(table, path, **kw)
    return path


# ---------------------------------------------------------------------------------------------
# resolve_inputs
# ---------------------------------------------------------------------------------------------


def test_resolve_files_dirs_globs_in_order(tmp_path):
    t = pa.table({"text": ["a"]})
    d = tmp_path / "d"
    d.mkdir()
    for name in ["b.parquet", "a.parquet", "c.parquet"]:
        _write(d / name, t)
    (d / "notes.txt").write_text("not parquet")
    single = _write(tmp_path / "z.parquet", t)
    got = resolve_inputs([str(single), str(d), str(d / "[ab].parquet"), str(single)])
    assert got == [single, d / "a.parquet", d / "b.parquet", d / "c.parquet", d / "a.parquet", d / "b.parquet", single]


def test_resolve_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        resolve_inputs([str(tmp_path / "missing.parquet")])
    with pytest.raises(InputError, match="matches no file"):
        resolve_inputs([str(tmp_path / "*.parquet")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no \\*.parquet"):
        resolve_inputs([str(tmp_path / "empty")])
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"id,text\n1,hello\n")
    with pytest.raises(InputError, match="not a parquet file"):
        resolve_inputs([str(fake)])
    with pytest.raises(InputError, match="no input"):
        resolve_inputs([])


# ---------------------------------------------------------------------------------------------
# arrow_to_flat: sliced, chunked, large, view, dictionary
# ---------------------------------------------------------------------------------------------


@settings(max_examples=examples(150), deadline=None)
@given(
    values=st.lists(st.text(max_size=12), max_size=30),
    lo=st.integers(0, 30),
    length=st.integers(0, 30),
    large=st.booleans(),
)
def test_arrow_to_flat_slices(values, lo, length, large):
    arr = pa.array(values, type=pa.large_string() if large else pa.string())
    sl = arr.slice(min(lo, len(values)), length)
    data, offsets = arrow_to_flat(sl)
    expect = [v.encode() for v in sl.to_pylist()]
    assert offsets.dtype == np.int64 and offsets[0] == 0 and len(offsets) == len(expect) + 1
    raw = data.tobytes()
    assert [raw[offsets[i] : offsets[i + 1]] for i in range(len(expect))] == expect
    assert data.size == sum(map(len, expect))


def test_arrow_to_flat_is_zero_copy_and_read_only():
    arr = pa.array(["hello", "wörld", ""]).slice(1)
    data, _ = arrow_to_flat(arr)
    assert not data.flags.writeable
    value_buf = arr.buffers()[2]
    assert data.__array_interface__["data"][0] == value_buf.address + len("hello")


def test_arrow_to_flat_chunked_binary_dictionary_view():
    chunked = pa.chunked_array([pa.array(["a", "bc"]).slice(1), pa.array(["", "déf"])])
    data, off = arrow_to_flat(chunked)
    assert data.tobytes() == "bcdéf".encode() and off.tolist() == [0, 2, 2, 6]
    data, off = arrow_to_flat(pa.array([b"\xfe\x00", b"x"], type=pa.large_binary()))
    assert data.tobytes() == b"\xfe\x00x" and off.tolist() == [0, 2, 3]
    data, off = arrow_to_flat(pa.array(["q", "r", "q"]).dictionary_encode())
    assert data.tobytes() == b"qrq" and off.tolist() == [0, 1, 2, 3]
    data, off = arrow_to_flat(pa.array(["long enough to be out of line", "s"], type=pa.string_view()))
    assert data.tobytes() == b"long enough to be out of lines"
    data, off = arrow_to_flat(pa.chunked_array([], type=pa.string()))
    assert data.size == 0 and off.tolist() == [0]
    with pytest.raises(TypeError):
        arrow_to_flat(pa.array([1, 2]))


# ---------------------------------------------------------------------------------------------
# iter_string_batches
# ---------------------------------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("batch_bytes", [1 << 16, 3 << 20, 64 << 20])
def test_batches_equal_read_table_on_shared_corpus(batch_bytes):
    expect = [s.encode() for s in pq.read_table(DOCS, columns=["text"]).column(0).to_pylist()]
    batches = list(iter_string_batches([DOCS], "text", batch_bytes=batch_bytes))
    assert _docs(batches) == expect
    # first_row counts rows within the file; batches are near the target size on average
    # (the row count is chosen from each row group's mean row size), never bigger than a row group
    rows = 0
    for b in batches:
        assert b.first_row == rows and b.path == DOCS
        rows += b.num_rows
    total = sum(b.data.size for b in batches)
    n_row_groups = pq.ParquetFile(DOCS).metadata.num_row_groups
    assert total / len(batches) <= 2 * batch_bytes or len(batches) == n_row_groups


def test_batches_several_files_row_groups_and_types(tmp_path):
    a = _write(tmp_path / "a.parquet", pa.table({"text": ["x" * i for i in range(50)]}), row_group_size=7)
    b = _write(tmp_path / "b.parquet", pa.table({"text": pa.array(["é", "", "ü" * 3], type=pa.large_string())}))
    c = _write(tmp_path / "c.parquet", pa.table({"text": pa.array([], type=pa.string())}))
    got = _docs(iter_string_batches([a, c, b, a], "text", batch_bytes=100))
    expect = [("x" * i).encode() for i in range(50)]
    assert got == expect + ["é".encode(), b"", "üüü".encode()] + expect


_PEAK_SCRIPT = """
import sys
import pyarrow as pa
from fastenc.arrow_io import iter_string_batches
n = 0
for b in iter_string_batches([sys.argv[1]], "text", batch_bytes=1 << 20):
    n += b.data.size
print(n, pa.default_memory_pool().max_memory())
"""


def test_batches_stream_a_big_row_group_without_holding_its_column(tmp_path):
    # One row group of 48 MB of incompressible text in pages of ~1 MB (the writer checks a page's size
    # every write_batch_size values): a streaming read holds about a batch and a page of it at a time,
    # not the whole column chunk (pyarrow's pre-buffering read all 48 MB before the first batch).
    import subprocess
    import sys

    rng = np.random.default_rng(7)
    docs = [rng.integers(97, 123, 48_000, dtype=np.uint8).tobytes().decode() for _ in range(1000)]
    path = _write(tmp_path / "big.parquet", pa.table({"text": docs}), row_group_size=1000, compression="none",
                  write_batch_size=16)
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(path)], capture_output=True, text=True, check=True)
    total, peak = map(int, out.stdout.split())
    assert total == 48_000_000
    assert peak < 16_000_000, f"pyarrow held {peak / 1e6:.1f} MB at once streaming 1 MB batches of a 48 MB row group"


def test_candidates(tmp_path):
    p1 = _write(tmp_path / "1.parquet", pa.table({"content": ["c1"], "text": ["t1"]}))
    p2 = _write(tmp_path / "2.parquet", pa.table({"text": ["t2"]}))
    assert _docs(iter_string_batches([p1, p2], None, candidates=["content", "text"])) == [b"c1", b"t2"]
    with pytest.raises(InputError, match=r"none of the columns \['content'\].*--column"):
        list(iter_string_batches([p2], None, candidates=["content"]))


def test_missing_column_lists_columns(tmp_path):
    p = _write(tmp_path / "a.parquet", pa.table({"body": ["x"], "id": [1]}))
    with pytest.raises(InputError) as ei:
        list(iter_string_batches([p], "text"))
    msg = str(ei.value)
    assert "a.parquet" in msg and "'text'" in msg and "['body', 'id']" in msg and "--column" in msg


def test_non_string_column(tmp_path):
    p = _write(tmp_path / "a.parquet", pa.table({"n": [1, 2], "s": ["a", "b"]}))
    with pytest.raises(InputError, match=r"'n' has type int64.*\['s'\].*--column"):
        list(iter_string_batches([p], "n"))


def test_binary_only_when_allowed(tmp_path):
    p = _write(tmp_path / "a.parquet", pa.table({"raw": pa.array([b"\xfe\xffab", b""], type=pa.binary())}))
    with pytest.raises(InputError, match=r"'raw' has type binary.*cast it to string"):
        list(iter_string_batches([p], "raw"))
    assert _docs(iter_string_batches([p], "raw", allow_binary=True)) == [b"\xfe\xffab", b""]


def test_nulls_named_with_first_row(tmp_path):
    vals = ["a"] * 13 + [None] + ["b"] * 5 + [None]
    p = _write(tmp_path / "a.parquet", pa.table({"text": vals}), row_group_size=4)
    with pytest.raises(InputError, match=r"a.parquet: column 'text' has a null at row 13 .*fill"):
        list(iter_string_batches([p], "text"))
    # without statistics the error comes while streaming, with the same row
    q = _write(tmp_path / "nostats.parquet", pa.table({"text": vals}), row_group_size=4, write_statistics=False)
    it = iter_string_batches([q], "text", batch_bytes=1)
    with pytest.raises(InputError, match=r"null at row 13 "):
        list(it)


def _values_and_rows(chunks) -> tuple[list, list, int, int]:
    """What a caller of iter_column_chunks sees: every value with its file row, the nulls, the rows."""
    values, rows, nulls, num_rows = [], [], 0, 0
    for c in chunks:
        k = len(c.offsets) - 1
        assert c.offsets[0] == 0 and c.offsets[-1] == c.data.size
        values += [c.data[c.offsets[j] : c.offsets[j + 1]].tobytes() for j in range(k)]
        rows += c.rows.tolist() if c.rows is not None else list(range(c.first_row, c.first_row + k))
        nulls += c.nulls
        num_rows += c.num_rows
    return values, rows, nulls, num_rows


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=40), st.integers(1, 40), st.integers(1, 6))
def test_column_chunks_in_slices_are_the_same_rows(tmp_path_factory, values, row_group, max_rows):
    # the URL pass hands out long row groups in slices: the same values, file rows and counts
    p = _write(tmp_path_factory.mktemp("s") / "a.parquet", pa.table({"url": pa.array(values, pa.string())}), row_group_size=row_group)
    whole = _values_and_rows(iter_column_chunks(p, "url", skip_nulls=True))
    sliced = list(iter_column_chunks(p, "url", skip_nulls=True, max_rows=max_rows))
    assert all(len(c.offsets) - 1 <= max_rows for c in sliced)
    assert _values_and_rows(sliced) == whole
    kept = [(v.encode(), i) for i, v in enumerate(values) if v is not None]
    assert whole == ([v for v, _ in kept], [i for _, i in kept], values.count(None), len(values))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=6)), max_size=40), st.integers(1, 40), st.integers(1, 6),
       st.integers(1, 7))
def test_column_chunks_streamed_are_the_same_rows(tmp_path_factory, values, row_group, max_rows, batch_rows):
    # a file with a row group over STREAM_ROW_GROUP_BYTES is streamed in batches (here every file, in
    # batches of batch_rows): the same values, file rows and counts as the row groups read whole
    import fastenc.arrow_io as arrow_io

    p = _write(tmp_path_factory.mktemp("s") / "a.parquet", pa.table({"url": pa.array(values, pa.string())}), row_group_size=row_group)
    whole = _values_and_rows(iter_column_chunks(p, "url", skip_nulls=True))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrow_io, "STREAM_ROW_GROUP_BYTES", -1)
        mp.setattr(arrow_io, "STREAM_BATCH_ROWS", batch_rows)
        streamed = list(iter_column_chunks(p, "url", skip_nulls=True))
        sliced = list(iter_column_chunks(p, "url", skip_nulls=True, max_rows=max_rows))
    assert all(len(c.offsets) - 1 <= batch_rows for c in streamed)
    assert all(len(c.offsets) - 1 <= max_rows for c in sliced)
    assert _values_and_rows(streamed) == whole
    assert _values_and_rows(sliced) == whole
    if None in values:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(arrow_io, "STREAM_ROW_GROUP_BYTES", -1)
            with pytest.raises(InputError, match=rf"null at row {values.index(None)} "):
                list(iter_column_chunks(p, "url"))


_URL_PEAK_SCRIPT = """
import sys
import pyarrow as pa
import fastenc.arrow_io as arrow_io
arrow_io.STREAM_ROW_GROUP_BYTES = int(sys.argv[2])
n = 0
for c in arrow_io.iter_column_chunks(sys.argv[1], "url", max_rows=200):
    n += c.data.size
print(n, pa.default_memory_pool().max_memory())
"""


@pytest.mark.parametrize("threshold", [None, 1 << 20])
def test_a_big_row_group_is_streamed_not_read_whole(tmp_path, threshold):
    # 48 MB of URLs in one row group, pages of ~1 MB: over the threshold it is streamed (pyarrow holds
    # about a batch and a page), under it read whole (the whole column chunk, and more)
    import subprocess
    import sys

    rng = np.random.default_rng(3)
    urls = [rng.integers(97, 123, 4_800, dtype=np.uint8).tobytes().decode() for _ in range(10_000)]
    path = _write(tmp_path / "urls.parquet", pa.table({"url": urls}), row_group_size=10_000, compression="none",
                  write_batch_size=128)
    limit = str(threshold if threshold is not None else 1 << 30)
    out = subprocess.run([sys.executable, "-c", _URL_PEAK_SCRIPT, str(path), limit], capture_output=True, text=True, check=True)
    total, peak = map(int, out.stdout.split())
    assert total == 48_000_000
    if threshold is None:
        assert peak > 48_000_000  # (the test's premise: read whole, the row group is all in memory)
    else:
        assert peak < 16_000_000, f"pyarrow held {peak / 1e6:.1f} MB at once streaming a 48 MB row group"


def test_a_damaged_page_of_a_streamed_file_is_an_input_error(tmp_path, monkeypatch):
    import fastenc.arrow_io as arrow_io

    src = tmp_path / "d.parquet"
    pq.write_table(pa.table({"url": [f"https://example.com/{i}/" * 30 for i in range(2000)]}), src, compression="zstd",
                   row_group_size=2000)
    chunk = pq.ParquetFile(src).metadata.row_group(0).column(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    raw = bytearray(src.read_bytes())
    frame = raw.index(b"\x28\xb5\x2f\xfd", start)  # the first zstd frame of the column's pages
    raw[frame : frame + 4] = b"\x00\x00\x00\x00"
    src.write_bytes(bytes(raw))
    monkeypatch.setattr(arrow_io, "STREAM_ROW_GROUP_BYTES", -1)
    with pytest.raises(InputError, match=r"d.parquet: cannot read it: .*damaged"):
        list(iter_column_chunks(src, "url"))


def test_bad_file_late_in_list_fails_before_any_batch(tmp_path):
    good = _write(tmp_path / "good.parquet", pa.table({"text": ["a"]}))
    bad = _write(tmp_path / "bad.parquet", pa.table({"other": ["a"]}))
    it = iter_string_batches([good, bad], "text")
    with pytest.raises(InputError, match="bad.parquet"):
        next(it)


def test_inspect_inputs_reports_sizes(tmp_path):
    p = _write(tmp_path / "a.parquet", pa.table({"text": ["abc"] * 10}))
    (info,) = inspect_inputs([p], "text")
    assert info.num_rows == 10 and info.column == "text" and info.file_bytes == p.stat().st_size
    assert info.column_bytes > 0 and info.arrow_type == "string"


def test_read_column_rows(tmp_path):
    vals = [f"row {i} ü" for i in range(30)]
    p = _write(tmp_path / "a.parquet", pa.table({"text": vals}), row_group_size=7)
    rows = [29, 0, 7, 6, 15, 0]
    assert read_column_rows(p, "text", rows) == [vals[r] for r in rows]
    with pytest.raises(IndexError):
        read_column_rows(p, "text", [30])


@needs_shared
def test_read_column_rows_shared():
    table = pq.read_table(DOCS, columns=["text"]).column(0)
    rows = [0, 1999, 2000, 6625]
    assert read_column_rows(DOCS, "text", rows) == [table[r].as_py() for r in rows]


# ---------------------------------------------------------------------------------------------
# Atomic output
# ---------------------------------------------------------------------------------------------
