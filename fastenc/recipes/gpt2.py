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

Code layout: this module is the recipe itself (``encode_gpt2``) and its command line; the format
(names, buckets, part checks) is in ``gpt2_format``, reading in ``gpt2_source``, the part writer
in ``gpt2_parts`` and ``fastenc verify``'s checks in ``gpt2_verify`` (re-exported here).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow.parquet as pq

from fastenc.arrow_io import (
    AtomicGroup,
    inspect_inputs,
    remove_stale_temps,
    resolve_inputs,
    write_json_atomic,
)
from fastenc.errors import InputError, VerificationError
from fastenc.progress import format_bytes, format_rate, progress, summary_line
# The format's names are re-exported here too: ``fastenc.recipes.gpt2`` stays the one import
# for callers (tests, bench, ``fastenc verify``, which calls ``verify_output`` from this module).
from fastenc.recipes.gpt2_format import (  # noqa: F401  (re-exports)
    BUCKETS,
    EDGES,
    EMPTY,
    ENCODING_TEXT,
    FORMAT,
    FORMAT_VERSION,
    PART_FILE_RE,
    PART_RULE,
    SUMMARY_JSON,
    SUMMARY_TSV,
    TOKENIZER,
    VOCAB_SIZE,
    TokenFormat,
    bucket_of,
    bucket_range,
    buckets_of,
    check_part_files,
    parse_buckets,
    part_stem,
    summary_tsv,
    token_format,
)
from fastenc.recipes.gpt2_parts import Batch, BucketWriter
from fastenc.recipes.gpt2_source import Prefetch, count_column_of, describe_document, iter_source
from fastenc.recipes.gpt2_verify import verify_output  # noqa: F401  (re-export: fastenc verify calls it here)

#: 2**28 tokens = 512 MiB of bin per part: a few hundred parts for a 100 B-token corpus, each
#: small enough to download, memmap, hash and verify on its own, and big enough that the
#: per-file overhead (listing, open, metadata) is noise; below the 5 GB where S3/HF uploads
#: need multipart. Every part is also verified as it closes, so this bounds that cost too.
DEFAULT_PART_TOKENS = 1 << 28
DEFAULT_BATCH_BYTES = 32 << 20
DEFAULT_DECODE_EVERY = 1000
DEFAULT_COUNT_COLUMN = "gpt2_tokens"
TEXT_CANDIDATES = ("content", "text")


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
            found += [p for p in d.iterdir() if PART_FILE_RE.match(p.name)]
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
                item = 4 if summary.get("dtype") == "uint32" else 2
                if stem.with_name(stem.name + ".bin").stat().st_size != item * part["tokens"]:
                    return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return summary



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
    encoding: str = TOKENIZER,
    pattern: str | None = None,
) -> dict:
    """Encode the documents of ``inputs`` into GPT-2 bucketed bins under ``out_dir``; returns the summary.

    ``inputs``: parquet files, directories or globs, read in the order given. ``column``: the
    text column (default: ``content`` when a file has it, else ``text``). ``buckets``: which
    buckets to write (``"b1,b2,b3"``; default all), the others are counted and dropped.
    ``count_column``: the column of expected token counts, compared for every document of
    every file that has it (None: no comparison). ``decode_every``: every N-th document of each
    bucket (and each part's first) is decoded back from disk and compared with its source.
    ``threads``: Numba threads for the encoder (default: all). ``encoding``: ``"gpt2"`` (the
    card's), ``"cl100k_base"``, ``"o200k_base"``, or the path of a tokenizer.json or of a
    ``.tiktoken`` rank file (then ``pattern`` names its split); ids are stored as uint16 when every
    id fits, else uint32, and the choice is recorded with the encoding and its file's sha256.
    The count column is only compared for gpt2 unless another one is named. ``batch_bytes`` and ``threads``
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
    enc, fmt = _load_encoding(encoding, pattern)
    if fmt.tokenizer != TOKENIZER and count_column == DEFAULT_COUNT_COLUMN:
        count_column = None  # gpt2_tokens counts GPT-2 tokens: it cannot check another encoding
    count_columns = [count_column_of(i.path, count_column) for i in infos]
    id_columns = ["id" if "id" in pq.ParquetFile(i.path).schema_arrow.names else None for i in infos]
    out_dir = Path(out_dir)
    request = _request(infos, column, kept, part_tokens, count_column, decode_every, enc.sha256)
    if fmt.tokenizer != TOKENIZER:  # (a gpt2 request, and so its summary, is unchanged)
        request["encoding"] = [fmt.tokenizer, fmt.pattern]

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
    ctx = {"encoder": enc, "format": fmt, "sources": sources, "tokenizer_sha256": enc.sha256, "fastenc_version": __version__,
           "count_column": count_column if any(count_columns) else None}
    old_threads = numba.get_num_threads()
    if threads is not None:
        if not 1 <= threads <= numba.config.NUMBA_NUM_THREADS:
            raise InputError(f"--threads must be between 1 and {numba.config.NUMBA_NUM_THREADS} (got {threads})")
        numba.set_num_threads(threads)

    t0 = time.perf_counter()
    bar = progress(sum(i.column_bytes for i in infos), unit="B", desc="gpt2", quiet=quiet)
    group = AtomicGroup()
    writers = {b: BucketWriter(b, out_dir, part_tokens, decode_every, group, ctx) for b in kept}
    is_kept = np.zeros(EMPTY + 1, dtype=bool)
    is_kept[kept] = True
    docs_per = np.zeros(EMPTY + 1, np.int64)
    tokens_per = np.zeros(EMPTY + 1, np.int64)
    text_bytes = 0
    count_checked = 0
    n_docs = 0
    reader = Prefetch(iter_source(infos, count_columns, batch_bytes))
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
            info = Batch(si, batch.path, batch.first_row, batch.data, batch.offsets, expected is not None, id_columns[si])
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
        "tokenizer": fmt.tokenizer,
        **({"tokenizer_pattern": fmt.pattern} if fmt.pattern else {}),
        "tokenizer_sha256": enc.sha256,
        "vocab_size": fmt.vocab_size,
        "dtype": fmt.dtype,
        "encoding": fmt.encoding_text,
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
        f.write(summary_tsv(summary))
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


def _load_encoding(encoding: str, pattern: str | None):
    """(Encoder, TokenFormat) for ``--encoding``: a built-in name, or a file path (made absolute,
    so that ``verify`` finds it from anywhere)."""
    import fastenc
    from fastenc.vocab import TIKTOKEN_BUILTIN

    if encoding == TOKENIZER:
        if pattern is not None:
            raise InputError("--pattern applies to a .tiktoken file given by path, not to gpt2")
        enc = fastenc.load(TOKENIZER)
        if enc.vocab_size != VOCAB_SIZE or np.dtype(enc.dtype) != np.uint16:
            raise AssertionError(f"the built-in gpt2 vocabulary has {enc.vocab_size} ids ({enc.dtype}), expected {VOCAB_SIZE} (uint16)")
        return enc, token_format(TOKENIZER, enc)
    if encoding in TIKTOKEN_BUILTIN:
        return fastenc.load(encoding, pattern=pattern), token_format(encoding, fastenc.load(encoding), None)
    path = os.path.abspath(encoding)
    enc = fastenc.load(path, pattern=pattern)
    return enc, token_format(path, enc, pattern)


def _rmdir_if_empty(d: Path) -> None:
    try:
        d.rmdir()
    except OSError:
        pass



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
    p.add_argument("--encoding", default=TOKENIZER,
                   help="gpt2 (default), cl100k_base, o200k_base, or the path of a tokenizer.json or .tiktoken file; "
                        "ids are uint16 when they all fit, else uint32 (recorded in every sidecar)")
    p.add_argument("--pattern", default=None, choices=["cl100k", "o200k", "gpt2"],
                   help="the split pattern of a .tiktoken file given to --encoding by path")
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
        encoding=args.encoding,
        pattern=args.pattern,
    )
    return 0
