"""The flags that several subcommands share, spelled one way, and sizes such as ``64MiB``.

Not every command takes every one of them (``bytes`` has no ``-t``, ``urls`` no ``--batch-bytes``,
``verify``, ``decode`` and ``card`` few): each command's ``--help`` lists its own.

=================  =================================================================
``-o/--out DIR``   the output directory (every command that writes)
``-t/--tokenizer`` ``gpt2``, ``urls`` or a path to a tokenizer.json (or its folder)
``--column NAME``  the text column; the summary line says which one was used
``--threads N``    Numba threads (default: every core); outputs never depend on it
``--batch-bytes``  read batch size (memory only; outputs never depend on it)
``-q/--quiet``     no progress bar, no summary line
``--json``         print the result (manifest or report) as JSON on stdout
=================  =================================================================
"""
from __future__ import annotations

import argparse
import re

__all__ = ["parse_size", "size_arg", "positive_int", "add_out", "add_tokenizer", "add_column", "add_threads",
           "add_batch_bytes", "add_workers", "add_quiet_json", "add_overwrite", "add_skip_nulls", "print_json"]

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?i?[bB]?)\s*$")
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
          "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30, "gib": 2**30, "ti": 2**40, "tib": 2**40}


def parse_size(text: str) -> int:
    """``'500MB' -> 500_000_000``, ``'64MiB' -> 67108864``, ``'1000' -> 1000`` (decimal units by default)."""
    m = _SIZE_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (use e.g. 500000000, 500MB or 512MiB)")
    return int(float(m.group(1)) * _UNITS[unit])


def size_arg(text: str) -> int:
    """argparse type: a positive size."""
    try:
        n = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte (got {text!r})")
    return n


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {n})")
    return n


def add_out(p, help_text: str) -> None:
    p.add_argument("-o", "--out", required=True, metavar="DIR", help=help_text)


def add_tokenizer(p, default: str, help_text: str | None = None, aliases: tuple[str, ...] = ()) -> None:
    """``-t/--tokenizer`` (``aliases``: older spellings still accepted, e.g. gpt2's ``--encoding``)."""
    p.add_argument("-t", "--tokenizer", *aliases, dest="tokenizer", default=default, metavar="TOKENIZER",
                   help=help_text or f"'gpt2', 'urls' or a path to a tokenizer.json or its folder (default: {default})")


def add_pattern(p, flag: str) -> None:
    p.add_argument("--pattern", default=None, metavar="P",
                   help=f"the split pattern of a .tiktoken file given to {flag} by path: a name (gpt2, cl100k, o200k, "
                        "llama3, llama4, qwen2, tekken, ...) or the regex the model's code passes to tiktoken")


def add_column(p, default_text: str) -> None:
    p.add_argument("--column", default=None, metavar="NAME", help=f"text column (default: {default_text}); the summary line names the one used")


def add_threads(p) -> None:
    p.add_argument("--threads", type=positive_int, default=None, help="Numba threads (default: every core; the output does not depend on it)")


def add_workers(p, units: str = "input files") -> None:
    p.add_argument("--workers", type=positive_int, default=1,
                   help=f"processes encoding {units} at once (default: 1, which uses every core); each gets "
                        "cores/N threads (--threads caps it); an interrupted run resumes: rerun the same command "
                        "(docs/scale.md); the output does not depend on it")


def add_batch_bytes(p, default: int) -> None:
    p.add_argument("--batch-bytes", type=size_arg, default=default,
                   help=f"read batch size, e.g. 64MiB (memory only; the output does not depend on it; default: {default >> 20}MiB)")


def add_skip_nulls(p, what: str = "documents") -> None:
    p.add_argument("--skip-nulls", action="store_true", help=f"leave null {what} out (counted in the manifest) instead of failing")


def add_overwrite(p, what: str) -> None:
    p.add_argument("--overwrite", action="store_true", help=f"replace {what}")


def add_quiet_json(p, json_help: str = "print the manifest as JSON on stdout") -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")
    p.add_argument("--json", action="store_true", help=json_help)


def print_json(obj) -> None:
    import json
    import sys

    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
