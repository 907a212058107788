"""Verification of a GPT-2 recipe output (``fastenc verify`` reaches it as
``fastenc.recipes.gpt2.verify_output``): re-checks the files alone, and optionally against the
source parquet files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow.parquet as pq

from fastenc.arrow_io import arrow_to_flat, read_column_rows, read_row_group, resolve_inputs
from fastenc.recipes.gpt2.format import (
    BUCKETS,
    EMPTY,
    FORMAT,
    FORMAT_VERSION,
    PART_FILE_RE,
    SUMMARY_JSON,
    SUMMARY_TSV,
    TOKENIZER,
    buckets_of,
    check_part_files,
    part_stem,
    summary_tsv,
)


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
    from fastenc.verify import checked

    return checked(FORMAT, out_dir, "summary.json or a part's meta.json", _verify, source)


def _verify(out_dir: Path, source, report: dict) -> None:
    from fastenc.verify import read_manifest

    problems: list[str] = report["problems"]
    summary = read_manifest(out_dir / SUMMARY_JSON, FORMAT, FORMAT_VERSION, problems)
    if summary is None:
        return
    enc, fmt = _recorded_encoding(summary, problems)
    if enc is None:
        return
    if summary.get("tokenizer_sha256") != enc.sha256:
        problems.append(
            f"summary.json was written with tokenizer sha256 {summary.get('tokenizer_sha256')}, but fastenc's "
            f"{fmt.tokenizer} vocabulary file is {enc.sha256}: the ids may differ; re-encode with this fastenc"
        )
    kept_names = list(summary["kept_buckets"])
    for name in kept_names:
        if name not in BUCKETS or not summary["buckets"][name]["kept"]:
            problems.append(f"summary.json: kept bucket {name!r} is unknown or not marked kept")
            return
    _check_no_stray_parts(out_dir, summary, kept_names, problems)
    totals = {"docs": 0, "tokens": 0}
    metas: dict[str, list[dict]] = {}
    for b, name in enumerate(BUCKETS):
        info = summary["buckets"][name]
        totals["docs"] += int(info["docs"])
        totals["tokens"] += int(info["tokens"])
        if name in kept_names:
            metas[name] = _check_bucket(out_dir, summary, b, enc.sha256, problems, fmt)
        elif info["parts"]:
            problems.append(f"{name} is not kept but summary.json lists parts for it")
    kept = _check_summary_totals(out_dir, summary, totals, kept_names, problems)
    report.update(
        documents=totals["docs"], tokens=totals["tokens"], kept_documents=kept["docs"], kept_tokens=kept["tokens"],
        empty_documents=summary["empty_documents_skipped"], parts=sum(len(m) for m in metas.values()),
        buckets={n: {"docs": summary["buckets"][n]["docs"], "tokens": summary["buckets"][n]["tokens"], "kept": n in kept_names} for n in BUCKETS},
        checked_source=False,
    )
    if source is not None and not problems:
        _compare_with_source(out_dir, summary, metas, [Path(p) for p in source], enc, report, fmt)
        report["checked_source"] = True
        how = " and ".join(sorted({"the count column" if f != "re-encoded" else "encoding it again"
                                   for f in report.get("count_order_from", [])}))
        report["source_compared"] = (
            f"the bucket, order and token count of all {report.get('count_order_checked', 0):,} documents, from {how or 'nothing'}; "
            f"{report.get('roundtrip_checked', 0):,} sampled documents decoded and compared byte for byte"
        )


def _check_no_stray_parts(out_dir: Path, summary: dict, kept_names: list, problems: list) -> None:
    listed: set[Path] = set()
    for name in kept_names:
        for part in summary["buckets"][name]["parts"]:
            for suffix in (".bin", ".idx.npy", ".meta.json"):
                listed.add(out_dir / (part["stem"] + suffix))
    for name in BUCKETS:
        d = out_dir / name
        if d.is_dir():
            for p in sorted(d.iterdir()):
                if PART_FILE_RE.match(p.name) and p not in listed:
                    problems.append(f"{name}/{p.name} is on disk but not in summary.json (left from another run?)")


def _check_bucket(out_dir: Path, summary: dict, b: int, sha: str, problems: list, fmt) -> list[dict]:
    """Check every part of kept bucket ``b`` (files, meta, part rule); returns the parts' metas."""
    name = BUCKETS[b]
    info = summary["buckets"][name]
    part_tokens = int(summary["part_tokens"])
    metas: list[dict] = []
    docs_sum = tokens_sum = 0
    prev = None  # tokens of the previous part
    for k, part in enumerate(info["parts"]):
        stem = f"{name}/{part_stem(k)}"
        if part["stem"] != stem:
            problems.append(f"{name}: part {k} is {part['stem']!r}, expected {stem!r}")
            continue
        checked = _check_part(out_dir, summary, stem, part, b, k, docs_sum, sha, problems, fmt)
        if checked is None:
            continue
        meta, checks, idx_path = checked
        metas.append(meta)
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
    return metas


def _check_part(out_dir: Path, summary: dict, stem: str, part: dict, b: int, k: int, docs_before: int, sha: str, problems: list, fmt):
    """``(meta, file checks, idx path)`` of one part after checking it, or None if it is missing."""
    bin_path, idx_path, meta_path = (out_dir / (stem + s) for s in (".bin", ".idx.npy", ".meta.json"))
    missing = [p.name for p in (bin_path, idx_path, meta_path) if not p.is_file()]
    if missing:
        problems.append(f"{stem}: missing {', '.join(missing)}")
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{stem}.meta.json cannot be read: {exc}")
        return None
    checks = check_part_files(bin_path, idx_path, b, fmt)
    problems += [f"{stem}: {p}" for p in checks["problems"]]
    _check_meta(stem, meta, part, checks, BUCKETS[b], k, docs_before, summary, sha, problems, fmt)
    part_tokens = int(summary["part_tokens"])
    if part["tokens"] > part_tokens and part["docs"] != 1:
        problems.append(f"{stem}: {part['tokens']} tokens > part_tokens {part_tokens} with {part['docs']} documents")
    return meta, checks, idx_path


def _check_summary_totals(out_dir: Path, summary: dict, totals: dict, kept_names: list, problems: list) -> dict:
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
    if not tsv.is_file() or tsv.read_text(encoding="utf-8") != summary_tsv(summary):
        problems.append("summary.tsv is missing or does not match summary.json")
    return kept


def _recorded_encoding(summary: dict, problems: list):
    """The encoder and ``TokenFormat`` summary.json names (gpt2 for outputs from before
    ``--encoding``), loaded the same way the run loaded it; (None, None) if it cannot be."""
    from fastenc.errors import FastencError
    from fastenc.recipes.gpt2 import load_encoding

    name = summary.get("tokenizer", TOKENIZER)
    try:
        enc, fmt = load_encoding(name, summary.get("tokenizer_pattern"))
    except FastencError as exc:
        problems.append(f"summary.json names the encoding {name!r}, which cannot be loaded: {exc}")
        return None, None
    if summary.get("dtype", "uint16") != fmt.dtype or summary.get("vocab_size") != fmt.vocab_size:
        problems.append(f"summary.json says {summary.get('dtype')} ids of a {summary.get('vocab_size')}-id vocabulary; "
                        f"{name} has {fmt.vocab_size} ids, stored as {fmt.dtype}")
    return enc, fmt


def _check_meta(stem, meta, part, checks, name, k, docs_before, summary, sha, problems, fmt) -> None:
    def bad(text):
        problems.append(f"{stem}.meta.json: {text}")

    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        bad(f"format {meta.get('format')!r} v{meta.get('format_version')!r}, expected {FORMAT!r} v{FORMAT_VERSION}")
        return
    if meta["bucket"] != name or meta["part"] != k:
        bad(f"says bucket {meta['bucket']!r} part {meta['part']}, expected {name!r} part {k}")
    if meta["tokenizer_sha256"] != sha:
        bad(f"tokenizer sha256 {meta['tokenizer_sha256']} is not that of fastenc's {fmt.tokenizer} ({sha})")
    if meta.get("tokenizer") != fmt.tokenizer or meta.get("dtype") != fmt.dtype:
        bad(f"says {meta.get('dtype')} ids of {meta.get('tokenizer')!r}, summary.json {fmt.dtype} of {fmt.tokenizer!r}")
    if not meta.get("fastenc_version"):
        bad("no fastenc_version")
    if meta["docs"] != part["docs"] or meta["tokens"] != part["tokens"]:
        bad(f"{meta['docs']} docs / {meta['tokens']} tokens, summary.json says {part['docs']} / {part['tokens']}")
    if checks["docs"] != meta["docs"] or checks["bin_tokens"] != meta["tokens"] or meta["bin_bytes"] != fmt.itemsize * meta["tokens"]:
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
    failed = [f"{f} is {c.get(f)!r}" for f in flags if c.get(f) is not True]
    failed += [f"{f} is {c[f]!r}" for f in ("count_mismatches", "roundtrip_mismatches", "docs_outside_bucket_range") if c[f]]
    if failed:
        bad(f"its meta.json records failed checks ({'; '.join(failed)}): the run that wrote it did not pass; rerun it")
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


def _compare_with_source(out_dir: Path, summary: dict, metas: dict, source: list[Path], enc, report: dict, fmt) -> None:
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
                tok = np.memmap(out_dir / (stem + ".bin"), dtype=fmt.disk_dtype, mode="r")
                got = enc.decode_bytes(tok[idx[doc] : idx[doc + 1]])
                want = text.encode("utf-8") if isinstance(text, str) else bytes(text)
                checked += 1
                if got != want:
                    problems.append(f"{stem} document {doc} decodes to text that differs from {paths[si]} row {row}")
                    if len(problems) > 20:
                        return
    report["roundtrip_checked"] = checked

    # 2. every document's bucket, order and token count: from the sources' count column, or by
    # encoding the source again where a file has none (the source is at hand: compare all)
    report["count_order_checked"] = 0
    _compare_counts(out_dir, summary, paths, recorded, enc, report)


def _source_counts(pf, path: Path, rg: int, src: dict, count_column: str | None, enc, nulls_skipped: bool = False) -> np.ndarray:
    """The token count of every document of row group ``rg``: the count column, or the document
    encoded again."""
    text = valid = None
    if nulls_skipped or not count_column:
        text = read_row_group(pf, path, rg, [src["column"]]).column(0)
        if text.null_count:  # the run left them out (--skip-nulls; without it a null fails the run)
            valid = text.is_valid().to_numpy()
            text = text.drop_null()
    if count_column:
        counts = read_row_group(pf, path, rg, [count_column]).column(0).to_numpy().astype(np.int64)
        return counts if valid is None else counts[valid]
    data, offsets = arrow_to_flat(text)
    return np.diff(enc.encode_arrays(data, offsets)[1]).astype(np.int64)


def _compare_counts(out_dir: Path, summary: dict, paths, recorded, enc, report: dict) -> None:
    problems = report["problems"]
    kept = {BUCKETS.index(n): _BucketCursor(out_dir, summary["buckets"][n]["parts"]) for n in summary["kept_buckets"]}
    docs_per = np.zeros(EMPTY + 1, np.int64)
    tokens_per = np.zeros(EMPTY + 1, np.int64)
    seen = 0
    report["count_order_from"] = []
    for si, p in enumerate(paths):
        pf = pq.ParquetFile(p)
        count_column = recorded[si].get("count_column")
        if count_column not in pf.schema_arrow.names:
            count_column = None
        report["count_order_from"].append(count_column or "re-encoded")
        row0 = 0
        for rg in range(pf.metadata.num_row_groups):
            counts = _source_counts(pf, Path(p), rg, recorded[si], count_column, enc, bool(summary.get("null_documents_skipped")))
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
                        f"{BUCKETS[b]}: the documents do not match the source's token counts in order "
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
