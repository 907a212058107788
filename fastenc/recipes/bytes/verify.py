"""``fastenc verify OUT`` for bytes outputs: re-check the shards and meta.json from the files
alone, and against the source when given (``verify_output``, re-exported by the package)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import xxhash

from fastenc.arrow_io import iter_string_batches, resolve_inputs
from fastenc.recipes.bytes import FORMAT, FORMAT_VERSION, META_NAME, RESERVED, SEPARATOR, SHARD_RE, SPLITS, is_val, shard_name

_CHUNK = 16 << 20


def _scan_shard(path: Path) -> dict:
    """Separator and 255 counts, the first two separator positions and the xxh3 of one shard."""
    mm = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else np.empty(0, np.uint8)
    h = xxhash.xxh3_64()
    seps = 0
    reserved = 0
    first_two: list[int] = []
    for start in range(0, mm.size, _CHUNK):
        chunk = mm[start : start + _CHUNK]
        h.update(chunk)
        eq = chunk == SEPARATOR
        c = int(np.count_nonzero(eq))
        if c and len(first_two) < 2:
            first_two.extend(int(x) + start for x in np.flatnonzero(eq)[: 2 - len(first_two)])
        seps += c
        reserved += int(np.count_nonzero(chunk == RESERVED))
    first = int(mm[0]) if mm.size else None
    size = int(mm.size)
    del mm
    return {"size": size, "separators": seps, "reserved": reserved, "first_byte": first, "first_two": first_two, "xxh3_64": h.hexdigest()}


def _global_index(split: str, ordinal: int, val_every: int) -> int:
    """Global document index of the ``ordinal``-th document of ``split`` under the val rule."""
    if val_every == 0:
        return ordinal
    if split == "val":
        return ordinal * val_every + val_every - 1
    if val_every == 1:
        return -1  # there are no train documents when every document is val
    return ordinal + ordinal // (val_every - 1)


def verify_output(out_dir: Path, source: Sequence[Path] | None = None) -> dict:
    """Re-check a bytes output directory from its files alone (and against ``source`` if given).

    Checks: meta.json parses and has this format; the files on disk are exactly the shards listed;
    each shard has its listed size and xxh3, starts with 254, has as many 254 bytes as documents
    and no 255; the shard rule holds (no shard over shard_bytes unless it is a single document, and
    the next shard's first document would not have fitted); per-split and total counts add up;
    the split sizes and each shard's first_document follow the val rule. With ``source``, the
    documents are re-read and compared byte for byte, in order.
    """
    from fastenc.verify import checked

    return checked(FORMAT, out_dir, META_NAME, _verify, source)


def _verify(out_dir: Path, source: Sequence[Path] | None, report: dict) -> None:
    from fastenc.verify import read_manifest

    problems: list[str] = report["problems"]
    meta = read_manifest(out_dir / META_NAME, FORMAT, FORMAT_VERSION, problems)
    if meta is None:
        return
    if meta.get("separator") != SEPARATOR:
        problems.append(f"separator is {meta.get('separator')!r}, expected {SEPARATOR}")
    listed = {s["file"] for split in SPLITS for s in meta["splits"][split]["shards"]}
    on_disk = {p.name for p in out_dir.iterdir() if SHARD_RE.match(p.name)}
    for name in sorted(on_disk - listed):
        problems.append(f"{name} is on disk but not in meta.json (left from another run?)")
    totals = [_check_split(out_dir, meta, split, problems) for split in SPLITS]
    n, nbytes = sum(t[0] for t in totals), sum(t[1] for t in totals)
    _check_totals(meta, n, nbytes, problems)
    report.update(
        documents=n,
        bytes=nbytes,
        stripped_bytes=meta.get("stripped_bytes"),
        splits={s: {k: meta["splits"][s][k] for k in ("documents", "bytes")} | {"shards": len(meta["splits"][s]["shards"])} for s in SPLITS},
        checked_source=False,
    )
    if source is not None and not problems:
        _compare_with_source(out_dir, meta, [Path(p) for p in source], problems)
        report["checked_source"] = True
        report["source_compared"] = f"all {meta['documents']:,} documents byte for byte"


def _check_split(out_dir: Path, meta: dict, split: str, problems: list) -> tuple[int, int]:
    """Check one split's shards (each file, then the shard rule between them); returns the
    documents and bytes its shards add up to."""
    info = meta["splits"][split]
    shards = info["shards"]
    scans: dict[str, dict] = {}
    docs_sum = bytes_sum = 0
    for k, s in enumerate(shards):
        sc = _check_shard(out_dir, meta, split, k, s, docs_sum, problems)
        if sc is not None:
            scans[s["file"]] = sc
        docs_sum += s["documents"]
        bytes_sum += s["bytes"]
    shard_bytes = int(meta["shard_bytes"])
    for k in range(len(shards) - 1):  # shard k ended because the next document did not fit
        a, b = shards[k], shards[k + 1]
        sc = scans.get(b["file"])
        if sc is None:
            continue
        first_doc_size = sc["first_two"][1] if len(sc["first_two"]) > 1 else sc["size"]
        if a["bytes"] + first_doc_size <= shard_bytes:
            problems.append(
                f"{b['file']}: its first document ({first_doc_size} bytes) would have fitted in {a['file']} "
                f"({a['bytes']} of {shard_bytes} bytes): the shard rule was not followed"
            )
    if docs_sum != info["documents"] or bytes_sum != info["bytes"] or info.get("text_bytes") != bytes_sum - docs_sum:
        problems.append(
            f"{split}: meta.json says {info['documents']} documents / {info['bytes']} bytes / {info.get('text_bytes')} text bytes, "
            f"its shards add up to {docs_sum} / {bytes_sum} / {bytes_sum - docs_sum}"
        )
    return docs_sum, bytes_sum


def _check_shard(out_dir: Path, meta: dict, split: str, k: int, s: dict, docs_before: int, problems: list) -> dict | None:
    """Scan shard ``k`` of ``split`` and compare it with its entry ``s``; the scan, or None."""
    name = s["file"]
    if name != shard_name(split, k):
        problems.append(f"{split} shard {k} is named {name!r}, expected {shard_name(split, k)!r}")
        return None
    p = out_dir / name
    if not p.is_file():
        problems.append(f"{name} is listed in meta.json but missing")
        return None
    sc = _scan_shard(p)
    if sc["size"] != s["bytes"]:
        problems.append(f"{name}: {sc['size']} bytes on disk, meta.json says {s['bytes']}")
    if sc["first_byte"] != SEPARATOR:
        problems.append(f"{name}: does not start with byte 254 (first byte {sc['first_byte']})")
    if sc["separators"] != s["documents"]:
        problems.append(f"{name}: {sc['separators']} separators (documents), meta.json says {s['documents']}")
    if sc["reserved"]:
        problems.append(f"{name}: byte 255 occurs {sc['reserved']} times (it is reserved and must never occur)")
    if sc["xxh3_64"] != s.get("xxh3_64"):
        problems.append(f"{name}: xxh3_64 {sc['xxh3_64']} differs from meta.json {s.get('xxh3_64')} (content changed)")
    shard_bytes = int(meta["shard_bytes"])
    if s["bytes"] > shard_bytes and s["documents"] != 1:
        problems.append(f"{name}: {s['bytes']} bytes > shard_bytes {shard_bytes} with {s['documents']} documents")
    expect_first = _global_index(split, docs_before, int(meta["val_every"])) if s["documents"] else None
    if s["documents"] and s.get("first_document") != expect_first:
        problems.append(f"{name}: first_document {s.get('first_document')} but the val rule gives {expect_first}")
    return sc


def _check_totals(meta: dict, n: int, nbytes: int, problems: list) -> None:
    val_every = int(meta["val_every"])
    if meta["documents"] != n or meta["bytes"] != nbytes or meta.get("text_bytes") != nbytes - n:
        problems.append(f"totals: meta.json says {meta['documents']} documents / {meta['bytes']} bytes, the splits add up to {n} / {nbytes}")
    expect_val = n // val_every if val_every else 0
    if meta["splits"]["val"]["documents"] != expect_val:
        problems.append(f"val has {meta['splits']['val']['documents']} documents; the val rule gives {expect_val} of {n}")
    if meta.get("source_text_bytes") is not None and meta["source_text_bytes"] - meta["stripped_bytes"] != nbytes - n:
        problems.append(
            f"source_text_bytes {meta['source_text_bytes']} - stripped_bytes {meta['stripped_bytes']} != text bytes written {nbytes - n}"
        )


class _SplitReader:
    """Reads one split's shards as one byte stream (shards hold whole documents)."""

    def __init__(self, out_dir: Path, shards: list[dict]):
        self.files = [out_dir / s["file"] for s in shards]
        self.i = 0
        self.f = None

    def read(self, n: int) -> bytes:
        parts = []
        while n > 0:
            if self.f is None:
                if self.i >= len(self.files):
                    break
                self.f = open(self.files[self.i], "rb")
                self.i += 1
            got = self.f.read(n)
            if not got:
                self.f.close()
                self.f = None
                continue
            parts.append(got)
            n -= len(got)
        return b"".join(parts)

    def at_end(self) -> bool:
        return not self.read(1)


def _compare_with_source(out_dir: Path, meta: dict, source: list[Path], problems: list[str]) -> None:
    """Re-read the source documents (plain Python, independent of the packing kernel) and compare."""
    val_every = int(meta["val_every"])
    readers = {s: _SplitReader(out_dir, meta["splits"][s]["shards"]) for s in SPLITS}
    paths = resolve_inputs([str(p) for p in source])
    g = 0
    skip_nulls = bool(meta.get("null_documents_skipped"))
    for batch in iter_string_batches(paths, meta["column"], allow_binary=True, skip_nulls=skip_nulls):
        raw = batch.data.tobytes()
        off = batch.offsets
        expected = {"train": [], "val": []}
        for j in range(batch.num_rows):
            doc = raw[off[j] : off[j + 1]].translate(None, b"\xfe\xff")
            expected["val" if is_val(g + j, val_every) else "train"].append(b"\xfe" + doc)
        for split, parts in expected.items():
            want = b"".join(parts)
            got = readers[split].read(len(want))
            if got != want:
                k = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
                problems.append(
                    f"{split}: content differs from the source in the batch starting at {batch.path} row {batch.first_row} "
                    f"(global document {g}), at byte {k} of that batch's {split} documents"
                )
                return
        g += batch.num_rows
    for split, r in readers.items():
        if not r.at_end():
            problems.append(f"{split}: the shards hold more bytes than the source documents give")
    if g != meta["documents"]:
        problems.append(f"the source has {g} documents, meta.json says {meta['documents']}")
