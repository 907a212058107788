"""Reading the URL column of a parquet shard: streamed in Arrow batches, or whole as flat arrays.

No Python string per URL: every batch is a zero-copy ``uint8`` view of the Arrow buffer plus
``int64`` offsets. Nulls are an ``InputError`` naming the file, row group and row, unless
``skip_nulls``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fastenc.arrow_io import arrow_to_flat, read_guard
from fastenc.errors import InputError


class UrlColumn(NamedTuple):
    """One file's URL column as flat arrays: URL i is ``data[offsets[i]:offsets[i + 1]]``.

    ``rows[i]`` is URL i's row in the file when nulls were skipped (else None: row == i).
    """

    data: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray | None
    nulls_skipped: int
    num_rows: int
    column_type: str


def _text_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return any(
        f(t)
        for f in (
            pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view,
            pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view,
        )
    )


def _open_column(path: Path, column: str) -> tuple[pq.ParquetFile, pa.DataType]:
    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read it as parquet ({exc}): check that the file is complete") from exc
    schema = pf.schema_arrow
    if column not in schema.names:
        raise InputError(f"{path}: no column {column!r}; its columns are {schema.names}. Choose one with --column NAME")
    t = schema.field(column).type
    if not _text_type(t):
        text_cols = [f.name for f in schema if _text_type(f.type)]
        raise InputError(f"{path}: column {column!r} has type {t}, not string or binary; the text columns are {text_cols}: choose one with --column NAME")
    return pf, t


def big_empty(n: int, dtype) -> np.ndarray:
    """``np.empty(n, dtype)`` for the shard-sized buffers, on huge pages from 64 MB up (``fastenc.memory``)."""
    from fastenc.memory import huge_array

    return huge_array(n, dtype, min_bytes=64 << 20)


def _read_row_groups(path: Path, column: str, n_groups: int, threads: int = 2, ahead: int = 4) -> Iterator[pa.Table]:
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


class UrlBatch(NamedTuple):
    """One Arrow chunk of the URL column, nulls dropped: URL j is ``data[offsets[j]:offsets[j + 1]]``
    (``data`` is a zero-copy view of the Arrow buffer). ``rows`` holds the file rows of the URLs
    when nulls were dropped from this chunk, else None (then URL j is row ``first_row + j``)."""

    data: np.ndarray
    offsets: np.ndarray
    first_row: int
    rows: np.ndarray | None
    nulls: int
    num_rows: int  # rows of the file this chunk covered (nulls included)


def iter_url_batches(path: str | os.PathLike, column: str = "url", *, skip_nulls: bool = False) -> Iterator[UrlBatch]:
    """Stream ``column`` of one parquet file as ``UrlBatch``es, in file order (row groups decoded
    two at a time in background threads). Nulls raise ``InputError`` (file, column, row) unless
    ``skip_nulls``."""
    path = Path(path)
    pf, _ = _open_column(path, column)
    md = pf.metadata
    row = 0
    for rg, table in enumerate(read_guard(path, _read_row_groups(path, column, md.num_row_groups))):
        for arr in table.column(0).chunks:
            m = len(arr)
            rows = None
            nulls = arr.null_count
            if nulls:
                valid = arr.is_valid().to_numpy(zero_copy_only=False)
                if not skip_nulls:
                    bad = row + int(np.argmin(valid))
                    raise InputError(
                        f"{path}: column {column!r} has {nulls} null(s) in row group {rg}, the first at row {bad} "
                        "(0-based); a null is not a URL: pass --skip-nulls to drop them (their count goes in the "
                        "sidecar), or fill them in the source"
                    )
                rows = row + np.flatnonzero(valid)
                arr = arr.drop_null()
            data, offs = arrow_to_flat(arr)
            yield UrlBatch(data, offs, row, rows, nulls, m)
            row += m
        del table
    if row != md.num_rows:
        raise InputError(f"{path}: read {row} rows but its footer says {md.num_rows}: is the file being written?")


def _column_bytes(pf: pq.ParquetFile, column: str) -> int:
    """Uncompressed size of the column: about its text bytes (plain pages: + 4 per value)."""
    md = pf.metadata
    leaf = next((j for j in range(len(pf.schema)) if pf.schema.column(j).path == column), None)
    if leaf is None:
        raise InputError(f"{pf}: column {column!r} is not a flat column: choose a top-level text column with --column")
    return sum(md.row_group(rg).column(leaf).total_uncompressed_size for rg in range(md.num_row_groups))


def read_url_column(path: str | os.PathLike, column: str = "url", *, skip_nulls: bool = False, bar=None) -> UrlColumn:
    """The whole ``column`` of one parquet file as one flat ``uint8`` buffer + ``int64`` offsets
    (from the Arrow buffers, no Python string per URL). Nulls as in ``iter_url_batches``.
    ``bar`` (a tqdm) is advanced by rows."""
    path = Path(path)
    pf, t = _open_column(path, column)
    n_rows = pf.metadata.num_rows
    buf = big_empty(max(_column_bytes(pf, column), 1 << 16), np.uint8)  # untouched pages cost nothing
    offsets = big_empty(n_rows + 1, np.int64)
    offsets[0] = 0
    rows = None
    n = used = nulls = 0
    for batch in iter_url_batches(path, column, skip_nulls=skip_nulls):
        k = len(batch.offsets) - 1
        if batch.rows is not None and rows is None:
            rows = np.empty(n_rows, np.int64)
            rows[:n] = np.arange(n)
        if rows is not None:
            rows[n : n + k] = batch.rows if batch.rows is not None else np.arange(batch.first_row, batch.first_row + k)
        if used + batch.data.size > buf.size:
            grown = big_empty(max(used + batch.data.size, buf.size + buf.size // 2), np.uint8)
            grown[:used] = buf[:used]
            buf = grown
        buf[used : used + batch.data.size] = batch.data
        offsets[n + 1 : n + 1 + k] = batch.offsets[1:] + used
        used += batch.data.size
        n += k
        nulls += batch.nulls
        if bar is not None:
            bar.update(batch.num_rows)
    return UrlColumn(buf[:used], offsets[: n + 1], None if rows is None else rows[:n], nulls, n_rows, str(t))
