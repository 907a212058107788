"""Megatron-LM / NeMo / Megatron-core's indexed dataset: ``PREFIX.bin`` + ``PREFIX.idx``.

The bytes, as megatron-core's ``megatron/core/datasets/indexed_dataset.py`` (``_IndexReader``,
``IndexedDataset``) reads them; all integers little-endian::

    PREFIX.bin   the ids of every document, concatenated, in the dtype below; nothing else
    PREFIX.idx   offset  size     field
                 0       9        b"MMIDIDX\\x00\\x00"                      (_INDEX_HEADER)
                 9       8        <Q version, 1
                 17      1        <B dtype code: 8 uint16, 4 int32         (DType; no uint32 code)
                 18      8        <Q S, the sequence count
                 26      8        <Q D, the document count (entries of the document index)
                 34      4*S      int32 sequence lengths, in tokens
                 34+4S   8*S      int64 sequence pointers: byte offset of each sequence in .bin
                 34+12S  8*D      int64 document indices: sequence index where each document
                                  ends, after a leading 0 (D = documents + 1; last == S)

fastenc writes one sequence per document, as ``tools/preprocess_data.py`` does without
``--split-sentences`` (``IndexedDatasetBuilder.add_document(ids, [len(ids)])``): S = documents,
document indices 0, 1, ..., S. The dtype is uint16 when every id of the vocabulary fits (GPT-2),
else int32 (Megatron's ``DType.optimal_dtype`` picks int32 from 65,500 ids on; uint16 up to
65,536 ids reads the same). Nothing is multimodal (no per-sequence mode bytes).

``MegatronWriter`` streams: ``.bin`` is written as batches come, the lengths are spilled to a
temporary beside the index, and ``finish()`` writes ``.idx`` from it (memory: one batch). Both
files are written under temporary names and renamed, ``.bin`` first and ``.idx`` last: a prefix
whose ``.idx`` exists is complete (``IndexedDataset`` needs both).
"""
from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

import numpy as np

from fastenc.errors import UsageError
from fastenc.recipes.tokens.formats._files import (BadTokenFile, Counters, OutFile, TokenDocs, as_batch, discard_all,
                                                   file_size, memmap, write_array)
from fastenc.run.staging import temp_name

__all__ = ["MegatronWriter", "read_megatron", "write_megatron", "HEADER", "DTYPE_CODES", "paths"]

HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
#: megatron-core's ``DType`` enum: code -> numpy dtype
DTYPE_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
               8: np.uint16}
_CODE_OF = {np.dtype(v): k for k, v in DTYPE_CODES.items()}
_FIXED = 34  # 9 + 8 + 1 + 8 + 8
_CHUNK = 1 << 22
FIX = "rewrite it with fastenc tokens --format megatron (or Megatron's preprocess_data.py)"


def paths(prefix) -> tuple[Path, Path]:
    """(PREFIX.bin, PREFIX.idx), as ``get_bin_path`` / ``get_idx_path`` name them."""
    prefix = str(prefix)
    return Path(prefix + ".bin"), Path(prefix + ".idx")


class MegatronWriter:
    """Write one indexed dataset at ``prefix`` from batches of documents.

    ``add(ids, lengths)``: a batch (ids of the documents concatenated, each document's length);
    ``finish()`` writes the index, publishes both files and returns the counters;
    ``abort()`` deletes what was written. ``temp=False`` writes at the final names (the caller's
    staging folder is the temporary). Also a context manager (``abort`` on an exception).
    """

    def __init__(self, prefix, dtype=np.uint16, temp: bool = True):
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.uint16), np.dtype(np.int32)):
            raise UsageError(f"Megatron's index stores uint16 or int32 ids, not {self.dtype.name}")
        self.bin_path, self.idx_path = paths(prefix)
        self.counters = Counters()
        self._bin = OutFile(self.bin_path, temp)
        self._idx = None
        self._spill_path = self.idx_path.with_name(temp_name(self.idx_path.name + ".lengths"))
        self._spill = open(self._spill_path, "wb")
        self._temp = temp
        self.state = "open"

    def add(self, ids, lengths) -> None:
        ids, lengths, top = as_batch(ids, lengths, self.dtype, f"{self.bin_path}")
        if len(lengths) and int(lengths.max()) > np.iinfo(np.int32).max:
            raise UsageError(f"{self.bin_path}: a document of {int(lengths.max())} tokens is past Megatron's "
                             "int32 sequence length; split it")
        write_array(self._bin, ids)
        self._spill.write(lengths.astype("<i4").tobytes())
        c = self.counters
        c.documents += len(lengths)
        c.tokens += len(ids)
        c.max_id = max(c.max_id, top)

    def finish(self) -> dict:
        """Write ``.idx``, fsync both, rename ``.bin`` then ``.idx``; the counters."""
        try:
            if self.counters.tokens == 0 and self.counters.documents:  # Megatron's reader memory-maps the .bin, which fails on an empty file
                raise UsageError(f"{self.bin_path}: no tokens to write, and Megatron cannot read an empty dataset: "
                                 "keep a --bos or --eos, or leave the empty documents out")
            self._bin.finish()
            self._spill.close()
            self._idx = OutFile(self.idx_path, self._temp)
            self._write_index()
            self._idx.finish()
            self._bin.commit()
            self._idx.commit()  # the commit: a prefix with its .idx is complete
        except BaseException:
            self.abort()
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                self._spill_path.unlink()
        self.state = "finished"
        self.counters.files = [self.bin_path, self.idx_path]
        return self.counters.as_dict()

    def _write_index(self) -> None:
        n = self.counters.documents
        out = self._idx
        out.file.write(HEADER + struct.pack("<Q", VERSION) + struct.pack("<B", _CODE_OF[self.dtype])
                       + struct.pack("<Q", n) + struct.pack("<Q", n + 1))
        with open(self._spill_path, "rb") as spill:  # int32 lengths, as spilled
            for block in iter(lambda: spill.read(4 * _CHUNK), b""):
                out.file.write(block)
        itemsize = self.dtype.itemsize
        pointer = 0
        with open(self._spill_path, "rb") as spill:  # int64 byte pointers: exclusive prefix sums
            for block in iter(lambda: spill.read(4 * _CHUNK), b""):
                lengths = np.frombuffer(block, dtype="<i4").astype(np.int64)
                ends = np.cumsum(lengths * itemsize) + pointer
                write_array(out, (ends - lengths * itemsize).astype("<i8"))
                pointer = int(ends[-1])
        for start in range(0, n + 1, _CHUNK):  # int64 document indices 0..n
            write_array(out, np.arange(start, min(n + 1, start + _CHUNK), dtype="<i8"))

    def abort(self) -> None:
        if self.state == "aborted":
            return
        self.state = "aborted"
        with contextlib.suppress(Exception):
            self._spill.close()
        with contextlib.suppress(FileNotFoundError):
            self._spill_path.unlink()
        discard_all((self._bin, self._idx), self._idx)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and self.state == "open":
            self.abort()
        return None


def write_megatron(prefix, ids, lengths, dtype=np.uint16, temp: bool = True) -> dict:
    """One batch as a whole indexed dataset (tests, small inputs)."""
    with MegatronWriter(prefix, dtype, temp) as w:
        w.add(ids, lengths)
        return w.finish()


def read_megatron(prefix) -> TokenDocs:
    """Open ``PREFIX.bin`` + ``PREFIX.idx`` as ``IndexedDataset`` does, with every size checked:
    the ids (memory-mapped) and the document offsets. A wrong or truncated file raises
    ``BadTokenFile`` (one line: the file and the fix)."""
    bin_path, idx_path = paths(prefix)
    size = file_size(idx_path, f"pass the prefix of a .bin/.idx pair (without the suffix) or {FIX}")
    with open(idx_path, "rb") as f:
        head = f.read(_FIXED)
    if len(head) < _FIXED or head[:9] != HEADER:
        raise BadTokenFile(f"{idx_path} is not a Megatron index (no MMIDIDX header"
                           f"{', it is shorter than one' if len(head) < _FIXED else ''}); {FIX}")
    version, code, s, d = struct.unpack("<QBQQ", head[9:])
    if version != VERSION:
        raise BadTokenFile(f"{idx_path} is index version {version}, Megatron reads version 1; {FIX}")
    if code not in DTYPE_CODES:
        raise BadTokenFile(f"{idx_path} has dtype code {code}, which Megatron's DType lacks; {FIX}")
    dtype = np.dtype(DTYPE_CODES[code])
    want = _FIXED + 12 * s + 8 * d
    if size != want:
        extra = " (a multimodal index: fastenc reads text indexes only)" if size == want + s else ""
        raise BadTokenFile(f"{idx_path} is {size} bytes, its header ({s} sequences, {d} document entries) needs "
                           f"{want}{extra}; it is truncated or damaged: {FIX}")
    lengths = memmap(idx_path, np.dtype("<i4"), _FIXED, s)
    pointers = memmap(idx_path, np.dtype("<i8"), _FIXED + 4 * s, s)
    doc_index = memmap(idx_path, np.dtype("<i8"), _FIXED + 12 * s, d)
    if s and int(lengths.min()) < 0:
        raise BadTokenFile(f"{idx_path} has a negative sequence length; {FIX}")
    starts = np.zeros(s + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    if not np.array_equal(pointers, starts[:-1] * dtype.itemsize):
        raise BadTokenFile(f"{idx_path}: the sequence pointers are not the running sums of the lengths "
                           f"(sequences must be stored in order, back to back); {FIX}")
    if d == 0 or doc_index[0] != 0 or doc_index[-1] != s or (d > 1 and (np.diff(doc_index) < 0).any()):
        raise BadTokenFile(f"{idx_path}: the document index must rise from 0 to the sequence count {s}; {FIX}")
    n_tokens = int(starts[-1])
    bin_size = file_size(bin_path, f"the .idx has no .bin beside it: {FIX}")
    if bin_size != n_tokens * dtype.itemsize:
        raise BadTokenFile(f"{bin_path} is {bin_size} bytes, its index says {n_tokens} {dtype.name} ids "
                           f"({n_tokens * dtype.itemsize} bytes); it is truncated or not this index's: {FIX}")
    ids = memmap(bin_path, dtype, 0, n_tokens)
    offsets = starts[np.asarray(doc_index)]
    return TokenDocs(ids, offsets, (bin_path, idx_path))
