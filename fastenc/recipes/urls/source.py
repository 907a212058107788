"""The URL column of a parquet shard, whole, as flat arrays (``read_url_column``).

The reading itself is ``fastenc.arrow_io``'s, the one input layer of every recipe: chunks of
one column (``iter_column_chunks``, here also named ``iter_url_batches``), decoded two row
groups at a time in background threads, no Python string per URL. Nulls are an ``InputError``
naming the file, row group and row, unless ``skip_nulls``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from fastenc.arrow_io import ColumnChunk as UrlBatch  # noqa: F401  (the URL recipe's name for it)
from fastenc.arrow_io import column_bytes as url_column_bytes
from fastenc.arrow_io import iter_column_chunks as iter_url_batches
from fastenc.arrow_io import open_column


def open_url_column(path: Path, column: str):
    pf, _, t = open_column(path, column, allow_binary=True)
    return pf, t


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


def big_empty(n: int, dtype) -> np.ndarray:
    """``np.empty(n, dtype)`` for the shard-sized buffers, on huge pages from 64 MB up (``fastenc.memory``)."""
    from fastenc.memory import huge_array

    return huge_array(n, dtype, min_bytes=64 << 20)


def read_url_column(path: str | os.PathLike, column: str = "url", *, skip_nulls: bool = False, bar=None) -> UrlColumn:
    """The whole ``column`` of one parquet file as one flat ``uint8`` buffer + ``int64`` offsets
    (from the Arrow buffers, no Python string per URL). Nulls as in ``iter_url_batches``.
    ``bar`` (a tqdm) is advanced by rows."""
    path = Path(path)
    pf, t = open_url_column(path, column)
    n_rows = pf.metadata.num_rows
    buf = big_empty(max(url_column_bytes(pf, column), 1 << 16), np.uint8)  # untouched pages cost nothing
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
