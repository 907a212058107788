"""The token bin as a file: writing it chunk by chunk, and reading it back.

Writing (``ChunkWriter``) overlaps the disk with the gather of the next chunk and hashes what it
writes. Reading (``iter_decoded``, ``count_tokens_equal``) is for the decode CLI, the
recipe's read-back check and ``fastenc verify``; it uses plain file reads, not a memmap, so a pass
over a whole bin does not inflate the process's resident set.
"""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np

_STRETCH_TOKENS = 4 << 20  # tokens per stretch when a whole bin is decoded (~140 k URLs): the
# decoded text and its canonical form stay small and their memory is reused stretch after stretch
# (`fastenc verify` of an 8.3 M-URL bin: 3.9-4.5 s with stretches of 32 M tokens, 3.4-3.7 s with 4 M)


class ChunkWriter:
    """Writes token chunks to a file (and hashes them) from a background thread, so that the
    disk (~300 MB/s here: the 2.6 GB bin of a full shard takes ~8 s) works while the next chunk
    is gathered. Three buffers rotate: one being filled, up to two queued."""

    def __init__(self, file, depth: int = 2):
        import queue
        import threading

        import xxhash

        self.file = file
        self.hash = xxhash.xxh3_64()
        self.todo: queue.Queue = queue.Queue(maxsize=depth)
        self.free: queue.Queue = queue.Queue()
        for _ in range(depth + 1):
            self.free.put(np.empty(0, np.uint16))
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="fastenc-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self.todo.get()
            if item is None:
                return
            buf, count = item
            try:
                if self.error is None:
                    raw = buf[:count].astype("<u2", copy=False)
                    self.file.write(memoryview(raw).cast("B"))
                    self.hash.update(raw)
            except BaseException as exc:  # reported to the main thread by put() / close()
                self.error = exc
            self.free.put(buf)

    def buffer(self, size: int) -> np.ndarray:
        """A free buffer of at least ``size`` uint16 (waits while all are queued)."""
        buf = self.free.get()
        if buf.size < size:
            buf = np.empty(size + size // 8, np.uint16)
        return buf

    def put(self, chunk: np.ndarray) -> None:
        if self.error is not None:
            raise self.error
        self.todo.put((chunk.base if chunk.base is not None else chunk, chunk.size))

    def close(self) -> str:
        """Wait for the queued chunks; returns the xxh3_64 of all bytes written (hex)."""
        self.todo.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.hash.hexdigest()


class _TokenReader:
    """Reads stretches of a token bin, from an array (a memmap) or from a file path.

    From a path it reads with plain file reads into fresh arrays, so a pass over a whole bin
    does not leave gigabytes of mapped file pages in the process's resident set (as a memmap
    would: they count in its peak RSS)."""

    def __init__(self, source):
        if isinstance(source, (str, os.PathLike)):
            self.file = open(source, "rb")
            self.size = os.fstat(self.file.fileno()).st_size // 2
            self.tokens = None
        else:
            self.file = None
            self.tokens = source
            self.size = int(source.size)

    def read(self, p: int, n: int) -> np.ndarray:
        n = max(0, min(n, self.size - p))
        if self.tokens is not None:
            return np.asarray(self.tokens[p : p + n])
        self.file.seek(2 * p)
        return np.fromfile(self.file, dtype="<u2", count=n)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def count_tokens_equal(path: str | os.PathLike, value: int = 0, block: int = 1 << 18) -> int:
    """How many tokens of the bin at ``path`` equal ``value`` (read in blocks, not mapped).

    The block (512 kB) is read and counted while it is still in the CPU's cache; a 64 MB block was
    fresh memory on every call."""
    count = 0
    buf = np.empty(block, "<u2")
    with open(path, "rb") as f:
        while True:
            got = f.readinto(memoryview(buf).cast("B"))
            if not got:
                break
            count += int(np.count_nonzero(buf[: got // 2] == value))
    return count


def iter_decoded(source, enc, start: int = 0, eos: int = 0, stretch: int = _STRETCH_TOKENS) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Decode a URL bin (an array, or a file path) from token position ``start`` (an ``eos``)
    in stretches of whole URLs.

    Yields ``(position, data, offsets)``: the stretch's first token position and its URLs'
    stored (canonical) text as flat arrays. Raises ``ValueError`` on an id outside the vocabulary.
    """
    from fastenc.kernels.url_pack import decode_urls, decoded_length, find_eos_before

    reader = _TokenReader(source)
    try:
        p = start
        while p < reader.size:
            part = reader.read(p, stretch)
            if p + len(part) < reader.size:
                cut = int(find_eos_before(part, len(part), eos))
                if cut > 0:
                    part = part[:cut]
                else:  # one URL longer than the stretch: read on to the next eos
                    q = p + len(part)
                    while q < reader.size:
                        hits = np.flatnonzero(reader.read(q, stretch) == eos)
                        if hits.size:
                            q += int(hits[0])
                            break
                        q += stretch
                    part = reader.read(p, min(q, reader.size) - p)
            urls, nbytes = decoded_length(part, enc.vocab.token_offsets, eos)
            if urls < 0:
                raise ValueError(f"token ids out of the vocabulary's range (0..{enc.vocab_size - 1}) "
                                 f"between positions {p} and {p + len(part)}")
            data = np.empty(nbytes, np.uint8)
            offs = np.empty(urls + 1, np.int64)
            if decode_urls(part, enc.vocab.token_bytes, enc.vocab.token_offsets, eos, data, offs) != urls:
                raise ValueError(f"could not decode the tokens between positions {p} and {p + len(part)}")
            yield p, data, offs
            p += len(part)
    finally:
        reader.close()
