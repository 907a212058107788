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
   by two background threads into Arrow buffers (no Python string per URL); per slice of a row
   group (at most ``PASS_CHUNK_URLS``), every URL
   is hashed (xxh3_64, Numba), its shard checked, and it is encoded (canonical() + URL pre-split
   + BPE + the leading 0, one fused parallel kernel) into one token buffer. The source is
   SURT-sorted, so neighbouring URLs share hosts and the BPE piece caches hit: encoding in this
   order and permuting the tokens afterwards measured ~30% faster than encoding in hash order,
   and the text itself is never held whole. A URL outside the shard stops all encoding (the
   pass only counts from then on) and fails the run before anything is written.
2. **sort** by hash (``threads.sort_by_hash``: stable, ties in source order).
3. **write**: the token spans in hash order (a prefetching gather kernel), chunk by chunk
   (``DEFAULT_CHUNK_URLS``: small chunks in reused buffers), to the bin's temporary file, then fsync.
4. **verify** the finished file: its length, its count of zeros, and 1,000 URLs each from its
   head, middle and tail (plus every URL flagged irreversible) decoded with the pure-Python
   decoder and ``canonical()`` and compared byte for byte with the source text (kept for those
   URLs during the pass), their xxh3 (the ``xxhash`` package) with the order key and the shard.

Only then are the tokenizer folder, the bin and, last, the sidecar put under their final names.

Memory: the tokens once (~2.6 GB for a 36.6 M-URL shard of ~35 tokens per URL), 4 x 8 bytes per
URL (hashes, token offsets, order, sorted keys), plus a few Arrow row groups and one write chunk.

This module is the recipe's flow (the streaming pass, ``encode_shard``, the CLI); each stage's
pieces live in a module of their own, and their public names are importable from here too:

- ``urls.format``     file names, sidecar constants, the shard/order/layout rules
- ``urls.source``     reading the URL column of a parquet file (batches, or whole)
- ``urls.tokenizer``  loading the tokenizer, checking and copying OUT/tokenizer/
- ``urls.encode``     ``encode_url_chunk``: URLs -> ``[0] ++ ids`` spans
- ``urls.bin``        the bin file: the background chunk writer, reading and decoding it back
- ``urls.check``      the read-back check of a just-written bin (stage 4) and its samples
- ``urls.verify``     ``verify_output``: ``fastenc verify OUT`` for URL outputs
"""
from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow.parquet as pq

from fastenc.arrow_io import invalid_utf8_count, read_column_rows, resolve_inputs
from fastenc.errors import InputError, VerificationError, UsageError
from fastenc.memory import small_page_empty
from fastenc.progress import format_bytes, progress, summary_line
from fastenc.run import OutputSpec, Run, make_request
from fastenc.run.elastic import adjust
from fastenc.run.staging import finish_after_check
from fastenc.run.units import check_workers, file_xxh3, map_units, worker_threads

# The recipe's stages live in modules of their own; the names are imported here so that this
# module stays the recipe's one entry point (``fastenc urls``, ``fastenc verify``, the tests).
# The flow looks them up here (tests monkeypatch ``encode_url_chunk`` and ``verify_written`` on
# this module), which is also why the streaming pass ``_encode_pass`` stays in this file.
from fastenc.recipes.urls.bin import ChunkWriter, count_tokens_equal, iter_decoded  # noqa: F401
from fastenc.recipes.urls.check import VERIFY_SAMPLE, ReadBackCheck, sample_indices, SampleWindows, verify_written
from fastenc.recipes.urls.encode import EncodedUrls, EncodeBuffers, encode_url_chunk  # noqa: F401
from fastenc.recipes.urls.format import (  # noqa: F401
    EOS_TOKEN,
    FORMAT,
    FORMAT_VERSION,
    LAYOUT,
    ORDER_RULE,
    SHARD_RULE,
    TOKENIZER_DIR,
    TOKENIZER_FILES,
    show_bytes,
    bin_name,
    shard_from_name,
    sidecar_name,
)
from fastenc.recipes.urls.source import (  # noqa: F401
    UrlBatch,
    UrlColumn,
    url_column_bytes,
    open_url_column,
    big_empty,
    iter_url_batches,
    read_url_column,
)
from fastenc.recipes.urls.tokenizer import check_tokenizer_dir, copy_tokenizer, load_tokenizer
from fastenc.recipes.urls.verify import verify_output  # noqa: F401  (fastenc.verify calls it from here)

DEFAULT_NUM_SHARDS = 2048
# URLs per write chunk (~1.8 MB of ids at ~28 tokens a URL). Small on purpose: the gather writes
# into buffers that stay in the CPU's caches and are reused chunk after chunk, where a 1 M-URL
# chunk (~56 MB) was fresh memory for every shard: chunks of 8 k-64 k URLs wrote fastest (bench/RESULTS.md,
# "URL shards: the write chunk and the zero count were fresh memory on every shard").
DEFAULT_CHUNK_URLS = 32_768
# URLs hashed and encoded per step of the read pass: a row group is split into slices of at most
# this many, so that its per-step buffers (~8 MB of canonical text, ~20 MB of id slots) stay small
# whatever the file's row groups: a file of one huge row group no longer doubles the peak memory
# (bench/RESULTS.md, "URL read pass: a row group in slices of at most 131,072 URLs").
PASS_CHUNK_URLS = 131_072

__all__ = [
    "encode_shard",
    "encode_shards",
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
    samples: SampleWindows
    empty: int
    url_bytes: int
    max_url_bytes: int
    seconds: dict
    invalid_utf8: int


def _encode_pass(path: Path, column: str, enc, shard: int, num_shards: int, shard_check: bool, skip_nulls: bool, bar) -> _Pass:
    """One pass over the file: per Arrow chunk, hash every URL, check its shard, and encode it
    (canonical + BPE + the leading 0) into one growing token buffer, in the source's order."""
    from fastenc.kernels.url_pack import count_outside_shard, shard_of
    from fastenc.recipes.urls.threads import hash_batch

    pf, _ = open_url_column(path, column)
    n_rows = pf.metadata.num_rows
    column_bytes = url_column_bytes(pf, column)
    # Upper bounds (ids never outnumber bytes, + one 0 per URL); untouched pages cost nothing.
    # The ids on small pages: they are written once, front to back, and a huge page's first touch
    # costs more on the VMs measured: the ids' compaction gains more than the hash-order gather that
    # reads them back loses (bench/RESULTS.md, "A URL shard's ids on small pages").
    tokens = small_page_empty(column_bytes + n_rows + 1, np.uint16)
    tok_offsets = big_empty(n_rows + 1, np.int64)
    tok_offsets[0] = 0
    hashes = big_empty(max(n_rows, 1), np.uint64)
    lo = -(-shard * 2**64 // num_shards) if shard_check else 0  # the shard's hash range
    hi = -(-(shard + 1) * 2**64 // num_shards) if shard_check else 2**64
    samples = SampleWindows(n_rows, lo, hi)
    bufs = EncodeBuffers()
    seconds = {"read": 0.0, "hash": 0.0, "encode": 0.0}
    rows = None
    n = n_tok = nulls = outside = empty = url_bytes = max_len = invalid = 0
    examples: list[str] = []
    irreversible: dict[int, bytes] = {}
    first_bad = np.empty(5, np.int64)
    t = time.perf_counter()
    for batch in iter_url_batches(path, column, skip_nulls=skip_nulls, max_rows=PASS_CHUNK_URLS):
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
        adjust()  # a --workers worker takes its share of the cores of workers already done
        if k:
            h = hash_batch(data, offsets)
            hashes[n : n + k] = h
            if shard_check:
                bad = int(count_outside_shard(h, np.uint64(num_shards), np.uint64(shard), first_bad, 5 - len(examples)))
                for j in first_bad[: min(bad, 5 - len(examples))].tolist():
                    row = int(rows[n + j]) if rows is not None else batch.first_row + j
                    url = data[offsets[j] : offsets[j + 1]].tobytes()
                    examples.append(f"row {row}: {show_bytes(url)} is in shard {int(shard_of(h[j], np.uint64(num_shards)))}")
                outside += bad
            samples.add(h, data, offsets, n)
            lengths = np.diff(offsets)
            empty += int(np.count_nonzero(lengths == 0))
            invalid += invalid_utf8_count(data, offsets)
            url_bytes += int(offsets[-1])
            max_len = max(max_len, int(lengths.max()))
        t2 = time.perf_counter()
        seconds["hash"] += t2 - t1
        if k and not outside:  # once a URL is outside the shard nothing will be written: just count
            if n_tok + int(offsets[-1]) + k > tokens.size:  # only if the size estimate was wrong
                grown = small_page_empty(max(n_tok + int(offsets[-1]) + k, tokens.size + tokens.size // 2), np.uint16)
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
                 samples, empty, url_bytes, max_len, seconds, invalid)

# ----------------------------------------------------------------------------------------------
# The recipe
# ----------------------------------------------------------------------------------------------


def _output(shard: int) -> OutputSpec:
    """One shard's output in a shared ``OUT``: its bin and its sidecar (the manifest), and the
    shared ``tokenizer/`` (added when absent)."""
    return OutputSpec(
        recipe="urls",
        format=FORMAT,
        manifest=sidecar_name(shard),
        files_of=lambda meta: [(bin_name(shard), 2 * int(meta["tokens"])), (f"{TOKENIZER_DIR}/tokenizer.json", None)],
        is_own=lambda name: name == TOKENIZER_DIR or shard_from_name(name) is not None,
        mode="into",
        leftovers=(bin_name(shard),),
        shared=(TOKENIZER_DIR,),
        check=lambda out, meta: file_xxh3(out / bin_name(shard)) == meta["bin_xxh3_64"],
        card=_render_card,
    )


def _render_card(folder: Path) -> str:
    from fastenc.recipes.urls.card import render

    return render(folder)


def _shard_request(path: Path, tokenizer_sha256: str, column: str, shard: int, num_shards: int, shard_check: bool,
                   skip_nulls: bool) -> dict:
    """What one shard's run was asked to do (its sidecar's ``request``)."""
    options = {"column": column, "shard": shard, "num_shards": num_shards, "shard_check": shard_check, "skip_nulls": skip_nulls}
    return make_request("urls", [path], options, tokenizer_sha256)


def _source_rows(p: _Pass, idx: np.ndarray) -> np.ndarray:
    return p.rows[idx] if p.rows is not None else idx


def _check_shard_args(path, shard, num_shards, chunk_urls) -> tuple[Path, int]:
    paths = resolve_inputs([os.fspath(path)])
    if len(paths) != 1:
        raise InputError(f"{path} names {len(paths)} files; encode_shard takes one shard file (the CLI takes several)")
    path = paths[0]
    if not 1 <= num_shards < 2**64:
        raise UsageError(f"--num-shards must be at least 1 (got {num_shards})")
    if shard is None:
        shard = shard_from_name(path)
        if shard is None:
            raise InputError(
                f"cannot tell the shard index of {path.name}: its name has no part-NNNNN. Pass --shard N "
                "(or --no-shard-check, which then writes it as shard 0)"
            )
    if not 0 <= shard < num_shards:
        raise InputError(f"shard {shard} is not below --num-shards {num_shards}: check --num-shards (the default is {DEFAULT_NUM_SHARDS})")
    if chunk_urls < 1:
        raise UsageError(f"--chunk-urls must be positive (got {chunk_urls})")
    return path, shard


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
    threads: int | None = None,
    overwrite: bool = False,
    quiet: bool = False,
    command: dict | None = None,
) -> dict:
    """Encode one URL shard into ``out_dir``; returns the sidecar as written.

    ``shard`` defaults to the ``part-NNNNN`` in the file name (0 when ``shard_check`` is off and
    the name has none). ``out_dir`` may hold other shards' outputs (one bin + sidecar each, one
    shared ``tokenizer/``). If it already holds the finished output of this very request (same
    file, size, mtime, options, tokenizer and fastenc version), nothing is done; a different
    earlier output of the same shard is replaced only with ``overwrite``. The shard appears in one
    step: a new ``OUT`` by one rename, an existing one by one exchange with a rebuilt copy (Linux;
    elsewhere the sidecar is renamed in last, the commit) (docs/atomic-output.md). The bin does not depend on
    ``chunk_urls`` (URLs per write chunk) or ``threads``. Raises ``InputError`` (bad input),
    ``VerificationError`` (a URL outside the shard, or the written bin failing its read-back
    check: then nothing is published). ``command``: how the run was started, for the card.
    """
    if shard is None and not shard_check and shard_from_name(Path(path)) is None:
        shard = 0
    path, shard = _check_shard_args(path, shard, num_shards, chunk_urls)
    enc, tok_src = load_tokenizer(tokenizer)
    open_url_column(path, column)  # a missing or non-text column fails before anything else
    request = _shard_request(path, enc.sha256, column, shard, num_shards, shard_check, skip_nulls)
    with Run(_output(shard), out_dir, request, overwrite=overwrite, threads=threads, command=command) as run:
        if run.done is not None:
            summary_line(f"fastenc urls: {run.out / bin_name(shard)} already holds this output (its sidecar matches); "
                         "nothing to do", quiet=quiet)
            return run.done
        tokenizer_present = check_tokenizer_dir(run.out, enc.sha256)
        job = _Job(path, column, shard, num_shards, shard_check, enc, quiet, run.stats)
        p = _read_pass(job, skip_nulls)
        meta = _sort_write_verify(job, run.stage, p, chunk_urls, request)
        if not tokenizer_present:
            copy_tokenizer(tok_src, run.stage)
        run.publish(meta)
    _print_summary(job, run, meta, p.nulls)
    return meta


def encode_shards(paths, out_dir: str | os.PathLike, *, workers: int = 1, threads: int | None = None, quiet: bool = False,
                  shard: int | None = None, **options) -> list[dict]:
    """Encode many URL shards into ``out_dir`` (``encode_shard`` per file, same options); returns
    their sidecars in input order.

    Each shard is a unit of its own (docs/scale.md), committed with its sidecar (docs/atomic-output.md), so
    a rerun after an interruption redoes only the shards without a sidecar whose bin verifies
    (size and xxh3). ``workers`` > 1 encodes that many shards at once, in processes (forked or spawned, docs/scale.md) of
    ``cores // workers`` Numba threads each, with one progress bar over the shards.
    """
    paths = resolve_inputs([os.fspath(p) for p in paths])
    if shard is not None and len(paths) > 1:
        raise UsageError(f"--shard names one shard but {len(paths)} files were given: pass one file, or name them part-NNNNN")
    check_workers(workers)
    for path in paths:  # every file's shard index is checked before any is encoded
        if shard is not None or options.get("shard_check", True) or shard_from_name(path) is not None:
            _check_shard_args(path, shard, options.get("num_shards", DEFAULT_NUM_SHARDS), options.get("chunk_urls", DEFAULT_CHUNK_URLS))
    task = functools.partial(encode_unit, [os.fspath(p) for p in paths], os.fspath(out_dir), shard, options,
                             quiet or workers > 1)
    if workers == 1 or len(paths) == 1:
        return [task(i, threads=threads) for i in range(len(paths))]
    _prepare_shared(out_dir, options, quiet)
    try:
        with progress(len(paths), unit="shard", desc="urls", quiet=quiet, unit_scale=False) as bar:
            map_units(task, range(len(paths)), workers=workers, threads=worker_threads(workers, threads), bar=bar)
    except BaseException:
        _tidy(Path(out_dir))  # the stages of the workers it stopped (their shards were not published)
        raise
    return read_sidecars(paths, out_dir, shard)


def _tidy(out: Path) -> None:
    """After a stopped map (its workers are gone): their temporaries beside and in ``OUT``, and the
    files of the shard locks they held."""
    from fastenc.run import staging
    from fastenc.run.lifecycle import RUN_LOCK_SUFFIX

    out = Path(os.path.abspath(out))
    try:
        # (this process's own too: the map is over, and a signal can land between a stage's mkdir
        # and the line that records it)
        staging.clean_stale(out.parent, out.name, ours=True)
        staging.clean_stale(out, ours=True)
        staging.clean_locks(out.parent, out.name + ".", RUN_LOCK_SUFFIX)  # the shard locks of the stopped workers
    except OSError:  # (a failed clean-up must not hide why the run stopped; a rerun cleans up too)
        pass


def read_sidecars(paths, out_dir: str | os.PathLike, shard: int | None = None) -> list[dict]:
    """The sidecars of the shards of ``paths`` in ``out_dir``, in input order (as written)."""
    paths = resolve_inputs([os.fspath(p) for p in paths])
    return [json.loads((Path(out_dir) / sidecar_name(_shard_index(p, shard))).read_text(encoding="utf-8")) for p in paths]


def _shard_index(path: Path, shard: int | None) -> int:
    """The shard a file is written as (``encode_shard``'s rule: --shard, else its part-NNNNN, else 0)."""
    if shard is not None:
        return shard
    found = shard_from_name(path)
    return 0 if found is None else found


def shards_missing(paths, out_dir: str | os.PathLike, *, indices=None, shard: int | None = None, **options) -> list[int]:
    """The indices of ``paths`` (those in ``indices``, default all) whose shard is not finished in
    ``out_dir`` with these options (no sidecar of this very request, or a bin that does not verify)."""
    from fastenc.run import finished_same

    enc, _ = load_tokenizer(options.get("tokenizer", "urls"))
    paths = resolve_inputs([os.fspath(p) for p in paths])
    missing = []
    for i in range(len(paths)) if indices is None else indices:
        path = paths[i]
        k = _shard_index(path, shard)
        request = _shard_request(path, enc.sha256, options.get("column", "url"), k, options.get("num_shards", DEFAULT_NUM_SHARDS),
                                 options.get("shard_check", True), options.get("skip_nulls", False))
        if finished_same(Path(out_dir), _output(k), request) is None:
            missing.append(i)
    return missing


def encode_unit(paths: list, out_dir: str, shard, options: dict, quiet: bool, i: int, threads: int | None = None) -> dict:
    """One shard (a map unit): ``encode_shard`` of ``paths[i]``; the sidecar it wrote or found."""
    return encode_shard(paths[i], out_dir, shard=shard, threads=threads, quiet=quiet, **options)


def _prepare_shared(out_dir, options: dict, quiet: bool) -> None:
    """Before the workers start: compile the kernels once, load the Encoder (forked workers
    inherit it; each fills piece caches of its own, ``fastenc.encoder``), and, in an ``OUT`` that
    holds shards already, put ``OUT/tokenizer/`` in place (each worker would otherwise stage its
    own copy of it). A new ``OUT`` is not created here: a run stopped before its first shard's
    commit would leave a folder holding only ``tokenizer/`` under the final name."""
    from fastenc.recipes.urls.recipe import FAMILY

    FAMILY.compile_ahead(quiet)
    enc, tok_src = load_tokenizer(options.get("tokenizer", "urls"))
    from fastenc.run import staging

    out = Path(out_dir)
    if not out.is_dir() or not staging.has_files(out):
        return  # OUT appears with the first shard, tokenizer/ in it, never before (docs/atomic-output.md)
    with staging.out_lock(out):  # a writer of OUT like any shard's run: another may be swapping OUT now
        if check_tokenizer_dir(out, enc.sha256):
            return
        stage = staging.Stage(out / staging.temp_name(""))
        try:
            copy_tokenizer(tok_src, stage)
            stage.finish()
            staging.rename_step(stage.dir / TOKENIZER_DIR, out / TOKENIZER_DIR)
        finally:
            stage.discard()


class _Job(NamedTuple):
    """The facts every stage of one shard's run needs."""

    path: Path
    column: str
    shard: int
    num_shards: int
    shard_check: bool
    enc: object
    quiet: bool
    stats: object


def _read_pass(job: _Job, skip_nulls: bool) -> _Pass:
    """Stage 1, and the refusal of a shard with URLs outside it (before anything is written)."""
    bar = progress(pq.ParquetFile(job.path).metadata.num_rows, unit="URL", desc="read+hash+encode", quiet=job.quiet)
    with bar:
        p = _encode_pass(job.path, job.column, job.enc, job.shard, job.num_shards, job.shard_check, skip_nulls, bar)
    job.stats.seconds.update(p.seconds)
    if p.outside:
        raise VerificationError(
            f"{job.path}: {p.outside:,} of {p.n:,} URLs do not belong to shard {job.shard} of {job.num_shards} "
            f"(rule: {SHARD_RULE}), for example:\n  " + "\n  ".join(p.outside_examples) + "\n"
            "Nothing was written. Check --num-shards and --shard (or the part-NNNNN in the file name); "
            "for an input that is not a shard, pass --no-shard-check"
        )
    return p


class _Order(NamedTuple):
    order: np.ndarray  # source index of each bin position
    samples: np.ndarray  # bin positions checked after writing
    sample_keys: np.ndarray
    prev_keys: np.ndarray
    flagged_pos: np.ndarray  # bin positions of the irreversible URLs


def _sort(job: _Job, p: _Pass) -> _Order:
    """Stage 2: the hash order, and the keys of the positions the verify stage samples."""
    from fastenc.recipes.urls.threads import sort_by_hash

    n = p.n
    with job.stats.time("sort"), progress(n, unit="URL", desc="sort", quiet=job.quiet) as bar:
        import numba

        order, sorted_hashes = sort_by_hash(p.hashes, numba.get_num_threads())
        samples = sample_indices(n)
        sample_keys = sorted_hashes[samples]
        prev_keys = sorted_hashes[np.maximum(samples - 1, 0)]
        del sorted_hashes
        flagged = np.fromiter(p.irreversible, np.int64, len(p.irreversible))
        flagged_pos = np.flatnonzero(np.isin(order, flagged)) if flagged.size else np.zeros(0, np.int64)
        bar.update(n)
    return _Order(order, samples, sample_keys, prev_keys, flagged_pos)


def _write_bin(job: _Job, stage, p: _Pass, o: _Order, chunk_urls: int):
    """Stage 3: the token spans in hash order, chunk by chunk, into the staged bin (which stage 4
    reads back and then fsyncs).
    Returns the staged file, the bin positions watched by stage 4 with their token spans, the
    digest and the token count."""
    import numba

    from fastenc.recipes.urls.threads import copy_spans, plan_spans

    n, threads = p.n, numba.get_num_threads()
    watch = np.union1d(o.samples, o.flagged_pos)  # bin positions whose spans the verify stage reads
    spans = np.zeros((len(watch), 2), np.int64)
    bin_file = stage.open(bin_name(job.shard))
    with job.stats.time("write"), progress(n, unit="URL", desc="write", quiet=job.quiet) as bar:
        writer = ChunkWriter(bin_file.file)
        out_offsets = np.empty(min(n, chunk_urls) + 1, np.int64)
        starts = np.empty(min(n, chunk_urls), np.int64)
        written = 0
        try:
            for a in range(0, n, chunk_urls):
                b = min(n, a + chunk_urls)
                need, chunk_starts = plan_spans(p.tok_offsets, o.order[a:b], out_offsets[: b - a + 1], starts)
                out = writer.buffer(need)
                copy_spans(p.tokens, chunk_starts, out, out_offsets[: b - a + 1], threads)
                lo_w, hi_w = np.searchsorted(watch, [a, b])
                spans[lo_w:hi_w, 0] = written + out_offsets[watch[lo_w:hi_w] - a]
                spans[lo_w:hi_w, 1] = written + out_offsets[watch[lo_w:hi_w] - a + 1]
                writer.put(out[:need])
                written += need
                bar.update(b - a)
        finally:
            digest = writer.close()  # waits for the queued chunks; re-raises a write error
        # (not fsynced here: the verify stage reads it back while the disk writes it, then fsyncs)
    return bin_file, watch, spans, digest, written


def _verify_bin(job: _Job, p: _Pass, o: _Order, bin_file, watch, spans, n_tokens: int) -> tuple[dict, int]:
    """Stage 4: read the staged bin back and check its samples while the disk writes it, then fsync
    it (``finish_after_check``); returns the check and how many
    sampled texts had to be read back from the source."""
    src_idx = o.order[watch]
    texts = {}
    missing = [int(i) for i in src_idx if int(i) not in p.samples.text and int(i) not in p.irreversible]
    if missing:  # a skewed input put some samples outside the windows: read them back
        rows = _source_rows(p, np.asarray(missing, np.int64))
        for i, url in zip(missing, read_column_rows(job.path, job.column, rows.tolist())):
            texts[i] = url.encode("utf-8", "surrogatepass") if isinstance(url, str) else url
    where = {int(k): j for j, k in enumerate(o.samples)}
    flagged_set = set(o.flagged_pos.tolist())
    checks = []
    for w, k in enumerate(watch.tolist()):
        i = int(src_idx[w])
        text = p.irreversible.get(i) or p.samples.text.get(i) or texts.get(i, b"")
        j = where.get(k)
        checks.append(ReadBackCheck(k, int(spans[w, 0]), int(spans[w, 1]), int(o.sample_keys[j]) if j is not None else None,
                             int(o.prev_keys[j]) if j is not None else None, text, int(_source_rows(p, np.array([i]))[0]),
                             k in flagged_set))
    with job.stats.time("verify"), progress(len(checks), unit="URL", desc="verify", quiet=job.quiet) as bar:
        check = finish_after_check([bin_file], lambda: verify_written(
            bin_file.temp_path, job.enc, p.n, n_tokens, checks, job.num_shards, job.shard if job.shard_check else None, bar))
    if check["problems"]:
        raise VerificationError(f"{job.path}: the written bin failed its read-back check; nothing was published:\n  "
                                + "\n  ".join(check["problems"]))
    return check, len(missing)


def _sort_write_verify(job: _Job, stage, p: _Pass, chunk_urls: int, request: dict) -> dict:
    """Stages 2-4, each on the threads ``adjust()`` gives it; returns the sidecar."""
    adjust()
    o = _sort(job, p)
    adjust()
    bin_file, watch, spans, digest, n_tokens = _write_bin(job, stage, p, o, chunk_urls)
    adjust()
    check, read_back = _verify_bin(job, p, o, bin_file, watch, spans, n_tokens)
    return _sidecar(job, p, o, n_tokens, digest, check, read_back, request)


def _sidecar(job: _Job, p: _Pass, o: _Order, n_tokens: int, digest: str, check: dict, read_back: int, request: dict) -> dict:
    from fastenc import __version__

    n, enc, path = p.n, job.enc, job.path
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fastenc_version": __version__,
        "file": bin_name(job.shard),
        "urls": n,
        "tokens": n_tokens,
        "dtype": "uint16",
        "byteorder": "little",
        "eos_token": EOS_TOKEN,
        "eos_token_id": 0,
        "vocab_size": enc.vocab_size,
        "tokenizer": f"{TOKENIZER_DIR}/tokenizer.json",
        "tokenizer_sha256": enc.sha256,
        "shard": job.shard,
        "num_shards": job.num_shards,
        "shard_checked": job.shard_check,
        "shard_rule": SHARD_RULE,
        "order": ORDER_RULE,
        "hash": "xxh3_64: XXH3_64bits, seed 0 (xxhash.xxh3_64_intdigest)",
        "layout": LAYOUT,
        "source": {
            "file": path.name,
            "bytes": path.stat().st_size,
            "rows": p.num_rows,
            "column": job.column,
            "column_type": str(open_url_column(path, job.column)[1]),
        },
        "null_urls_skipped": p.nulls,
        "empty_urls": p.empty,
        "invalid_utf8_urls": p.invalid_utf8,  # kept byte for byte like every URL; counted so a bad source shows
        "url_bytes": p.url_bytes,
        "max_url_bytes": p.max_url_bytes,
        # URLs on which the card's canonical() is not self-inverse (malformed hosts such as
        # http://x:1.y or http://a.[b): stored as canonical(url) like every URL, but
        # canonical(decode(ids)) is not the original. Indices are positions in the bin (0-based).
        "irreversible_urls": int(o.flagged_pos.size),
        "irreversible_url_indices": o.flagged_pos.tolist(),
        "bin_xxh3_64": digest,
        # samples_read_back: sampled URLs whose text the pass did not keep (see SampleWindows). No
        # timings or thread counts here: a shard's files are byte-identical however it was run
        "verified": {"head": min(VERIFY_SAMPLE, n), "middle": min(VERIFY_SAMPLE, n), "tail": min(VERIFY_SAMPLE, n),
                     "urls_checked": check["urls_checked"], "mismatches": check["mismatches"], "samples_read_back": read_back},
        "request": request,
    }


def _print_summary(job: _Job, run, meta: dict, nulls: int) -> None:
    dt = run.stats.elapsed()
    s = run.stats.seconds
    n, n_tokens = meta["urls"], meta["tokens"]
    summary_line(
        f"fastenc urls: {job.path.name} -> {run.out / meta['file']}: {n:,} URLs, {n_tokens:,} tokens ({format_bytes(2 * n_tokens)}) in "
        f"{dt:.2f} s, {n / dt if dt > 0 else 0:,.0f} URLs/s (read {s['read']:.1f} s, hash {s['hash']:.1f}, "
        f"encode {s['encode']:.1f}, sort {s['sort']:.1f}, write {s['write']:.1f}, verify {s['verify']:.1f}); "
        f"shard {job.shard} of {job.num_shards}{'' if job.shard_check else ' (not checked)'}, {nulls:,} nulls skipped",
        quiet=job.quiet,
    )
