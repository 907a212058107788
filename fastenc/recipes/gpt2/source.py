"""Reading for the GPT-2 recipe: text batches plus the count column of the same rows (which the
recipe prefetches on a thread, ``arrow_io.Prefetch``: pyarrow decodes the next batch while the
main thread encodes this one), and how error messages name a source document."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fastenc.arrow_io import invalid_utf8_count, iter_string_batches, read_column_rows, read_row_group
from fastenc.errors import InputError


class _CountColumn:
    """The ``gpt2_tokens`` values of one file, for any row range, one row group in memory at a time."""

    def __init__(self, path: Path, column: str):
        self.path = path
        self.column = column
        self.pf = pq.ParquetFile(path)
        md = self.pf.metadata
        self.starts = np.cumsum([0] + [md.row_group(i).num_rows for i in range(md.num_row_groups)])
        self.rg = -1
        self.values = np.empty(0, np.int64)

    def _load(self, rg: int) -> None:
        arr = read_row_group(self.pf, self.path, rg, [self.column]).column(0)
        if arr.null_count:
            mask = arr.is_null().to_numpy(zero_copy_only=False)
            row = int(self.starts[rg]) + int(np.argmax(mask))
            raise InputError(
                f"{self.path}: column {self.column!r} has a null at row {row} (0-based); it holds the expected token "
                f"counts that the run checks: fill it, or pass --no-count-check to skip that check"
            )
        self.values = arr.to_numpy().astype(np.int64, copy=False)
        self.rg = rg

    def take(self, first_row: int, n: int) -> np.ndarray:
        parts = []
        row, end = first_row, first_row + n
        while row < end:
            rg = int(np.searchsorted(self.starts, row, side="right")) - 1
            if rg != self.rg:
                self._load(rg)
            base = int(self.starts[rg])
            stop = min(end, int(self.starts[rg + 1]))
            parts.append(self.values[row - base : stop - base])
            row = stop
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def count_column_of(path: Path, count_column: str | None) -> str | None:
    """``count_column`` if ``path`` has it (checked to be an integer column), else None."""
    if not count_column:
        return None
    schema = pq.ParquetFile(path).schema_arrow
    if count_column not in schema.names:
        return None
    t = schema.field(count_column).type
    if not pa.types.is_integer(t):
        raise InputError(
            f"{path}: column {count_column!r} has type {t}, not an integer type; the run reads it as the expected "
            f"token count of each document: fix the column, or pass --no-count-check"
        )
    return count_column


def iter_source(infos, count_columns, batch_bytes: int, skip_nulls: bool = False) -> Iterator[tuple]:
    """``(source index, StringBatch, expected counts or None, documents not valid UTF-8)`` over
    every input, in order (the UTF-8 count is taken here, on the reader thread, beside the encoder)."""
    for si, info in enumerate(infos):
        if info.num_rows == 0:
            continue
        counts = _CountColumn(info.path, count_columns[si]) if count_columns[si] else None
        for batch in iter_string_batches([info.path], info.column, batch_bytes=batch_bytes, skip_nulls=skip_nulls):
            if batch.num_rows == 0:
                continue
            expected = counts.take(batch.first_row, batch.num_rows) if counts is not None else None
            yield si, batch, expected, invalid_utf8_count(batch.data, batch.offsets)


def describe_document(path, row: int, id_column: str | None = None) -> str:
    """``'docs.parquet row 12 (id 'web/x')'``: how errors name a document."""
    text = f"{path} row {row}"
    if id_column:
        try:
            text += f" (id {read_column_rows(path, id_column, [row])[0]!r})"
        except Exception:  # naming the document must never hide the real error
            pass
    return text
