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

import os
import sys
from pathlib import Path

from fastenc.errors import InputError, UsageError

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


def run(args, command: dict | None = None) -> int:  # (command: how it was started; only writers record it)
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


def _decode_dir(args, out: Path) -> None:
    from fastenc.recipes.decoding import Budget
    from fastenc.recipes.registry import detect

    fmt = detect(out)
    fmt.decode_dir(args, out, Budget(args.start, args.limit))


def _decode_file(args, path: Path) -> None:
    from fastenc.recipes.decoding import Budget
    from fastenc.recipes.registry import formats

    fmt = next((f for f in formats() if f.is_bin is not None and f.is_bin(path)), None)
    if fmt is None:
        raise InputError(f"{path} is not a bin fastenc knows (tokens-sNNNNN.bin, <bucket>/part_NN.bin with its .idx.npy, "
                         "train_/val_NNNNN.bin, or ids.bin of 'encode -o'): pass one of those or the output directory")
    fmt.decode_bin(args, path, Budget(args.start, args.limit))
