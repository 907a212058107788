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
2. **sort** by hash (``urls_threads.sort_by_hash``: stable, ties in source order).
3. **write**: the token spans in hash order (a prefetching gather kernel), chunk by chunk, to the
   bin's temporary file, then fsync.
4. **verify** the finished file: its length, its count of zeros, and 1,000 URLs each from its
   head, middle and tail (plus every URL flagged irreversible) decoded with the pure-Python
   decoder and ``canonical()`` and compared byte for byte with the source text (kept for those
   URLs during the pass), their xxh3 (the ``xxhash`` package) with the order key and the shard.

Only then are the tokenizer folder, the bin and, last, the sidecar put under their final names.

Memory: the tokens once (~2.6 GB for a 36.6 M-URL shard of ~35 tokens per URL), 4 x 8 bytes per
URL (hashes, token offsets, order, sorted keys), plus a few Arrow row groups and one write chunk.

This module is the recipe's flow (the streaming pass, ``encode_shard``, the CLI); each stage's
pieces live in a module of their own, and their public names are importable from here too:

- ``urls_format``     file names, sidecar constants, the shard/order/layout rules
- ``urls_source``     reading the URL column of a parquet file (batches, or whole)
- ``urls_tokenizer``  loading the tokenizer, checking and copying OUT/tokenizer/
- ``urls_encode``     ``encode_url_chunk``: URLs -> ``[0] ++ ids`` spans
- ``urls_bin``        the bin file: the background chunk writer, reading and decoding it back
- ``urls_check``      the read-back check of a just-written bin (stage 4) and its samples
- ``urls_verify``     ``verify_output``: ``fastenc verify OUT`` for URL outputs
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow.parquet as pq

from fastenc.arrow_io import AtomicFile, read_column_rows, remove_stale_temps, resolve_inputs, write_json_atomic
from fastenc.errors import InputError, VerificationError
from fastenc.progress import format_bytes, progress, summary_line

# The recipe's stages live in modules of their own; the names are imported here so that this
# module stays the recipe's one entry point (``fastenc urls``, ``fastenc verify``, the tests).
# The flow looks them up here (tests monkeypatch ``encode_url_chunk`` and ``_verify_written`` on
# this module), which is also why the streaming pass ``_encode_pass`` stays in this file.
from fastenc.recipes.urls_bin import _ChunkWriter, count_tokens_equal, iter_decoded  # noqa: F401
from fastenc.recipes.urls_check import VERIFY_SAMPLE, _Check, _sample_indices, _SampleWindows, _verify_written
from fastenc.recipes.urls_encode import EncodedUrls, _Buffers, encode_url_chunk  # noqa: F401
from fastenc.recipes.urls_format import (  # noqa: F401
    EOS_TOKEN,
    FORMAT,
    FORMAT_VERSION,
    LAYOUT,
    ORDER_RULE,
    SHARD_RULE,
    TOKENIZER_DIR,
    TOKENIZER_FILES,
    _show,
    bin_name,
    shard_from_name,
    sidecar_name,
)
from fastenc.recipes.urls_source import (  # noqa: F401
    UrlBatch,
    UrlColumn,
    _column_bytes,
    _open_column,
    big_empty,
    iter_url_batches,
    read_url_column,
)
from fastenc.recipes.urls_tokenizer import _check_tokenizer_dir, _copy_tokenizer, _load_tokenizer, _sha256_file
from fastenc.recipes.urls_verify import verify_output  # noqa: F401  (fastenc.verify calls it from here)

DEFAULT_NUM_SHARDS = 2048
DEFAULT_CHUNK_URLS = 1_000_000

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


# ----------------------------------------------------------------------------------------------
# The streaming pass: read, hash, check and encode every URL in the source's order
# ----------------------------------------------------------------------------------------------


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
    from fastenc.recipes.urls_threads import hash_batch

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
            h = hash_batch(data, offsets)
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
    from fastenc.recipes.urls_threads import gather_spans, sort_by_hash

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
    order, sorted_hashes = sort_by_hash(p.hashes, threads)
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
