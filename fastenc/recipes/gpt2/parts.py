"""Writing for the GPT-2 recipe, in two phases (docs/scale.md):

- map: one ``BucketSpill`` per kept bucket and input file appends runs of that file's documents
  to the spill (ids, and each document's token count), and round-trips a sample of them from disk;
- reduce: one ``BucketWriter`` per kept bucket streams the spills, in input order, into its
  parts under the part rule, and, as each part closes, re-reads and checks it and writes its
  meta.json."""
from __future__ import annotations

import os

import numpy as np
import xxhash

from fastenc.errors import VerificationError
from fastenc.run.parts import CappedParts
from fastenc.run.staging import finish_after_check
from fastenc.recipes.gpt2.format import (
    BUCKETS,
    FORMAT,
    FORMAT_VERSION,
    GPT2_FORMAT,
    PART_RULE,
    bucket_range,
    check_part_files,
    npy_header,
    part_stem,
)
from fastenc.recipes.gpt2.source import describe_document


class Batch:
    """What a writer needs to know about the batch being written."""

    __slots__ = ("source", "path", "first_row", "data", "offsets", "checked_counts", "id_column")

    def __init__(self, source, path, first_row, data, offsets, checked_counts, id_column):
        self.source = source
        self.path = path
        self.first_row = first_row
        self.data = data
        self.offsets = offsets
        self.checked_counts = checked_counts
        self.id_column = id_column


class _Part:
    """The open part of a bucket: two temporaries being appended to, and its running counters."""

    def __init__(self, index: int, bucket: str, stage):
        self.index = index
        self.stem = part_stem(index)
        self.bin = stage.open(f"{bucket}/{self.stem}.bin")
        self.idx = stage.open(f"{bucket}/{self.stem}.idx.npy")
        self.idx.file.write(npy_header(0))
        zero = np.zeros(1, np.int64)
        self.idx.file.write(zero.data)
        self.bin_hash = xxhash.xxh3_64()
        self.idx_hash = xxhash.xxh3_64(zero.tobytes())
        self.tokens = 0
        self.docs = 0
        self.sources: dict[int, int] = {}
        self.count_checked = 0
        self.roundtrip_checked = 0
        self.samples: list[list[int]] = []
        self.first_bucket_doc = -1


#: A bucket's spill is appended one run of documents at a time (a few kB each): through a buffer
#: of 1 MB the kernel gets 1 MB writes, which the page cache holds in large folios: deleting the
#: spills after publication then takes about half the time.
SPILL_BUFFER = 1 << 20


def spill_names(bucket: str) -> tuple[str, str]:
    """A bucket's two spill files: its ids (disk dtype) and its documents' token counts (int64)."""
    return f"{bucket}.ids", f"{bucket}.lens"


class BucketSpill:
    """Map phase: one input file's documents of one bucket, appended in file order to the spill.

    The round-trip sample is every ``decode_every``-th document of the bucket counted within the
    file, starting with its first: it is read back from the spill on disk, decoded and compared
    with the source text (the reduce then copies these very bytes, checked by xxh3).
    """

    def __init__(self, b: int, stage, decode_every: int, enc, fmt):
        self.name = BUCKETS[b]
        ids_name, lens_name = spill_names(self.name)
        self.ids = stage.open(ids_name, "w+b", buffering=SPILL_BUFFER)  # read back for the round trip
        self.lens = stage.open(lens_name)
        self.decode_every = decode_every
        self.enc = enc
        self.fmt = fmt
        self.docs = 0
        self.tokens = 0
        self.samples: list[list[int]] = []  # [document of the bucket in this file, source row]

    def write(self, ids: np.ndarray, id_off: np.ndarray, s: int, e: int, batch: Batch) -> None:
        """Append documents ``s..e-1`` of an encoded batch (all of this bucket, none empty)."""
        a, z = int(id_off[s]), int(id_off[e])
        self.ids.file.write(ids[a:z].astype(self.fmt.disk_dtype, copy=False).data)  # the card's byte order
        self.lens.file.write(np.diff(id_off[s : e + 1]).astype("<i8").data)
        picks = range(s + (-self.docs) % self.decode_every, e, self.decode_every)
        if picks:
            self.ids.file.flush()
            fd = self.ids.file.fileno()
            for j in picks:
                start = self.tokens + int(id_off[j] - id_off[s])
                self._roundtrip(fd, start, int(id_off[j + 1] - id_off[j]), self.docs + (j - s), j, batch)
        self.docs += e - s
        self.tokens += z - a

    def _roundtrip(self, fd: int, start: int, n: int, doc: int, j: int, batch: Batch) -> None:
        """Read document ``j`` of the batch back from the spill, decode it, compare it with the source."""
        item = self.fmt.itemsize
        ids = np.frombuffer(os.pread(fd, item * n, item * start), dtype=self.fmt.disk_dtype)
        src = batch.data[batch.offsets[j] : batch.offsets[j + 1]]
        got = np.frombuffer(self.enc.decode_bytes(ids), dtype=np.uint8) if ids.size == n else None
        row = batch.first_row + j
        if got is None or got.size != src.size or not np.array_equal(got, src):
            at = "in length" if got is None or got.size != src.size else f"at byte {int(np.argmax(got != src))}"
            raise VerificationError(
                f"round trip failed for {describe_document(batch.path, row, batch.id_column)}: its ids, read back "
                f"from the {self.name} spill of its file (document {doc} of the bucket there), decode to bytes that "
                f"differ from the source text {at}; this is a fastenc bug: please report it with this document"
            )
        self.samples.append([doc, row])

    def finish(self) -> dict:
        self.ids.finish()
        self.lens.finish()
        return {"docs": self.docs, "tokens": self.tokens, "samples": self.samples}


class BucketWriter(CappedParts):
    """Reduce phase: the spills of one bucket, in input order, cut into parts under the part rule
    (``fastenc.run.parts``, in tokens); each part is checked as it closes."""

    def __init__(self, b: int, stage, part_tokens: int, ctx: dict):
        super().__init__(part_tokens)
        self.b = b
        self.name = BUCKETS[b]
        self.lo, self.hi = bucket_range(b)
        self.part_tokens = part_tokens
        self.stage = stage
        self.ctx = ctx  # run-level fields of meta.json
        self.fmt = ctx.get("format", GPT2_FORMAT)  # the encoding and the bins' dtype
        self.parts: list[dict] = []  # finished parts' meta
        self.part: _Part | None = None
        self.docs = 0  # documents written to this bucket so far (its next document's ordinal)

    def write_spill(self, source: int, folder, spill: dict, checked_counts: bool) -> None:
        """Append the bucket's spill of input ``source`` (in ``folder``; ``spill``: its map result)."""
        from fastenc.run.units import read_blocks

        ids_name, lens_name = spill_names(self.name)
        lens = np.fromfile(folder / lens_name, dtype="<i8")
        csum = np.zeros(lens.size + 1, np.int64)
        np.cumsum(lens, out=csum[1:])
        samples = np.array(spill["samples"], np.int64).reshape(-1, 2)
        for s, e, data in read_blocks(folder / ids_name, csum, self.fmt.itemsize):
            ids = np.frombuffer(data, dtype=self.fmt.disk_dtype)
            self.write_items(csum, s, e, ids, csum, s, source, samples, checked_counts)

    def write_back(self, wait: bool = True) -> None:
        """Have the open part's data written to disk now (it stays a temporary until publication).
        ``wait=False``: only start it (the last unit's: the parts' closing checks run meanwhile)."""
        if self.part is not None:
            self.part.bin.write_back(wait)
            self.part.idx.write_back(wait)

    def _open_part(self) -> None:
        self.part = _Part(len(self.parts), self.name, self.stage)
        self.part.first_bucket_doc = self.docs

    def _append(self, s: int, k: int, ids, csum, block_start: int, source: int, samples, checked_counts: bool) -> None:
        p = self.part
        a, z = int(csum[s]), int(csum[k])
        base = int(csum[block_start])
        chunk = ids[a - base : z - base]
        p.bin.file.write(chunk.data)
        p.bin_hash.update(chunk)
        ends = (csum[s + 1 : k + 1] - (a - p.tokens)).astype("<i8", copy=False)
        p.idx.file.write(ends.data)
        p.idx_hash.update(ends)
        lo, hi = np.searchsorted(samples[:, 0], [s, k])
        for doc, row in samples[lo:hi].tolist():
            p.samples.append([p.docs + doc - s, source, row])
        p.roundtrip_checked += int(hi - lo)
        p.tokens += z - a
        p.docs += k - s
        p.sources[source] = p.sources.get(source, 0) + (k - s)
        if checked_counts:
            p.count_checked += k - s
        self.docs += k - s

    def _close_part(self) -> None:
        p, self.part = self.part, None
        p.idx.file.flush()
        p.idx.file.seek(0)
        p.idx.file.write(npy_header(p.docs + 1))
        checks = finish_after_check([p.bin, p.idx], lambda: check_part_files(p.bin.temp_path, p.idx.temp_path, self.b, self.fmt))
        expect = {
            "bin_tokens": p.tokens,
            "idx_last": p.tokens,
            "docs": p.docs,
        }
        problems = [f"{k} is {checks[k]} on disk, {v} written" for k, v in expect.items() if checks[k] != v]
        if checks["bin_data_xxh3_64"] != p.bin_hash.hexdigest():
            problems.append("the .bin read back differs from the ids written (xxh3)")
        if checks["idx_data_xxh3_64"] != p.idx_hash.hexdigest():
            problems.append("the .idx.npy read back differs from the offsets written (xxh3)")
        problems += checks["problems"]
        if problems:
            raise VerificationError(
                f"{self.name}/{p.stem}: the part failed its checks after writing: {'; '.join(problems)} "
                f"(is the disk full or failing? nothing was published)"
            )
        sources = self.ctx["sources"]
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "bucket": self.name,
            "bucket_min_tokens": self.lo,
            "bucket_max_tokens": self.hi,
            "part": p.index,
            "bin": f"{p.stem}.bin",
            "idx": f"{p.stem}.idx.npy",
            "docs": p.docs,
            "tokens": p.tokens,
            "bin_bytes": self.fmt.itemsize * p.tokens,
            "dtype": self.fmt.dtype,
            "idx_dtype": "int64",
            "first_bucket_doc": p.first_bucket_doc,
            "tokenizer": self.fmt.tokenizer,
            **({"tokenizer_pattern": self.fmt.pattern} if self.fmt.pattern else {}),
            "tokenizer_sha256": self.ctx["tokenizer_sha256"],
            "vocab_size": self.fmt.vocab_size,
            "encoding": self.fmt.encoding_text,
            "fastenc_version": self.ctx["fastenc_version"],
            "part_tokens": self.part_tokens,
            "part_rule": PART_RULE,
            "sources": [
                {"source": si, "path": sources[si]["path"], "column": sources[si]["column"], "docs": n}
                for si, n in sorted(p.sources.items())
            ],
            "checks": {
                "len_bin_eq_idx_last": checks["bin_tokens"] == checks["idx_last"],
                "bin_tokens": checks["bin_tokens"],
                "idx_last": checks["idx_last"],
                "idx0_eq_0": checks["idx_first"] == 0,
                "idx_strictly_increasing": checks["idx_non_increasing"] == 0,
                "idx_non_increasing_steps": checks["idx_non_increasing"],
                "max_token_id": checks["max_token_id"],
                "max_token_id_lt_vocab": checks["max_token_id"] is not None and checks["max_token_id"] < self.fmt.vocab_size,
                "docs_outside_bucket_range": checks["outside_range"],
                "reread_equals_written": True,
                "count_column": self.ctx["count_column"],
                "count_checked": p.count_checked,
                "count_mismatches": 0,
                "roundtrip_checked": p.roundtrip_checked,
                "roundtrip_mismatches": 0,
            },
            "bin_xxh3_64": checks["bin_xxh3_64"],
            "idx_xxh3_64": checks["idx_xxh3_64"],
            "roundtrip_samples": p.samples,
        }
        self.stage.write_json(f"{self.name}/{p.stem}.meta.json", meta)
        self.parts.append(meta)

    def finish(self) -> dict:
        self.close()
        return {
            "docs": sum(m["docs"] for m in self.parts),
            "tokens": sum(m["tokens"] for m in self.parts),
            "parts": [
                {"stem": f"{self.name}/{part_stem(m['part'])}", "docs": m["docs"], "tokens": m["tokens"],
                 "bin_xxh3_64": m["bin_xxh3_64"], "idx_xxh3_64": m["idx_xxh3_64"]}
                for m in self.parts
            ],
        }
