"""Raw-bytes recipe (FineWeb-Edu style): documents -> uint8 shards with 0xFE separators.

Output format (``meta.json`` ``"format": "fastenc-bytes"``, see docs/bytes.md)::

    OUT/train_00000.bin, train_00001.bin, ...   uint8; each document is byte 254 then its UTF-8 bytes
    OUT/val_00000.bin, ...                      the same, for the validation documents
    OUT/meta.json                               exact counts per split and per shard (written last)

- Bytes 0..253 are text; 254 (``<|doc|>``) starts every document; 255 never occurs. Bytes 254
  and 255 cannot occur in valid UTF-8; if a source has them anyway (a binary column, or a
  string column that is not valid UTF-8) they are dropped and counted (``stripped_bytes``).
- Val rule: the document with global index ``i`` (0-based, counted over all inputs in the order
  given, val documents included) goes to val iff ``i % val_every == val_every - 1``: the
  1000th, 2000th, ... document. ``val_every=0`` puts everything in train.
- Shard rule: shards end at document boundaries. A document goes into the current shard if the
  shard is empty or if the document (separator included) still fits within ``shard_bytes``;
  otherwise it starts the next shard. So every shard starts with 254, holds whole documents
  and is readable on its own, and is at most ``shard_bytes`` long unless it holds one single
  document longer than that.

The work is map/reduce over the input files (docs/scale.md). Map: each file's Arrow batches
are packed with their separators by one kernel call each into a reusable buffer and appended to
the file's spill (the packed documents and their sizes), on any worker, in any order. Reduce:
the spills, in input order, are routed to the splits by the val rule (global document index)
and cut into shards (staged; the whole output appears in one rename, ``meta.json`` in it).
Memory is a few batches (``batch_bytes``) and one 8 MB reduce block, whatever the input size.
"""
from __future__ import annotations

import functools
import os
import re
import threading
from typing import NamedTuple, Sequence

import numpy as np
import xxhash

from fastenc.arrow_io import as_input_list, check_batch_bytes, inspect_inputs, invalid_utf8_count, iter_string_batches, resolve_inputs
from fastenc.errors import InputError, UsageError
from fastenc.run import OutputSpec, Run, make_request
from fastenc.run.parts import CappedParts, reread_xxh3
from fastenc.run.staging import finish_after_check
from fastenc.run.units import WorkDir, check_workers, map_phase, read_blocks, run_unit
from fastenc.progress import format_bytes, format_rate, summary_line

__all__ = ["encode_bytes", "verify_output", "is_val", "shard_name", "val_rule_text", "FORMAT", "FORMAT_VERSION",
           "SEPARATOR", "RESERVED", "SHARD_RULE", "META_NAME", "SPLITS", "DEFAULT_SHARD_BYTES", "DEFAULT_VAL_EVERY",
           "DEFAULT_BATCH_BYTES"]

FORMAT = "fastenc-bytes"
FORMAT_VERSION = 1
SEPARATOR = 254
RESERVED = 255
DEFAULT_SHARD_BYTES = 500_000_000
DEFAULT_VAL_EVERY = 1000
DEFAULT_BATCH_BYTES = 16 << 20
META_NAME = "meta.json"
SPLITS = ("train", "val")
SHARD_RE = re.compile(r"^(train|val)_(\d{5,})\.bin$")
TEXT_CANDIDATES = ("text", "content")

SHARD_RULE = (
    "shards end at document boundaries: a document goes into the current shard if the shard is empty or if "
    "the document (separator included) still fits within shard_bytes, otherwise it starts the next shard; "
    "every shard starts with 254 and holds whole documents, and is at most shard_bytes long unless it holds "
    "a single document longer than that"
)


def val_rule_text(val_every: int) -> str:
    if val_every == 0:
        return "no val split: every document goes to train"
    return (
        f"document i (0-based, counted over all input documents in the order given, val documents included) "
        f"goes to val iff i % {val_every} == {val_every - 1}, i.e. the {val_every}th, {2 * val_every}th, ... document"
    )


def is_val(i: int | np.ndarray, val_every: int):
    """The val rule, for one global document index or an array of them."""
    if val_every == 0:
        return np.zeros_like(i, dtype=bool) if isinstance(i, np.ndarray) else False
    return i % val_every == val_every - 1


def shard_name(split: str, index: int) -> str:
    return f"{split}_{index:05d}.bin"


# ----------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------


class _SplitWriter(CappedParts):
    """Appends packed documents of one split to its shard files, under the shard rule
    (``fastenc.run.parts``); each finished shard is read back and fsynced (``finish_after_check``)."""

    def __init__(self, split: str, stage, shard_bytes: int):
        super().__init__(shard_bytes)
        self.split = split
        self.stage = stage
        self.shards: list[dict] = []

    def _open_part(self) -> None:
        self._name = shard_name(self.split, len(self.shards))
        self._file = self.stage.open(self._name)
        self._hash = xxhash.xxh3_64()
        self._first = None

    def _append(self, a: int, k: int, packed: np.ndarray, csum: np.ndarray, first_global: int) -> None:
        if self._first is None:
            self._first = first_global + a
        chunk = packed[csum[a] : csum[k]]
        self._file.file.write(chunk)
        self._hash.update(chunk)

    def write_back(self, wait: bool = True) -> None:
        """Have the open shard's data written to disk now (it stays a temporary until publication).
        ``wait=False``: only start it (the last unit's: the shards' read-back checks come next)."""
        if self.is_open:
            self._file.write_back(wait)

    def _close_part(self) -> None:
        # read back while the disk writes it; durable (fsynced) before it is published
        finish_after_check([self._file], lambda: reread_xxh3(self._file.path, self._hash.hexdigest(),
                                                             f"{self.split} shard {self._name}"))
        self.shards.append(
            {
                "file": self._name,
                "documents": self.items,
                "bytes": self.fill,
                "first_document": self._first,
                "xxh3_64": self._hash.hexdigest(),
            }
        )

    def finish(self) -> dict:
        self.close()
        docs = sum(s["documents"] for s in self.shards)
        nbytes = sum(s["bytes"] for s in self.shards)
        return {"documents": docs, "bytes": nbytes, "text_bytes": nbytes - docs, "shards": self.shards}


def _pack_batch(data: np.ndarray, offsets: np.ndarray, buf: np.ndarray):
    """Pack one batch: ``(buf, packed, csum, counts)``.

    ``packed`` (a view of ``buf``, which grows when needed and is returned for reuse) holds every
    document with its separator; document ``i`` is ``packed[csum[i]:csum[i + 1]]``. ``counts`` is
    the per-document number of stripped bytes, or None when the batch has no byte >= 254 (the
    usual case, checked by one vectorised ``max``).
    """
    from fastenc.kernels.bytes_pack import count_high_bytes, pack_documents

    n = offsets.size - 1
    need = data.size + n
    if buf.size < need:
        buf = np.empty(max(need, buf.size + buf.size // 2), np.uint8)
    lengths = np.diff(offsets)
    counts = None
    strip_from = 256
    if data.size and int(data.max()) >= SEPARATOR:
        counts = np.empty(n, np.int64)
        if count_high_bytes(data, offsets, np.uint8(SEPARATOR), counts) < 0:
            raise AssertionError("count_high_bytes: malformed batch offsets")
        lengths = lengths - counts
        strip_from = SEPARATOR
    written = pack_documents(data, offsets, np.uint8(SEPARATOR), np.int64(strip_from), buf)
    if written < 0:
        raise AssertionError("pack_documents: malformed batch offsets or short buffer")
    csum = np.empty(n + 1, np.int64)
    csum[0] = 0
    np.cumsum(lengths + 1, out=csum[1:])
    if csum[-1] != written:
        raise AssertionError("pack_documents wrote a different size than the document lengths give")
    return buf, buf[:written], csum, counts


def _route(writers: dict, packed: np.ndarray, csum: np.ndarray, first_global: int, val_every: int) -> None:
    """Send each document of a packed batch to its split, as runs of consecutive documents:
    val documents are isolated (global index ``i % val_every == val_every - 1``), train runs lie between."""
    n = csum.size - 1
    pos = 0
    if val_every:
        for v in range((val_every - 1 - first_global) % val_every, n, val_every):
            if v > pos:
                writers["train"].write_items(csum, pos, v, packed, csum, first_global)
            writers["val"].write_items(csum, v, v + 1, packed, csum, first_global)
            pos = v + 1
    if pos < n:
        writers["train"].write_items(csum, pos, n, packed, csum, first_global)


def _manifest_files(meta: dict) -> list:
    return [(s["file"], s["bytes"]) for split in SPLITS for s in meta["splits"][split]["shards"]]


def _is_own(name: str) -> bool:
    return bool(SHARD_RE.match(name)) or name == META_NAME


def _render_card(folder) -> str:
    from fastenc.recipes.bytes.card import render

    return render(folder)


OUTPUT = OutputSpec(recipe="bytes", format=FORMAT, manifest=META_NAME, files_of=_manifest_files, is_own=_is_own,
                    card=_render_card)


def _load_kernels_in_background() -> threading.Thread:
    """Import Numba and load the packing kernels on a thread while the first batch is read.

    That start-up (~0.5-1 s: importing numba, loading the cached machine code) would otherwise
    come before the first byte is packed; pyarrow reads without the GIL, so the two overlap.
    The warm-up call uses the argument types of the real calls (Arrow's buffers are read-only).
    """

    def load() -> None:
        from fastenc.kernels.bytes_pack import count_high_bytes, pack_documents
        data = np.zeros(1, np.uint8)
        data.flags.writeable = False
        offsets = np.array([0, 1], np.int64)
        pack_documents(data, offsets, np.uint8(SEPARATOR), np.int64(256), np.empty(2, np.uint8))
        count_high_bytes(data, offsets, np.uint8(SEPARATOR), np.empty(1, np.int64))

    thread = threading.Thread(target=load, name="fastenc-load-kernels", daemon=True)
    thread.start()
    return thread


class _Job(NamedTuple):
    """What a map worker needs to pack one input file (pickled to worker processes)."""

    out: str
    request: dict
    infos: list
    batch_bytes: int
    skip_nulls: bool


def encode_bytes(
    inputs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    column: str | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    val_every: int = DEFAULT_VAL_EVERY,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    skip_nulls: bool = False,
    threads: int | None = None,
    workers: int = 1,
    overwrite: bool = False,
    quiet: bool = False,
    command: dict | None = None,
) -> dict:
    """Encode the ``column`` documents of ``inputs`` into ``out_dir``; returns the meta (as written).

    ``column``: default ``text`` when a file has it, else ``content`` (the summary line names it).
    ``skip_nulls``: leave null values out (they are not documents: the val rule does not count
    them) and count them in the meta, instead of refusing the input.

    ``inputs``: parquet files, directories or globs, read in the order given. ``out_dir`` must be
    absent or empty; if it already holds the finished output of the same request (same input files,
    sizes and mtimes, same options and fastenc version) nothing is done and its meta is returned;
    otherwise a non-empty ``out_dir`` is refused unless ``overwrite``, which replaces the previous
    output (files that are not train_*/val_*/meta.json are kept). The whole output appears in one
    step (docs/atomic-output.md). ``workers``: processes packing the input files (map phase,
    docs/scale.md); an interrupted run resumes where it stopped. The output does not depend on
    ``batch_bytes``, ``threads`` or ``workers``. ``command``: how the run was started, for the card.
    """
    from fastenc.recipes.bytes.recipe import FAMILY

    job = plan_bytes(inputs, out_dir, column=column, shard_bytes=shard_bytes, val_every=val_every, batch_bytes=batch_bytes,
                     skip_nulls=skip_nulls, workers=workers)
    request, infos = job.request, job.infos
    with Run(OUTPUT, out_dir, request, overwrite=overwrite, threads=threads, command=command) as run:
        if run.done is not None:
            WorkDir(run.out, request).remove_if_same()
            summary_line(f"fastenc bytes: {run.out} already holds this output (meta.json matches); nothing to do", quiet=quiet)
            return run.done
        work = WorkDir(run.out, request).open(overwrite)
        with work:  # a failure before any unit finished removes it
            reduce = _Reduce(run, work, shard_bytes, val_every, len(infos))
            results = map_phase(work, functools.partial(map_unit, job), len(infos), workers=workers, threads=threads,
                                before_workers=functools.partial(FAMILY.compile_ahead, quiet), desc="bytes",
                                quiet=quiet, reduce_unit=reduce.unit)
            counts = {k: sum(r[k] for r in results) for k in _COUNTS}
            splits = {s: w.finish() for s, w in reduce.writers.items()}
            meta = _meta(column, counts, splits, infos, shard_bytes, val_every, request)
            run.publish(meta)
        work.remove()
    _print_summary(run, meta, quiet)
    return meta


def plan_bytes(inputs, out_dir, *, column: str | None = None, shard_bytes: int = DEFAULT_SHARD_BYTES,
               val_every: int = DEFAULT_VAL_EVERY, batch_bytes: int = DEFAULT_BATCH_BYTES, skip_nulls: bool = False,
               workers: int = 1) -> _Job:
    """The checked request of a run and what its map units need (``encode_bytes`` and the
    ``fastenc.datatrove`` steps share it, so that they agree on the request)."""
    _check_options(shard_bytes, val_every, batch_bytes, workers)
    paths = resolve_inputs(as_input_list(inputs))
    infos = inspect_inputs(paths, column, candidates=None if column else TEXT_CANDIDATES, allow_binary=True, skip_nulls=skip_nulls)
    options = {"column": column, "shard_bytes": shard_bytes, "val_every": val_every, "skip_nulls": skip_nulls}
    return _Job(os.fspath(out_dir), make_request("bytes", paths, options), infos, batch_bytes, skip_nulls)


def _check_options(shard_bytes: int, val_every: int, batch_bytes: int, workers: int) -> None:
    if shard_bytes < 1:
        raise UsageError(f"--shard-bytes must be at least 1 (got {shard_bytes})")
    if val_every < 0:
        raise UsageError(f"--val-every must be 0 (no val split) or positive (got {val_every})")
    check_workers(workers)
    check_batch_bytes(batch_bytes)


# ----------------------------------------------------------------------------------------------
# Map: one input file -> its spill (the packed documents and their sizes)
# ----------------------------------------------------------------------------------------------

_COUNTS = ("documents", "stripped_bytes", "documents_with_stripped_bytes", "source_text_bytes", "invalid_utf8_documents",
           "null_documents_skipped")
_SPILL_DOCS = "docs.bin"  # every document packed with its separator, in file order
_SPILL_SIZES = "sizes.i64"  # little-endian int64: each document's packed size


def map_unit(job: _Job, i: int) -> dict:
    """Pack input file ``i`` into its spill (``fastenc.run.units``); returns its counts."""
    return run_unit(WorkDir(job.out, job.request), i, lambda stage: _pack_file(job, job.infos[i], stage))


def _pack_file(job: _Job, info, stage) -> dict:
    kernels_loading = _load_kernels_in_background()
    counts = dict.fromkeys(_COUNTS, 0)
    buf = np.empty(0, np.uint8)
    docs, sizes = stage.open(_SPILL_DOCS), stage.open(_SPILL_SIZES)
    for batch in iter_string_batches([info.path], info.column, batch_bytes=job.batch_bytes, allow_binary=True,
                                     skip_nulls=job.skip_nulls):
        if batch.num_rows == 0:
            continue
        kernels_loading.join()
        buf, packed, csum, stripped = _pack_batch(batch.data, batch.offsets, buf)
        counts["invalid_utf8_documents"] += invalid_utf8_count(batch.data, batch.offsets)
        if stripped is not None:
            counts["stripped_bytes"] += int(stripped.sum())
            counts["documents_with_stripped_bytes"] += int(np.count_nonzero(stripped))
        docs.file.write(packed.data)
        sizes.file.write(np.diff(csum).astype("<i8").data)
        counts["documents"] += batch.num_rows
        counts["source_text_bytes"] += batch.data.size
    counts["null_documents_skipped"] = info.num_rows - counts["documents"] if job.skip_nulls else 0
    if counts["documents"] + counts["null_documents_skipped"] != info.num_rows:
        raise InputError(f"{info.path} gave {counts['documents']} documents but its footer announces {info.num_rows}: "
                         "did the file change while it was read?")
    return counts


# ----------------------------------------------------------------------------------------------
# Reduce: the spills, in input order, routed to the splits and cut into shards (I/O only)
# ----------------------------------------------------------------------------------------------


class _Reduce:
    """``unit(i, result)`` for every unit in input order, while the map runs
    (``fastenc.run.units.InOrder``): its spill routed and cut into the shards; the open shards'
    data is then written to disk (fdatasync), so that their fsyncs at close have little left (the
    last unit's write-back only started: the shards' read-back checks run while the disk writes)."""

    def __init__(self, run, work: WorkDir, shard_bytes: int, val_every: int, n_units: int):
        self.work, self.val_every, self.n_units = work, val_every, n_units
        self.writers = {s: _SplitWriter(s, run.stage, shard_bytes) for s in SPLITS}
        self.first = 0  # the global index of the next unit's first document: the val rule counts over all inputs

    def unit(self, i: int, result: dict) -> None:
        d = self.work.unit_dir(i)
        sizes = np.fromfile(d / _SPILL_SIZES, dtype="<i8")
        csum = np.zeros(sizes.size + 1, np.int64)
        np.cumsum(sizes, out=csum[1:])
        for s, e, data in read_blocks(d / _SPILL_DOCS, csum, 1):
            packed = np.frombuffer(data, np.uint8)
            _route(self.writers, packed, csum[s : e + 1] - csum[s], self.first + s, self.val_every)
        self.first += sizes.size
        for w in self.writers.values():
            w.write_back(wait=i < self.n_units - 1)


def _meta(column, counts, splits, infos, shard_bytes, val_every, request) -> dict:
    from fastenc import __version__

    sources, first = [], 0
    for info in infos:  # exact: a file gives as many documents as its footer has rows (checked)
        sources.append({"path": os.path.abspath(info.path), "rows": info.num_rows, "file_bytes": info.file_bytes,
                        "column": info.column, "column_type": info.arrow_type, "first_document": first})
        first += info.num_rows
    n_docs = counts["documents"]
    total_bytes = splits["train"]["bytes"] + splits["val"]["bytes"]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fastenc_version": __version__,
        "dtype": "uint8",
        "separator": SEPARATOR,
        "separator_token": "<|doc|>",
        "reserved_byte": RESERVED,
        "column": infos[0].column if infos else column,
        "documents": n_docs,
        "bytes": total_bytes,
        "text_bytes": total_bytes - n_docs,
        "source_text_bytes": counts["source_text_bytes"],
        "stripped_bytes": counts["stripped_bytes"],
        "documents_with_stripped_bytes": counts["documents_with_stripped_bytes"],
        # documents that are not valid UTF-8 (copied as they are, 254/255 stripped): counted so a bad source shows
        "invalid_utf8_documents": counts["invalid_utf8_documents"],
        "null_documents_skipped": counts["null_documents_skipped"],
        "val_every": val_every,
        "val_rule": val_rule_text(val_every),
        "shard_bytes": shard_bytes,
        "shard_rule": SHARD_RULE,
        "splits": splits,
        "sources": sources,
        "request": request,
    }


def _print_summary(run, meta: dict, quiet: bool) -> None:
    dt = run.stats.elapsed()
    tr, va = meta["splits"]["train"], meta["splits"]["val"]
    summary_line(
        f"fastenc bytes: {meta['documents']:,} documents (column {meta['column']!r}) -> {run.out}: train {tr['documents']:,} docs in "
        f"{len(tr['shards'])} shard(s), val {va['documents']:,} docs in {len(va['shards'])} shard(s); "
        f"{format_bytes(meta['bytes'])} written in {dt:.2f} s ({format_rate(meta['source_text_bytes'], dt)} of text); "
        f"{meta['stripped_bytes']:,} bytes 254/255 stripped, {meta['invalid_utf8_documents']:,} documents not valid UTF-8",
        quiet=quiet,
    )


from fastenc.recipes.bytes.verify import verify_output  # noqa: E402,F401  (fastenc verify calls it here)
