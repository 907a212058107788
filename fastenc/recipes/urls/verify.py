"""``fastenc verify OUT`` for URL outputs: re-check bins and sidecars from their files alone.

``fastenc.verify`` dispatches to ``fastenc.recipes.urls.verify_output`` (re-exported from here).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from fastenc.arrow_io import resolve_inputs
from fastenc.errors import InputError
from fastenc.recipes.urls.bin import iter_decoded
from fastenc.recipes.urls.format import (FORMAT, FORMAT_VERSION, TOKENIZER_DIR, bin_name, sidecar_name, sidecar_paths,
                                      uncommitted_bins)
from fastenc.recipes.urls.source import read_url_column
from fastenc.recipes.urls.tokenizer import sha256_file


def verify_output(out_dir: Path, source: Sequence[Path] | None = None) -> dict:
    """Re-check a URL output directory from its files alone (and against ``source`` if given).

    For every ``tokens-s*.json``: the format; the bin's size (= 2 x ``tokens``) and xxh3; the
    sha256 of ``tokenizer/tokenizer.json`` against the sidecar; the bin starts with 0 and holds
    exactly ``urls`` zeros; every id is in the vocabulary; every URL decoded, put through
    ``canonical()`` and hashed: the hashes ascend, and (when the build checked membership) each
    is in the sidecar's shard (except the URLs the sidecar lists as irreversible, whose original
    cannot be recovered); ``empty_urls``, ``url_bytes`` and ``max_url_bytes`` agree. A bin without a sidecar
    is reported (an unfinished run). With ``source`` (parquet files, matched to sidecars by
    their file name, or the single source of a single sidecar), the decoded URLs must equal the
    source's, in hash order, byte for byte (stored canonical forms are compared: exact for every URL).
    """
    out_dir = Path(out_dir)
    report: dict = {"format": "urls", "ok": False, "problems": [], "out_dir": str(out_dir), "shards": 0, "urls": 0, "tokens": 0,
                    "checked_source": False}
    problems: list[str] = report["problems"]
    sidecars = sidecar_paths(out_dir)
    for name in uncommitted_bins(out_dir):
        problems.append(f"{name} has no sidecar (.json): an unfinished or interrupted run; rerun the recipe for that shard")
    tok_path = out_dir / TOKENIZER_DIR / "tokenizer.json"
    tok_sha = sha256_file(tok_path) if tok_path.is_file() else None
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
    """Check one sidecar, its bin's file and every URL decoded from it."""
    problems: list[str] = report["problems"]
    meta = _check_sidecar(meta_path, tok_path, tok_sha, problems)
    if meta is None:
        return
    checked = _check_bin_file(out_dir, meta, tok_path, problems)
    if checked is None:
        return
    bin_path, enc = checked
    src_iter = _source_urls(meta, sources, n_sidecars) if sources else None
    if src_iter is not None:
        report["checked_source"] = True
        report["source_compared"] = "every URL of the bins whose source was given, byte for byte, in hash order"
        report.setdefault("sources_checked", []).append(meta["source"]["file"])
    urls = _check_decoded(bin_path, enc, meta, src_iter, problems)
    if urls is None:
        return
    report["shards"] += 1
    report["urls"] += urls
    report["tokens"] += int(meta["tokens"])


def _check_sidecar(meta_path: Path, tok_path: Path, tok_sha: str | None, problems: list) -> dict | None:
    """The sidecar, if its format, names, dtype and tokenizer are right (else None, with a problem)."""
    from fastenc.verify import read_manifest

    name = meta_path.name
    meta = read_manifest(meta_path, FORMAT, FORMAT_VERSION, problems)
    if meta is None:
        return None
    shard = int(meta["shard"])
    if name != sidecar_name(shard) or meta["file"] != bin_name(shard):
        problems.append(f"{name}: names shard {shard} and file {meta['file']!r}; expected {sidecar_name(shard)} / {bin_name(shard)}")
        return None
    if meta["dtype"] != "uint16" or meta["byteorder"] != "little" or meta["eos_token_id"] != 0:
        problems.append(f"{name}: dtype/byteorder/eos {meta['dtype']}/{meta['byteorder']}/{meta['eos_token_id']} is not uint16/little/0")
        return None
    if tok_sha is None:
        return None
    if tok_sha != meta["tokenizer_sha256"]:
        problems.append(f"{name}: tokenizer_sha256 {meta['tokenizer_sha256'][:16]}... but {tok_path} has {tok_sha[:16]}...: "
                        "this bin was made with another vocabulary")
        return None
    return meta


def _check_bin_file(out_dir: Path, meta: dict, tok_path: Path, problems: list):
    """``(bin path, Encoder)`` if the bin's size, xxh3 and first token agree with the sidecar."""
    from fastenc.encoder import load
    from fastenc.run.units import file_xxh3

    bin_path = out_dir / meta["file"]
    if not bin_path.is_file():
        problems.append(f"{meta['file']} is missing (listed by {bin_path.with_suffix('.json').name})")
        return None
    n_tokens = int(meta["tokens"])
    size = bin_path.stat().st_size
    if size != 2 * n_tokens:
        problems.append(f"{meta['file']}: {size} bytes on disk, the sidecar says {n_tokens} tokens = {2 * n_tokens} bytes")
        return None
    enc = load(tok_path)
    if enc.vocab_size != meta["vocab_size"]:
        problems.append(f"{meta['file']}: vocab_size {meta['vocab_size']} but the tokenizer has {enc.vocab_size}")
    digest = file_xxh3(bin_path)
    if digest != meta.get("bin_xxh3_64"):
        problems.append(f"{meta['file']}: xxh3_64 {digest} differs from the sidecar's {meta.get('bin_xxh3_64')} (the content changed)")
    first = int(np.fromfile(bin_path, dtype="<u2", count=1)[0]) if n_tokens else None
    if n_tokens and first != 0:
        problems.append(f"{meta['file']}: starts with token {first}, not 0 (<eos>): every URL must begin with 0")
        return None
    return bin_path, enc


class _Tally:
    """What decoding a whole bin counts."""

    def __init__(self):
        self.urls = self.empty = self.url_bytes = self.max_len = self.out_of_shard = self.disorder = 0
        self.prev = None
        self.first_bad: list[str] = []


def _check_decoded(bin_path: Path, enc, meta: dict, src_iter, problems: list) -> int | None:
    """Decode every URL: hash order, shard membership, counts, and the source when given.
    Returns the number of URLs (None when the bin could not be decoded)."""
    n_urls = int(meta["urls"])
    # URLs whose original canonical() cannot give back: their decoded hash is not their key
    skip = np.asarray(meta.get("irreversible_url_indices", []), dtype=np.int64)
    if len(skip) != meta.get("irreversible_urls", 0) or (skip.size and ((np.diff(skip) <= 0).any() or skip[0] < 0 or skip[-1] >= n_urls)):
        problems.append(f"{bin_path.with_suffix('.json').name}: irreversible_url_indices is not a sorted list of "
                        "irreversible_urls distinct URL indices")
        return None
    t = _Tally()
    try:
        for _, data, offs in iter_decoded(bin_path, enc):
            _tally_stretch(t, data, offs, skip, meta, src_iter)
    except ValueError as exc:
        problems.append(f"{meta['file']}: {exc}")
        return None
    _report_tally(t, meta, src_iter, problems)
    return t.urls


def _tally_stretch(t: _Tally, data, offs, skip, meta: dict, src_iter) -> None:
    from fastenc.kernels.url_pack import count_outside_shard
    from fastenc.recipes.urls.threads import canonical_batch, hash_batch

    m = len(offs) - 1
    hs = hash_batch(canonical_batch(data, offs), offs)
    lo, hi = np.searchsorted(skip, [t.urls, t.urls + m])
    if hi > lo:
        keep = np.ones(m, bool)
        keep[skip[lo:hi] - t.urls] = False
        hs = hs[keep]
    if hs.size:
        if t.prev is not None and hs[0] < t.prev:
            t.disorder += 1
        t.disorder += int(np.count_nonzero(hs[1:] < hs[:-1]))
        t.prev = hs[-1]
        if meta.get("shard_checked", True):
            dummy = np.empty(1, np.int64)
            t.out_of_shard += int(count_outside_shard(hs, np.uint64(int(meta["num_shards"])), np.uint64(int(meta["shard"])), dummy, 1))
    lengths = np.diff(offs)
    t.empty += int(np.count_nonzero(lengths == 0))
    t.url_bytes += int(offs[-1])
    t.max_len = max(t.max_len, int(lengths.max())) if m else t.max_len
    if src_iter is not None:
        bad = src_iter.compare(data, offs, t.urls)
        if bad is not None and len(t.first_bad) < 3:
            t.first_bad.append(bad)
    t.urls += m


def _report_tally(t: _Tally, meta: dict, src_iter, problems: list) -> None:
    name = meta["file"]
    if t.urls != int(meta["urls"]):
        problems.append(f"{name}: holds {t.urls} URLs (zeros), the sidecar says {meta['urls']}")
    if t.disorder:
        problems.append(f"{name}: the xxh3_64 of the decoded URLs descends {t.disorder} time(s): not in hash order")
    if t.out_of_shard:
        problems.append(f"{name}: {t.out_of_shard} decoded URLs are not in shard {meta['shard']} of {meta['num_shards']}")
    found = (t.empty, t.url_bytes, t.max_len)
    said = (meta.get("empty_urls"), meta.get("url_bytes"), meta.get("max_url_bytes"))
    if found != said:
        problems.append(f"{name}: decodes to {t.empty} empty URLs / {t.url_bytes} bytes / longest {t.max_len} bytes, "
                        f"the sidecar says {said[0]} / {said[1]} / {said[2]} (empty_urls / url_bytes / max_url_bytes)")
    if src_iter is not None:
        problems.extend(f"{name} vs {src_iter.path.name}: {b}" for b in t.first_bad)
        tail = src_iter.finish(t.urls)
        if tail:
            problems.append(f"{name} vs {src_iter.path.name}: {tail}")


class _SourceStream:
    """The source's URLs in hash order, compared stretch by stretch with a decoded bin."""

    def __init__(self, path: Path, meta: dict):
        import numba

        from fastenc.recipes.urls.threads import canonical_batch, hash_batch, sort_by_hash

        self.path = path
        col = read_url_column(path, meta["source"]["column"], skip_nulls=bool(meta.get("null_urls_skipped")))
        n = len(col.offsets) - 1
        hashes = hash_batch(col.data, col.offsets) if n else np.empty(0, np.uint64)
        self.order, _ = sort_by_hash(hashes, numba.get_num_threads())
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
