"""GPT-2 long-context recipe: documents -> GPT-2 ``uint16`` bins bucketed by token count.

Output format (``"format": "fastenc-gpt2"``, see docs/gpt2.md and the dataset card
``gpt2-long-context.md``)::

    OUT/<bucket>/part_00.bin        uint16 GPT-2 ids, documents concatenated, no separator
    OUT/<bucket>/part_00.idx.npy    int64, ndocs + 1 offsets into the bin, idx[0] == 0
    OUT/<bucket>/part_00.meta.json  counts, provenance, tokenizer sha256, verification counters
    OUT/summary.tsv, OUT/summary.json  documents and tokens per bucket and in total (json last)

- Encoding: tiktoken's gpt2 ``encode_ordinary`` (``<|endoftext|>`` in a text is ordinary text,
  so id 50256 never occurs), by ``fastenc.load("gpt2").encode_arrays`` on every Numba thread.
- Buckets: a document with ``n`` tokens goes to the bucket whose half-open range holds ``n``
  (``BUCKETS``); ``--buckets`` keeps some of them, the others are counted and dropped. Empty
  documents (0 tokens) cannot make ``idx`` strictly increasing: they are skipped and counted.
- Part rule (the bytes recipe's shard rule, in tokens): a document goes into its bucket's
  open part if that part is empty or the document still fits within ``part_tokens``;
  otherwise it starts the next part. So parts hold whole documents, in input order, and are at
  most ``part_tokens`` long unless a part holds one single longer document.

The run is one streaming pass. A reader thread decodes the parquet batches (and the
``gpt2_tokens`` column of the same rows) while the main thread encodes the previous batch; the
encoded batch is cut into runs of consecutive same-bucket documents, and each run is written
straight into its bucket's open part file (temporary names) with no copy. Memory is a few
batches, whatever the input and part sizes: no part is ever held in memory, and the
``.idx.npy`` is streamed too (its 128-byte header is rewritten with the final length).

Checks done by the run, recorded in every ``meta.json`` (any failure stops the run, exit 1,
naming the document; nothing appears under a final name):

- every document's token count against the ``gpt2_tokens`` column, when the input has one;
- a deterministic sample (each part's first document and every ``decode_every``-th document of
  each bucket) is read back from the part file, decoded and compared byte for byte with the source;
- each finished part is re-read from disk: ``len(bin) == idx[-1]``, ``idx[0] == 0``, ``idx``
  strictly increasing, every document length inside the bucket's range, ``max(id) < 50257``,
  and the bytes read equal the bytes written (xxh3).
"""
from __future__ import annotations

import json
import os
import queue
import re
import threading
import time
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from numpy.lib import format as npy_format

from fastenc.arrow_io import (
    AtomicGroup,
    inspect_inputs,
    iter_string_batches,
    read_column_rows,
    remove_stale_temps,
    resolve_inputs,
    write_json_atomic,
)
from fastenc.errors import InputError, VerificationError
from fastenc.progress import format_bytes, format_rate, progress, summary_line

FORMAT = "fastenc-gpt2"
FORMAT_VERSION = 1
TOKENIZER = "gpt2"
VOCAB_SIZE = 50257
BUCKETS = (
    "b0_lt_4096",
    "b1_4096_8192",
    "b2_8192_16384",
    "b3_16384_32768",
    "b4_32768_65536",
    "b5_65536_131072",
    "b6_gte_131072",
)
#: bucket k holds documents with EDGES[k-1] <= tokens < EDGES[k] (b0 from 1, b6 unbounded)
EDGES = np.array([4096, 8192, 16384, 32768, 65536, 131072], dtype=np.int64)
EMPTY = len(BUCKETS)  # pseudo-bucket of empty documents (skipped)
#: 2**28 tokens = 512 MiB of bin per part: a few hundred parts for a 100 B-token corpus, each
#: small enough to download, memmap, hash and verify on its own, and big enough that the
#: per-file overhead (listing, open, metadata) is noise; below the 5 GB where S3/HF uploads
#: need multipart. Every part is also verified as it closes, so this bounds that cost too.
DEFAULT_PART_TOKENS = 1 << 28
DEFAULT_BATCH_BYTES = 32 << 20
DEFAULT_DECODE_EVERY = 1000
DEFAULT_COUNT_COLUMN = "gpt2_tokens"
TEXT_CANDIDATES = ("content", "text")
SUMMARY_JSON = "summary.json"
SUMMARY_TSV = "summary.tsv"
_PART_RE = re.compile(r"^part_(\d{2,})\.(bin|idx\.npy|meta\.json)$")
_NPY_HEADER = 128  # numpy pads a 1-D header to 128 bytes for any length (room to grow in place)
_CHUNK = 1 << 20  # re-read buffer: small, so that checking a part costs few page faults

PART_RULE = (
    "parts end at document boundaries: a document goes into its bucket's open part if that part is empty "
    "or the document still fits within part_tokens, otherwise it starts the next part; parts hold whole "
    "documents in input order and are at most part_tokens long unless a part holds a single longer document"
)
ENCODING_TEXT = (
    "tiktoken gpt2 encode_ordinary: <|endoftext|> in the text is ordinary text (id 50256 never occurs); "
    "no separator between documents"
)


def bucket_range(b: int) -> tuple[int, int | None]:
    """``(lo, hi)``: bucket ``b`` holds documents with ``lo <= tokens < hi`` (``hi`` None: no limit)."""
    lo = 1 if b == 0 else int(EDGES[b - 1])
    hi = int(EDGES[b]) if b < len(EDGES) else None
    return lo, hi


def bucket_of(n_tokens: int) -> int:
    """Bucket index of a document with ``n_tokens`` tokens (``EMPTY`` for 0)."""
    return EMPTY if n_tokens == 0 else int(np.searchsorted(EDGES, n_tokens, side="right"))


def buckets_of(counts: np.ndarray) -> np.ndarray:
    """Vectorised ``bucket_of`` (int8)."""
    b = np.searchsorted(EDGES, counts, side="right").astype(np.int8)
    b[counts == 0] = EMPTY
    return b


def parse_buckets(text: str | Sequence[str] | None) -> list[int]:
    """``"b1,b2,b3"`` (short names or full names, or ``"all"``) -> sorted bucket indices."""
    if text is None:
        return list(range(len(BUCKETS)))
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if items == ["all"]:
        return list(range(len(BUCKETS)))
    out = set()
    for item in items:
        hit = [k for k, name in enumerate(BUCKETS) if item == name or item == name.split("_")[0]]
        if not hit:
            raise InputError(f"unknown bucket {item!r}: use names from {', '.join(BUCKETS)} (or b0..b6, or 'all')")
        out.add(hit[0])
    if not out:
        raise InputError("--buckets names no bucket: give e.g. b1,b2,b3 or all")
    return sorted(out)


def part_stem(k: int) -> str:
    return f"part_{k:02d}"


def _npy_header(n: int) -> bytes:
    import io

    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": "<i8", "fortran_order": False, "shape": (n,)})
    h = buf.getvalue()
    if len(h) != _NPY_HEADER:  # cannot happen with numpy >= 1.24's growth padding; never write a bad file
        raise AssertionError(f"unexpected .npy header length {len(h)} for shape ({n},)")
    return h


# ----------------------------------------------------------------------------------------------
# Reading: text batches + the count column of the same rows, prefetched by a thread
# ----------------------------------------------------------------------------------------------


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
        arr = self.pf.read_row_group(rg, columns=[self.column]).column(0)
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


def _count_column_of(path: Path, count_column: str | None) -> str | None:
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


def _iter_source(infos, count_columns, batch_bytes: int) -> Iterator[tuple]:
    """``(source index, StringBatch, expected counts or None)`` over every input, in order."""
    for si, info in enumerate(infos):
        if info.num_rows == 0:
            continue
        counts = _CountColumn(info.path, count_columns[si]) if count_columns[si] else None
        for batch in iter_string_batches([info.path], info.column, batch_bytes=batch_bytes):
            if batch.num_rows == 0:
                continue
            expected = counts.take(batch.first_row, batch.num_rows) if counts is not None else None
            yield si, batch, expected


_END = object()


class _Prefetch:
    """Runs a generator in a thread, one item ahead (pyarrow decodes while the kernel encodes).

    Exceptions in the generator are re-raised in the consumer; ``close()`` stops the thread.
    """

    def __init__(self, gen: Iterator, depth: int = 1):
        self.gen = gen
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fastenc-gpt2-reader", daemon=True)
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


# ----------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------


class _Batch:
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


def describe_document(path, row: int, id_column: str | None = None) -> str:
    """``'docs.parquet row 12 (id 'web/x')'``: how errors name a document."""
    text = f"{path} row {row}"
    if id_column:
        try:
            text += f" (id {read_column_rows(path, id_column, [row])[0]!r})"
        except Exception:  # naming the document must never hide the real error
            pass
    return text


class _Part:
    """The open part of a bucket: two temporaries being appended to, and its running counters."""

    def __init__(self, index: int, directory: Path, group: AtomicGroup):
        self.index = index
        self.stem = part_stem(index)
        self.bin = group.open(directory / f"{self.stem}.bin", "w+b")  # read back for the round trip
        self.idx = group.open(directory / f"{self.stem}.idx.npy")
        self.idx.file.write(_npy_header(0))
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


class _BucketWriter:
    """Appends runs of one bucket's documents to its part files, applying the part rule."""

    def __init__(self, b: int, out_dir: Path, part_tokens: int, decode_every: int, group: AtomicGroup, ctx: dict):
        self.b = b
        self.name = BUCKETS[b]
        self.dir = out_dir / self.name
        self.lo, self.hi = bucket_range(b)
        self.part_tokens = part_tokens
        self.decode_every = decode_every
        self.group = group
        self.ctx = ctx  # encoder, run-level fields of meta.json
        self.parts: list[dict] = []  # finished parts' meta
        self.part: _Part | None = None
        self.docs = 0  # documents written to this bucket so far (its next document's ordinal)
        self.created_dir = False

    def write(self, ids: np.ndarray, id_off: np.ndarray, s: int, e: int, batch: _Batch) -> None:
        """Write documents ``s..e-1`` of an encoded batch (all of this bucket, none empty)."""
        while s < e:
            if self.part is None:
                self._open()
            room = self.part_tokens - self.part.tokens
            k = min(e, int(np.searchsorted(id_off, id_off[s] + room, side="right")) - 1)
            if k <= s:
                if self.part.docs:
                    self._close()  # the next document does not fit: it starts the next part
                    continue
                k = s + 1  # a document longer than a whole part: a part of its own
            self._append(ids, id_off, s, k, batch)
            s = k

    def _open(self) -> None:
        if not self.dir.is_dir():
            self.dir.mkdir(parents=True)
            self.created_dir = True
        self.part = _Part(len(self.parts), self.dir, self.group)
        self.part.first_bucket_doc = self.docs

    def _append(self, ids, id_off, s: int, k: int, batch: _Batch) -> None:
        p = self.part
        a, z = int(id_off[s]), int(id_off[k])
        chunk = ids[a:z].astype("<u2", copy=False)  # the card's byte order (no copy on little-endian hosts)
        p.bin.file.write(chunk.data)
        p.bin_hash.update(chunk)
        ends = (id_off[s + 1 : k + 1] - (a - p.tokens)).astype("<i8", copy=False)
        p.idx.file.write(ends.data)
        p.idx_hash.update(ends)
        tokens_before, docs_before = p.tokens, p.docs
        p.tokens += z - a
        p.docs += k - s
        p.sources[batch.source] = p.sources.get(batch.source, 0) + (k - s)
        if batch.checked_counts:
            p.count_checked += k - s
        # the sample: every decode_every-th document of the bucket, and each part's first document
        o0 = self.docs
        picks = set(range(s + (-o0) % self.decode_every, k, self.decode_every))
        if docs_before == 0:
            picks.add(s)
        if picks:
            p.bin.file.flush()
            fd = p.bin.file.fileno()
            for j in sorted(picks):
                start = tokens_before + int(id_off[j] - id_off[s])
                self._roundtrip(fd, start, int(id_off[j + 1] - id_off[j]), docs_before + (j - s), j, batch)
        self.docs += k - s

    def _roundtrip(self, fd: int, start: int, n: int, part_doc: int, j: int, batch: _Batch) -> None:
        """Read document ``j`` of the batch (``part_doc`` of the part) back from the part file,
        decode it and compare it byte for byte with the source text."""
        p = self.part
        raw = os.pread(fd, 2 * n, 2 * start)
        ids = np.frombuffer(raw, dtype="<u2")
        src = batch.data[batch.offsets[j] : batch.offsets[j + 1]]
        got = np.frombuffer(self.ctx["encoder"].decode_bytes(ids), dtype=np.uint8) if ids.size == n else None
        row = batch.first_row + j
        if got is None or got.size != src.size or not np.array_equal(got, src):
            at = "in length" if got is None or got.size != src.size else f"at byte {int(np.argmax(got != src))}"
            raise VerificationError(
                f"round trip failed for {describe_document(batch.path, row, batch.id_column)}: its ids, read back "
                f"from {self.name}/{p.stem}.bin (document {part_doc} of the part), decode to bytes that differ from "
                f"the source text {at}; this is a fastenc bug: please report it with this document"
            )
        p.roundtrip_checked += 1
        p.samples.append([part_doc, batch.source, row])

    def _close(self) -> None:
        p = self.part
        if p is None:
            return
        self.part = None
        p.idx.file.flush()
        p.idx.file.seek(0)
        p.idx.file.write(_npy_header(p.docs + 1))
        p.bin.finish()
        p.idx.finish()
        checks = check_part_files(p.bin.temp_path, p.idx.temp_path, self.b)
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
            "bin_bytes": 2 * p.tokens,
            "dtype": "uint16",
            "idx_dtype": "int64",
            "first_bucket_doc": p.first_bucket_doc,
            "tokenizer": TOKENIZER,
            "tokenizer_sha256": self.ctx["tokenizer_sha256"],
            "vocab_size": VOCAB_SIZE,
            "encoding": ENCODING_TEXT,
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
                "max_token_id_lt_vocab": checks["max_token_id"] is not None and checks["max_token_id"] < VOCAB_SIZE,
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
        af = self.group.open(self.dir / f"{p.stem}.meta.json", "w", encoding="utf-8")
        af.file.write(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
        af.finish()
        self.parts.append(meta)

    def finish(self) -> dict:
        self._close()
        return {
            "docs": sum(m["docs"] for m in self.parts),
            "tokens": sum(m["tokens"] for m in self.parts),
            "parts": [
                {"stem": f"{self.name}/{part_stem(m['part'])}", "docs": m["docs"], "tokens": m["tokens"],
                 "bin_xxh3_64": m["bin_xxh3_64"], "idx_xxh3_64": m["idx_xxh3_64"]}
                for m in self.parts
            ],
        }


def check_part_files(bin_path: Path, idx_path: Path, b: int) -> dict:
    """Re-read one part from disk and check the card's invariants (and the bucket's range).

    Returns the measured values (``bin_tokens``, ``idx_first``, ``idx_last``, ``docs``,
    ``idx_non_increasing``, ``outside_range``, ``max_token_id``, the xxh3 of each whole file
    and of each data section) and ``problems``: a list of broken invariants, empty when all hold.
    Reads in fixed-size chunks: memory does not grow with the part size.
    """
    problems: list[str] = []
    lo, hi = bucket_range(b)
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    out: dict = {"problems": problems}

    # .bin: uint16 ids, no header
    h = xxhash.xxh3_64()
    size = 0
    top = -1
    with open(bin_path, "rb") as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
            usable = n - (n % 2)
            if usable:
                top = max(top, int(np.frombuffer(buf, dtype="<u2", count=usable // 2).max()))
            size += n
    if size % 2:
        problems.append(f"{bin_path.name} has an odd size ({size} bytes): not a uint16 array")
    out.update(bin_tokens=size // 2, max_token_id=top if size >= 2 else None,
               bin_xxh3_64=h.hexdigest(), bin_data_xxh3_64=h.hexdigest())
    if top >= VOCAB_SIZE:
        problems.append(f"max token id is {top}, not < {VOCAB_SIZE}")

    # .idx.npy: a 1-D little-endian int64 array of ndocs + 1 offsets
    whole = xxhash.xxh3_64()
    data_h = xxhash.xxh3_64()
    first = last = None
    count = non_inc = outside = 0
    prev = None
    with open(idx_path, "rb") as f:
        try:
            version = npy_format.read_magic(f)
            if version != (1, 0):
                raise ValueError(f"npy format version {version}, expected (1, 0)")
            shape, fortran, dtype = npy_format.read_array_header_1_0(f)
        except (ValueError, OSError) as exc:
            problems.append(f"{idx_path.name} is not a valid .npy file ({exc})")
            shape, fortran, dtype = None, None, None
        if shape is not None:
            if dtype != np.dtype("<i8") or len(shape) != 1 or fortran:
                problems.append(f"{idx_path.name} holds {dtype} of shape {shape}, expected a 1-D int64 array")
            header_len = f.tell()
            f.seek(0)
            whole.update(f.read(header_len))
            rest = b""
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                whole.update(view[:n])
                data_h.update(view[:n])
                chunk = rest + bytes(view[:n]) if rest else view[:n]
                usable = len(chunk) - len(chunk) % 8
                vals = np.frombuffer(chunk, dtype="<i8", count=usable // 8)
                rest = bytes(chunk[usable:])
                if not vals.size:
                    continue
                if first is None:
                    first = int(vals[0])
                steps = np.diff(vals) if prev is None else np.diff(np.concatenate(([prev], vals)))
                non_inc += int(np.count_nonzero(steps <= 0))
                outside += int(np.count_nonzero((steps < lo) | ((steps >= hi) if hi is not None else False)))
                prev = int(vals[-1])
                count += int(vals.size)
            if rest:
                problems.append(f"{idx_path.name}: its data is not a whole number of int64 values")
            if len(shape) == 1 and shape[0] != count:
                problems.append(f"{idx_path.name}: its header says {shape[0]} offsets, the file holds {count}")
            last = prev
    out.update(idx_first=first, idx_last=last, docs=count - 1 if count else None, idx_non_increasing=non_inc,
               outside_range=outside, idx_xxh3_64=whole.hexdigest(), idx_data_xxh3_64=data_h.hexdigest())
    if count == 0:
        problems.append(f"{idx_path.name} is empty: it must hold at least the offset 0")
    if first is not None and first != 0:
        problems.append(f"idx[0] is {first}, not 0")
    if non_inc:
        problems.append(f"idx is not strictly increasing ({non_inc} step(s) <= 0)")
    if last is not None and last != size // 2:
        problems.append(f"len(bin) is {size // 2} tokens but idx[-1] is {last}")
    if outside:
        rng = f"[{lo}, {hi})" if hi is not None else f">= {lo}"
        problems.append(f"{outside} document(s) have a token count outside the bucket's range {rng}")
    return out


# ----------------------------------------------------------------------------------------------
# The recipe
# ----------------------------------------------------------------------------------------------


def _request(infos, column, kept, part_tokens, count_column, decode_every, sha256) -> dict:
    from fastenc import __version__

    return {
        "sources": [[os.path.abspath(i.path), i.file_bytes, Path(i.path).stat().st_mtime_ns] for i in infos],
        "column": column,
        "buckets": [BUCKETS[b] for b in kept],
        "part_tokens": part_tokens,
        "count_column": count_column,
        "decode_every": decode_every,
        "tokenizer_sha256": sha256,
        "fastenc_version": __version__,
    }


def _own_files(out_dir: Path) -> list[Path]:
    """Files of a gpt2 output in ``out_dir``: bucket parts and the summaries."""
    found = [out_dir / n for n in (SUMMARY_JSON, SUMMARY_TSV) if (out_dir / n).is_file()]
    for name in BUCKETS:
        d = out_dir / name
        if d.is_dir():
            found += [p for p in d.iterdir() if _PART_RE.match(p.name)]
    return found


def _finished_same(out_dir: Path, request: dict) -> dict | None:
    """The existing summary if ``out_dir`` already holds a complete output of this very request."""
    try:
        summary = json.loads((out_dir / SUMMARY_JSON).read_text(encoding="utf-8"))
        if summary.get("format") != FORMAT or summary.get("request") != request:
            return None
        for name in summary["kept_buckets"]:
            for part in summary["buckets"][name]["parts"]:
                stem = out_dir / part["stem"]
                for suffix in (".bin", ".idx.npy", ".meta.json"):
                    if not stem.with_name(stem.name + suffix).is_file():
                        return None
                if stem.with_name(stem.name + ".bin").stat().st_size != 2 * part["tokens"]:
                    return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return summary


def _summary_tsv(summary: dict) -> str:
    lines = ["bucket\tdocs\ttokens\tkept\tparts"]
    for name in BUCKETS:
        info = summary["buckets"][name]
        lines.append(f"{name}\t{info['docs']}\t{info['tokens']}\t{'yes' if info['kept'] else 'no'}\t{len(info['parts'])}")
    t = summary["total"]
    lines.append(f"total\t{t['docs']}\t{t['tokens']}\t\t{sum(len(summary['buckets'][n]['parts']) for n in BUCKETS)}")
    return "\n".join(lines) + "\n"


def encode_gpt2(
    inputs: Sequence[str | os.PathLike] | str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    column: str | None = None,
    buckets: str | Sequence[str] | None = None,
    part_tokens: int = DEFAULT_PART_TOKENS,
    count_column: str | None = DEFAULT_COUNT_COLUMN,
    decode_every: int = DEFAULT_DECODE_EVERY,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    threads: int | None = None,
    overwrite: bool = False,
    quiet: bool = False,
) -> dict:
    """Encode the documents of ``inputs`` into GPT-2 bucketed bins under ``out_dir``; returns the summary.

    ``inputs``: parquet files, directories or globs, read in the order given. ``column``: the
    text column (default: ``content`` when a file has it, else ``text``). ``buckets``: which
    buckets to write (``"b1,b2,b3"``; default all), the others are counted and dropped.
    ``count_column``: the column of expected token counts, compared for every document of
    every file that has it (None: no comparison). ``decode_every``: every N-th document of each
    bucket (and each part's first) is decoded back from disk and compared with its source.
    ``threads``: Numba threads for the encoder (default: all). ``batch_bytes`` and ``threads``
    change memory and speed only: the output is byte-identical for any values.

    ``out_dir`` must be absent or empty; if it already holds the finished output of the same
    request (same input files, sizes and mtimes, same options, tokenizer and fastenc version),
    nothing is done and its summary is returned; another non-empty ``out_dir`` is refused unless
    ``overwrite``, which replaces a previous gpt2 output (its parts and summaries; other files
    are left alone).
    """
    import numba

    import fastenc

    if part_tokens < 1:
        raise InputError(f"--part-tokens must be at least 1 (got {part_tokens})")
    if decode_every < 1:
        raise InputError(f"--decode-every must be at least 1 (1 decodes every document; got {decode_every})")
    if batch_bytes < 1:
        raise InputError(f"--batch-bytes must be positive (got {batch_bytes})")
    kept = parse_buckets(buckets)
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    paths = resolve_inputs([os.fspath(p) for p in inputs])
    infos = inspect_inputs(paths, column, candidates=None if column else TEXT_CANDIDATES)
    count_columns = [_count_column_of(i.path, count_column) for i in infos]
    id_columns = ["id" if "id" in pq.ParquetFile(i.path).schema_arrow.names else None for i in infos]
    enc = fastenc.load(TOKENIZER)
    if enc.vocab_size != VOCAB_SIZE or np.dtype(enc.dtype) != np.uint16:
        raise AssertionError(f"the built-in gpt2 vocabulary has {enc.vocab_size} ids ({enc.dtype}), expected {VOCAB_SIZE} (uint16)")
    out_dir = Path(out_dir)
    request = _request(infos, column, kept, part_tokens, count_column, decode_every, enc.sha256)

    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"output {out_dir} exists and is not a directory: choose a directory path with -o")
    created_out = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out_dir)
    for name in BUCKETS:
        remove_stale_temps(out_dir / name)
    existing = sorted(p.name for p in out_dir.iterdir())
    if existing:
        done = _finished_same(out_dir, request)
        if done is not None and not overwrite:
            summary_line(f"fastenc gpt2: {out_dir} already holds this output (summary.json matches); nothing to do", quiet=quiet)
            return done
        if not overwrite:
            shown = ", ".join(existing[:5]) + (", ..." if len(existing) > 5 else "")
            raise InputError(
                f"output directory {out_dir} is not empty ({shown}): pass --overwrite to replace a previous fastenc "
                "gpt2 output there, or choose an empty or new directory"
            )

    from fastenc import __version__

    sources = [
        {"path": os.path.abspath(i.path), "column": i.column, "column_type": i.arrow_type, "rows": i.num_rows,
         "file_bytes": i.file_bytes, "count_column": cc}
        for i, cc in zip(infos, count_columns)
    ]
    ctx = {"encoder": enc, "sources": sources, "tokenizer_sha256": enc.sha256, "fastenc_version": __version__,
           "count_column": count_column if any(count_columns) else None}
    old_threads = numba.get_num_threads()
    if threads is not None:
        if not 1 <= threads <= numba.config.NUMBA_NUM_THREADS:
            raise InputError(f"--threads must be between 1 and {numba.config.NUMBA_NUM_THREADS} (got {threads})")
        numba.set_num_threads(threads)

    t0 = time.perf_counter()
    bar = progress(sum(i.column_bytes for i in infos), unit="B", desc="gpt2", quiet=quiet)
    group = AtomicGroup()
    writers = {b: _BucketWriter(b, out_dir, part_tokens, decode_every, group, ctx) for b in kept}
    is_kept = np.zeros(EMPTY + 1, dtype=bool)
    is_kept[kept] = True
    docs_per = np.zeros(EMPTY + 1, np.int64)
    tokens_per = np.zeros(EMPTY + 1, np.int64)
    text_bytes = 0
    count_checked = 0
    n_docs = 0
    reader = _Prefetch(_iter_source(infos, count_columns, batch_bytes))
    try:
        for si, batch, expected in reader:
            ids, id_off = enc.encode_arrays(batch.data, batch.offsets)
            counts = np.diff(id_off)
            if expected is not None:
                bad = np.flatnonzero(counts != expected)
                if bad.size:
                    j = int(bad[0])
                    raise VerificationError(
                        f"token count mismatch for {describe_document(batch.path, batch.first_row + j, id_columns[si])}: "
                        f"fastenc gives {int(counts[j])} tokens, column {count_columns[si]!r} says {int(expected[j])} "
                        f"({bad.size} mismatch(es) in this batch of {batch.num_rows}); if the column was computed with "
                        "another tokenizer, pass --no-count-check"
                    )
                count_checked += batch.num_rows
            bk = buckets_of(counts)
            docs_per += np.bincount(bk, minlength=EMPTY + 1)
            tokens_per += np.bincount(bk, weights=counts, minlength=EMPTY + 1).astype(np.int64)
            info = _Batch(si, batch.path, batch.first_row, batch.data, batch.offsets, expected is not None, id_columns[si])
            # runs of consecutive documents of one bucket: each is one write, with no copy
            cuts = np.flatnonzero(bk[1:] != bk[:-1]) + 1
            starts = [0] + cuts.tolist()
            ends = cuts.tolist() + [batch.num_rows]
            for s, e in zip(starts, ends):
                b = int(bk[s])
                if is_kept[b]:
                    writers[b].write(ids, id_off, s, e, info)
            n_docs += batch.num_rows
            text_bytes += int(batch.data.size)
            bar.update(int(batch.data.size))
            bar.set_postfix_str(f"{n_docs:,} docs", refresh=False)
        results = {b: w.finish() for b, w in writers.items()}
        group.finish()
    except BaseException:
        reader.close()
        group.discard()
        bar.close()
        for w in writers.values():
            if w.created_dir:
                _rmdir_if_empty(w.dir)
        if created_out:
            _rmdir_if_empty(out_dir)
        raise
    finally:
        numba.set_num_threads(old_threads)
    reader.close()
    bar.close()

    bucket_info = {}
    for b, name in enumerate(BUCKETS):
        r = results.get(b)
        if r is not None and (r["docs"] != docs_per[b] or r["tokens"] != tokens_per[b]):
            raise AssertionError(f"{name}: written {r['docs']} docs / {r['tokens']} tokens, counted {docs_per[b]} / {tokens_per[b]}")
        bucket_info[name] = {
            "min_tokens": bucket_range(b)[0],
            "max_tokens": bucket_range(b)[1],
            "kept": b in results,
            "docs": int(docs_per[b]),
            "tokens": int(tokens_per[b]),
            "parts": r["parts"] if r else [],
        }
    metas = [m for w in writers.values() for m in w.parts]
    summary = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fastenc_version": __version__,
        "tokenizer": TOKENIZER,
        "tokenizer_sha256": enc.sha256,
        "vocab_size": VOCAB_SIZE,
        "dtype": "uint16",
        "encoding": ENCODING_TEXT,
        "bucket_edges": EDGES.tolist(),
        "kept_buckets": [BUCKETS[b] for b in kept],
        "buckets": bucket_info,
        "total": {"docs": int(docs_per[:EMPTY].sum()), "tokens": int(tokens_per[:EMPTY].sum())},
        "kept": {"docs": int(docs_per[kept].sum()), "tokens": int(tokens_per[kept].sum())},
        "documents_read": n_docs,
        "empty_documents_skipped": int(docs_per[EMPTY]),
        "source_text_bytes": text_bytes,
        "checks": {
            "count_column": ctx["count_column"],
            "count_checked": count_checked,
            "count_mismatches": 0,
            "count_checked_kept": sum(m["checks"]["count_checked"] for m in metas),
            "roundtrip_checked": sum(m["checks"]["roundtrip_checked"] for m in metas),
            "roundtrip_mismatches": 0,
            "parts_checked": len(metas),
        },
        "part_tokens": part_tokens,
        "part_rule": PART_RULE,
        "decode_every": decode_every,
        "sources": sources,
        "request": request,
    }

    # Publish: every part is durable (fsynced) and checked. Remove the old summary first so that a
    # crash below never leaves a summary.json describing a mix of old and new parts.
    new_paths = {af.final_path for af in group.files}
    try:
        (out_dir / SUMMARY_JSON).unlink(missing_ok=True)
        (out_dir / SUMMARY_TSV).unlink(missing_ok=True)
        group.commit()
    except BaseException:
        group.discard()
        raise
    for p in _own_files(out_dir):
        if p.parent != out_dir and p not in new_paths:
            p.unlink()  # a part of a previous output (only with --overwrite)
    for name in BUCKETS:
        _rmdir_if_empty(out_dir / name)
    from fastenc.arrow_io import atomic_output

    with atomic_output(out_dir / SUMMARY_TSV, "w", encoding="utf-8") as f:
        f.write(_summary_tsv(summary))
    write_json_atomic(out_dir / SUMMARY_JSON, summary)

    dt = time.perf_counter() - t0
    per = ", ".join(
        f"{name.split('_')[0]} {bucket_info[name]['docs']:,}/{bucket_info[name]['tokens']:,}"
        + ("" if bucket_info[name]["kept"] else " (dropped)")
        for name in BUCKETS
    )
    summary_line(
        f"fastenc gpt2: {n_docs:,} documents -> {out_dir}: kept {summary['kept']['docs']:,} docs / "
        f"{summary['kept']['tokens']:,} tokens in {len(metas)} part(s); docs/tokens per bucket: {per}; "
        f"{summary['empty_documents_skipped']:,} empty skipped; {count_checked:,} counts checked, "
        f"{summary['checks']['roundtrip_checked']:,} round trips, 0 mismatches; {format_bytes(text_bytes)} of text in "
        f"{dt:.2f} s ({format_rate(text_bytes, dt)})",
        quiet=quiet,
    )
    return summary


def _rmdir_if_empty(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass


# ----------------------------------------------------------------------------------------------
# Verification (called by ``fastenc verify``)
# ----------------------------------------------------------------------------------------------


def verify_output(out_dir: Path, source: Sequence[Path] | None = None) -> dict:
    """Re-check a gpt2 output directory from its files alone (and against ``source`` if given).

    From the files: summary.json and every part's meta.json parse and have this format; the part
    files on disk are exactly those listed, numbered from 00 in each kept bucket; every part
    satisfies the card's invariants (``len(bin) == idx[-1]``, ``idx[0] == 0``, ``idx`` strictly
    increasing, ``max(id) < 50257``), every document length lies in its bucket's range, the
    files' xxh3 match the sidecars, the counts of the metas, the summary and the files agree,
    the part rule holds, the recorded counters say every check passed, and the tokenizer sha256
    is that of the gpt2 vocabulary fastenc ships. With ``source`` (the input files, in the
    order of the run): the recorded sample documents are decoded and compared byte for byte
    with the source texts, and, when the sources have the count column, every source document's
    count is matched, in order, with the next document of its bucket (so each bucket holds
    exactly the documents it should, in input order), and the dropped and empty counts too.
    """
    out_dir = Path(out_dir)
    report: dict = {"format": FORMAT, "ok": False, "problems": [], "out_dir": str(out_dir)}
    try:
        _verify(out_dir, source, report)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        if isinstance(exc, InputError):
            raise
        report["problems"].append(f"a sidecar is malformed ({type(exc).__name__}: {exc}): rerun the recipe with --overwrite")
    report["ok"] = not report["problems"]
    return report


def _verify(out_dir: Path, source, report: dict) -> None:
    import fastenc

    problems: list[str] = report["problems"]
    try:
        summary = json.loads((out_dir / SUMMARY_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"cannot read {out_dir / SUMMARY_JSON}: {exc}")
        return
    if summary.get("format") != FORMAT:
        problems.append(f"summary.json format is {summary.get('format')!r}, expected {FORMAT!r}")
        return
    if summary.get("format_version") != FORMAT_VERSION:
        problems.append(f"summary.json format_version {summary.get('format_version')!r} is not {FORMAT_VERSION}: use the fastenc that wrote it")
        return
    enc = fastenc.load(TOKENIZER)
    if summary.get("tokenizer_sha256") != enc.sha256:
        problems.append(
            f"summary.json was written with tokenizer sha256 {summary.get('tokenizer_sha256')}, but fastenc's gpt2 "
            f"tokenizer.json is {enc.sha256}: the ids may differ; re-encode with this fastenc"
        )
    part_tokens = int(summary["part_tokens"])
    kept_names = list(summary["kept_buckets"])
    for name in kept_names:
        if name not in BUCKETS or not summary["buckets"][name]["kept"]:
            problems.append(f"summary.json: kept bucket {name!r} is unknown or not marked kept")
            return

    listed: set[Path] = set()
    for name in kept_names:
        for part in summary["buckets"][name]["parts"]:
            for suffix in (".bin", ".idx.npy", ".meta.json"):
                listed.add(out_dir / (part["stem"] + suffix))
    for name in BUCKETS:
        d = out_dir / name
        if d.is_dir():
            for p in sorted(d.iterdir()):
                if _PART_RE.match(p.name) and p not in listed:
                    problems.append(f"{name}/{p.name} is on disk but not in summary.json (left from another run?)")

    totals = {"docs": 0, "tokens": 0}
    n_parts = 0
    metas: dict[str, list[dict]] = {}
    for b, name in enumerate(BUCKETS):
        info = summary["buckets"][name]
        totals["docs"] += int(info["docs"])
        totals["tokens"] += int(info["tokens"])
        if name not in kept_names:
            if info["parts"]:
                problems.append(f"{name} is not kept but summary.json lists parts for it")
            continue
        metas[name] = []
        docs_sum = tokens_sum = 0
        prev = None  # (tokens of the previous part)
        for k, part in enumerate(info["parts"]):
            stem = f"{name}/{part_stem(k)}"
            if part["stem"] != stem:
                problems.append(f"{name}: part {k} is {part['stem']!r}, expected {stem!r}")
                continue
            n_parts += 1
            bin_path, idx_path, meta_path = (out_dir / (stem + s) for s in (".bin", ".idx.npy", ".meta.json"))
            missing = [p.name for p in (bin_path, idx_path, meta_path) if not p.is_file()]
            if missing:
                problems.append(f"{stem}: missing {', '.join(missing)}")
                continue
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                problems.append(f"{stem}.meta.json cannot be read: {exc}")
                continue
            metas[name].append(meta)
            checks = check_part_files(bin_path, idx_path, b)
            problems += [f"{stem}: {p}" for p in checks["problems"]]
            _check_meta(stem, meta, part, checks, name, k, docs_sum, summary, enc.sha256, problems)
            if part["tokens"] > part_tokens and part["docs"] != 1:
                problems.append(f"{stem}: {part['tokens']} tokens > part_tokens {part_tokens} with {part['docs']} documents")
            if prev is not None and checks["docs"]:
                first_len = int(np.load(idx_path, mmap_mode="r")[1])
                if prev + first_len <= part_tokens:
                    problems.append(
                        f"{stem}: its first document ({first_len} tokens) would have fitted in the previous part "
                        f"({prev} of {part_tokens} tokens): the part rule was not followed"
                    )
            prev = checks["bin_tokens"]
            docs_sum += int(part["docs"])
            tokens_sum += int(part["tokens"])
        if docs_sum != info["docs"] or tokens_sum != info["tokens"]:
            problems.append(f"{name}: summary.json says {info['docs']} docs / {info['tokens']} tokens, its parts add up to {docs_sum} / {tokens_sum}")

    if summary["total"] != totals:
        problems.append(f"summary.json total {summary['total']} but the buckets add up to {totals}")
    kept = {"docs": sum(summary["buckets"][n]["docs"] for n in kept_names), "tokens": sum(summary["buckets"][n]["tokens"] for n in kept_names)}
    if summary["kept"] != kept:
        problems.append(f"summary.json kept {summary['kept']} but the kept buckets add up to {kept}")
    if summary["documents_read"] != totals["docs"] + summary["empty_documents_skipped"]:
        problems.append(f"documents_read {summary['documents_read']} != bucketed {totals['docs']} + empty {summary['empty_documents_skipped']}")
    c = summary["checks"]
    if c["count_mismatches"] or c["roundtrip_mismatches"]:
        problems.append(f"summary.json records mismatches: {c}")
    tsv = out_dir / SUMMARY_TSV
    if not tsv.is_file() or tsv.read_text(encoding="utf-8") != _summary_tsv(summary):
        problems.append("summary.tsv is missing or does not match summary.json")

    report.update(
        documents=totals["docs"], tokens=totals["tokens"], kept_documents=kept["docs"], kept_tokens=kept["tokens"],
        empty_documents=summary["empty_documents_skipped"], parts=n_parts,
        buckets={n: {"docs": summary["buckets"][n]["docs"], "tokens": summary["buckets"][n]["tokens"], "kept": n in kept_names} for n in BUCKETS},
        checked_source=False,
    )
    if source is not None and not problems:
        _compare_with_source(out_dir, summary, metas, [Path(p) for p in source], enc, report)
        report["checked_source"] = True


def _check_meta(stem, meta, part, checks, name, k, docs_before, summary, sha, problems) -> None:
    def bad(text):
        problems.append(f"{stem}.meta.json: {text}")

    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        bad(f"format {meta.get('format')!r} v{meta.get('format_version')!r}, expected {FORMAT!r} v{FORMAT_VERSION}")
        return
    if meta["bucket"] != name or meta["part"] != k:
        bad(f"says bucket {meta['bucket']!r} part {meta['part']}, expected {name!r} part {k}")
    if meta["tokenizer_sha256"] != sha:
        bad(f"tokenizer sha256 {meta['tokenizer_sha256']} is not fastenc's gpt2 tokenizer.json ({sha})")
    if not meta.get("fastenc_version"):
        bad("no fastenc_version")
    if meta["docs"] != part["docs"] or meta["tokens"] != part["tokens"]:
        bad(f"{meta['docs']} docs / {meta['tokens']} tokens, summary.json says {part['docs']} / {part['tokens']}")
    if checks["docs"] != meta["docs"] or checks["bin_tokens"] != meta["tokens"] or meta["bin_bytes"] != 2 * meta["tokens"]:
        bad(f"{meta['docs']} docs / {meta['tokens']} tokens, the files hold {checks['docs']} / {checks['bin_tokens']}")
    for key in ("bin_xxh3_64", "idx_xxh3_64"):
        if meta[key] != checks[key] or part[key] != checks[key]:
            bad(f"{key} {meta[key]} (summary {part[key]}) but the file's is {checks[key]} (content changed)")
    if meta["first_bucket_doc"] != docs_before:
        bad(f"first_bucket_doc {meta['first_bucket_doc']}, the parts before it hold {docs_before} documents")
    if sum(s["docs"] for s in meta["sources"]) != meta["docs"]:
        bad("its per-source document counts do not add up to its docs")
    c = meta["checks"]
    flags = ("len_bin_eq_idx_last", "idx0_eq_0", "idx_strictly_increasing", "max_token_id_lt_vocab", "reread_equals_written")
    failed = [f for f in flags if c.get(f) is not True]
    if failed or c["count_mismatches"] or c["roundtrip_mismatches"] or c["docs_outside_bucket_range"]:
        bad(f"records failed checks: {failed} {c}")
    if c["bin_tokens"] != checks["bin_tokens"] or c["idx_last"] != checks["idx_last"] or c["max_token_id"] != checks["max_token_id"]:
        bad(f"counters {c['bin_tokens']}/{c['idx_last']}/{c['max_token_id']} differ from the files' {checks['bin_tokens']}/{checks['idx_last']}/{checks['max_token_id']}")
    if c["roundtrip_checked"] != len(meta["roundtrip_samples"]) or not 0 <= c["count_checked"] <= meta["docs"]:
        bad("its round-trip or count counters are inconsistent")
    n_src = len(summary["sources"])
    for doc, si, row in meta["roundtrip_samples"]:
        if not (0 <= doc < meta["docs"] and 0 <= si < n_src and 0 <= row < summary["sources"][si]["rows"]):
            bad(f"round-trip sample {[doc, si, row]} is out of range")
            break


class _BucketCursor:
    """The document lengths of one bucket, part after part, handed out in order."""

    def __init__(self, out_dir: Path, parts: list[dict]):
        self.files = [out_dir / (p["stem"] + ".idx.npy") for p in parts]
        self.i = 0
        self.lengths = np.empty(0, np.int64)
        self.pos = 0

    def take(self, n: int) -> np.ndarray:
        out = []
        while n > 0:
            if self.pos >= self.lengths.size:
                if self.i >= len(self.files):
                    break
                self.lengths = np.diff(np.load(self.files[self.i], mmap_mode="r"))
                self.pos = 0
                self.i += 1
                continue
            got = self.lengths[self.pos : self.pos + n]
            out.append(got)
            self.pos += got.size
            n -= got.size
        return np.concatenate(out) if out else np.empty(0, np.int64)

    def at_end(self) -> bool:
        return self.take(1).size == 0


def _compare_with_source(out_dir: Path, summary: dict, metas: dict, source: list[Path], enc, report: dict) -> None:
    problems = report["problems"]
    paths = resolve_inputs([str(p) for p in source])
    recorded = summary["sources"]
    if len(paths) != len(recorded):
        problems.append(f"--source gives {len(paths)} file(s), the output was made from {len(recorded)}: pass the same inputs, in order")
        return
    for i, (p, s) in enumerate(zip(paths, recorded)):
        pf = pq.ParquetFile(p)
        if pf.metadata.num_rows != s["rows"] or s["column"] not in pf.schema_arrow.names:
            problems.append(f"--source file {i} ({p}) has {pf.metadata.num_rows} rows / columns {pf.schema_arrow.names}; "
                            f"the output was made from {s['path']} ({s['rows']} rows, column {s['column']!r})")
            return

    # 1. the recorded sample documents, decoded from the bins and compared with the source texts
    wanted: dict[int, list[tuple]] = {}
    for name, ms in metas.items():
        for meta in ms:
            for doc, si, row in meta["roundtrip_samples"]:
                wanted.setdefault(si, []).append((row, name, meta["part"], doc))
    checked = 0
    for si, items in sorted(wanted.items()):
        items.sort()
        for start in range(0, len(items), 1024):
            chunk = items[start : start + 1024]
            texts = read_column_rows(paths[si], recorded[si]["column"], [r for r, *_ in chunk])
            for (row, name, part, doc), text in zip(chunk, texts):
                stem = f"{name}/{part_stem(part)}"
                idx = np.load(out_dir / (stem + ".idx.npy"), mmap_mode="r")
                tok = np.memmap(out_dir / (stem + ".bin"), dtype=np.uint16, mode="r")
                got = enc.decode_bytes(tok[idx[doc] : idx[doc + 1]])
                want = text.encode("utf-8") if isinstance(text, str) else bytes(text)
                checked += 1
                if got != want:
                    problems.append(f"{stem} document {doc} decodes to text that differs from {paths[si]} row {row}")
                    if len(problems) > 20:
                        return
    report["roundtrip_checked"] = checked

    # 2. membership and order, from the sources' count column (when every source has one)
    count_cols = [s.get("count_column") for s in recorded]
    report["count_order_checked"] = 0
    if not count_cols or not all(count_cols):
        return
    kept = {BUCKETS.index(n): _BucketCursor(out_dir, summary["buckets"][n]["parts"]) for n in summary["kept_buckets"]}
    docs_per = np.zeros(EMPTY + 1, np.int64)
    tokens_per = np.zeros(EMPTY + 1, np.int64)
    seen = 0
    for si, p in enumerate(paths):
        pf = pq.ParquetFile(p)
        row0 = 0
        for rg in range(pf.metadata.num_row_groups):
            counts = pf.read_row_group(rg, columns=[count_cols[si]]).column(0).to_numpy().astype(np.int64)
            bk = buckets_of(counts)
            docs_per += np.bincount(bk, minlength=EMPTY + 1)
            tokens_per += np.bincount(bk, weights=counts, minlength=EMPTY + 1).astype(np.int64)
            for b, cur in kept.items():
                sel = np.flatnonzero(bk == b)
                got = cur.take(sel.size)
                if got.size != sel.size or not np.array_equal(got, counts[sel]):
                    j = int(np.argmax(got != counts[sel][: got.size])) if got.size else 0
                    where = f"{p} row {row0 + int(sel[j])}" if sel.size else str(p)
                    problems.append(
                        f"{BUCKETS[b]}: the documents do not match the source's {count_cols[si]!r} counts in order "
                        f"(first difference at {where}): a document is missing, extra, misplaced or mis-encoded"
                    )
                    return
            seen += counts.size
            row0 += counts.size
    for b, cur in kept.items():
        if not cur.at_end():
            problems.append(f"{BUCKETS[b]} holds more documents than the source gives for it")
    for b, name in enumerate(BUCKETS):
        info = summary["buckets"][name]
        if (info["docs"], info["tokens"]) != (int(docs_per[b]), int(tokens_per[b])):
            problems.append(f"{name}: the source's counts give {docs_per[b]} docs / {tokens_per[b]} tokens, summary.json says {info['docs']} / {info['tokens']}")
    if summary["empty_documents_skipped"] != docs_per[EMPTY]:
        problems.append(f"the source has {docs_per[EMPTY]} empty documents, summary.json says {summary['empty_documents_skipped']}")
    report["count_order_checked"] = seen


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def _size_arg(text: str) -> int:
    import argparse

    from fastenc.recipes.bytes import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(p) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="parquet files, directories of them, or globs; read in the order given")
    p.add_argument("-o", "--out", required=True, help="output directory (created; must be empty unless --overwrite)")
    p.add_argument("--column", default=None, help="text column (default: 'content' when present, else 'text')")
    p.add_argument("--buckets", default=None,
                   help="buckets to write, e.g. b1,b2,b3 (default: all of b0..b6); the others are counted and dropped")
    p.add_argument("--part-tokens", type=_size_arg, default=DEFAULT_PART_TOKENS,
                   help="part size limit in tokens; parts end at document boundaries (default: 268435456 = 2**28, 512 MiB of bin)")
    p.add_argument("--count-column", default=DEFAULT_COUNT_COLUMN,
                   help="column of expected token counts, compared for every document when present (default: gpt2_tokens)")
    p.add_argument("--no-count-check", action="store_true", help="do not compare token counts with a count column")
    p.add_argument("--decode-every", type=int, default=DEFAULT_DECODE_EVERY,
                   help="decode every N-th document of each bucket (and each part's first) back from disk and compare "
                        "it with the source (default: 1000; 1: every document)")
    p.add_argument("--batch-bytes", type=_size_arg, default=DEFAULT_BATCH_BYTES,
                   help="read batch size (memory; the output does not depend on it; default: 32MiB)")
    p.add_argument("--threads", type=int, default=None, help="encoder threads (default: every core; the output does not depend on it)")
    p.add_argument("--overwrite", action="store_true", help="replace a previous gpt2 output in OUT")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")


def run(args) -> int:
    encode_gpt2(
        args.inputs,
        args.out,
        column=args.column,
        buckets=args.buckets,
        part_tokens=args.part_tokens,
        count_column=None if args.no_count_check else args.count_column,
        decode_every=args.decode_every,
        batch_bytes=args.batch_bytes,
        threads=args.threads,
        overwrite=args.overwrite,
        quiet=args.quiet,
    )
    return 0
