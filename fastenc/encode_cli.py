"""``fastenc encode``: encode a text file (or stdin) and print the ids or write a flat bin."""
from __future__ import annotations

import sys
from pathlib import Path

from fastenc.errors import InputError


def add_arguments(p) -> None:
    p.add_argument("input", nargs="?", default="-", help="UTF-8 text file (default: stdin)")
    p.add_argument("-t", "--tokenizer", default="gpt2",
                   help="'gpt2', 'cl100k_base', 'o200k_base', 'urls', or a path to a tokenizer.json or .tiktoken file (default: gpt2)")
    p.add_argument("--pattern", default=None, choices=["cl100k", "o200k", "gpt2"],
                   help="the split pattern of a .tiktoken file given to -t by path")
    p.add_argument("-o", "--output", help="write the ids as a flat little-endian bin here instead of printing them")
    p.add_argument("--decode", action="store_true", help="print each id with the text it stands for")


def run(args) -> int:
    import fastenc
    from fastenc.arrow_io import atomic_output

    if args.input == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(args.input)
        if not path.is_file():
            raise InputError(f"no such file: {path}; pass a UTF-8 text file or '-' for stdin")
        data = path.read_bytes()
    enc = fastenc.load(args.tokenizer, pattern=args.pattern)  # ids: uint16 if they all fit, else uint32
    ids = enc.encode_bytes(data)
    if args.output:
        with atomic_output(args.output) as f:
            f.write(ids.astype(ids.dtype.newbyteorder("<"), copy=False).tobytes())
        print(f"{len(ids)} ids ({ids.dtype}, little-endian) -> {args.output}", file=sys.stderr)
    elif args.decode:
        for tid in ids.tolist():
            print(tid, repr(enc.decode_bytes([tid]).decode("utf-8", errors="backslashreplace")))
    else:
        print(" ".join(map(str, ids.tolist())))
    return 0
