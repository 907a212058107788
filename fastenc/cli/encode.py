"""``fastenc encode``: encode a text file (or stdin) and print the ids, or write them to -o DIR.

``-o DIR`` writes ``DIR/ids.bin`` (flat little-endian ids, uint16 when every id fits, else
uint32) and ``DIR/meta.json`` through the same run skeleton as the recipes: the folder appears
whole, a rerun of the same request does nothing, another one needs ``--overwrite``.
"""
from __future__ import annotations

import sys
from pathlib import Path

from fastenc.recipes import options as o
from fastenc.errors import InputError
from fastenc.recipes.ids import IDS_BIN, META, write_ids

HELP = "encode a text file (or stdin) and print the ids, or write them to -o DIR"


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


def run(args, command: dict | None = None) -> int:
    import fastenc
    from fastenc.run.lifecycle import thread_count

    data, path = _read_input(args.input)
    enc = fastenc.load(args.tokenizer, pattern=args.pattern)  # ids: uint16 if they all fit, else uint32
    with thread_count(args.threads):
        ids = enc.encode_bytes(data)
    if args.out:
        meta = write_ids(ids, enc, args.out, path, data, args.tokenizer, overwrite=args.overwrite, quiet=args.quiet,
                         pattern=args.pattern, command=command)
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
