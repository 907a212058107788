"""URL recipe (the URL dataset card): one parquet shard -> ``tokens-sNNNNN.bin`` + sidecar.

Output format (see ``../shared/seeds/urls-tokenized.md`` and docs/urls.md)::

    OUT/tokens-s00042.bin    flat little-endian uint16; every URL as [0] ++ encode(canonical(url))
    OUT/tokens-s00042.json   sidecar: counts, dtype, eos id, tokenizer sha256, shard, source (written last)
    OUT/tokenizer/           the exact tokenizer folder that produced the bin

- ``url`` means the ORIGINAL bytes of the source column. Shard membership is
  ``(xxh3_64(url) * num_shards) >> 64 == shard`` and the bin's order is ``xxh3_64(url)``
  ascending, equal hashes in source row order. Both hash the original, never the canonical form.
- The stored text is ``canonical(url)`` (host labels TLD-first); decoding gives it back and one
  more ``canonical()`` gives the original (the function is an involution).
- Every URL is kept as it is: malformed ones, empty strings (a lone ``[0]``; hashed as xxh3 of
  ``b""``) and URLs of any length. Nulls are an error naming the file and row, unless
  ``skip_nulls``, which drops them and counts them in the sidecar (``null_urls_skipped``).

Stages (each timed; progress bars in URLs on stderr):

1. **read + hash + encode**, one streaming pass in the source's order: row groups are decoded
   by two background threads into Arrow buffers (no Python string per URL); per chunk, every URL
   is hashed (xxh3_64, Numba), its shard checked, and it is encoded (canonical() + URL pre-split
   + BPE + the leading 0, one fused parallel kernel) into one token buffer. The source is
   SURT-sorted, so neighbouring URLs share hosts and the BPE piece caches hit: encoding in this
   order and permuting the tokens afterwards measured ~30% faster than encoding in hash order,
   and the text itself is never held whole. A URL outside the shard stops all encoding (the
   pass only counts from then on) and fails the run before anything is written.
2. **sort** by hash (``fastenc.kernels.url_pack.hash_order``: stable, ties in source order).
3. **write**: the token spans in hash order (a prefetching gather kernel), chunk by chunk, to the
   bin's temporary file, then fsync.
4. **verify** the finished file: its length, its count of zeros, and 1,000 URLs each from its
   head, middle and tail (plus every URL flagged irreversible) decoded with the pure-Python
   decoder and ``canonical()`` and compared byte for byte with the source text (kept for those
   URLs during the pass), their xxh3 (the ``xxhash`` package) with the order key and the shard.

Only then are the tokenizer folder, the bin and, last, the sidecar put under their final names.

Memory: the tokens once (~2.6 GB for a 36.6 M-URL shard of ~35 tokens per URL), 4 x 8 bytes per
URL (hashes, token offsets, order, sorted keys), plus a few Arrow row groups and one write chunk.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import shutil
import time
from pathlib import Path
from typing import Iterator, NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fastenc.arrow_io import (
    AtomicFile,
    arrow_to_flat,
    atomic_output,
    read_column_rows,
    remove_stale_temps,
    resolve_inputs,
    write_json_atomic,
)
from fastenc.errors import InputError, VerificationError, VocabError
from fastenc.progress import format_bytes, progress, summary_line

FORMAT = "fastenc-urls"
FORMAT_VERSION = 1
EOS_TOKEN = "<eos>"
DEFAULT_NUM_SHARDS = 2048
DEFAULT_CHUNK_URLS = 1_000_000
VERIFY_SAMPLE = 1000  # URLs each from the head, the middle and the tail of the bin
TOKENIZER_DIR = "tokenizer"
# Files copied from the tokenizer's folder to OUT/tokenizer/ (those that exist).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "training_meta.json", "special_tokens_map.json", "README.md")
_PART_RE = re.compile(r"part-(\d+)")
_SIDECAR_RE = re.compile(r"^tokens-s(\d{5,})\.json$")
_BIN_RE = re.compile(r"^tokens-s(\d{5,})\.bin$")
_STRETCH_TOKENS = 32 << 20  # tokens per stretch when a whole bin is decoded

SHARD_RULE = "floor(xxh3_64(url) * num_shards / 2**64) == shard, url = the original URL's bytes (not canonical)"
ORDER_RULE = "xxh3_64(url) ascending over the original URL's bytes; equal hashes in source row order"
LAYOUT = "each URL is [eos_token_id] ++ ids of canonical(url); decode, then apply canonical() once to get the URL back"

__all__ = [
    "encode_shard",
    "encode_url_chunk",
    "EncodedUrls",
    "verify_output",
    "shard_from_name",
    "bin_name",
    "sidecar_name",
    "read_url_column",
    "iter_decoded",
    "UrlColumn",
]


def bin_name(shard: int) -> str:
    return f"tokens-s{shard:05d}.bin"


def sidecar_name(shard: int) -> str:
    return f"tokens-s{shard:05d}.json"


def shard_from_name(path: str | os.PathLike) -> int | None:
    """The shard index in a file name such as ``part-00042.parquet`` (the last ``part-NNNNN``), or None."""
    found = _PART_RE.findall(Path(path).name)
    return int(found[-1]) if found else None


# ----------------------------------------------------------------------------------------------
# Read
# ----------------------------------------------------------------------------------------------


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
    """``np.empty(n, dtype)``, backed by transparent huge pages where the OS allows it.

    The encode stage reads URLs at random positions of the whole column (hash order); with
    2 MB pages instead of 4 kB ones those reads miss the TLB far less (measured ~15% of that
    stage). Small arrays, and systems without ``MADV_HUGEPAGE``, get plain ``np.empty``. Pages
    are only backed by memory once written, as with ``np.empty``.
    """
    nbytes = int(n) * np.dtype(dtype).itemsize
    if nbytes < (64 << 20) or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.empty(n, dtype)
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except OSError:
        pass
    return np.frombuffer(m, dtype=dtype, count=n)  # the array keeps the mapping alive


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
    for rg, table in enumerate(_read_row_groups(path, column, md.num_row_groups)):
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


# ----------------------------------------------------------------------------------------------
# Hash + shard check
# ----------------------------------------------------------------------------------------------


def _show(url: bytes, limit: int = 160) -> str:
    text = url.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------


def _load_tokenizer(tokenizer: str | os.PathLike):
    """(Encoder, the folder or file its files are copied from)."""
    from fastenc.encoder import load
    from fastenc.vocab import BUILTIN, builtin_tokenizer_dir

    enc = load(tokenizer)
    if str(tokenizer) in BUILTIN:
        src = builtin_tokenizer_dir(str(tokenizer))
    else:
        src = Path(tokenizer)
    if enc.info.pretokenizer != "url":
        raise VocabError(f"tokenizer {tokenizer} does not use the URL card's pre-split (it is {enc.info.pretokenizer!r}): use 'urls' or a URL tokenizer.json")
    eos = enc.info.special_tokens.get(EOS_TOKEN)
    if eos != 0:
        raise VocabError(f"tokenizer {tokenizer}: the URL bins need the special token {EOS_TOKEN!r} at id 0 (found {eos!r})")
    if enc.vocab_size > 65536:
        raise VocabError(f"tokenizer {tokenizer} has {enc.vocab_size} ids; URL bins are uint16: at most 65,536")
    return enc, src


def _tokenizer_sources(src: Path) -> list[Path]:
    if src.is_dir():
        return [src / name for name in TOKENIZER_FILES if (src / name).is_file()]
    return [src]  # a tokenizer.json given as a file: only itself


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_tokenizer_dir(out_dir: Path, sha256: str) -> bool:
    """True if OUT/tokenizer/ already holds this tokenizer; refuses another one."""
    dst = out_dir / TOKENIZER_DIR / "tokenizer.json"
    if not dst.is_file():
        return False
    have = _sha256_file(dst)
    if have != sha256:
        raise InputError(
            f"{dst} is another tokenizer (sha256 {have[:16]}..., this run's is {sha256[:16]}...): bins of different "
            "vocabularies must not share a directory. Write to a new directory (-o)"
        )
    return True


def _copy_tokenizer(src: Path, out_dir: Path) -> None:
    dst = out_dir / TOKENIZER_DIR
    dst.mkdir(exist_ok=True)
    files = _tokenizer_sources(src)
    # tokenizer.json last: its presence is what marks the folder as complete
    files.sort(key=lambda p: p.name == "tokenizer.json" or p == src)
    for f in files:
        name = "tokenizer.json" if f == src else f.name
        with atomic_output(dst / name) as out, open(f, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)


# ----------------------------------------------------------------------------------------------
# Encode + write
# ----------------------------------------------------------------------------------------------


class _Buffers:
    """Per-chunk scratch arrays, grown on demand and reused (no page faults per chunk)."""

    def __init__(self):
        self.canon = np.empty(0, np.uint8)
        self.scratch = np.empty(0, np.uint16)
        self.out = np.empty(0, np.uint16)

    def get(self, nbytes: int, m: int):
        if self.canon.size < max(nbytes, 1):
            self.canon = np.empty(max(nbytes + nbytes // 4, 1), np.uint8)
        if self.scratch.size < nbytes + m:
            self.scratch = np.empty(nbytes + m + (nbytes + m) // 4, np.uint16)
        return self.canon, self.scratch

    def out_for(self, n: int):
        if self.out.size < n:
            self.out = np.empty(n + n // 4, np.uint16)
        return self.out[:n]


class EncodedUrls(NamedTuple):
    """URL k: ``tokens[offsets[k]:offsets[k + 1]] == [0] ++ encode(canonical(url))``;
    ``irreversible[k]`` is 1 when canonical() does not give that URL back (see docs/urls.md)."""

    tokens: np.ndarray
    offsets: np.ndarray
    irreversible: np.ndarray


def encode_url_chunk(enc, data: np.ndarray, offsets: np.ndarray, order: np.ndarray, lengths: np.ndarray | None = None,
                     bufs: _Buffers | None = None, out: np.ndarray | None = None) -> EncodedUrls:
    """Encode URLs ``order[0..m-1]`` of ``(data, offsets)`` the way the bins store them.

    ``lengths`` (the URLs' byte lengths, in this order) and ``bufs`` (reused scratch) are
    optional. The tokens go to ``out`` when given (it needs room for the URLs' bytes + m ids:
    an id never covers less than one byte), else to ``bufs``; either way the returned
    ``tokens`` is a view: copy it before the buffer is reused.
    """
    from fastenc.kernels.encode import gather_batch
    from fastenc.kernels.url_pack import pack_urls

    order = np.ascontiguousarray(order, dtype=np.int64)
    if lengths is None:
        lengths = offsets[order + 1] - offsets[order]
    if bufs is None:
        bufs = _Buffers()
    m = len(order)
    canon_offsets = np.empty(m + 1, np.int64)
    canon_offsets[0] = 0
    np.cumsum(lengths, out=canon_offsets[1:])
    nbytes = int(canon_offsets[-1])
    canon, scratch = bufs.get(nbytes, m)
    counts = np.empty(m, np.int64)
    flags = np.zeros(m, np.uint8)
    tok_offsets = np.zeros(m + 1, np.int64)
    if m == 0:
        return EncodedUrls(bufs.out_for(0) if out is None else out[:0], tok_offsets, flags)
    caches = enc._task_caches()
    pack_urls(data, offsets, order, canon_offsets, 0, enc.vocab, enc.classes,
              caches.short, caches.long, canon, scratch, counts, flags)
    total = int(counts.sum())
    if out is None:
        out = bufs.out_for(total)
    elif out.size < total:
        raise ValueError(f"encode_url_chunk: out has room for {out.size} ids, {total} are needed")
    gather_batch(scratch, canon_offsets + np.arange(m + 1), counts, out, tok_offsets)
    return EncodedUrls(out[:total], tok_offsets, flags)


# ----------------------------------------------------------------------------------------------
# The streaming pass: read, hash, check and encode every URL in the source's order
# ----------------------------------------------------------------------------------------------


class _SampleWindows:
    """Keeps the source text of the URLs that the verify stage will need, while it streams by.

    The verify stage checks the first, the middle and the last ``VERIFY_SAMPLE`` URLs of the bin
    (by hash rank), but their ranks are known only after the sort, when the text is gone. The
    hashes of a shard are uniform over its range ``[lo, hi)``, so those URLs lie, with
    overwhelming probability, in three windows of the range: at each end one expected to hold 4x
    the sample, and around the middle one expected to hold the sample plus 8 standard deviations
    of the median's rank (sqrt(n) / 2) on each side (~100 k URLs for 36.6 M). The text of every
    URL in a window is kept. A URL still missing afterwards (a skewed input) is read back from
    the parquet file by row (``read_column_rows``), which is slower but as exact.
    """

    def __init__(self, expected: int, lo: int, hi: int):
        span = hi - lo
        n = max(expected, 1)
        end_w = span * 4 * VERIFY_SAMPLE // n
        mid_w = span * int(VERIFY_SAMPLE + 8 * n**0.5) // n
        if 2 * end_w + 2 * mid_w >= span // 2:  # small inputs: keep everything
            windows = [(lo, hi)]
        else:
            mid = lo + span // 2
            windows = [(lo, lo + end_w), (mid - mid_w, mid + mid_w), (hi - end_w, hi)]
        self.windows = [(np.uint64(a), b) for a, b in windows]
        self.text: dict[int, bytes] = {}

    def add(self, hashes: np.ndarray, data: np.ndarray, offsets: np.ndarray, first: int) -> None:
        keep = np.zeros(len(hashes), bool)
        for a, b in self.windows:
            keep |= (hashes >= a) if b >= 2**64 else ((hashes >= a) & (hashes < np.uint64(b)))
        for j in np.flatnonzero(keep).tolist():
            self.text[first + j] = data[offsets[j] : offsets[j + 1]].tobytes()


class _Pass(NamedTuple):
    n: int
    hashes: np.ndarray  # uint64[n], source order
    tokens: np.ndarray  # every URL's [0] ++ ids, source order
    tok_offsets: np.ndarray  # int64[n + 1]
    rows: np.ndarray | None  # file row of each URL when nulls were skipped
    nulls: int
    num_rows: int
    outside: int  # URLs not in the shard
    outside_examples: list
    irreversible: dict  # source index -> text, for URLs canonical() cannot give back
    samples: _SampleWindows
    empty: int
    url_bytes: int
    max_url_bytes: int
    seconds: dict


def _encode_pass(path: Path, column: str, enc, shard: int, num_shards: int, shard_check: bool, skip_nulls: bool, bar) -> _Pass:
    """One pass over the file: per Arrow chunk, hash every URL, check its shard, and encode it
    (canonical + BPE + the leading 0) into one growing token buffer, in the source's order."""
    from fastenc.kernels.url_pack import count_outside_shard, shard_of
    from fastenc.kernels.xxh3 import xxh3_64_batch

    pf, _ = _open_column(path, column)
    n_rows = pf.metadata.num_rows
    column_bytes = _column_bytes(pf, column)
    # Upper bounds (ids never outnumber bytes, + one 0 per URL); untouched pages cost nothing.
    tokens = big_empty(column_bytes + n_rows + 1, np.uint16)
    tok_offsets = big_empty(n_rows + 1, np.int64)
    tok_offsets[0] = 0
    hashes = big_empty(max(n_rows, 1), np.uint64)
    lo = -(-shard * 2**64 // num_shards) if shard_check else 0  # the shard's hash range
    hi = -(-(shard + 1) * 2**64 // num_shards) if shard_check else 2**64
    samples = _SampleWindows(n_rows, lo, hi)
    bufs = _Buffers()
    seconds = {"read": 0.0, "hash": 0.0, "encode": 0.0}
    rows = None
    n = n_tok = nulls = outside = empty = url_bytes = max_len = 0
    examples: list[str] = []
    irreversible: dict[int, bytes] = {}
    first_bad = np.empty(5, np.int64)
    t = time.perf_counter()
    for batch in iter_url_batches(path, column, skip_nulls=skip_nulls):
        data, offsets = batch.data, batch.offsets
        k = len(offsets) - 1
        if batch.rows is not None and rows is None:
            rows = np.empty(n_rows, np.int64)
            rows[:n] = np.arange(n)
        if rows is not None:
            rows[n : n + k] = batch.rows if batch.rows is not None else np.arange(batch.first_row, batch.first_row + k)
        nulls += batch.nulls
        t1 = time.perf_counter()
        seconds["read"] += t1 - t
        if k:
            h = xxh3_64_batch(data, offsets)
            hashes[n : n + k] = h
            if shard_check:
                bad = int(count_outside_shard(h, np.uint64(num_shards), np.uint64(shard), first_bad, 5 - len(examples)))
                for j in first_bad[: min(bad, 5 - len(examples))].tolist():
                    row = int(rows[n + j]) if rows is not None else batch.first_row + j
                    url = data[offsets[j] : offsets[j + 1]].tobytes()
                    examples.append(f"row {row}: {_show(url)} is in shard {int(shard_of(h[j], np.uint64(num_shards)))}")
                outside += bad
            samples.add(h, data, offsets, n)
            lengths = np.diff(offsets)
            empty += int(np.count_nonzero(lengths == 0))
            url_bytes += int(offsets[-1])
            max_len = max(max_len, int(lengths.max()))
        t2 = time.perf_counter()
        seconds["hash"] += t2 - t1
        if k and not outside:  # once a URL is outside the shard nothing will be written: just count
            if n_tok + int(offsets[-1]) + k > tokens.size:  # only if the size estimate was wrong
                grown = big_empty(max(n_tok + int(offsets[-1]) + k, tokens.size + tokens.size // 2), np.uint16)
                grown[:n_tok] = tokens[:n_tok]
                tokens = grown
            res = encode_url_chunk(enc, data, offsets, np.arange(k), lengths, bufs, out=tokens[n_tok:])
            tok_offsets[n + 1 : n + k + 1] = res.offsets[1:] + n_tok
            n_tok += len(res.tokens)
            for j in np.flatnonzero(res.irreversible).tolist():
                irreversible[n + j] = data[offsets[j] : offsets[j + 1]].tobytes()
        n += k
        t = time.perf_counter()
        seconds["encode"] += t - t2
        bar.update(batch.num_rows)
    del bufs
    return _Pass(n, hashes[:n], tokens[:n_tok], tok_offsets[: n + 1], rows, nulls, n_rows, outside, examples, irreversible,
                 samples, empty, url_bytes, max_len, seconds)


class _ChunkWriter:
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


def _sample_indices(n: int, k: int = VERIFY_SAMPLE) -> np.ndarray:
    """Sorted distinct bin positions: the first k URLs, the k around n // 2, and the last k."""
    mid = max(0, n // 2 - k // 2)
    parts = [np.arange(0, min(k, n)), np.arange(mid, min(mid + k, n)), np.arange(max(0, n - k), n)]
    return np.unique(np.concatenate(parts)).astype(np.int64)


class _Check(NamedTuple):
    """One URL the verify stage decodes back: bin position k, its token span, its order key and
    the previous URL's (None: not checked), its source text and row, and whether it was flagged
    irreversible."""

    k: int
    start: int
    end: int
    key: int | None
    prev: int | None
    source: bytes
    row: int
    irreversible: bool


def _verify_written(path: Path, enc, n_urls: int, n_tokens: int, checks: list[_Check], num_shards: int,
                    shard: int | None, bar) -> dict:
    """Re-read the finished bin: its length, its zero count, and the checked URLs decoded back.

    Decoding and canonical() here are the pure-Python/numpy ones (``Encoder.decode_bytes``,
    ``fastenc.canonical.canonical_bytes``), independent of the kernels that wrote the bin; the
    hashes are the ``xxhash`` package's. For each URL: it starts with the only 0 of its span,
    decodes to canonical(source), and canonical() of that gives the source back (or the kernel
    flagged the URL as irreversible, and it really is); its xxh3 is its order key, not below the
    previous URL's, and in the shard.
    """
    import xxhash

    from fastenc.canonical import canonical_bytes

    problems: list[str] = []
    size = path.stat().st_size
    if size != 2 * n_tokens:
        problems.append(f"the bin has {size} bytes, expected {2 * n_tokens} ({n_tokens} uint16 tokens)")
    zeros = count_tokens_equal(path, 0)
    if zeros != n_urls:
        problems.append(f"the bin holds {zeros} zeros (<eos>), expected one per URL: {n_urls}")
    mismatches = 0
    examples = []
    with open(path, "rb") as f:
        for c in checks:
            f.seek(2 * c.start)
            ids = np.fromfile(f, dtype="<u2", count=max(0, c.end - c.start))
            ok = ids.size == c.end - c.start and ids.size >= 1 and ids[0] == 0 and not (ids[1:] == 0).any()
            if ok:
                stored = enc.decode_bytes(ids[1:])
                ok = stored == canonical_bytes(c.source) and (canonical_bytes(stored) == c.source) != c.irreversible
                h = xxhash.xxh3_64_intdigest(c.source)
                if ok and c.key is not None:
                    ok = h == c.key and c.prev <= c.key
                if ok and shard is not None:
                    ok = (h * num_shards) >> 64 == shard
            if not ok:
                mismatches += 1
                if len(examples) < 3:
                    examples.append(f"URL {c.k} of the bin (source row {c.row}): {_show(c.source)}")
            bar.update(1)
    if mismatches:
        problems.append(f"{mismatches} of {len(checks)} checked URLs did not decode back to their source: " + "; ".join(examples))
    return {"urls_checked": len(checks), "mismatches": mismatches, "problems": problems}


# ----------------------------------------------------------------------------------------------
# The recipe
# ----------------------------------------------------------------------------------------------


def _request(path: Path, column: str, shard: int, num_shards: int, shard_check: bool, skip_nulls: bool, sha256: str) -> dict:
    from fastenc import __version__

    st = path.stat()
    return {
        "source": [os.path.abspath(path), st.st_size, st.st_mtime_ns],
        "column": column,
        "shard": shard,
        "num_shards": num_shards,
        "shard_check": shard_check,
        "skip_nulls": skip_nulls,
        "tokenizer_sha256": sha256,
        "fastenc_version": __version__,
    }


def _finished_same(out_dir: Path, shard: int, request: dict) -> dict | None:
    try:
        meta = json.loads((out_dir / sidecar_name(shard)).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("request") != request:
            return None
        if (out_dir / bin_name(shard)).stat().st_size != 2 * int(meta["tokens"]):
            return None
        if _sha256_file(out_dir / TOKENIZER_DIR / "tokenizer.json") != meta["tokenizer_sha256"]:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return meta


def _source_rows(p: _Pass, idx: np.ndarray) -> np.ndarray:
    return p.rows[idx] if p.rows is not None else idx


def encode_shard(
    path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    column: str = "url",
    shard: int | None = None,
    num_shards: int = DEFAULT_NUM_SHARDS,
    shard_check: bool = True,
    skip_nulls: bool = False,
    tokenizer: str | os.PathLike = "urls",
    chunk_urls: int = DEFAULT_CHUNK_URLS,
    overwrite: bool = False,
    quiet: bool = False,
) -> dict:
    """Encode one URL shard into ``out_dir``; returns the sidecar as written.

    ``shard`` defaults to the ``part-NNNNN`` in the file name. ``out_dir`` may hold other
    shards' outputs (one bin + sidecar each, one shared ``tokenizer/``). If it already holds the
    finished output of this very request (same file, size, mtime, options, tokenizer and fastenc
    version), nothing is done; a different earlier output of the same shard is replaced only with
    ``overwrite``. The bin does not depend on ``chunk_urls`` (URLs per write chunk) or the
    thread count. Raises ``InputError`` (bad input), ``VerificationError`` (a URL outside the
    shard, or the written bin failing its read-back check: then no file is left under a final name).
    """
    import numba
    import xxhash

    from fastenc import __version__
    from fastenc.kernels.url_pack import gather_spans, hash_order

    t_start = time.perf_counter()
    paths = resolve_inputs([os.fspath(path)])
    if len(paths) != 1:
        raise InputError(f"{path} names {len(paths)} files; encode_shard takes one shard file (the CLI takes several)")
    path = paths[0]
    if not 1 <= num_shards < 2**64:
        raise InputError(f"--num-shards must be at least 1 (got {num_shards})")
    if shard is None:
        shard = shard_from_name(path)
        if shard is None:
            raise InputError(
                f"cannot tell the shard index of {path.name}: its name has no part-NNNNN. Pass --shard N "
                "(and --no-shard-check if the file is not a shard of the corpus)"
            )
    if not 0 <= shard < num_shards:
        raise InputError(f"shard {shard} is not below --num-shards {num_shards}: check --num-shards (the default is {DEFAULT_NUM_SHARDS})")
    if chunk_urls < 1:
        raise InputError(f"--chunk-urls must be positive (got {chunk_urls})")
    enc, tok_src = _load_tokenizer(tokenizer)
    _open_column(path, column)  # a missing or non-text column fails before anything else

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"output {out_dir} exists and is not a directory: choose a directory path with -o")
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out_dir)
    tokenizer_present = _check_tokenizer_dir(out_dir, enc.sha256)
    request = _request(path, column, shard, num_shards, shard_check, skip_nulls, enc.sha256)
    bin_path = out_dir / bin_name(shard)
    meta_path = out_dir / sidecar_name(shard)
    if bin_path.exists() or meta_path.exists():
        done = _finished_same(out_dir, shard, request)
        if done is not None and not overwrite:
            summary_line(f"fastenc urls: {out_dir / bin_name(shard)} already holds this output (its sidecar matches); nothing to do", quiet=quiet)
            return done
        if not overwrite:
            raise InputError(
                f"{out_dir} already holds output for shard {shard} ({bin_path.name} / {meta_path.name}) from another run: "
                "pass --overwrite to replace it, or choose another directory"
            )
    threads = numba.get_num_threads()

    # --- read + hash + shard check + encode, one streaming pass in the source's order ---
    bar = progress(pq.ParquetFile(path).metadata.num_rows, unit="URL", desc="read+hash+encode", quiet=quiet, unit_scale=True)
    try:
        p = _encode_pass(path, column, enc, shard, num_shards, shard_check, skip_nulls, bar)
    finally:
        bar.close()
    seconds = dict(p.seconds)
    n = p.n
    if p.outside:
        raise VerificationError(
            f"{path}: {p.outside:,} of {n:,} URLs do not belong to shard {shard} of {num_shards} "
            f"(rule: {SHARD_RULE}), for example:\n  " + "\n  ".join(p.outside_examples) + "\n"
            "Nothing was written. Check --num-shards and --shard (or the part-NNNNN in the file name); "
            "for an input that is not a shard, pass --no-shard-check"
        )

    # --- sort ---
    t = time.perf_counter()
    bar = progress(n, unit="URL", desc="sort", quiet=quiet, unit_scale=True)
    order, sorted_hashes = hash_order(p.hashes, threads)
    samples = _sample_indices(n)
    sample_keys = sorted_hashes[samples]
    prev_keys = sorted_hashes[np.maximum(samples - 1, 0)]
    del sorted_hashes
    # bin positions of the irreversible URLs (a handful, if any)
    flagged = np.fromiter(p.irreversible, np.int64, len(p.irreversible))
    flagged_pos = np.flatnonzero(np.isin(order, flagged)) if flagged.size else np.zeros(0, np.int64)
    bar.update(n)
    bar.close()
    seconds["sort"] = time.perf_counter() - t

    # --- write: the token spans in hash order, chunk by chunk, to the temporary file ---
    watch = np.union1d(samples, flagged_pos)  # bin positions whose spans the verify stage reads
    spans = np.zeros((len(watch), 2), np.int64)
    bin_file = AtomicFile(bin_path)
    try:
        t = time.perf_counter()
        writer = _ChunkWriter(bin_file.file)
        out_offsets = np.empty(min(n, chunk_urls) + 1, np.int64)
        written = 0
        bar = progress(n, unit="URL", desc="write", quiet=quiet, unit_scale=True)
        try:
            for a in range(0, n, chunk_urls):
                b = min(n, a + chunk_urls)
                sel = order[a:b]
                need = int((p.tok_offsets[sel + 1] - p.tok_offsets[sel]).sum())
                out = writer.buffer(need)
                gather_spans(p.tokens, p.tok_offsets, sel, out, out_offsets[: b - a + 1], threads)
                lo_w, hi_w = np.searchsorted(watch, [a, b])
                spans[lo_w:hi_w, 0] = written + out_offsets[watch[lo_w:hi_w] - a]
                spans[lo_w:hi_w, 1] = written + out_offsets[watch[lo_w:hi_w] - a + 1]
                writer.put(out[:need])
                written += need
                bar.update(b - a)
        finally:
            bin_digest = writer.close()  # waits for the queued chunks; re-raises a write error
        bar.close()
        bin_file.finish()  # flush + fsync: what verify reads is what the disk holds
        seconds["write"] = time.perf_counter() - t
        n_tokens = written

        # --- verify the finished file ---
        t = time.perf_counter()
        src_idx = order[watch]
        texts = {}
        missing = [int(i) for i in src_idx if int(i) not in p.samples.text and int(i) not in p.irreversible]
        if missing:  # a skewed input put some samples outside the windows: read them back
            rows = _source_rows(p, np.asarray(missing, np.int64))
            for i, url in zip(missing, read_column_rows(path, column, rows.tolist())):
                texts[i] = url.encode("utf-8", "surrogatepass") if isinstance(url, str) else url
        where = {int(k): j for j, k in enumerate(samples)}
        checks = []
        flagged_set = set(flagged_pos.tolist())
        for w, k in enumerate(watch.tolist()):
            i = int(src_idx[w])
            text = p.irreversible.get(i) or p.samples.text.get(i) or texts.get(i, b"")
            j = where.get(k)
            checks.append(_Check(k, int(spans[w, 0]), int(spans[w, 1]), int(sample_keys[j]) if j is not None else None,
                                 int(prev_keys[j]) if j is not None else None, text, int(_source_rows(p, np.array([i]))[0]),
                                 k in flagged_set))
        bar = progress(len(checks), unit="URL", desc="verify", quiet=quiet)
        check = _verify_written(bin_file.temp_path, enc, n, n_tokens, checks, num_shards, shard if shard_check else None, bar)
        bar.close()
        if check["problems"]:
            raise VerificationError(f"{path}: the written bin failed its read-back check; nothing was published:\n  "
                                    + "\n  ".join(check["problems"]))
        seconds["verify"] = time.perf_counter() - t
        seconds["total"] = time.perf_counter() - t_start
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "fastenc_version": __version__,
            "file": bin_path.name,
            "urls": n,
            "tokens": n_tokens,
            "dtype": "uint16",
            "byteorder": "little",
            "eos_token": EOS_TOKEN,
            "eos_token_id": 0,
            "vocab_size": enc.vocab_size,
            "tokenizer": f"{TOKENIZER_DIR}/tokenizer.json",
            "tokenizer_sha256": enc.sha256,
            "shard": shard,
            "num_shards": num_shards,
            "shard_checked": shard_check,
            "shard_rule": SHARD_RULE,
            "order": ORDER_RULE,
            "hash": "xxh3_64: XXH3_64bits, seed 0 (xxhash.xxh3_64_intdigest)",
            "layout": LAYOUT,
            "source": {
                "file": path.name,
                "bytes": path.stat().st_size,
                "rows": p.num_rows,
                "column": column,
                "column_type": str(_open_column(path, column)[1]),
            },
            "null_urls_skipped": p.nulls,
            "empty_urls": p.empty,
            "url_bytes": p.url_bytes,
            "max_url_bytes": p.max_url_bytes,
            # URLs on which the card's canonical() is not self-inverse (malformed hosts such as
            # http://x:1.y or http://a.[b): stored as canonical(url) like every URL, but
            # canonical(decode(ids)) is not the original. Indices are positions in the bin (0-based).
            "irreversible_urls": int(flagged_pos.size),
            "irreversible_url_indices": flagged_pos.tolist(),
            "bin_xxh3_64": bin_digest,
            "verified": {"head": min(VERIFY_SAMPLE, n), "middle": min(VERIFY_SAMPLE, n), "tail": min(VERIFY_SAMPLE, n),
                         "urls_checked": check["urls_checked"], "mismatches": check["mismatches"]},
            # samples_read_back: sampled URLs whose text the pass did not keep (see _SampleWindows)
            "build": {"threads": threads, "seconds": {k: round(v, 3) for k, v in seconds.items()}, "samples_read_back": len(missing)},
            "request": request,
        }

        # --- publish: tokenizer, then the bin, then the sidecar last ---
        if not tokenizer_present:
            _copy_tokenizer(tok_src, out_dir)
        meta_path.unlink(missing_ok=True)  # never a sidecar describing another bin, even after a crash
        bin_file.rename()
    except BaseException:
        bar.close()
        bin_file.discard()
        raise
    write_json_atomic(meta_path, meta)

    dt = time.perf_counter() - t_start
    s = seconds
    summary_line(
        f"fastenc urls: {path.name} -> {bin_path}: {n:,} URLs, {n_tokens:,} tokens ({format_bytes(2 * n_tokens)}) in "
        f"{dt:.2f} s, {n / dt if dt > 0 else 0:,.0f} URLs/s (read {s['read']:.1f} s, hash {s['hash']:.1f}, "
        f"encode {s['encode']:.1f}, sort {s['sort']:.1f}, write {s['write']:.1f}, verify {s['verify']:.1f}); "
        f"shard {shard} of {num_shards}{'' if shard_check else ' (not checked)'}, {p.nulls:,} nulls skipped",
        quiet=quiet,
    )
    return meta


# ----------------------------------------------------------------------------------------------
# Reading bins back (decode CLI, verify)
# ----------------------------------------------------------------------------------------------


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


def count_tokens_equal(path: str | os.PathLike, value: int = 0, block: int = 32 << 20) -> int:
    """How many tokens of the bin at ``path`` equal ``value`` (read in blocks, not mapped)."""
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


# ----------------------------------------------------------------------------------------------
# Verification (``fastenc verify OUT``)
# ----------------------------------------------------------------------------------------------


def verify_output(out_dir: Path, source: Sequence[Path] | None = None) -> dict:
    """Re-check a URL output directory from its files alone (and against ``source`` if given).

    For every ``tokens-s*.json``: the format; the bin's size (= 2 x ``tokens``) and xxh3; the
    sha256 of ``tokenizer/tokenizer.json`` against the sidecar; the bin starts with 0 and holds
    exactly ``urls`` zeros; every id is in the vocabulary; every URL decoded, put through
    ``canonical()`` and hashed: the hashes ascend, and (when the build checked membership) each
    is in the sidecar's shard (except the URLs the sidecar lists as irreversible, whose original
    cannot be recovered); ``empty_urls`` and ``url_bytes`` agree. A bin without a sidecar
    is reported (an unfinished run). With ``source`` (parquet files, matched to sidecars by
    their file name, or the single source of a single sidecar), the decoded URLs must equal the
    source's, in hash order, byte for byte (stored canonical forms are compared: exact for every URL).
    """
    out_dir = Path(out_dir)
    report: dict = {"format": "urls", "ok": False, "problems": [], "out_dir": str(out_dir), "shards": 0, "urls": 0, "tokens": 0,
                    "checked_source": False}
    problems: list[str] = report["problems"]
    sidecars = sorted(p for p in out_dir.iterdir() if _SIDECAR_RE.match(p.name))
    bins = {p.name for p in out_dir.iterdir() if _BIN_RE.match(p.name)}
    for p in sidecars:
        bins.discard(p.with_suffix(".bin").name)
    for name in sorted(bins):
        problems.append(f"{name} has no sidecar (.json): an unfinished or interrupted run; rerun the recipe for that shard")
    tok_path = out_dir / TOKENIZER_DIR / "tokenizer.json"
    tok_sha = _sha256_file(tok_path) if tok_path.is_file() else None
    if tok_sha is None:
        problems.append(f"{tok_path} is missing: the bins cannot be decoded without the tokenizer that made them")
    sources = [Path(p) for p in resolve_inputs([str(s) for s in source])] if source else []
    for meta_path in sidecars:
        try:
            _verify_one(out_dir, meta_path, tok_path, tok_sha, sources, len(sidecars), report)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, InputError):
                raise
            problems.append(f"{meta_path.name}: malformed or inconsistent ({type(exc).__name__}: {exc}): rerun the recipe with --overwrite")
    if sources and not report["checked_source"] and sidecars:
        wanted = sorted({_source_name(m) for m in sidecars} - {None})
        problems.append(f"none of the --source files is the source of a bin here (their sources: {wanted}): pass those files")
    report["ok"] = not problems
    return report


def _source_name(meta_path: Path) -> str | None:
    try:
        return json.loads(meta_path.read_text(encoding="utf-8"))["source"]["file"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _verify_one(out_dir: Path, meta_path: Path, tok_path: Path, tok_sha: str | None, sources: list[Path], n_sidecars: int, report: dict) -> None:
    import xxhash

    from fastenc.encoder import load
    from fastenc.kernels.canonical import canonical_batch
    from fastenc.kernels.url_pack import count_outside_shard
    from fastenc.kernels.xxh3 import xxh3_64_batch

    problems: list[str] = report["problems"]
    name = meta_path.name
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"cannot read {meta_path}: {exc}")
        return
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        problems.append(f"{name}: format {meta.get('format')!r} v{meta.get('format_version')!r}, expected {FORMAT!r} v{FORMAT_VERSION}")
        return
    shard = int(meta["shard"])
    if name != sidecar_name(shard) or meta["file"] != bin_name(shard):
        problems.append(f"{name}: names shard {shard} and file {meta['file']!r}; expected {sidecar_name(shard)} / {bin_name(shard)}")
        return
    if meta["dtype"] != "uint16" or meta["byteorder"] != "little" or meta["eos_token_id"] != 0:
        problems.append(f"{name}: dtype/byteorder/eos {meta['dtype']}/{meta['byteorder']}/{meta['eos_token_id']} is not uint16/little/0")
        return
    if tok_sha is None:
        return
    if tok_sha != meta["tokenizer_sha256"]:
        problems.append(f"{name}: tokenizer_sha256 {meta['tokenizer_sha256'][:16]}... but {tok_path} has {tok_sha[:16]}...: "
                        "this bin was made with another vocabulary")
        return
    bin_path = out_dir / meta["file"]
    if not bin_path.is_file():
        problems.append(f"{meta['file']} is missing (listed by {name})")
        return
    n_tokens, n_urls = int(meta["tokens"]), int(meta["urls"])
    size = bin_path.stat().st_size
    if size != 2 * n_tokens:
        problems.append(f"{meta['file']}: {size} bytes on disk, the sidecar says {n_tokens} tokens = {2 * n_tokens} bytes")
        return
    enc = load(tok_path)
    if enc.vocab_size != meta["vocab_size"]:
        problems.append(f"{name}: vocab_size {meta['vocab_size']} but the tokenizer has {enc.vocab_size}")
    h = xxhash.xxh3_64()
    first = None
    with open(bin_path, "rb") as f:
        for block in iter(lambda: f.read(32 << 20), b""):
            h.update(block)
            if first is None:
                first = int.from_bytes(block[:2], "little")
    if h.hexdigest() != meta.get("bin_xxh3_64"):
        problems.append(f"{meta['file']}: xxh3_64 {h.hexdigest()} differs from the sidecar's {meta.get('bin_xxh3_64')} (the content changed)")
    if n_tokens and first != 0:
        problems.append(f"{meta['file']}: starts with token {first}, not 0 (<eos>): every URL must begin with 0")
        return

    src_iter = _source_urls(meta, sources, n_sidecars) if sources else None
    if src_iter is not None:
        report["checked_source"] = True
        report.setdefault("sources_checked", []).append(meta["source"]["file"])
    num_shards = int(meta["num_shards"])
    # URLs whose original canonical() cannot give back: their decoded hash is not their key
    skip = np.asarray(meta.get("irreversible_url_indices", []), dtype=np.int64)
    if len(skip) != meta.get("irreversible_urls", 0) or (skip.size and ((np.diff(skip) <= 0).any() or skip[0] < 0 or skip[-1] >= n_urls)):
        problems.append(f"{name}: irreversible_url_indices is not a sorted list of irreversible_urls distinct URL indices")
        return
    urls = empty = url_bytes = 0
    prev = None
    out_of_shard = disorder = 0
    first_bad: list[str] = []
    try:
        for _, data, offs in iter_decoded(bin_path, enc):
            m = len(offs) - 1
            hs = xxh3_64_batch(canonical_batch(data, offs), offs)
            lo, hi = np.searchsorted(skip, [urls, urls + m])
            if hi > lo:
                keep = np.ones(m, bool)
                keep[skip[lo:hi] - urls] = False
                hs = hs[keep]
            if hs.size:
                if prev is not None and hs[0] < prev:
                    disorder += 1
                disorder += int(np.count_nonzero(hs[1:] < hs[:-1]))
                prev = hs[-1]
                if meta.get("shard_checked", True):
                    dummy = np.empty(1, np.int64)
                    out_of_shard += int(count_outside_shard(hs, np.uint64(num_shards), np.uint64(shard), dummy, 1))
            lengths = np.diff(offs)
            empty += int(np.count_nonzero(lengths == 0))
            url_bytes += int(offs[-1])
            if src_iter is not None:
                bad = src_iter.compare(data, offs, urls)
                if bad is not None and len(first_bad) < 3:
                    first_bad.append(bad)
            urls += m
    except ValueError as exc:
        problems.append(f"{meta['file']}: {exc}")
        return
    if urls != n_urls:
        problems.append(f"{meta['file']}: holds {urls} URLs (zeros), the sidecar says {n_urls}")
    if disorder:
        problems.append(f"{meta['file']}: the xxh3_64 of the decoded URLs descends {disorder} time(s): not in hash order")
    if out_of_shard:
        problems.append(f"{meta['file']}: {out_of_shard} decoded URLs are not in shard {shard} of {num_shards}")
    if empty != meta.get("empty_urls") or url_bytes != meta.get("url_bytes"):
        problems.append(f"{meta['file']}: decodes to {empty} empty URLs / {url_bytes} bytes, the sidecar says "
                        f"{meta.get('empty_urls')} / {meta.get('url_bytes')}")
    if src_iter is not None:
        problems.extend(f"{meta['file']} vs {src_iter.path.name}: {b}" for b in first_bad)
        tail = src_iter.finish(urls)
        if tail:
            problems.append(f"{meta['file']} vs {src_iter.path.name}: {tail}")
    report["shards"] += 1
    report["urls"] += urls
    report["tokens"] += n_tokens


class _SourceStream:
    """The source's URLs in hash order, compared stretch by stretch with a decoded bin."""

    def __init__(self, path: Path, meta: dict):
        import numba

        from fastenc.kernels.canonical import canonical_batch
        from fastenc.kernels.url_pack import hash_order
        from fastenc.kernels.xxh3 import xxh3_64_batch

        self.path = path
        col = read_url_column(path, meta["source"]["column"], skip_nulls=bool(meta.get("null_urls_skipped")))
        n = len(col.offsets) - 1
        hashes = xxh3_64_batch(col.data, col.offsets) if n else np.empty(0, np.uint64)
        self.order, _ = hash_order(hashes, numba.get_num_threads())
        # the bin stores canonical(url): compare stored forms, exact for every URL (irreversible too)
        self.col = col._replace(data=canonical_batch(col.data, col.offsets) if n else col.data)
        self.mismatches = 0

    def compare(self, data: np.ndarray, offs: np.ndarray, first: int) -> str | None:
        from fastenc.kernels.url_pack import first_difference

        m = len(offs) - 1
        sel = self.order[first : first + m]
        k = int(first_difference(self.col.data, self.col.offsets, sel, data, offs))
        if k >= 0:
            self.mismatches += 1
            i = int(sel[k])
            row = int(self.col.rows[i]) if self.col.rows is not None else i
            return f"URL {first + k} of the bin differs from the source's URL {first + k} in hash order (source row {row})"
        if len(sel) != m:
            self.mismatches += 1
            return f"the bin has more URLs than the source ({len(self.order)})"
        return None

    def finish(self, urls: int) -> str | None:
        if urls < len(self.order):
            return f"the source has {len(self.order)} URLs, the bin {urls}"
        return None


def _source_urls(meta: dict, sources: list[Path], n_sidecars: int) -> _SourceStream | None:
    name = meta["source"]["file"]
    match = [p for p in sources if p.name == name]
    if not match and n_sidecars == 1 and len(sources) == 1:
        match = sources
    if not match:
        return None
    return _SourceStream(match[0], meta)


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("inputs", nargs="+", metavar="PARQUET", help="URL shard(s) such as part-00042.parquet (files, directories or globs)")
    p.add_argument("-o", "--out", required=True, help="output directory (created; may hold other shards' outputs)")
    p.add_argument("--column", default="url", help="URL column (default: url)")
    p.add_argument("--shard", type=int, default=None, help="shard index (default: the NNNNN of part-NNNNN in the file name)")
    p.add_argument("--num-shards", type=int, default=DEFAULT_NUM_SHARDS, help=f"shards in the corpus (default: {DEFAULT_NUM_SHARDS})")
    p.add_argument("--no-shard-check", dest="shard_check", action="store_false",
                   help="do not require (xxh3_64(url) * num_shards) >> 64 == shard (for inputs that are not shards)")
    p.add_argument("--skip-nulls", action="store_true", help="drop null URLs (counted in the sidecar) instead of failing")
    p.add_argument("--tokenizer", default="urls", help="'urls' (built in) or a URL tokenizer.json / its folder")
    p.add_argument("--chunk-urls", type=int, default=DEFAULT_CHUNK_URLS, help="URLs gathered and written per chunk (memory; the output does not depend on it)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads (default: all cores); the output does not depend on it")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier output of the same shard in OUT")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars and no summary line")


def run(args) -> int:
    paths = resolve_inputs(args.inputs)
    if args.shard is not None and len(paths) > 1:
        raise InputError(f"--shard names one shard but {len(paths)} files were given: pass one file, or name them part-NNNNN")
    if args.threads is not None:
        import numba

        if not 1 <= args.threads <= numba.config.NUMBA_NUM_THREADS:
            raise InputError(f"--threads must be between 1 and {numba.config.NUMBA_NUM_THREADS}")
        numba.set_num_threads(args.threads)
    for path in paths:
        encode_shard(
            path,
            args.out,
            column=args.column,
            shard=args.shard,
            num_shards=args.num_shards,
            shard_check=args.shard_check,
            skip_nulls=args.skip_nulls,
            tokenizer=args.tokenizer,
            chunk_urls=args.chunk_urls,
            overwrite=args.overwrite,
            quiet=args.quiet,
        )
    return 0
