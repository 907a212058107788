"""llm.c / modded-nanogpt token shards: a 256 x int32 header, then the ids.

The bytes, as llm.c's ``dev/data/data_common.py`` ``write_datafile`` writes them and its
``train_gpt2.py`` / ``train_llama3.py`` / ``llmc/dataloader.h`` and modded-nanogpt's
``_load_data_shard`` read them; all little-endian::

    offset  size         field
    0       4            int32 magic: 20240520 (GPT-2, uint16 ids) or 20240801 (Llama 3, uint32 ids)
    4       4            int32 version: 1 with 20240520, 7 with 20240801
    8       4            int32 N, the number of ids (< 2**31)
    12      1012         int32 zeros (the rest of the 256)
    1024    2*N or 4*N   the ids: uint16 (20240520) or uint32 (20240801)

The magic says the dtype: uint16 when every id of the vocabulary fits (GPT-2's 50,257), else
uint32 (cl100k, o200k, Llama 3/4, Qwen, Mistral). There is no index: documents are found from
their delimiter (llm.c's ``fineweb.py`` leads each document with ``<|endoftext|>`` for GPT-2 and
``<|begin_of_text|>`` for Llama 3; ``Delimiters.split``). llm.c fills 100 M-token shards and
names them ``<name>_val_000000.bin`` (the first) and ``<name>_train_NNNNNN.bin``; the recipe does
the sharding, this module one file.

``LlmcWriter`` streams: it writes the header with N = 0, the ids as they come, then the header
again with N at ``finish()``, under a temporary name renamed at the end (the commit).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fastenc.errors import UsageError
from fastenc.recipes.tokens.formats._files import (BadTokenFile, Counters, OutFile, TokenDocs, as_batch, discard_all,
                                                   file_size, memmap, write_array)

__all__ = ["LlmcWriter", "read_llmc", "write_llmc", "header", "MAGIC", "HEADER_BYTES", "shard_name"]

#: magic -> (version, id dtype)
MAGIC = {20240520: (1, np.dtype(np.uint16)), 20240801: (7, np.dtype(np.uint32))}
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
MAX_TOKENS = 2 ** 31 - 1
FIX = "rewrite it with fastenc tokens --format llmc (or llm.c's dev/data scripts)"


def header(n_tokens: int, dtype) -> bytes:
    """The 1,024-byte header for ``n_tokens`` ids of ``dtype`` (uint16 or uint32)."""
    dtype = np.dtype(dtype)
    magic = next((m for m, (_, dt) in MAGIC.items() if dt == dtype), None)
    if magic is None:
        raise UsageError(f"llm.c's shards hold uint16 or uint32 ids, not {dtype.name}")
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0], h[1], h[2] = magic, MAGIC[magic][0], n_tokens
    return h.tobytes()


def shard_name(name: str, split: str, index: int) -> str:
    """llm.c's file name: ``fineweb_val_000000.bin``, ``fineweb_train_000001.bin``."""
    return f"{name}_{split}_{index:06d}.bin"


class LlmcWriter:
    """Write one llm.c shard from batches of documents (already delimited; the lengths only count
    documents). ``add``, ``finish``, ``abort``, ``temp`` as ``MegatronWriter``'s. A shard holds
    fewer than 2**31 ids (the header's int32); ``room()`` says how many more fit."""

    def __init__(self, path, dtype=np.uint16, temp: bool = True):
        self.dtype = np.dtype(dtype)
        self.path = Path(path)
        header(0, self.dtype)  # refuses another dtype
        self.counters = Counters()
        self._out = OutFile(self.path, temp)
        self._out.file.write(header(0, self.dtype))
        self.state = "open"

    def room(self) -> int:
        return MAX_TOKENS - self.counters.tokens

    def add(self, ids, lengths) -> None:
        ids, lengths, top = as_batch(ids, lengths, self.dtype, f"{self.path}")
        if len(ids) > self.room():
            raise UsageError(f"{self.path}: {self.counters.tokens + len(ids)} ids are past llm.c's int32 count "
                             f"({MAX_TOKENS}); use smaller shards (--shard-tokens)")
        write_array(self._out, ids)
        c = self.counters
        c.documents += len(lengths)
        c.tokens += len(ids)
        c.max_id = max(c.max_id, top)

    def finish(self) -> dict:
        """The header with the count, fsync, rename (the commit)."""
        try:
            self._out.file.flush()
            self._out.file.seek(0)
            self._out.file.write(header(self.counters.tokens, self.dtype))
            self._out.file.seek(0, 2)
            self._out.finish()
            self._out.commit()
        except BaseException:
            self.abort()
            raise
        self.state = "finished"
        self.counters.files = [self.path]
        return self.counters.as_dict()

    def abort(self) -> None:
        if self.state != "aborted":
            self.state = "aborted"
            discard_all((self._out,), self._out)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and self.state == "open":
            self.abort()
        return None


def write_llmc(path, ids, lengths=None, dtype=np.uint16, temp: bool = True) -> dict:
    """One batch as a whole shard (tests, small inputs)."""
    ids = np.asarray(ids)
    with LlmcWriter(path, dtype, temp) as w:
        w.add(ids, [len(ids)] if lengths is None else lengths)
        return w.finish()


def read_llmc_ids(path) -> np.ndarray:
    """The ids of an llm.c shard (memory-mapped), its header checked as llm.c's loaders check it
    and its size against the header's count. ``BadTokenFile`` (one line) if not."""
    path = Path(path)
    size = file_size(path, f"pass the path of a .bin shard or {FIX}")
    if size < HEADER_BYTES:
        raise BadTokenFile(f"{path} is {size} bytes, shorter than llm.c's 1024-byte header; {FIX}")
    h = np.fromfile(path, dtype="<i4", count=3)
    magic, version, n = int(h[0]), int(h[1]), int(h[2])
    if magic not in MAGIC:
        raise BadTokenFile(f"{path} has magic {magic}, not llm.c's 20240520 (uint16) or 20240801 (uint32); "
                           f"it is not an llm.c shard: {FIX}")
    want_version, dtype = MAGIC[magic]
    if version != want_version:
        raise BadTokenFile(f"{path} has version {version}; llm.c reads version {want_version} with magic {magic}: {FIX}")
    if n < 0 or size != HEADER_BYTES + n * dtype.itemsize:
        raise BadTokenFile(f"{path} is {size} bytes, its header says {n} {dtype.name} ids "
                           f"({HEADER_BYTES + max(n, 0) * dtype.itemsize} bytes); it is truncated: {FIX}")
    return memmap(path, dtype.newbyteorder("<"), HEADER_BYTES, n)


def read_llmc(path, delimiters=None) -> TokenDocs:
    """The ids of a shard and its document offsets, found from ``delimiters``
    (``fastenc.recipes.tokens.delimit.Delimiters``; None: the whole shard is one run of ids)."""
    ids = read_llmc_ids(path)
    if delimiters is None or delimiters.per_document == 0:
        offsets = np.array([0, len(ids)], dtype=np.int64)
    else:
        offsets = delimiters.split(ids)
    return TokenDocs(ids, offsets, (Path(path),))
