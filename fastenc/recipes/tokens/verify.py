"""``fastenc verify OUT`` for tokens outputs: every shard read back through fastenc's readers of its
format and checked against ``tokens.json`` (sizes, xxh3, documents, tokens, max id, totals, the val
rule), and sampled documents re-encoded from their source and compared id for id, delimiters included."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from fastenc.errors import FastencError
from fastenc.recipes.tokens import read_tokens
from fastenc.recipes.tokens.layout import (FORMAT, FORMAT_VERSION, MANIFEST, SPLITS, data_file, global_index, is_own,
                                           order, split_sizes)
from fastenc.recipes.tokens.manifest import delimiters, shards
from fastenc.run.units import file_xxh3

SAMPLES = 64  # documents re-encoded per split


def verify_output(out_dir: Path, source: Sequence[Path] | None = None) -> dict:
    """Re-check a tokens output from its files alone; re-encode sampled documents from ``source``
    (default: the inputs the manifest records, where they still exist)."""
    from fastenc.verify import checked

    return checked(FORMAT, out_dir, MANIFEST, _check, source)


def _check(out: Path, source, report: dict) -> None:
    from fastenc.verify import read_manifest

    problems = report["problems"]
    m = read_manifest(out / MANIFEST, FORMAT, FORMAT_VERSION, problems)
    if m is None:
        return
    delims = delimiters(m)
    _check_listing(out, m, problems)
    streams = {split: [] for split in SPLITS}
    for split, shard in shards(m):
        docs = _check_shard(out, m, delims, shard, problems)
        if docs is not None:
            streams[split].append(docs)
    _check_totals(m, delims, streams, problems)
    report.update({k: m[k] for k in ("documents", "tokens", "bytes_in", "max_id")})
    report["shards"] = sum(len(v) for v in streams.values())
    if not problems:
        report["documents_reencoded"] = _check_samples(m, delims, streams, source, problems)


def _check_listing(out: Path, m: dict, problems: list) -> None:
    listed = {f: size for _, s in shards(m) for f, size in s["files"].items()}
    for f, size in listed.items():
        p = out / f
        if not p.is_file():
            problems.append(f"{f} is listed in {MANIFEST} but missing")
        elif p.stat().st_size != size:
            problems.append(f"{f} is {p.stat().st_size} bytes, {MANIFEST} says {size}")
    found = [p.relative_to(out).as_posix() for p in out.iterdir() if is_own(p.name) and p.name != MANIFEST and p.is_file()]
    found += [p.relative_to(out).as_posix() for d in ("train", "val") if (out / d).is_dir() for p in (out / d).iterdir()]
    extra = sorted(set(found) - set(listed))
    if extra:
        problems.append(f"{len(extra)} file(s) not listed in {MANIFEST}: {', '.join(extra[:5])}")


def _check_shard(out: Path, m: dict, delims, shard: dict, problems: list):
    fmt, base = m["trainer_format"], shard["base"]
    try:
        docs = read_tokens(fmt, out / base, delims)
    except FastencError as exc:
        problems.append(str(exc))
        return None
    ids = docs.ids
    top = int(ids.max()) if len(ids) else -1
    checks = [("tokens", len(ids), shard["tokens"]), ("max id", top, shard["max_id"])]
    if fmt != "llmc":
        checks.append(("documents", docs.n_docs, shard["documents"]))
    elif delims.bos is not None:  # documents starting in the shard, found by their BOS
        checks.append(("documents", int(np.count_nonzero(ids == delims.bos)), shard["documents"]))
    for what, got, want in checks:
        if got != want:
            problems.append(f"{base}: {what} {got:,} on disk, {MANIFEST} says {want:,}")
    if top >= delims.n_ids:
        problems.append(f"{base}: id {top} is past the vocabulary's {delims.n_ids} ids")
    if file_xxh3(out / data_file(fmt, base)) != shard["xxh3_64"]:
        problems.append(f"{data_file(fmt, base)}: xxh3_64 differs from {MANIFEST}'s: the file changed after it was written")
    return docs


def _check_totals(m: dict, delims, streams: dict, problems: list) -> None:
    want = split_sizes(m["documents"], m["val_every"])
    for split in SPLITS:
        sp = m["splits"][split]
        docs = sum(s["documents"] for s in sp["shards"])
        if docs != sp["documents"] or docs != want[split]:
            problems.append(f"{split}: {docs:,} documents in its shards, {sp['documents']:,} listed, the val rule "
                            f"gives {want[split]:,}")
    for k in ("documents", "tokens", "bytes_in"):
        if sum(m["splits"][s][k] for s in SPLITS) != m[k]:
            problems.append(f"the splits' {k} do not add up to the total's {m[k]:,}")
    if m["trainer_format"] == "llmc" and delims.bos is None and delims.eos is not None:
        for split in SPLITS:
            ends = sum(int(np.count_nonzero(d.ids == delims.eos)) for d in streams[split])
            if ends != m["splits"][split]["documents"]:
                problems.append(f"{split}: {ends:,} EOS ids, {m['splits'][split]['documents']:,} documents listed")


class _Split:
    """A split's documents in output order, across its shards."""

    def __init__(self, fmt: str, delims, docs: list):
        self.docs, self.fmt = docs, fmt
        if fmt != "llmc":
            self.first = np.cumsum([0] + [d.n_docs for d in docs])
            return
        self.base = np.cumsum([0] + [len(d.ids) for d in docs])
        marks = [np.flatnonzero(d.ids == (delims.bos if delims.bos is not None else delims.eos)) + b
                 for d, b in zip(docs, self.base)]
        marks = np.concatenate(marks) if marks else np.zeros(0, np.int64)
        total = int(self.base[-1])
        self.bounds = np.concatenate([marks, [total]]) if delims.bos is not None else np.concatenate([[0], marks + 1])

    def document(self, q: int) -> np.ndarray:
        if self.fmt != "llmc":
            k = int(np.searchsorted(self.first, q, side="right")) - 1
            return np.asarray(self.docs[k].document(q - int(self.first[k])))
        a, b = int(self.bounds[q]), int(self.bounds[q + 1])
        parts = []
        for d, base in zip(self.docs, self.base):
            lo, hi = max(a, base), min(b, base + len(d.ids))
            if lo < hi:
                parts.append(np.asarray(d.ids[lo - base:hi - base]))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _check_samples(m: dict, delims, streams: dict, source, problems: list) -> int | None:
    """Re-encode up to ``SAMPLES`` documents per split from their source; the count checked (None: no source)."""
    from fastenc.arrow_io import read_column_rows
    from fastenc.recipes.tokens.build import load_tokenizer

    paths = [Path(p) for p in source] if source else [Path(s["path"]) for s in m["sources"]]
    if len(paths) != len(m["sources"]) or not all(p.is_file() for p in paths):
        return None
    if m["trainer_format"] == "llmc" and delims.per_document == 0:
        return None  # no delimiter: the stream has no document boundaries to find
    enc = load_tokenizer(m["tokenizer"]["name"], m["tokenizer"]["pattern"])
    firsts = np.array([s["first_document"] for s in m["sources"]])
    checked = 0
    for split in SPLITS:
        n = m["splits"][split]["documents"]
        if n == 0:
            continue
        split_docs = _Split(m["trainer_format"], delims, streams[split])
        perm = order(n, m["shuffle"], split)
        for q in np.unique(np.linspace(0, n - 1, min(n, SAMPLES)).astype(np.int64)):
            g = int(global_index(split, int(perm[q]), m["val_every"]))
            k = int(np.searchsorted(firsts, g, side="right")) - 1
            text = read_column_rows(paths[k], m["sources"][k]["column"], [g - int(firsts[k])])[0]
            ids = enc.encode_bytes(text.encode("utf-8") if isinstance(text, str) else text)
            want, _ = delims.apply(np.asarray(ids), np.array([len(ids)]))
            got = split_docs.document(int(q))
            if not np.array_equal(got, want):
                problems.append(f"{split} document {int(q)} (input document {g}) differs from its source re-encoded "
                                f"({len(got)} ids on disk, {len(want)} re-encoded)")
                return checked
            checked += 1
    return checked
