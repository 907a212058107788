"""``fastenc encode``: encode a text file (or stdin) and print the ids, or write them to -o DIR.

``-o DIR`` writes ``DIR/ids.bin`` (flat little-endian ids, uint16 when every id fits, else
uint32) and ``DIR/meta.json`` through the same run skeleton as the recipes: the folder appears
whole, a rerun of the same request does nothing, another one needs ``--overwrite``.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from fastenc.cli import options as o
from fastenc.errors import InputError

HELP = "encode a text file (or stdin) and print the ids, or write them to -o DIR"
FORMAT = "fastenc-ids"
IDS_BIN = "ids.bin"
META = "meta.json"


def add_arguments(p) -> None:
    p.add_argument("input", nargs="?", default="-", help="UTF-8 text file (default: stdin)")
    o.add_tokenizer(p, "gpt2", "'gpt2', 'cl100k_base', 'o200k_base', 'urls', or a path to a tokenizer.json (or its folder) "
                    "or a .tiktoken file (default: gpt2)")
    o.add_pattern(p, "-t")
    p.add_argument("-o", "--out", metavar="DIR", default=None,
                   help=f"write {IDS_BIN} (flat little-endian ids) and {META} into this directory instead of printing")
    p.add_argument("--decode", action="store_true", help="print each id with the text it stands for")
    o.add_threads(p)
    p.add_argument("--overwrite", action="store_true", help="replace an earlier output in DIR")
    o.add_quiet_json(p, "print the ids (or, with -o, meta.json) as JSON on stdout")


def _read_input(name: str) -> tuple[bytes, Path | None]:
    if name == "-":
        return sys.stdin.buffer.read(), None
    path = Path(name)
    if not path.is_file():
        raise InputError(f"no such file: {path}; pass a UTF-8 text file or '-' for stdin")
    return path.read_bytes(), path


def run(args) -> int:
    import fastenc
    from fastenc.run.lifecycle import thread_count

    data, path = _read_input(args.input)
    enc = fastenc.load(args.tokenizer, pattern=args.pattern)  # ids: uint16 if they all fit, else uint32
    with thread_count(args.threads):
        ids = enc.encode_bytes(data)
    if args.out:
        meta = write_ids(ids, enc, args.out, path, data, args.tokenizer, overwrite=args.overwrite, quiet=args.quiet,
                         pattern=args.pattern)
        if args.json:
            o.print_json(meta)
    elif args.json:
        o.print_json(ids.tolist())
    elif args.decode:
        for tid in ids.tolist():
            print(tid, repr(enc.decode_bytes([tid]).decode("utf-8", errors="backslashreplace")))
    else:
        print(" ".join(map(str, ids.tolist())))
    return 0


def _spec():
    from fastenc.run import OutputSpec

    return OutputSpec(recipe="encode", format=FORMAT, manifest=META, files_of=lambda m: [(IDS_BIN, m["bytes"])],
                      is_own=lambda name: name in (IDS_BIN, META))


def write_ids(ids, enc, out, path: Path | None, data: bytes, tokenizer: str, *, overwrite: bool = False, quiet: bool = False,
              pattern: str | None = None) -> dict:
    """Write ``ids`` as ``out/ids.bin`` + ``out/meta.json``, published in one step. ``pattern``:
    the split of a .tiktoken file given by path, recorded so that ``verify`` loads it the same way."""
    from fastenc import __version__
    from fastenc.progress import summary_line
    from fastenc.run import Run, make_request

    options = {"tokenizer": str(tokenizer), "input_sha256": hashlib.sha256(data).hexdigest()}
    if pattern is not None:  # (requests without one are unchanged)
        options["pattern"] = pattern
    request = make_request("encode", [path] if path else [], options, enc.sha256)
    raw = ids.astype(ids.dtype.newbyteorder("<"), copy=False).tobytes()
    with Run(_spec(), out, request, overwrite=overwrite) as run:
        if run.done is not None:
            summary_line(f"fastenc encode: {run.out} already holds these ids; nothing to do", quiet=quiet)
            return run.done
        run.stage.write_bytes(IDS_BIN, raw)
        meta = {"format": FORMAT, "fastenc_version": __version__, "file": IDS_BIN, "ids": int(ids.size), "bytes": len(raw),
                "dtype": str(ids.dtype), "byteorder": "little", "tokenizer": str(tokenizer), "tokenizer_sha256": enc.sha256,
                **({"tokenizer_pattern": pattern} if pattern is not None else {}),
                "source": str(path) if path else "-", "request": request}
        run.publish(meta)
    summary_line(f"fastenc encode: {ids.size:,} ids ({ids.dtype}, little-endian) -> {run.out / IDS_BIN}", quiet=quiet)
    return meta


def verify_output(out_dir: Path, source=None) -> dict:
    """``fastenc verify DIR`` for ``encode -o DIR``: the ids file has the size, dtype and ids the
    meta records, and every id is below the tokenizer's vocabulary size."""
    from fastenc.verify import checked

    return checked(FORMAT, out_dir, META, _verify)


def _verify(out_dir: Path, report: dict) -> None:
    import json

    import numpy as np

    import fastenc

    meta = json.loads((out_dir / META).read_text(encoding="utf-8"))
    ids = np.fromfile(out_dir / IDS_BIN, dtype=np.dtype(meta["dtype"]).newbyteorder("<"))
    if ids.nbytes != meta["bytes"] or ids.size != meta["ids"]:
        report["problems"].append(f"{IDS_BIN} holds {ids.size} ids ({ids.nbytes} bytes), {META} says {meta['ids']} ({meta['bytes']})")
    enc = fastenc.load(meta["tokenizer"], pattern=meta.get("tokenizer_pattern"))
    if ids.size and int(ids.max()) >= enc.vocab_size:
        report["problems"].append(f"{IDS_BIN} holds id {int(ids.max())}, not below the vocabulary size {enc.vocab_size}")
    report.update(ids=int(ids.size))
