"""What the three format writers share: staged output files, batch checks, counters, the read result."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from fastenc.errors import InputError, UsageError
from fastenc.run import faults
from fastenc.run.staging import StagedFile, temp_name

_CHUNK = 1 << 22  # ids per write when a batch is converted to the format's dtype


class BadTokenFile(InputError):
    """A trainer file that is not what its format says (wrong magic, truncated, sizes that disagree):
    the message names the file and what to do."""


class TokenDocs(NamedTuple):
    """What a reader gives: the ids (a read-only memory map where possible), document offsets
    (int64, ``n_docs + 1``, ``offsets[0] == 0``, ``offsets[-1] == len(ids)``), and the files read."""

    ids: np.ndarray
    offsets: np.ndarray
    paths: tuple

    @property
    def n_docs(self) -> int:
        return len(self.offsets) - 1

    def document(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i]:self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


@dataclass
class Counters:
    """A writer's running totals (for the card and the sidecar)."""

    documents: int = 0
    tokens: int = 0
    max_id: int = -1
    files: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"documents": self.documents, "tokens": self.tokens, "max_id": self.max_id,
                "files": [str(p) for p in self.files]}


class OutFile:
    """One output file: written under ``<name>.tmp-<pid>-<hex>`` beside its final name and renamed
    by ``commit()`` (``temp=True``), or written at its final name when the caller's staging folder is
    the temporary (``temp=False``, the run skeleton's ``Stage``). Writes and fsyncs go through
    ``fastenc.run.staging.StagedFile`` (and so through the fault hooks)."""

    def __init__(self, path: Path, temp: bool = True):
        self.path = Path(path)
        self.temp = temp
        self.write_path = self.path.with_name(temp_name(self.path.name)) if temp else self.path
        self.staged = StagedFile(self.write_path, "wb")
        self.file = self.staged.file

    def finish(self) -> None:
        self.staged.finish()

    committed = False  # renamed onto its final name (temp=True), or finished in place (temp=False)

    def commit(self) -> None:
        if self.temp:
            faults.step("rename", self.path)
            os.replace(self.write_path, self.path)
            self.committed = True  # (before the hook: a signal just after the rename finds it done)
            faults.step(faults.RENAMED, self.path)
        else:
            self.committed = True

    def discard(self) -> None:
        """Close and delete what this file wrote: its temporary, or its final name if it was
        renamed there already (the caller's commit point was not reached)."""
        self.staged.close_quietly()
        with contextlib.suppress(FileNotFoundError):
            (self.path if self.committed else self.write_path).unlink()


def discard_all(files, commit_point) -> None:
    """A writer's abort: nothing if its commit point (the file renamed last) was renamed -- the
    output is complete, a signal came just after --, else every file it wrote goes."""
    if commit_point is not None and commit_point.committed:
        return
    for out in files:
        if out is not None:
            out.discard()


def as_batch(ids, lengths, dtype: np.dtype, where: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(ids in ``dtype``, lengths int64, max id) of one batch, refusing an id the dtype cannot hold
    and lengths that do not add up."""
    ids = np.asarray(ids)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise UsageError(f"{where}: ids must be a 1-D integer array, not {ids.dtype} of shape {ids.shape}")
    if len(lengths) and int(lengths.min()) < 0:
        raise UsageError(f"{where}: a document length is negative")
    if int(lengths.sum()) != len(ids):
        raise UsageError(f"{where}: the lengths sum to {int(lengths.sum())}, the batch has {len(ids)} ids")
    top = -1
    if len(ids):
        top = int(ids.max())
        low = int(ids.min())
        info = np.iinfo(dtype)
        if low < 0 or top > info.max:
            bad = low if low < 0 else top
            raise UsageError(f"{where}: id {bad} does not fit {dtype.name} (0..{info.max}); "
                             "pass ids of the vocabulary (or write a format with a wider dtype)")
    return ids.astype(dtype, copy=False), lengths, top


def write_array(out: OutFile, arr: np.ndarray) -> None:
    """Write ``arr``'s bytes (little-endian as the formats are; numpy's native order on x86/ARM)."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    for start in range(0, len(arr), _CHUNK):
        out.file.write(memoryview(arr[start:start + _CHUNK]).cast("B"))


def file_size(path: Path, fix: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        raise BadTokenFile(f"{path} is missing; {fix}") from None
    except OSError as exc:
        raise BadTokenFile(f"cannot read {path}: {exc.strerror}; {fix}") from None


def memmap(path: Path, dtype, offset: int, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(count,))
