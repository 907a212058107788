"""What every recipe's decoder shares (``fastenc decode``): ``--start``/``--limit`` across bins, and
printing documents as raw bytes, JSON strings or ids."""
from __future__ import annotations

import json
import sys
from pathlib import Path


class Budget:
    """--start and --limit across several bins."""

    def __init__(self, start: int, limit: int | None):
        self.skip = start
        self.left = limit

    def done(self) -> bool:
        return self.left is not None and self.left <= 0


def print_docs(args, docs, budget: Budget) -> None:
    """Print ``(document bytes, its ids or None)`` items, one a line, within ``budget``."""
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


def document_decoder(bins_of, docs_of):
    """``(decode_dir, decode_bin)`` of a document format: ``bins_of(out) -> [Path]`` in order, and
    ``docs_of(path, tokenizer) -> (bytes, ids or None)...`` of one bin."""

    def decode_dir(args, out: Path, budget: Budget) -> None:
        for p in bins_of(out):
            if budget.done():
                return
            print_docs(args, docs_of(p, args.tokenizer), budget)

    def decode_bin(args, path: Path, budget: Budget) -> None:
        print_docs(args, docs_of(path, args.tokenizer), budget)

    return decode_dir, decode_bin
