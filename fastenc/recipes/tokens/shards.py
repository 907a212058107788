"""One split's shards: documents in output order -> trainer files under the shard rule, with the
counters of each shard (documents, tokens, bytes in, max id, size and xxh3 of its files)."""
from __future__ import annotations

import os

import numpy as np

from fastenc.recipes.tokens import open_writer, output_paths
from fastenc.recipes.tokens.layout import data_file, shard_base
from fastenc.run.units import file_xxh3


class SplitShards:
    """``add(ids, lengths, nbytes)``: a batch of delimited documents; ``finish()``: the split's counters.

    ``cap``: tokens per shard (None: one shard). ``cut``: llm.c's rule, shards of exactly ``cap``
    tokens, documents continued in the next; else documents stay whole (a longer one alone)."""

    def __init__(self, fmt: str, split: str, stage, delims, cap: int | None, tokenizer_name: str, first_index: int = 0):
        self.fmt, self.split, self.stage, self.delims = fmt, split, stage, delims
        self.cap = cap if cap is not None else 1 << 62
        self.cut = fmt == "llmc"
        self.tokenizer_name = tokenizer_name
        self.index = first_index  # llm.c numbers the shards of both splits in one sequence
        self.shards: list[dict] = []
        self.writer = None
        self.doc_no = 0  # documents of this split started so far

    def add(self, ids: np.ndarray, lengths: np.ndarray, nbytes: np.ndarray) -> None:
        csum = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=csum[1:])
        (self._add_cut if self.cut else self._add_whole)(ids, lengths, nbytes, csum)

    def _add_whole(self, ids, lengths, nbytes, csum) -> None:
        s, n = 0, len(lengths)
        while s < n:
            self._open()
            room = self.cap - self.fill
            e = int(np.searchsorted(csum, csum[s] + room, side="right")) - 1
            if e == s and self.fill == 0:
                e = s + 1  # a single document longer than a shard: alone in one
            if e > s:
                self._write(ids[csum[s]:csum[e]], lengths[s:e], e - s, int(nbytes[s:e].sum()))
            if e < n:
                self._close()
            s = e

    def _add_cut(self, ids, lengths, nbytes, csum) -> None:
        starts, pos, total = csum[:-1], 0, int(csum[-1])
        while pos < total:
            self._open()
            take = min(self.cap - self.fill, total - pos)
            a, b = np.searchsorted(starts, [pos, pos + take], side="left")
            self._write(ids[pos:pos + take], np.array([take]), int(b - a), int(nbytes[a:b].sum()))
            pos += take
            if self.fill == self.cap:
                self._close()
        if total == 0 and len(lengths):  # documents without ids (no delimiters, empty texts)
            self._open()
            self._write(ids[:0], np.array([0]), len(lengths), int(nbytes.sum()))

    def _open(self) -> None:
        if self.writer is not None:
            return
        self.base = shard_base(self.fmt, self.split, self.index)
        self.writer = open_writer(self.fmt, self.stage.path(self.base), self.delims, self.tokenizer_name, temp=False)
        self.fill, self.docs, self.bytes_in, self.first = 0, 0, 0, self.doc_no

    def _write(self, ids, lengths, docs: int, nbytes: int) -> None:
        self.writer.add(ids, lengths)
        self.fill += len(ids)
        self.docs += docs
        self.doc_no += docs
        self.bytes_in += nbytes

    def _close(self) -> None:
        if self.writer is None:
            return
        counters = self.writer.finish()
        self.writer = None
        files = [p.relative_to(self.stage.dir).as_posix() for p in output_paths(self.fmt, self.stage.path(self.base))]
        self.shards.append({
            "base": self.base,
            "files": {f: os.stat(self.stage.dir / f).st_size for f in files},
            "documents": self.docs,
            "first_document": self.first,
            "tokens": counters["tokens"],
            "bytes_in": self.bytes_in,
            "max_id": counters["max_id"],
            # re-read from disk: the bytes there are the bytes written, and verify can check them later
            "xxh3_64": file_xxh3(self.stage.dir / data_file(self.fmt, self.base)),
        })
        self.index += 1

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
            self.writer = None

    def finish(self) -> dict:
        self._close()
        return totals(self.shards)


def totals(shards: list[dict]) -> dict:
    """A split's (or the output's) counters from its shards."""
    return {"documents": sum(s["documents"] for s in shards), "tokens": sum(s["tokens"] for s in shards),
            "bytes_in": sum(s["bytes_in"] for s in shards), "max_id": max((s["max_id"] for s in shards), default=-1),
            "shards": shards}
