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
- a deterministic sample (every ``decode_every``-th document of each bucket, counted within each
  input file) is read back from the file's spill, decoded and compared byte for byte with the source;
- each finished part is re-read from disk: ``len(bin) == idx[-1]``, ``idx[0] == 0``, ``idx``
  strictly increasing, every document length inside the bucket's range, ``max(id) < 50257``,
  and the bytes read equal the bytes written (xxh3).

Code layout: this module is the recipe itself (``encode_gpt2``) and its command line; the format
(names, buckets, part checks) is in ``gpt2.format``, reading in ``gpt2.source``, the part writer
in ``gpt2.parts`` and ``fastenc verify``'s checks in ``gpt2.verify`` (re-exported here).
"""
from __future__ import annotations

import functools
import os
from typing import NamedTuple, Sequence

import numpy as np
import pyarrow.parquet as pq

from fastenc.arrow_io import Prefetch, as_input_list, check_batch_bytes, inspect_inputs, resolve_inputs
from fastenc.errors import UsageError, VerificationError
from fastenc.progress import format_bytes, format_rate, summary_line
from fastenc.run import OutputSpec, Run, make_request
from fastenc.run.elastic import adjust, one_of_many
from fastenc.run.units import WorkDir, check_workers, map_phase, run_unit
from fastenc.tasks import Behind, each_on_threads
# The format's names are re-exported here too: ``fastenc.recipes.gpt2`` stays the one import
# for callers (tests, bench, ``fastenc verify``, which calls ``verify_output`` from this module).
from fastenc.recipes.gpt2.format import (  # noqa: F401  (re-exports)
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
from fastenc.recipes.gpt2.parts import Batch, BucketSpill, BucketWriter
from fastenc.recipes.gpt2.source import count_column_of, describe_document, iter_source
from fastenc.recipes.gpt2.verify import verify_output  # noqa: F401  (re-export: fastenc verify calls it here)

#: 2**28 tokens = 512 MiB of bin per part: a few hundred parts for a 100 B-token corpus, each
#: small enough to download, memmap, hash and verify on its own, and big enough that the
#: per-file overhead (listing, open, metadata) is noise; below the 5 GB where S3/HF uploads
#: need multipart. Every part is also verified as it closes, so this bounds that cost too.
DEFAULT_PART_TOKENS = 1 << 28
#: Read batches of 8 MB, not 32: the reader thread hands the first one over in ~17 ms, not ~125
#: (a 54 MB file), and a batch and its ids stay in the CPU caches between decode and encode
#: (bench/RESULTS.md, "Issue 11: 8 MiB read batches for the gpt2 recipe"). The output does not depend on it.
DEFAULT_BATCH_BYTES = 8 << 20
DEFAULT_DECODE_EVERY = 1000
DEFAULT_COUNT_COLUMN = "gpt2_tokens"
TEXT_CANDIDATES = ("content", "text")


def _manifest_files(summary: dict) -> list:
    files = [(SUMMARY_TSV, None)]
    item = 4 if summary.get("dtype") == "uint32" else 2
    for name in summary["kept_buckets"]:
        for part in summary["buckets"][name]["parts"]:
            stem = part["stem"]
            files += [(f"{stem}.bin", item * part["tokens"]), (f"{stem}.idx.npy", None), (f"{stem}.meta.json", None)]
    return files


def _is_own(name: str) -> bool:
    return name in BUCKETS or name in (SUMMARY_JSON, SUMMARY_TSV)


def _render_card(folder) -> str:
    from fastenc.recipes.gpt2.card import render

    return render(folder)


OUTPUT = OutputSpec(recipe="gpt2", format=FORMAT, manifest=SUMMARY_JSON, files_of=_manifest_files, is_own=_is_own,
                    card=_render_card)


class _Sources(NamedTuple):
    """The checked inputs: their footers' facts, and per file its count and id columns (or None)."""

    paths: list
    infos: list
    count_columns: list
    id_columns: list


def _open_sources(inputs, column, count_column, skip_nulls: bool) -> _Sources:
    paths = resolve_inputs(as_input_list(inputs))
    infos = inspect_inputs(paths, column, candidates=None if column else TEXT_CANDIDATES, skip_nulls=skip_nulls)
    count_columns = [count_column_of(i.path, count_column) for i in infos]
    id_columns = ["id" if "id" in pq.ParquetFile(i.path).schema_arrow.names else None for i in infos]
    return _Sources(paths, infos, count_columns, id_columns)


def _check_options(part_tokens: int, decode_every: int, batch_bytes: int, workers: int) -> None:
    check_workers(workers)
    if part_tokens < 1:
        raise UsageError(f"--part-tokens must be at least 1 (got {part_tokens})")
    if decode_every < 1:
        raise UsageError(f"--decode-every must be at least 1 (1 decodes every document; got {decode_every})")
    check_batch_bytes(batch_bytes)


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
    skip_nulls: bool = False,
    threads: int | None = None,
    workers: int = 1,
    overwrite: bool = False,
    quiet: bool = False,
    encoding: str = TOKENIZER,
    pattern: str | None = None,
    command: dict | None = None,
) -> dict:
    """Encode the documents of ``inputs`` into GPT-2 bucketed bins under ``out_dir``; returns the summary.

    ``inputs``: parquet files, directories or globs, read in the order given. ``column``: the
    text column (default: ``content`` when a file has it, else ``text``). ``buckets``: which
    buckets to write (``"b1,b2,b3"``; default all), the others are counted and dropped.
    ``count_column``: the column of expected token counts, compared for every document of
    every file that has it (None: no comparison). ``decode_every``: every N-th document of each
    bucket (counted within each input file) is decoded back from disk and compared with its source.
    ``threads``: Numba threads for the encoder (default: all). ``encoding``: ``"gpt2"`` (the
    card's), ``"cl100k_base"``, ``"o200k_base"``, or the path of a tokenizer.json or of a
    ``.tiktoken`` rank file (then ``pattern`` names its split); ids are stored as uint16 when every
    id fits, else uint32, and the choice is recorded with the encoding and its file's sha256.
    The count column is only compared for gpt2 unless another one is named. ``batch_bytes`` and ``threads``
    change memory and speed only: the output is byte-identical for any values. ``skip_nulls``:
    leave null texts out and count them (``null_documents_skipped``) instead of refusing the input.

    ``out_dir`` must be absent or empty; if it already holds the finished output of the same
    request (same input files, sizes and mtimes, same options, tokenizer and fastenc version),
    nothing is done and its summary is returned; another non-empty ``out_dir`` is refused unless
    ``overwrite``, which replaces a previous output (files that are not buckets or summaries are
    kept). The whole output appears in one step (docs/atomic-output.md). ``workers``: processes
    encoding the input files (map phase, docs/scale.md); an interrupted run resumes where it
    stopped; the output does not depend on it. ``command``: how the run was started, for the card.
    """
    from fastenc.recipes.gpt2.recipe import FAMILY

    job = plan_gpt2(inputs, out_dir, column=column, buckets=buckets, part_tokens=part_tokens, count_column=count_column,
                    decode_every=decode_every, batch_bytes=batch_bytes, skip_nulls=skip_nulls, encoding=encoding,
                    pattern=pattern, workers=workers)
    enc, fmt = _ENCODINGS[(job.encoding, job.pattern)]
    with Run(OUTPUT, out_dir, job.request, overwrite=overwrite, threads=threads, command=command) as run:
        if run.done is not None:
            WorkDir(run.out, job.request).remove_if_same()
            summary_line(f"fastenc gpt2: {run.out} already holds this output (summary.json matches); nothing to do", quiet=quiet)
            return run.done
        work = WorkDir(run.out, job.request).open(overwrite)
        with work:  # a failure before any unit finished removes it
            ctx = _context(enc, fmt, job.src, job.count_column)
            reduce = _Reduce(run, work, job.kept, part_tokens, ctx, len(job.src.infos))
            map_phase(work, functools.partial(map_unit, job), len(job.src.infos), workers=workers, threads=threads,
                      before_workers=functools.partial(FAMILY.compile_ahead, quiet), desc="gpt2", quiet=quiet,
                      reduce_unit=reduce.unit)
            summary = _summary(reduce.writers, reduce.tally, job.kept, ctx, part_tokens, decode_every, job.request)
            run.stage.write_text(SUMMARY_TSV, summary_tsv(summary))
            run.publish(summary)
        work.remove()
    _print_summary(run, summary, reduce.tally, quiet)
    return summary


def plan_gpt2(inputs, out_dir, *, column=None, buckets=None, part_tokens: int = DEFAULT_PART_TOKENS,
              count_column: str | None = DEFAULT_COUNT_COLUMN, decode_every: int = DEFAULT_DECODE_EVERY,
              batch_bytes: int = DEFAULT_BATCH_BYTES, skip_nulls: bool = False, encoding: str = TOKENIZER,
              pattern: str | None = None, workers: int = 1) -> "_Job":
    """The checked request of a run and what its map units need (``encode_gpt2`` and the
    ``fastenc.datatrove`` steps share it, so that they agree on the request)."""
    _check_options(part_tokens, decode_every, batch_bytes, workers)
    kept = parse_buckets(buckets)
    enc, fmt = load_encoding(encoding, pattern)
    _ENCODINGS[(fmt.tokenizer, pattern)] = (enc, fmt)  # loaded once per process
    if fmt.tokenizer != TOKENIZER and count_column == DEFAULT_COUNT_COLUMN:
        count_column = None  # gpt2_tokens counts GPT-2 tokens: it cannot check another encoding
    src = _open_sources(inputs, column, count_column, skip_nulls)
    options = {"column": column, "buckets": [BUCKETS[b] for b in kept], "part_tokens": part_tokens,
               "count_column": count_column, "decode_every": decode_every, "skip_nulls": skip_nulls}
    request = make_request("gpt2", src.paths, options, enc.sha256)
    if fmt.tokenizer != TOKENIZER:  # (a gpt2 request, and so its summary, is unchanged)
        request["encoding"] = [fmt.tokenizer, fmt.pattern]
    return _Job(os.fspath(out_dir), request, src, kept, fmt.tokenizer, pattern, decode_every, batch_bytes, skip_nulls,
                count_column)


def load_encoding(encoding: str, pattern: str | None):
    """(Encoder, TokenFormat) for ``--encoding``: a built-in name, or a file path (made absolute,
    so that ``verify`` finds it from anywhere)."""
    import fastenc
    from fastenc.vocab import TIKTOKEN_BUILTIN

    if encoding == TOKENIZER:
        if pattern is not None:
            raise UsageError("--pattern applies to a .tiktoken file given by path, not to gpt2")
        enc = fastenc.load(TOKENIZER)
        if enc.vocab_size != VOCAB_SIZE or np.dtype(enc.dtype) != np.uint16:
            raise AssertionError(f"the built-in gpt2 vocabulary has {enc.vocab_size} ids ({enc.dtype}), expected {VOCAB_SIZE} (uint16)")
        return enc, token_format(TOKENIZER, enc)
    if encoding in TIKTOKEN_BUILTIN:
        return fastenc.load(encoding, pattern=pattern), token_format(encoding, fastenc.load(encoding), None)
    path = os.path.abspath(encoding)
    enc = fastenc.load(path, pattern=pattern)
    return enc, token_format(path, enc, pattern)


def _context(enc, fmt: TokenFormat, src: _Sources, count_column) -> dict:
    """What every part's meta.json repeats about the run."""
    from fastenc import __version__

    sources = [
        {"path": os.path.abspath(i.path), "column": i.column, "column_type": i.arrow_type, "rows": i.num_rows,
         "file_bytes": i.file_bytes, "count_column": cc}
        for i, cc in zip(src.infos, src.count_columns)
    ]
    return {"encoder": enc, "format": fmt, "sources": sources, "tokenizer_sha256": enc.sha256, "fastenc_version": __version__,
            "count_column": count_column if any(src.count_columns) else None}


class _Tally:
    """Documents and tokens per bucket (the last slot counts empty documents), and run counters."""

    def __init__(self):
        self.docs = np.zeros(EMPTY + 1, np.int64)
        self.tokens = np.zeros(EMPTY + 1, np.int64)
        self.text_bytes = 0
        self.count_checked = 0
        self.n_docs = 0
        self.invalid_utf8 = 0

    _SCALARS = ("text_bytes", "count_checked", "n_docs", "invalid_utf8")

    def to_json(self) -> dict:
        return {"docs": self.docs.tolist(), "tokens": self.tokens.tolist(), **{k: int(getattr(self, k)) for k in self._SCALARS}}

    def add(self, other: dict) -> None:
        """Add one file's tally (its ``to_json()``)."""
        self.docs += np.array(other["docs"], np.int64)
        self.tokens += np.array(other["tokens"], np.int64)
        for k in self._SCALARS:
            setattr(self, k, getattr(self, k) + other[k])


def _check_counts(counts, expected, batch, src: _Sources, si: int) -> None:
    bad = np.flatnonzero(counts != expected)
    if bad.size:
        j = int(bad[0])
        raise VerificationError(
            f"token count mismatch for {describe_document(batch.path, batch.first_row + j, src.id_columns[si])}: "
            f"fastenc gives {int(counts[j])} tokens, column {src.count_columns[si]!r} says {int(expected[j])} "
            f"({bad.size} mismatch(es) in this batch of {batch.num_rows}); if the column was computed with "
            "another tokenizer, pass --no-count-check"
        )


class _Job(NamedTuple):
    """What a map worker needs to encode one input file (pickled to worker processes)."""

    out: str
    request: dict
    src: _Sources
    kept: list
    encoding: str
    pattern: str | None
    decode_every: int
    batch_bytes: int
    skip_nulls: bool
    count_column: str | None


_ENCODINGS: dict = {}  # per process: (encoding, pattern) -> (Encoder, TokenFormat), loaded once


def map_unit(job: _Job, i: int) -> dict:
    """Encode input file ``i`` into its spill (``fastenc.run.units``); returns its tally and samples."""
    key = (job.encoding, job.pattern)
    if key not in _ENCODINGS:
        _ENCODINGS[key] = load_encoding(job.encoding, job.pattern)
    enc, fmt = _ENCODINGS[key]
    return run_unit(WorkDir(job.out, job.request), i, lambda stage: _encode_file(job, i, enc, fmt, stage))


def _encode_file(job: _Job, si: int, enc, fmt, stage) -> dict:
    """The streaming pass over one file: encode each batch, count it, spill its runs of same-bucket documents."""
    src = job.src
    spills = {b: BucketSpill(b, stage, job.decode_every, enc, fmt) for b in job.kept}
    tally = _Tally()
    is_kept = np.zeros(EMPTY + 1, dtype=bool)
    is_kept[job.kept] = True
    reader = Prefetch(iter_source([src.infos[si]], [src.count_columns[si]], job.batch_bytes, job.skip_nulls),
                      name="fastenc-gpt2-reader")
    # A batch's runs are spilled on a thread while the next batch is encoded, so one process keeps every
    # core busy (bench/RESULTS.md, "One process: a batch's runs spilled on a thread while the next batch is
    # encoded"). Not in one of several --workers: there the cores are the other workers', and the hand-offs cost.
    spilled = Behind("fastenc-gpt2-spill", inline=one_of_many())
    try:
        for _, batch, expected, invalid_utf8 in reader:
            adjust()  # a --workers worker takes its share of the cores of workers already done
            ids, id_off = enc.encode_arrays(batch.data, batch.offsets)
            tally.invalid_utf8 += invalid_utf8
            counts = np.diff(id_off)
            if expected is not None:
                _check_counts(counts, expected, batch, src, si)
                tally.count_checked += batch.num_rows
            bk = buckets_of(counts)
            tally.docs += np.bincount(bk, minlength=EMPTY + 1)
            tally.tokens += np.bincount(bk, weights=counts, minlength=EMPTY + 1).astype(np.int64)
            info = Batch(si, batch.path, batch.first_row, batch.data, batch.offsets, expected is not None, src.id_columns[si])
            spilled.submit(_write_runs, spills, is_kept, bk, ids, id_off, info)
            tally.n_docs += batch.num_rows
            tally.text_bytes += int(batch.data.size)
        spilled.finish()
    finally:
        spilled.close()
        reader.close()
    return {"tally": tally.to_json(), "buckets": {BUCKETS[b]: w.finish() for b, w in spills.items()},
            "count_checked": src.count_columns[si] is not None}


def _write_runs(writers, is_kept, bk, ids, id_off, info: Batch) -> None:
    """Each run of consecutive documents of one kept bucket is one write, with no copy."""
    cuts = np.flatnonzero(bk[1:] != bk[:-1]) + 1
    starts = [0] + cuts.tolist()
    ends = cuts.tolist() + [len(bk)]
    for s, e in zip(starts, ends):
        b = int(bk[s])
        if is_kept[b]:
            writers[b].write(ids, id_off, s, e, info)


class _Reduce:
    """The spills, in input order, into each kept bucket's parts (I/O and the part checks only).

    ``unit(si, result)`` is called for every unit in input order, while the map runs
    (``fastenc.run.units.InOrder``). Each unit's part data is also written to disk (fdatasync)
    right away, so that a part's fsync when it closes (often at the end: one part per bucket on
    a small input) has little left to write; the last unit's write-back is only started, and
    the parts' closing re-reads run while the disk writes it. The buckets are independent files: each unit's
    buckets, and the parts' closing checks at the end, run on a thread per core
    (``each_on_threads``): what is left after the map (the last units' reduce, closing and
    re-reading every part) then uses every core instead of one."""

    def __init__(self, run, work, kept, part_tokens: int, ctx: dict, n_units: int):
        self.work, self.kept, self.n_units = work, kept, n_units
        self.writers = {b: BucketWriter(b, run.stage, part_tokens, ctx) for b in kept}
        self.tally = _Tally()

    def unit(self, si: int, r: dict) -> None:
        self.tally.add(r["tally"])

        def bucket(b: int) -> None:
            self.writers[b].write_spill(si, self.work.unit_dir(si), r["buckets"][BUCKETS[b]], r["count_checked"])
            # the last unit's write-back is only started: the parts' closing checks come next
            self.writers[b].write_back(wait=si < self.n_units - 1)

        each_on_threads(bucket, self.kept)


def _summary(writers, tally: _Tally, kept, ctx, part_tokens, decode_every, request) -> dict:
    results = {}

    def close(b: int) -> None:
        results[b] = writers[b].finish()

    each_on_threads(close, writers)
    bucket_info = {}
    for b, name in enumerate(BUCKETS):
        r = results.get(b)
        if r is not None and (r["docs"] != tally.docs[b] or r["tokens"] != tally.tokens[b]):
            raise AssertionError(f"{name}: written {r['docs']} docs / {r['tokens']} tokens, counted {tally.docs[b]} / {tally.tokens[b]}")
        bucket_info[name] = {
            "min_tokens": bucket_range(b)[0],
            "max_tokens": bucket_range(b)[1],
            "kept": b in results,
            "docs": int(tally.docs[b]),
            "tokens": int(tally.tokens[b]),
            "parts": r["parts"] if r else [],
        }
    metas = [m for w in writers.values() for m in w.parts]
    fmt = ctx["format"]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fastenc_version": ctx["fastenc_version"],
        "tokenizer": fmt.tokenizer,
        **({"tokenizer_pattern": fmt.pattern} if fmt.pattern else {}),
        "tokenizer_sha256": ctx["tokenizer_sha256"],
        "vocab_size": fmt.vocab_size,
        "dtype": fmt.dtype,
        "encoding": fmt.encoding_text,
        "bucket_edges": EDGES.tolist(),
        "kept_buckets": [BUCKETS[b] for b in kept],
        "buckets": bucket_info,
        "total": {"docs": int(tally.docs[:EMPTY].sum()), "tokens": int(tally.tokens[:EMPTY].sum())},
        "kept": {"docs": int(tally.docs[kept].sum()), "tokens": int(tally.tokens[kept].sum())},
        "documents_read": tally.n_docs,
        "null_documents_skipped": sum(s["rows"] for s in ctx["sources"]) - tally.n_docs,
        "empty_documents_skipped": int(tally.docs[EMPTY]),
        # documents of a string column that are not valid UTF-8 (parquet does not check): encoded
        # byte by byte like any text, and counted here so that a bad source does not go unnoticed
        "invalid_utf8_documents": tally.invalid_utf8,
        "source_text_bytes": tally.text_bytes,
        "checks": {
            "count_column": ctx["count_column"],
            "count_checked": tally.count_checked,
            "count_mismatches": 0,
            "count_checked_kept": sum(m["checks"]["count_checked"] for m in metas),
            "roundtrip_checked": sum(m["checks"]["roundtrip_checked"] for m in metas),
            "roundtrip_mismatches": 0,
            "parts_checked": len(metas),
        },
        "part_tokens": part_tokens,
        "part_rule": PART_RULE,
        "decode_every": decode_every,
        "sources": ctx["sources"],
        "request": request,
    }


def _print_summary(run, summary: dict, tally: _Tally, quiet: bool) -> None:
    dt = run.stats.elapsed()
    buckets = summary["buckets"]
    per = ", ".join(
        f"{name.split('_')[0]} {buckets[name]['docs']:,}/{buckets[name]['tokens']:,}" + ("" if buckets[name]["kept"] else " (dropped)")
        for name in BUCKETS
    )
    parts = sum(len(buckets[name]["parts"]) for name in BUCKETS)
    summary_line(
        f"fastenc gpt2: {tally.n_docs:,} documents (column {summary['sources'][0]['column'] if summary['sources'] else '-'!r}) "
        f"-> {run.out}: kept {summary['kept']['docs']:,} docs / "
        f"{summary['kept']['tokens']:,} tokens in {parts} part(s); docs/tokens per bucket: {per}; "
        f"{summary['empty_documents_skipped']:,} empty skipped, {tally.invalid_utf8:,} not valid UTF-8; "
        f"{tally.count_checked:,} counts checked, "
        f"{summary['checks']['roundtrip_checked']:,} round trips, 0 mismatches; {format_bytes(tally.text_bytes)} of text in "
        f"{dt:.2f} s ({format_rate(tally.text_bytes, dt)})",
        quiet=quiet,
    )
