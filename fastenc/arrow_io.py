"""Parquet in, flat arrays out: every input of every recipe is read here.

Everything the recipes share about I/O lives here:

- ``resolve_inputs``: command-line inputs (files, directories, globs) -> parquet paths, in order.
- ``inspect_inputs``: the column each file will be read from, checked before any work starts
  (missing column, wrong type, nulls the statistics already know about) -> ``SourceInfo``.
- ``iter_string_batches``: a text column streamed in bounded batches as ``StringBatch``
  (a zero-copy ``uint8`` view of the Arrow value buffer + ``int64`` offsets rebased to 0),
  the form every kernel takes.
- ``arrow_to_flat``: the same conversion for one Arrow array (sliced or chunked arrays too).
- ``read_column_rows``: a few rows as Python values, for verifying samples.
- ``open_column`` / ``column_bytes`` / ``iter_column_chunks``: one file's column checked, sized,
  and streamed whole (small row groups decoded ahead by two threads, big ones in batches; nulls
  dropped and counted on request): the URL recipe's reader.
- ``Prefetch``: a generator run on a thread, items handed over a bounded queue.
- ``read_guard`` / ``read_row_group``: a damaged page becomes one ``InputError`` naming the file.

Writing is not here: every output goes through the run skeleton (``fastenc.run``).
"""
from __future__ import annotations

import glob
import os
import queue
import re
import threading
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fastenc.errors import InputError, UsageError

__all__ = [
    "StringBatch",
    "SourceInfo",
    "resolve_inputs",
    "as_input_list",
    "check_batch_bytes",
    "inspect_inputs",
    "iter_string_batches",
    "arrow_to_flat",
    "read_column_rows",
    "read_guard",
    "invalid_utf8_count",
    "open_column",
    "column_bytes",
    "ColumnChunk",
    "iter_column_chunks",
    "read_row_group",
    "Prefetch",
    "DEFAULT_BATCH_BYTES",
]

DEFAULT_BATCH_BYTES = 64 << 20
# Streaming reads go through a buffer of this size: pyarrow's default (``pre_buffer=True``) reads
# a row group's whole column chunk first, which for a file written as one big row group (pandas and
# pq.write_table do that up to 1 M rows) is the whole compressed column in memory at once. A
# 190 MB-text file, 8 MB batches: pyarrow's peak 164 -> 67 MB, and a new process's first file is faster
# (fresh memory, which a VM backs slowly); bench/RESULTS.md, "Streaming reads no longer pre-buffer a row group's column chunk".
READ_BUFFER_BYTES = 1 << 20
# iter_column_chunks streams a file with a row group bigger than this (``_row_groups`` says why; the
# read-ahead holds up to four row groups, so at most ~0.5 GB of column, plus their compressed pages)
STREAM_ROW_GROUP_BYTES = 128 << 20
STREAM_BATCH_ROWS = 1 << 17
_PARQUET_MAGIC = b"PAR1"
_GLOB_CHARS = re.compile(r"[*?\[]")


class StringBatch(NamedTuple):
    """One bounded batch of a text column, in the flat form the kernels take.

    ``data`` is a read-only ``uint8`` view of the Arrow value buffer (no copy) starting at the
    batch's first value; document ``i`` is ``data[offsets[i]:offsets[i + 1]]``; ``offsets`` is
    ``int64`` with ``num_rows + 1`` entries and ``offsets[0] == 0``. ``first_row`` is the row
    index of the batch's first document within ``path``.
    """

    data: np.ndarray
    offsets: np.ndarray
    path: Path
    first_row: int
    num_rows: int


class SourceInfo(NamedTuple):
    """What ``inspect_inputs`` found out about one input file (from its footer only)."""

    path: Path
    column: str
    arrow_type: str
    num_rows: int
    file_bytes: int
    #: uncompressed size of the column chunks: an estimate of the text bytes, for progress bars
    column_bytes: int


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------


def _is_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == _PARQUET_MAGIC
    except OSError:
        return False


def as_input_list(inputs: Sequence[str | os.PathLike] | str | os.PathLike) -> list[str]:
    """One input or a sequence of them, as a list of strings (what ``resolve_inputs`` takes)."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return [os.fspath(p) for p in inputs]


def check_batch_bytes(batch_bytes: int) -> None:
    if batch_bytes < 1:
        raise UsageError(f"--batch-bytes must be positive, e.g. 64MiB (got {batch_bytes})")


def resolve_inputs(inputs: Sequence[str | os.PathLike]) -> list[Path]:
    """Turn command-line inputs into parquet file paths, in the order given.

    A file is taken as is (it must be parquet: checked by its ``PAR1`` magic, not its name);
    a directory gives its ``*.parquet`` files sorted by name (not recursive); anything else is
    a glob pattern (``**`` recurses), whose matches are sorted by name. Repeats are kept: the
    same file given twice is read twice.
    """
    if not inputs:
        raise InputError("no input given: pass parquet files, a directory of them, or a glob such as 'data/*.parquet'")
    paths: list[Path] = []
    for item in inputs:
        text = os.fspath(item)
        p = Path(text)
        if p.is_dir():
            found = sorted(q for q in p.glob("*.parquet") if q.is_file())
            if not found:
                raise InputError(f"directory {text!r} holds no *.parquet files: point at the files themselves or at a glob")
            matches = found
        elif p.exists():
            matches = [p]
        elif _GLOB_CHARS.search(text):
            matches = sorted(Path(m) for m in glob.glob(text, recursive=True) if Path(m).is_file())
            if not matches:
                raise InputError(f"the pattern {text!r} matches no file: check the path (quote it so the shell does not expand it)")
        else:
            raise InputError(f"input {text!r} does not exist: check the path")
        for m in matches:
            if not _is_parquet(m):
                raise InputError(
                    f"{str(m)!r} is not a parquet file (it does not start with the PAR1 magic bytes): "
                    "pass only .parquet files, or convert the data to parquet first"
                )
        paths.extend(matches)
    return paths


def _type_ok(t: pa.DataType, allow_binary: bool) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return True
    return allow_binary and (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


def _is_binary(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def _pick_column(path: Path, schema: pa.Schema, column: str | None, candidates: Sequence[str] | None) -> str:
    names = schema.names
    if column is not None:
        if column in names:
            return column
        raise InputError(
            f"{path}: no column {column!r}; its columns are {names}. Choose one with --column NAME"
        )
    for c in candidates or ():
        if c in names:
            return c
    tried = list(candidates or ())
    raise InputError(f"{path}: none of the columns {tried} exists; its columns are {names}. Choose one with --column NAME")


def _leaf_index(pf: pq.ParquetFile, column: str) -> int:
    """Index of ``column`` among the parquet leaf columns (what row-group metadata is indexed by)."""
    for j in range(len(pf.schema)):
        if pf.schema.column(j).path == column:
            return j
    raise InputError(f"column {column!r} is not a flat column of its parquet file: choose a top-level text column with --column")


def _first_null_row(pf: pq.ParquetFile, column: str, row_groups: Iterable[int]) -> int:
    start = 0
    md = pf.metadata
    wanted = set(row_groups)
    for rg in range(md.num_row_groups):
        n = md.row_group(rg).num_rows
        if rg in wanted:
            arr = pf.read_row_group(rg, columns=[column]).column(0)
            if arr.null_count:
                mask = arr.is_null().to_numpy(zero_copy_only=False)
                return start + int(np.argmax(mask))
        start += n
    return -1


def _null_error(path: Path, column: str, row: int, where: str = "") -> InputError:
    """The one message for a null text value (every recipe has ``--skip-nulls``). ``where``: e.g.
    ``" (1 of row group 0)"``."""
    return InputError(
        f"{path}: column {column!r} has a null at row {row} (0-based){where} and fastenc does not guess what a missing "
        "value means: pass --skip-nulls to leave nulls out (they are counted), or fill them in the source "
        "(e.g. pyarrow.compute.fill_null(col, '')) and rewrite the file"
    )


def inspect_inputs(
    paths: Sequence[Path],
    column: str | None,
    *,
    candidates: Sequence[str] | None = None,
    allow_binary: bool = False,
    skip_nulls: bool = False,
) -> list[SourceInfo]:
    """Check every input before any work starts, from the parquet footers only.

    Raises ``InputError`` for a missing column (listing the available ones), a column whose type
    is not text (string/large_string; binary too when ``allow_binary``), or nulls that the
    row-group statistics report (naming the first null row). Nulls in files without statistics
    are caught later, by ``iter_string_batches``.
    """
    if column is None and not candidates:
        raise ValueError("inspect_inputs: give a column or a list of candidate columns")
    infos = []
    for path in paths:
        path = Path(path)
        pf, col, t = open_column(path, column, candidates=candidates, allow_binary=allow_binary)
        md = pf.metadata
        leaf = _leaf_index(pf, col)
        column_bytes = 0
        null_rgs = []
        for rg in range(md.num_row_groups):
            chunk = md.row_group(rg).column(leaf)
            column_bytes += chunk.total_uncompressed_size
            stats = chunk.statistics
            if stats is not None and stats.has_null_count and stats.null_count > 0:
                null_rgs.append(rg)
        if null_rgs and not skip_nulls:
            raise _null_error(path, col, _first_null_row(pf, col, null_rgs[:1]))
        infos.append(SourceInfo(path, col, str(t), md.num_rows, path.stat().st_size, column_bytes))
    return infos


# ----------------------------------------------------------------------------------------------
# Arrow -> flat arrays
# ----------------------------------------------------------------------------------------------


def arrow_to_flat(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """``(data uint8, offsets int64)`` of a string/binary array, ``offsets[0] == 0``.

    Zero-copy for the value bytes of a single array, sliced or not (a slice's offsets do not
    start at 0, and its ``offset`` says where its first offset is). A chunked array with more
    than one chunk is concatenated (one copy). Dictionary and view types are decoded first
    (one copy). Nulls are the caller's business (``iter_string_batches`` refuses them): a
    null reads as an empty value here.
    """
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            arr = arr.chunk(0)
        elif arr.num_chunks == 0:
            return np.empty(0, np.uint8), np.zeros(1, np.int64)
        else:
            arr = pa.concat_arrays(arr.chunks)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_string_view(t):
        arr = arr.cast(pa.large_string())
    elif pa.types.is_binary_view(t):
        arr = arr.cast(pa.large_binary())
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        odt = np.int32
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        odt = np.int64
    else:
        raise TypeError(f"arrow_to_flat: expected a string or binary array, got {t}")
    n = len(arr)
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        return np.empty(0, np.uint8), np.zeros(n + 1, np.int64)
    raw = np.frombuffer(bufs[1], dtype=odt)[arr.offset : arr.offset + n + 1]
    lo, hi = int(raw[0]), int(raw[-1])
    offsets = raw.astype(np.int64)
    offsets -= lo
    if bufs[2] is None or hi == lo:
        data = np.empty(0, np.uint8)
    else:
        data = np.frombuffer(bufs[2], dtype=np.uint8)[lo:hi]
        # Arrow memory is shared and immutable by contract; make that explicit so that no
        # kernel writes into it (numba accepts read-only arrays, like np.frombuffer(bytes)).
        data.flags.writeable = False
    return data, offsets


def _rows_per_batch(md: pq.FileMetaData, rg: int, leaf: int, batch_bytes: int) -> int:
    """Rows per batch so that a batch holds about ``batch_bytes`` of values (at least one row)."""
    g = md.row_group(rg)
    size = max(1, g.column(leaf).total_uncompressed_size)
    return max(1, min(g.num_rows, int(batch_bytes * g.num_rows // size)))


def iter_string_batches(
    paths: Sequence[Path],
    column: str | None,
    *,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    candidates: Sequence[str] | None = None,
    allow_binary: bool = False,
    skip_nulls: bool = False,
) -> Iterator[StringBatch]:
    """Stream one text column of ``paths`` (in order) as ``StringBatch``es of about ``batch_bytes``.

    All files are checked first (``inspect_inputs``), so a bad file late in the list fails
    before any batch is produced. ``column=None`` takes the first of ``candidates`` that exists
    in each file. The batch size in rows is chosen per row group from its uncompressed column
    size (an estimate: dictionary-encoded columns can give bigger batches); a single row larger
    than ``batch_bytes`` makes a batch of its own. Nulls raise ``InputError`` naming the file,
    column and first null row; with ``skip_nulls`` they are left out: a batch is then cut around
    them, so that every batch still holds consecutive rows from ``first_row`` (the caller counts
    them as the file's rows minus the documents it was given).
    """
    if batch_bytes < 1:
        raise ValueError("batch_bytes must be positive")
    infos = inspect_inputs(paths, column, candidates=candidates, allow_binary=allow_binary, skip_nulls=skip_nulls)
    for info in infos:
        pf = pq.ParquetFile(info.path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        md = pf.metadata
        leaf = _leaf_index(pf, info.column)
        row = 0
        for rg in range(md.num_row_groups):
            if md.row_group(rg).num_rows == 0:
                continue
            bs = _rows_per_batch(md, rg, leaf, batch_bytes)
            for rb in read_guard(info.path, pf.iter_batches(batch_size=bs, row_groups=[rg], columns=[info.column], use_threads=True), rg):
                arr = rb.column(0)
                for a, b in _valid_runs(arr, info, row, skip_nulls):
                    data, offsets = arrow_to_flat(arr.slice(a, b - a))
                    yield StringBatch(data, offsets, info.path, row + a, b - a)
                row += len(arr)


def _valid_runs(arr: pa.Array, info: SourceInfo, row: int, skip_nulls: bool) -> list[tuple[int, int]]:
    """The runs ``[a, b)`` of non-null values of ``arr`` (all of it when it has no null)."""
    if not arr.null_count:
        return [(0, len(arr))]
    null = arr.is_null().to_numpy(zero_copy_only=False)
    if not skip_nulls:
        raise _null_error(info.path, info.column, row + int(np.argmax(null)))
    edges = np.flatnonzero(np.diff(np.concatenate(([True], null, [True])).astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


def open_column(path: Path, column: str | None, *, candidates: Sequence[str] | None = None,
                allow_binary: bool = False) -> tuple[pq.ParquetFile, str, pa.DataType]:
    """``(ParquetFile, column name, its type)`` after checking that the file is parquet and the
    column (``column``, or the first of ``candidates`` it has) holds text: string, or binary too
    when ``allow_binary``. Anything else is one ``InputError`` naming the file and the fix."""
    path = Path(path)
    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read it as parquet ({exc}): check that the file is complete") from exc
    schema = pf.schema_arrow
    col = _pick_column(path, schema, column, candidates)
    t = schema.field(col).type
    if not _type_ok(t, allow_binary):
        kinds = "string or large_string" + (" (or binary)" if allow_binary else "")
        text_cols = [f.name for f in schema if _type_ok(f.type, allow_binary)]
        hint = f"the text columns of this file are {text_cols}" if text_cols else "this file has no text column"
        if _is_binary(t) and not allow_binary:
            fix = "cast it to string if it holds UTF-8 text (pyarrow.compute.cast(col, pa.string()) validates it)"
        else:
            fix = "choose another column with --column NAME"
        raise InputError(f"{path}: column {col!r} has type {t}, not {kinds}; {hint}; {fix}")
    return pf, col, t


def _read_ahead(path: Path, column: str, n_groups: int, threads: int = 2, ahead: int = 4) -> Iterator[pa.Table]:
    """The row groups of ``path`` in order, decoded by ``threads`` threads (each with its own
    ParquetFile; pyarrow releases the GIL), at most ``ahead`` groups in flight."""
    import collections
    import threading
    from concurrent.futures import ThreadPoolExecutor

    local = threading.local()

    def read(rg: int) -> pa.Table:
        if not hasattr(local, "pf"):
            local.pf = pq.ParquetFile(path)
        return local.pf.read_row_group(rg, columns=[column], use_threads=False)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        pending: collections.deque = collections.deque()
        nxt = 0
        try:
            while nxt < n_groups or pending:
                while nxt < n_groups and len(pending) < ahead:
                    pending.append(pool.submit(read, nxt))
                    nxt += 1
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


class ColumnChunk(NamedTuple):
    """One Arrow chunk of a column, nulls dropped: value j is ``data[offsets[j]:offsets[j + 1]]``
    (``data`` is a zero-copy view of the Arrow buffer). ``rows`` holds the file rows of the values
    when nulls were dropped from this chunk, else None (then value j is row ``first_row + j``)."""

    data: np.ndarray
    offsets: np.ndarray
    first_row: int
    rows: np.ndarray | None
    nulls: int
    num_rows: int  # rows of the file this chunk covered (nulls included)


def iter_column_chunks(path: str | os.PathLike, column: str = "url", *, skip_nulls: bool = False,
                       max_rows: int | None = None) -> Iterator[ColumnChunk]:
    """Stream ``column`` of one parquet file as ``ColumnChunk``s, in file order (``_row_groups``:
    the URL recipe reads whole shards this way). Nulls raise
    ``InputError`` (file, column, row) unless ``skip_nulls``. ``max_rows``: an Arrow chunk longer
    than that is handed out in slices of at most ``max_rows`` values (views of its buffers), so
    that what a caller derives per chunk stays small whatever the file's row groups."""
    path = Path(path)
    pf, _, _ = open_column(path, column, allow_binary=True)
    md = pf.metadata
    row = 0
    for rg, chunks in read_guard(path, _row_groups(path, pf, column, max_rows)):
        for arr in chunks:
            m = len(arr)
            rows = None
            nulls = arr.null_count
            if nulls:
                valid = arr.is_valid().to_numpy(zero_copy_only=False)
                if not skip_nulls:
                    raise _null_error(path, column, row + int(np.argmin(valid)),
                                      f" (the first of {nulls} in rows {row}-{row + m - 1}, row group {rg})")
                rows = row + np.flatnonzero(valid)
                arr = arr.drop_null()
            data, offs = arrow_to_flat(arr)
            yield from _slices(ColumnChunk(data, offs, row, rows, nulls, m), max_rows)
            row += m
        del chunks
    if row != md.num_rows:
        raise InputError(f"{path}: read {row} rows but its footer says {md.num_rows}: is the file being written?")


def _row_groups(path: Path, pf: pq.ParquetFile, column: str, max_rows: int | None) -> Iterator[tuple[int, list]]:
    """``(row group, its Arrow arrays of column)`` in file order, decoded on background threads.

    Row groups of up to ``STREAM_ROW_GROUP_BYTES`` (uncompressed) are decoded whole, two at a time
    (``_read_ahead``). A file with a bigger one is streamed instead, in batches of ``max_rows``
    (``STREAM_BATCH_ROWS`` when None), one thread decoding ahead: the read-ahead would hold up to
    four whole row groups, compressed and decoded, at once: streaming halves the peak memory of a
    561 MB row group (bench/RESULTS.md, "A URL file with a row group over 128 MB is streamed"). Smaller
    row groups stay whole, decoded in parallel, which reads them faster than streaming would."""
    md = pf.metadata
    leaf = _leaf_index(pf, column)
    biggest = max((md.row_group(rg).column(leaf).total_uncompressed_size for rg in range(md.num_row_groups)), default=0)
    if biggest <= STREAM_ROW_GROUP_BYTES:
        for rg, table in enumerate(_read_ahead(path, column, md.num_row_groups)):
            yield rg, table.column(0).chunks
        return
    reader = Prefetch(_batches(path, column, md.num_row_groups, max_rows or STREAM_BATCH_ROWS), depth=2)
    try:
        yield from reader
    finally:
        reader.close()


def _batches(path: Path, column: str, n_groups: int, rows: int) -> Iterator[tuple[int, list]]:
    """``_row_groups``' streamed form: each row group in record batches of ``rows`` (a ParquetFile
    of its own: this runs on the Prefetch thread)."""
    pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
    for rg in range(n_groups):
        for rb in pf.iter_batches(batch_size=rows, row_groups=[rg], columns=[column], use_threads=False):
            yield rg, [rb.column(0)]


def _slices(chunk: ColumnChunk, max_rows: int | None) -> Iterator[ColumnChunk]:
    """``chunk`` in slices of at most ``max_rows`` values (all of it when None); the first slice
    carries the chunk's nulls, and the slices' ``num_rows`` add up to the chunk's."""
    n = len(chunk.offsets) - 1
    if max_rows is None or n <= max_rows:
        yield chunk
        return
    offs = chunk.offsets
    for a in range(0, n, max_rows):
        b = min(n, a + max_rows)
        nulls = chunk.nulls if a == 0 else 0
        rows = None if chunk.rows is None else chunk.rows[a:b]
        first = chunk.first_row + a if rows is None or a == 0 else int(rows[0])
        yield ColumnChunk(chunk.data[offs[a] : offs[b]], offs[a : b + 1] - offs[a], first, rows, nulls, b - a + nulls)


def column_bytes(pf: pq.ParquetFile, column: str) -> int:
    """Uncompressed size of the column: about its text bytes (plain pages: + 4 per value)."""
    md = pf.metadata
    leaf = next((j for j in range(len(pf.schema)) if pf.schema.column(j).path == column), None)
    if leaf is None:
        raise InputError(f"{pf}: column {column!r} is not a flat column: choose a top-level text column with --column")
    return sum(md.row_group(rg).column(leaf).total_uncompressed_size for rg in range(md.num_row_groups))


def invalid_utf8_count(data: np.ndarray, offsets: np.ndarray) -> int:
    """How many of the documents ``data[offsets[i]:offsets[i + 1]]`` are not valid UTF-8.

    Arrow's validator (SIMD, ~1.5 GB/s here, and it releases the GIL) answers for the whole
    batch at once; only a batch that fails it is counted document by document (the Numba kernel
    ``kernels.utf8.count_invalid_utf8``, ~0.7 GB/s): invalid text is rare.
    """
    n = offsets.size - 1
    if n <= 0 or data.size == 0:
        return 0
    arr = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    try:
        arr.validate(full=True)
        return 0
    except pa.ArrowInvalid:
        from fastenc.kernels.utf8 import count_invalid_utf8

        return int(count_invalid_utf8(data, offsets))


def read_guard(path: Path, batches: Iterable, row_group: int | None = None) -> Iterator:
    """``batches`` as they come, with a read failure (a damaged page: ``OSError: ZSTD
    decompression failed``, a truncated file) turned into one ``InputError`` naming the file."""
    it = iter(batches)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as exc:
            where = f" (row group {row_group})" if row_group is not None else ""
            raise InputError(f"{path}: cannot read it{where}: {exc}; the file is damaged: download or write it again") from None
        yield item


def read_row_group(pf: pq.ParquetFile, path: Path, rg: int, columns: list[str]) -> pa.Table:
    """``pf.read_row_group`` with a damaged page turned into one ``InputError`` (see ``read_guard``)."""
    (table,) = read_guard(path, (pf.read_row_group(rg, columns=columns) for _ in (0,)), rg)
    return table


def read_column_rows(path: str | os.PathLike, column: str, rows: Sequence[int]) -> list:
    """The values at ``rows`` (0-based, within the file) of ``column``, as Python objects
    (``str`` for string columns, ``bytes`` for binary), in the order of ``rows``.

    Reads only the row groups that hold the requested rows.
    """
    pf = pq.ParquetFile(path)
    md = pf.metadata
    if column not in pf.schema_arrow.names:
        raise InputError(f"{path}: no column {column!r}; its columns are {pf.schema_arrow.names}")
    starts = np.cumsum([0] + [md.row_group(i).num_rows for i in range(md.num_row_groups)])
    rows = [int(r) for r in rows]
    for r in rows:
        if not 0 <= r < md.num_rows:
            raise IndexError(f"{path}: row {r} out of range (the file has {md.num_rows} rows)")
    out: list = [None] * len(rows)
    by_rg: dict[int, list[int]] = {}
    for k, r in enumerate(rows):
        by_rg.setdefault(int(np.searchsorted(starts, r, side="right") - 1), []).append(k)
    for rg, ks in by_rg.items():
        arr = read_row_group(pf, Path(path), rg, [column]).column(0)
        base = int(starts[rg])
        for k in ks:
            out[k] = arr[rows[k] - base].as_py()
    return out


_END = object()


class Prefetch:
    """Runs a generator in a thread, one item ahead (pyarrow decodes while the kernel encodes).

    Exceptions in the generator are re-raised in the consumer; ``close()`` stops the thread.
    """

    def __init__(self, gen: Iterator, depth: int = 1, name: str = "fastenc-reader"):
        self.gen = gen
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self.gen:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as exc:  # handed to the consumer
            self._put(exc)

    def __iter__(self):
        while True:
            item = self.q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self.stop.set()
        while True:
            try:
                self.q.get_nowait()
            except queue.Empty:
                break
        self.thread.join(timeout=30)
