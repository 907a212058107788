"""``fastenc decode`` of a URL output: each URL's ids decoded with the tokenizer beside the bin
(``tokenizer/``, checked against the sidecar's sha256) and ``canonical()`` applied once, which gives
the ORIGINAL URL; ``--canonical`` prints the stored TLD-first form, ``--hash`` prefixes ``xxh3_64(url)``."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

from fastenc.errors import InputError
from fastenc.recipes.decoding import Budget
from fastenc.recipes.urls.bin import iter_decoded
from fastenc.recipes.urls.format import TOKENIZER_DIR, sidecar_paths, uncommitted_bins
from fastenc.url_canonical import canonical_bytes

_COUNT_STEP = 16 << 20
# A URL shard is complete only with its sidecar (docs/atomic-output.md): a bin in an output folder
# without its sidecar is what a run killed between the two renames leaves (the sidecar-last fallback).
_LEFTOVER = ("a run that never committed left it (a shard is complete only once its sidecar is there); "
             "rerun the recipe for that shard, which deletes it")


def decode_dir(args, out: Path, budget: Budget) -> None:
    """Every committed shard of ``out``, in shard order (a bin without its sidecar is skipped, named)."""
    for name in uncommitted_bins(out):  # not committed: not part of the output
        print(f"fastenc decode: skipping {name}: {_LEFTOVER}", file=sys.stderr)
    for p in sidecar_paths(out):
        if budget.done():
            return
        if not p.with_suffix(".bin").is_file():
            raise InputError(f"{p.with_suffix('.bin')} is missing but {p.name} lists it: the output is damaged; "
                             f"run `fastenc verify {out}`")
        decode_bin(args, p.with_suffix(".bin"), budget)


def is_bin(path: Path) -> bool:
    return re.match(r"^tokens-s\d+\.bin$", path.name) is not None


def decode_bin(args, bin_path: Path, budget: Budget) -> None:
    if not bin_path.with_suffix(".json").is_file() and (bin_path.parent / TOKENIZER_DIR).is_dir() and not args.tokenizer:
        raise InputError(f"{bin_path} has no sidecar {bin_path.with_suffix('.json').name}: {_LEFTOVER}")
    size = bin_path.stat().st_size
    if size % 2:
        raise InputError(f"{bin_path} has an odd size ({size} bytes): it is not a uint16 token bin (or it is truncated)")
    enc = _tokenizer_for(bin_path, args.tokenizer)
    tokens = np.memmap(bin_path, dtype="<u2", mode="r") if size else np.zeros(0, np.uint16)
    if tokens.size and tokens[0] != 0:
        raise InputError(f"{bin_path} does not start with token 0 (<eos>): it is not a URL bin")
    if budget.done():
        return
    out = sys.stdout.buffer
    n_urls = _count_zeros(tokens) if budget.skip else 0
    if budget.skip >= n_urls > 0:
        budget.skip -= n_urls
        return
    start = _position_of_url(tokens, budget.skip) if budget.skip else 0
    budget.skip = 0
    stretch = 1 << 16 if budget.left is not None and budget.left < 1000 else 1 << 24
    for pos, data, offs in iter_decoded(tokens, enc, start=start, stretch=stretch):
        m = len(offs) - 1
        lines = []
        p = pos
        for j in range(m):
            text = data[offs[j] : offs[j + 1]].tobytes()
            url = text if args.canonical else canonical_bytes(text)
            if args.ids:
                q = p + 1
                while q < tokens.size and tokens[q] != 0:
                    q += 1
                body = " ".join(str(int(t)) for t in tokens[p:q]).encode()
                p = q
            elif args.json:
                body = json.dumps(url.decode("utf-8", "replace"), ensure_ascii=False).encode("utf-8")
            else:
                body = url
            if args.hash:
                import xxhash

                body = f"{xxhash.xxh3_64_intdigest(canonical_bytes(text)):016x}\t".encode() + body
            lines.append(body)
            if budget.left is not None:
                budget.left -= 1
                if budget.done():
                    break
        out.write(b"\n".join(lines) + (b"\n" if lines else b""))
        if budget.done():
            break


def _tokenizer_for(bin_path: Path, explicit: str | None):
    """The Encoder for ``bin_path``: explicit, else OUT/tokenizer/ checked against the sidecar."""
    from fastenc.encoder import load

    if explicit:
        return load(explicit)
    tok = bin_path.parent / TOKENIZER_DIR / "tokenizer.json"
    if not tok.is_file():
        raise InputError(f"no tokenizer at {tok}: decode needs the tokenizer that made {bin_path.name}; pass --tokenizer PATH")
    enc = load(tok)
    sidecar = bin_path.with_suffix(".json")
    if sidecar.is_file():
        try:
            want = json.loads(sidecar.read_text(encoding="utf-8")).get("tokenizer_sha256")
        except (OSError, ValueError, AttributeError):
            want = None
        if want and want != enc.sha256:
            raise InputError(f"{tok} (sha256 {enc.sha256[:16]}...) is not the tokenizer {sidecar.name} records ({want[:16]}...): "
                             "pass the right one with --tokenizer")
    return enc


def _position_of_url(tokens: np.ndarray, k: int) -> int:
    """Token position of the k-th ``eos`` (URL k's start), or len(tokens) if there are fewer."""
    seen = 0
    for p in range(0, tokens.size, _COUNT_STEP):
        hits = np.flatnonzero(tokens[p : p + _COUNT_STEP] == 0)
        if seen + hits.size > k:
            return p + int(hits[k - seen])
        seen += hits.size
    return int(tokens.size)


def _count_zeros(tokens: np.ndarray) -> int:
    return sum(int(np.count_nonzero(tokens[p : p + _COUNT_STEP] == 0)) for p in range(0, tokens.size, _COUNT_STEP))
