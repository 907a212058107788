"""``fastenc decode PATH``: print what any fastenc output holds, one document (or URL) a line.

    python -m fastenc decode OUT/tokens-s00042.bin --limit 20    # one URL bin
    python -m fastenc decode OUT --limit 5                         # any output directory

``PATH`` is an output directory (every bin of it, in order) or one bin of any format:

- a URL bin (``tokens-sNNNNN.bin``): each URL's ids are decoded with the tokenizer beside the
  bin (``tokenizer/``, checked against the sidecar's sha256) and ``canonical()`` is applied once,
  which gives the ORIGINAL URL; ``--canonical`` prints the stored TLD-first form, ``--hash``
  prefixes ``xxh3_64(url)`` in hex;
- a GPT-2 part (``<bucket>/part_NN.bin`` with its ``.idx.npy``): each document decoded;
- a bytes shard (``train_NNNNN.bin``, ``val_NNNNN.bin``): each document between 0xFE bytes;
- an ``encode -o DIR`` output (``ids.bin`` + ``meta.json``): the whole text.

Each item is printed as its raw bytes and a newline; ``--json`` prints one JSON string per line
instead (documents hold newlines: use it for them), ``--ids`` the token ids.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from fastenc.errors import InputError, UsageError

_COUNT_STEP = 16 << 20
# A URL shard is complete only with its sidecar (docs/atomic-output.md): a bin in an output folder
# without its sidecar is what a run killed between the two renames leaves (the sidecar-last fallback).
_LEFTOVER = ("a run that never committed left it (a shard is complete only once its sidecar is there); "
             "rerun the recipe for that shard, which deletes it")


HELP = "print the documents (or URLs) stored in any fastenc output, a directory or one bin"


def add_arguments(p) -> None:
    p.add_argument("bin", metavar="PATH", help="an output directory, or one bin of it (e.g. OUT/tokens-s00042.bin)")
    p.add_argument("-n", "--limit", type=int, default=None, help="print at most N items (default: all)")
    p.add_argument("--start", type=int, default=0, help="skip the first K items (default: 0)")
    p.add_argument("--canonical", action="store_true", help="URLs: print the stored canonical (TLD-first) text, without applying canonical()")
    p.add_argument("--ids", action="store_true", help="print each item's token ids (a URL's leading 0 included) instead of its text")
    p.add_argument("--hash", action="store_true", help="URLs: prefix each line with xxh3_64 of the original URL (16 hex digits)")
    p.add_argument("--json", action="store_true", help="print each item as a JSON string (invalid UTF-8 as U+FFFD)")
    p.add_argument("-t", "--tokenizer", default=None, help="tokenizer to decode with (default: the one the output records)")


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
    if args.limit is not None and args.limit < 0 or args.start < 0:
        raise UsageError("--limit and --start must not be negative")
    path = Path(args.bin)
    if not path.exists():
        raise InputError(f"{path} does not exist: pass an output directory of fastenc or one of its bins")
    try:
        if path.is_dir():
            _decode_dir(args, path)
        else:
            _decode_file(args, path)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader is gone, which is fine
        # keep Python's exit-time flush of stdout from failing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


class _Budget:
    """--start and --limit across several bins."""

    def __init__(self, start: int, limit: int | None):
        self.skip = start
        self.left = limit

    def done(self) -> bool:
        return self.left is not None and self.left <= 0


def _decode_dir(args, out: Path) -> None:
    from fastenc.verify import detect_format

    fmt = detect_format(out)
    budget = _Budget(args.start, args.limit)
    if fmt == "urls":
        from fastenc.recipes.urls.format import sidecar_paths, uncommitted_bins

        for name in uncommitted_bins(out):  # not committed: not part of the output
            print(f"fastenc decode: skipping {name}: {_LEFTOVER}", file=sys.stderr)
        for p in sidecar_paths(out):
            if budget.done():
                return
            if not p.with_suffix(".bin").is_file():
                raise InputError(f"{p.with_suffix('.bin')} is missing but {p.name} lists it: the output is damaged; "
                                 f"run `fastenc verify {out}`")
            _decode_url_bin(args, p.with_suffix(".bin"), budget)
        return
    for p in _document_bins(out, fmt):
        if budget.done():
            return
        _print_docs(args, _iter_docs(p, fmt, args.tokenizer), budget)


def _document_bins(out: Path, fmt: str) -> list[Path]:
    meta = json.loads((out / ("summary.json" if fmt == "gpt2" else "meta.json")).read_text(encoding="utf-8"))
    if fmt == "gpt2":
        return [out / f"{part['stem']}.bin" for name in meta["kept_buckets"] for part in meta["buckets"][name]["parts"]]
    if fmt == "fastenc-bytes":
        return [out / s["file"] for split in ("train", "val") for s in meta["splits"][split]["shards"]]
    return [out / meta["file"]]


def _file_format(path: Path) -> str:
    if re.match(r"^tokens-s\d+\.bin$", path.name):
        return "urls"
    if path.with_name(path.name[:-4] + ".idx.npy").is_file():
        return "gpt2"
    if re.match(r"^(train|val)_\d+\.bin$", path.name):
        return "fastenc-bytes"
    meta = path.with_name("meta.json")
    if meta.is_file() and '"fastenc-ids"' in meta.read_text(encoding="utf-8"):
        return "fastenc-ids"
    raise InputError(f"{path} is not a bin fastenc knows (tokens-sNNNNN.bin, <bucket>/part_NN.bin with its .idx.npy, "
                     "train_/val_NNNNN.bin, or ids.bin of 'encode -o'): pass one of those or the output directory")


def _decode_file(args, path: Path) -> None:
    fmt = _file_format(path)
    budget = _Budget(args.start, args.limit)
    if fmt == "urls":
        _decode_url_bin(args, path, budget)
    else:
        _print_docs(args, _iter_docs(path, fmt, args.tokenizer), budget)


def _iter_docs(path: Path, fmt: str, tokenizer: str | None):
    """``(document bytes, its ids or None)`` of one bin of a document format."""
    import fastenc

    if fmt == "fastenc-bytes":
        raw = path.read_bytes()
        for doc in raw.split(b"\xfe")[1:]:
            yield doc, None
        return
    if fmt == "gpt2":
        # the part's sidecar names its tokenizer, split pattern and dtype (uint32 past 65,535 ids)
        side = path.with_name(path.name[:-4] + ".meta.json")
        meta = json.loads(side.read_text(encoding="utf-8")) if side.is_file() else {}
        enc = fastenc.load(tokenizer or meta.get("tokenizer", "gpt2"),
                           pattern=None if tokenizer else meta.get("tokenizer_pattern"))
        dtype = np.dtype(meta.get("dtype", "uint16")).newbyteorder("<")
        idx = np.load(path.with_name(path.name[:-4] + ".idx.npy"), mmap_mode="r")
        tokens = np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.zeros(0, dtype)
        for i in range(idx.size - 1):
            ids = tokens[idx[i] : idx[i + 1]]
            yield enc.decode_bytes(ids), ids
        return
    meta = json.loads(path.with_name("meta.json").read_text(encoding="utf-8"))
    enc = fastenc.load(tokenizer or meta["tokenizer"])
    ids = np.fromfile(path, dtype=np.dtype(meta["dtype"]).newbyteorder("<"))
    yield enc.decode_bytes(ids), ids


def _print_docs(args, docs, budget: _Budget) -> None:
    out = sys.stdout.buffer
    for text, ids in docs:
        if budget.skip:
            budget.skip -= 1
            continue
        if budget.done():
            return
        if args.ids:
            body = " ".join(str(int(t)) for t in ids).encode() if ids is not None else " ".join(map(str, text)).encode()
        elif args.json:
            body = json.dumps(text.decode("utf-8", "replace"), ensure_ascii=False).encode("utf-8")
        else:
            body = text
        out.write(body + b"\n")
        if budget.left is not None:
            budget.left -= 1


def _decode_url_bin(args, bin_path: Path, budget: _Budget) -> None:
    from fastenc.recipes.urls import iter_decoded
    from fastenc.url_canonical import canonical_bytes

    if not bin_path.with_suffix(".json").is_file() and (bin_path.parent / "tokenizer").is_dir() and not args.tokenizer:
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


def _count_zeros(tokens: np.ndarray) -> int:
    return sum(int(np.count_nonzero(tokens[p : p + _COUNT_STEP] == 0)) for p in range(0, tokens.size, _COUNT_STEP))
