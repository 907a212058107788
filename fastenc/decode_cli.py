"""``fastenc decode BIN``: print the URLs stored in a URL token bin, one per line.

    python -m fastenc decode OUT/tokens-s00042.bin --limit 20

This is the dataset card's "reading the data" in one command: the bin is memory-mapped, cut at
its ``<eos>`` (0) tokens, each URL's ids are decoded with the tokenizer that made the bin and
``canonical()`` is applied once, which gives the ORIGINAL URL (the one the xxh3 order and the
shard are computed over). ``--canonical`` prints the stored TLD-first form instead, ``--ids``
the token ids, ``--hash`` prefixes each line with ``xxh3_64(url)`` in hex.

The tokenizer is ``tokenizer/tokenizer.json`` beside the bin (as the recipe writes it), checked
against the sidecar's sha256; ``--tokenizer`` names another one. Output is the URLs' raw bytes
followed by a newline (a URL may itself hold any byte but 0x0A is rare and kept; use ``--json``
for one JSON string per line when that matters).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from fastenc.errors import InputError, UsageError

_COUNT_STEP = 16 << 20


def add_arguments(p) -> None:
    p.add_argument("bin", metavar="BIN", help="a URL token bin, e.g. OUT/tokens-s00042.bin")
    p.add_argument("-n", "--limit", type=int, default=None, help="print at most N URLs (default: all)")
    p.add_argument("--start", type=int, default=0, help="skip the first K URLs of the bin (default: 0)")
    p.add_argument("--canonical", action="store_true", help="print the stored canonical (TLD-first) text, without applying canonical()")
    p.add_argument("--ids", action="store_true", help="print each URL's token ids (the leading 0 included) instead of its text")
    p.add_argument("--hash", action="store_true", help="prefix each line with xxh3_64 of the original URL (16 hex digits)")
    p.add_argument("--json", action="store_true", help="print each URL as a JSON string (invalid UTF-8 as U+FFFD)")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json to decode with (default: tokenizer/ beside the bin)")


def _tokenizer_for(bin_path: Path, explicit: str | None):
    """The Encoder for ``bin_path``: explicit, else OUT/tokenizer/ checked against the sidecar."""
    from fastenc.encoder import load

    if explicit:
        return load(explicit)
    tok = bin_path.parent / "tokenizer" / "tokenizer.json"
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


def run(args) -> int:
    from fastenc.url_canonical import canonical_bytes
    from fastenc.recipes.urls import iter_decoded

    bin_path = Path(args.bin)
    if not bin_path.is_file():
        raise InputError(f"{bin_path} is not a file: pass a tokens-sNNNNN.bin written by 'fastenc urls'")
    size = bin_path.stat().st_size
    if size % 2:
        raise InputError(f"{bin_path} has an odd size ({size} bytes): it is not a uint16 token bin (or it is truncated)")
    if args.limit is not None and args.limit < 0 or args.start < 0:
        raise UsageError("--limit and --start must not be negative")
    enc = _tokenizer_for(bin_path, args.tokenizer)
    tokens = np.memmap(bin_path, dtype="<u2", mode="r") if size else np.zeros(0, np.uint16)
    if tokens.size and tokens[0] != 0:
        raise InputError(f"{bin_path} does not start with token 0 (<eos>): it is not a URL bin")
    if args.limit == 0:
        return 0
    out = sys.stdout.buffer
    printed = 0
    start = _position_of_url(tokens, args.start) if args.start else 0
    stretch = 1 << 16 if args.limit is not None and args.limit < 1000 else 1 << 24
    try:
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
                printed += 1
                if args.limit is not None and printed >= args.limit:
                    break
            out.write(b"\n".join(lines) + (b"\n" if lines else b""))
            if args.limit is not None and printed >= args.limit:
                break
        out.flush()
    except BrokenPipeError:  # `| head`: the reader is gone, which is fine
        # keep Python's exit-time flush of stdout from failing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
