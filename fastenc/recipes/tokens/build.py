"""``fastenc tokens``: documents -> the files a trainer reads (Megatron, datatrove/nanotron, llm.c).

The run (docs/trainer-formats.md, docs/scale.md): map, each input file encoded on any worker into
its spill (the delimited ids in the format's dtype, each document's length and bytes in); reduce,
the spills routed to the val and train splits and cut into shards, in input order while the map
runs, or, with ``--shuffle``, after it in each split's permuted order. The output appears whole in
one rename, ``tokens.json`` in it and the card beside it. The output depends on the inputs and the
options only, never on ``--workers``, ``--threads`` or ``--batch-bytes``.
"""
from __future__ import annotations

import functools
import os
from typing import NamedTuple, Sequence

import numpy as np

from fastenc.arrow_io import Prefetch, as_input_list, check_batch_bytes, inspect_inputs, iter_string_batches, resolve_inputs
from fastenc.errors import InputError, UsageError
from fastenc.progress import format_bytes, format_rate, summary_line
from fastenc.recipes.tokens import delimit
from fastenc.recipes.tokens.formats.llmc import MAX_TOKENS
from fastenc.recipes.tokens.layout import (DEFAULT_BATCH_BYTES, DEFAULT_LLMC_SHARD_TOKENS, DEFAULT_LLMC_VAL_EVERY, FORMAT,
                                           FORMAT_VERSION, MANIFEST, SPLITS, TEXT_CANDIDATES, global_index, is_own, is_val, order,
                                           shard_base, shard_rule_text, shuffle_text, split_sizes, val_rule_text)
from fastenc.recipes.tokens.shards import SplitShards, totals
from fastenc.run import OutputSpec, Run, make_request
from fastenc.run.units import WorkDir, check_workers, map_phase, read_blocks, run_unit

_SPILL_IDS, _SPILL_LENGTHS, _SPILL_BYTES = "ids.bin", "lengths.i64", "nbytes.i64"
_COUNTS = ("documents", "tokens", "bytes_in", "max_id")
_BLOCK_TOKENS = 4 << 20  # the reduce copies ids in blocks of this many tokens (bounded memory)


def _manifest_files(manifest: dict) -> list:
    return [(f, size) for split in SPLITS for s in manifest["splits"][split]["shards"] for f, size in s["files"].items()]


def _render_card(folder) -> str:
    from fastenc.recipes.tokens.card import render

    return render(folder)


OUTPUT = OutputSpec(recipe="tokens", format=FORMAT, manifest=MANIFEST, files_of=_manifest_files, is_own=is_own,
                    card=_render_card)


class Job(NamedTuple):
    """What a map worker needs to encode one input file (pickled to worker processes)."""

    out: str
    request: dict
    infos: list
    tokenizer: str
    pattern: str | None
    fmt: str
    bos: object
    eos: object
    batch_bytes: int


_TOOLS: dict = {}  # per process: (tokenizer, pattern, fmt, bos, eos) -> (Encoder, Delimiters), loaded once


def load_tokenizer(tokenizer: str, pattern: str | None):
    """``-t``: a built-in name, or a file (made absolute, so that verify finds it from anywhere)."""
    import fastenc
    from fastenc.vocab import TIKTOKEN_BUILTIN

    if tokenizer == "gpt2" or tokenizer in TIKTOKEN_BUILTIN:
        if pattern is not None:
            raise UsageError(f"--pattern applies to a .tiktoken file given by path, not to {tokenizer}")
        return fastenc.load(tokenizer)
    return fastenc.load(os.path.abspath(tokenizer), pattern=pattern)


def tools(tokenizer: str, pattern: str | None, fmt: str, bos=delimit.DEFAULT, eos=delimit.DEFAULT):
    """(Encoder, Delimiters) of a run, loaded once per process."""
    key = (tokenizer, pattern, fmt, str(bos), str(eos))
    if key not in _TOOLS:
        enc = load_tokenizer(tokenizer, pattern)
        _TOOLS[key] = (enc, delimit.resolve(enc, fmt, bos=bos, eos=eos))
    return _TOOLS[key]


def tokenizer_id(tokenizer: str) -> str:
    return tokenizer if os.sep not in tokenizer and not os.path.exists(tokenizer) else os.path.abspath(tokenizer)


def defaults(fmt: str, shard_tokens: int | None, val_every: int | None) -> tuple[int | None, int]:
    """llm.c: 100M-token shards and a val split; the others: one shard per split, no val split."""
    if fmt == "llmc":
        return shard_tokens or DEFAULT_LLMC_SHARD_TOKENS, DEFAULT_LLMC_VAL_EVERY if val_every is None else val_every
    return shard_tokens, 0 if val_every is None else val_every


def _check_options(fmt, shard_tokens, val_every, shuffle, batch_bytes, workers) -> None:
    if fmt not in delimit.FORMATS:
        raise UsageError(f"--format {fmt!r}: pass one of {', '.join(delimit.FORMATS)}")
    if shard_tokens is not None and shard_tokens < 1:
        raise UsageError(f"--shard-tokens must be at least 1 (got {shard_tokens})")
    if fmt == "llmc" and shard_tokens is not None and shard_tokens > MAX_TOKENS:
        raise UsageError(f"--shard-tokens {shard_tokens}: llm.c's header counts ids in an int32 (at most {MAX_TOKENS})")
    if val_every < 0:
        raise UsageError(f"--val-every must be 0 (no val split) or positive (got {val_every})")
    if shuffle is not None and not 0 <= shuffle < 2**63:
        raise UsageError(f"--shuffle takes a seed from 0 to 2**63-1 (got {shuffle})")
    check_workers(workers)
    check_batch_bytes(batch_bytes)


def plan_tokens(inputs, out_dir, *, tokenizer: str = "gpt2", fmt: str = "megatron", pattern: str | None = None,
                bos=delimit.DEFAULT, eos=delimit.DEFAULT, shard_tokens: int | None = None, val_every: int | None = None,
                shuffle: int | None = None, column: str | None = None, batch_bytes: int = DEFAULT_BATCH_BYTES,
                workers: int = 1) -> Job:
    """The checked request of a run and what its map units need (the run and the datatrove steps share it)."""
    shard_tokens, val_every = defaults(fmt, shard_tokens, val_every)
    _check_options(fmt, shard_tokens, val_every, shuffle, batch_bytes, workers)
    name = tokenizer_id(tokenizer)
    enc, delims = tools(name, pattern, fmt, bos, eos)
    paths = resolve_inputs(as_input_list(inputs))
    infos = inspect_inputs(paths, column, candidates=None if column else TEXT_CANDIDATES)
    if sum(i.num_rows for i in infos) == 0:
        raise InputError(f"the inputs hold no document ({len(infos)} file(s), 0 rows): nothing to tokenize")
    options = {"format": fmt, "column": column, "pattern": pattern, "bos": str(bos), "eos": str(eos),
               "shard_tokens": shard_tokens, "val_every": val_every, "shuffle": shuffle}
    request = make_request("tokens", paths, options, enc.sha256)
    request["tokenizer"] = name
    return Job(os.fspath(out_dir), request, infos, name, pattern, fmt, bos, eos, batch_bytes)


# ----------------------------------------------------------------------------------------------
# Map: one input file -> its spill
# ----------------------------------------------------------------------------------------------


def map_unit(job: Job, i: int) -> dict:
    """Encode input file ``i`` into its spill; returns its counters."""
    enc, delims = tools(job.tokenizer, job.pattern, job.fmt, job.bos, job.eos)
    return run_unit(WorkDir(job.out, job.request), i, lambda stage: _encode_file(job, job.infos[i], enc, delims, stage))


def _encode_file(job: Job, info, enc, delims, stage) -> dict:
    counts = dict.fromkeys(_COUNTS, 0)
    counts["max_id"] = -1
    files = [stage.open(name) for name in (_SPILL_IDS, _SPILL_LENGTHS, _SPILL_BYTES)]
    # pyarrow decodes the next batch on a thread while this one is encoded
    reader = Prefetch(iter_string_batches([info.path], info.column, batch_bytes=job.batch_bytes), name="fastenc-tokens-reader")
    try:
        for batch in reader:
            if batch.num_rows == 0:
                continue
            ids, offsets = enc.encode_arrays(batch.data, batch.offsets)
            out, lengths = delims.apply(ids, np.diff(offsets))
            nbytes = np.diff(batch.offsets).astype("<i8")
            for f, arr in zip(files, (out, lengths.astype("<i8"), nbytes)):
                f.file.write(memoryview(np.ascontiguousarray(arr)).cast("B"))
            counts["documents"] += batch.num_rows
            counts["tokens"] += len(out)
            counts["bytes_in"] += int(batch.data.size)
            counts["max_id"] = max(counts["max_id"], int(out.max()) if len(out) else -1)
    finally:
        reader.close()
    if counts["documents"] != info.num_rows:
        raise InputError(f"{info.path} gave {counts['documents']} documents but its footer announces {info.num_rows}: "
                         "did the file change while it was read?")
    return counts


# ----------------------------------------------------------------------------------------------
# Reduce: the spills -> the splits' shards
# ----------------------------------------------------------------------------------------------


class _Spill:
    """One unit's spill, memory-mapped: ids, and per document its length and bytes in."""

    def __init__(self, work: WorkDir, i: int, dtype):
        d = work.unit_dir(i)
        self.lengths = np.fromfile(d / _SPILL_LENGTHS, dtype="<i8")
        self.nbytes = np.fromfile(d / _SPILL_BYTES, dtype="<i8")
        self.csum = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=self.csum[1:])
        self.path, self.dtype = d / _SPILL_IDS, dtype


class _Reduce:
    def __init__(self, job: Job, run, work: WorkDir, delims, shard_tokens):
        self.job, self.work, self.dtype = job, work, delims.dtype
        self.val_every = job.request["options"]["val_every"]
        self.splits = {s: SplitShards(job.fmt, s, run.stage, delims, shard_tokens, job.tokenizer) for s in SPLITS}
        self.first = 0  # the input-order index of the next unit's first document

    def unit(self, i: int, result: dict) -> None:
        """Input order: each block of whole documents routed to its split by the val rule."""
        sp = _Spill(self.work, i, self.dtype)
        for s, e, data in read_blocks(sp.path, sp.csum, self.dtype.itemsize, _BLOCK_TOKENS):
            ids = np.frombuffer(data, self.dtype)
            val = is_val(np.arange(self.first + s, self.first + e), self.val_every)
            lengths = sp.lengths[s:e]
            for split, keep in (("val", val), ("train", ~val)):
                if keep.all():
                    self.splits[split].add(ids, lengths, sp.nbytes[s:e])
                elif keep.any():
                    self.splits[split].add(ids[np.repeat(keep, lengths)], lengths[keep], sp.nbytes[s:e][keep])
        self.first += len(sp.lengths)

    def shuffled(self, n_units: int, seed: int) -> None:
        """After the map: each split's documents gathered from the spills in the seed's order."""
        spills = [_Spill(self.work, i, self.dtype) for i in range(n_units)]
        unit_first = np.cumsum([0] + [len(s.lengths) for s in spills])
        lengths = np.concatenate([s.lengths for s in spills])
        nbytes = np.concatenate([s.nbytes for s in spills])
        ids = [np.memmap(s.path, dtype=self.dtype, mode="r") if s.csum[-1] else np.zeros(0, self.dtype) for s in spills]
        n_docs = int(unit_first[-1])
        for split, n in split_sizes(n_docs, self.val_every).items():
            g = global_index(split, order(n, seed, split), self.val_every)
            for docs in _token_blocks(g, lengths):
                self.splits[split].add(_gather(docs, lengths, unit_first, spills, ids, self.dtype), lengths[docs],
                                       nbytes[docs])

    def finish(self) -> dict:
        out = {s: w.finish() for s, w in self.splits.items()}
        if self.job.fmt == "llmc":
            _renumber_train(self.splits["train"], len(out["val"]["shards"]))
        return out

    def abort(self) -> None:
        for w in self.splits.values():
            w.abort()


def _token_blocks(g: np.ndarray, lengths: np.ndarray):
    """Runs of ``g`` (global document indices) of about ``_BLOCK_TOKENS`` tokens each."""
    csum = np.cumsum(lengths[g]) if len(g) else np.zeros(0, np.int64)
    s = 0
    while s < len(g):
        base = csum[s - 1] if s else 0
        e = max(s + 1, int(np.searchsorted(csum, base + _BLOCK_TOKENS, side="right")))
        yield g[s:e]
        s = e


def _gather(docs, lengths, unit_first, spills, ids, dtype) -> np.ndarray:
    """The ids of documents ``docs`` (global indices), concatenated in that order."""
    ln = lengths[docs]
    out = np.empty(int(ln.sum()), dtype)
    dst = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(ln, out=dst[1:])
    unit = np.searchsorted(unit_first, docs, side="right") - 1
    for u in np.unique(unit):
        sel = np.flatnonzero(unit == u)
        src_start = spills[u].csum[docs[sel] - unit_first[u]]
        n = ln[sel]
        if n.sum() == 0:
            continue
        shift = np.repeat(src_start - dst[sel], n)  # source position minus destination position, per token
        pos = _ranges(dst[sel], n)
        out[pos] = ids[u][pos + shift]
    return out


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in ...])``, vectorised."""
    total = int(counts.sum())
    ends = np.cumsum(counts)
    return np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - counts), counts)


def _renumber_train(train: SplitShards, offset: int) -> None:
    """llm.c numbers val first: the train shards follow the val ones (renamed in the stage, before publication)."""
    if not offset:
        return
    for k, shard in reversed(list(enumerate(train.shards))):
        base = shard_base("llmc", "train", k + offset)
        (name,) = shard["files"]
        os.replace(train.stage.dir / name, train.stage.dir / f"{base}.bin")
        shard.update(base=base, files={f"{base}.bin": shard["files"][name]})


# ----------------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------------


def encode_tokens(inputs: Sequence[str | os.PathLike] | str | os.PathLike, out_dir: str | os.PathLike, *,
                  tokenizer: str = "gpt2", fmt: str = "megatron", pattern: str | None = None, bos=delimit.DEFAULT,
                  eos=delimit.DEFAULT, shard_tokens: int | None = None, val_every: int | None = None,
                  shuffle: int | None = None, column: str | None = None, batch_bytes: int = DEFAULT_BATCH_BYTES,
                  threads: int | None = None, workers: int = 1, overwrite: bool = False, quiet: bool = False,
                  command: dict | None = None) -> dict:
    """Tokenize the ``column`` documents of ``inputs`` into ``fmt`` files under ``out_dir``; returns the manifest.

    ``bos``/``eos``: a token, an id, ``"none"``, or the tokenizer family's default
    (``delimit.resolve``). ``shard_tokens``: llm.c's default is 100M (documents may continue in
    the next shard), the others' one shard per split (documents whole). ``val_every``: document
    ``i`` goes to val iff ``i % k == k - 1`` (llm.c's default 1000, the others' 0). ``shuffle``: a
    seed; each split's documents in a permuted order. Resume, ``overwrite`` and publication as
    every recipe (docs/atomic-output.md, docs/scale.md).
    """
    from fastenc.recipes.tokens.recipe import FAMILY

    job = plan_tokens(inputs, out_dir, tokenizer=tokenizer, fmt=fmt, pattern=pattern, bos=bos, eos=eos,
                      shard_tokens=shard_tokens, val_every=val_every, shuffle=shuffle, column=column,
                      batch_bytes=batch_bytes, workers=workers)
    enc, delims = tools(job.tokenizer, pattern, fmt, bos, eos)
    opts = job.request["options"]
    with Run(OUTPUT, out_dir, job.request, overwrite=overwrite, threads=threads, command=command) as run:
        if run.done is not None:
            WorkDir(run.out, job.request).remove_if_same()
            summary_line(f"fastenc tokens: {run.out} already holds this output ({MANIFEST} matches); nothing to do",
                         quiet=quiet)
            return run.done
        work = WorkDir(run.out, job.request).open(overwrite)
        with work:  # a failure before any unit finished removes it
            reduce = _Reduce(job, run, work, delims, opts["shard_tokens"])
            try:
                results = map_phase(work, functools.partial(map_unit, job), len(job.infos), workers=workers,
                                    threads=threads, before_workers=functools.partial(FAMILY.compile_ahead, quiet),
                                    desc="tokens", quiet=quiet, reduce_unit=None if shuffle is not None else reduce.unit)
                if shuffle is not None:
                    reduce.shuffled(len(job.infos), shuffle)
                splits = reduce.finish()
            except BaseException:
                reduce.abort()
                raise
            manifest = _manifest(job, enc, delims, results, splits)
            run.publish(manifest)
        work.remove()
    _print_summary(run, manifest, quiet)
    return manifest


def _check_totals(results: list, splits: dict) -> None:
    for k in ("documents", "tokens", "bytes_in"):
        mapped, written = sum(r[k] for r in results), sum(splits[s][k] for s in SPLITS)
        if mapped != written:
            raise AssertionError(f"{k}: {mapped} encoded, {written} written")


def _manifest(job: Job, enc, delims, results: list, splits: dict) -> dict:
    from fastenc import __version__

    _check_totals(results, splits)
    opts = job.request["options"]
    sources, first = [], 0
    for info in job.infos:
        sources.append({"path": os.path.abspath(info.path), "rows": info.num_rows, "file_bytes": info.file_bytes,
                        "column": info.column, "first_document": first})
        first += info.num_rows
    every = totals([s for split in SPLITS for s in splits[split]["shards"]])
    del every["shards"]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fastenc_version": __version__,
        "trainer_format": job.fmt,
        "tokenizer": {"name": job.tokenizer, "pattern": job.pattern, "sha256": enc.sha256,
                      "vocab_size": enc.vocab_size, "pretokenizer": enc.info.pretokenizer,
                      "split": [stage[0] for stage in enc.info.split]},
        "dtype": delims.dtype.name,
        "delimiters": delims.as_dict(),
        "column": job.infos[0].column,
        **every,
        "val_every": opts["val_every"],
        "val_rule": val_rule_text(opts["val_every"]),
        "shard_tokens": opts["shard_tokens"],
        "shard_rule": shard_rule_text(job.fmt, opts["shard_tokens"]),
        "shuffle": opts["shuffle"],
        "shuffle_rule": shuffle_text(opts["shuffle"]),
        "splits": splits,
        "sources": sources,
        "request": job.request,
    }


def _print_summary(run, m: dict, quiet: bool) -> None:
    dt = run.stats.elapsed()
    tr, va = m["splits"]["train"], m["splits"]["val"]
    summary_line(
        f"fastenc tokens: {m['documents']:,} documents (column {m['column']!r}) -> {run.out} ({m['trainer_format']}, "
        f"{m['dtype']}): {m['tokens']:,} tokens, max id {m['max_id']:,}; train {tr['documents']:,} docs in "
        f"{len(tr['shards'])} shard(s), val {va['documents']:,} in {len(va['shards'])}; "
        f"{format_bytes(m['bytes_in'])} of text in {dt:.2f} s ({format_rate(m['bytes_in'], dt)})", quiet=quiet)
