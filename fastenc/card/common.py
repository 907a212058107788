"""Shared rendering of a dataset card: the YAML header, tables, code blocks and numbers.

A card is plain Markdown assembled from sections; everything in it is computed from the output's
files, so rendering twice gives the same bytes (no dates, no timings, no absolute paths of the
machine that renders it, only those the manifest recorded).
"""
from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Iterable, Sequence

from fastenc.errors import InputError

__all__ = ["yaml_header", "table", "code", "num", "size_category", "layout_block", "read_json", "built_section",
           "check_size", "ranges", "plural"]

# Hugging Face's size buckets (the cards in ../shared/seeds/ size them by tokens, or bytes).
_SIZE_EDGES = [(10**3, "n<1K"), (10**4, "1K<n<10K"), (10**5, "10K<n<100K"), (10**6, "100K<n<1M"),
               (10**7, "1M<n<10M"), (10**8, "10M<n<100M"), (10**9, "100M<n<1B"), (10**10, "1B<n<10B"),
               (10**11, "10B<n<100B"), (10**12, "100B<n<1T")]


def size_category(n: int) -> str:
    for edge, name in _SIZE_EDGES:
        if n < edge:
            return name
    return "n>1T"


def num(n: int) -> str:
    """``1234567 -> '1,234,567'``."""
    return f"{int(n):,}"


def plural(n: int, word: str) -> str:
    """``plural(1, 'document') -> '1 document'``, ``plural(3, 'document') -> '3 documents'``."""
    return f"{num(n)} {word}" if int(n) == 1 else f"{num(n)} {word}s"


def yaml_header(fields: dict) -> str:
    """The card's front matter: scalars as ``key: value``, lists as ``- item`` lines."""
    lines = ["---"]
    for key, value in fields.items():
        if isinstance(value, (list, tuple)):
            lines.append(f"{key}:")
            lines += [f"- {item}" for item in value]
        else:
            lines.append(f"{key}: {value}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(text: str, lang: str = "") -> str:
    return f"```{lang}\n{text.rstrip()}\n```\n"


def layout_block(entries: list[tuple[str, str]], keep_head: int = 4) -> str:
    """A ``text`` block listing files and what they hold; long runs of alike files are elided."""
    if len(entries) > keep_head + 2:
        entries = entries[:keep_head] + [("...", "")] + entries[-1:]
    width = max(len(name) for name, _ in entries) + 2
    return code("\n".join(f"{name:<{width}}{what}".rstrip() for name, what in entries), "text")


def ranges(values: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'``."""
    out, vals = [], sorted(values)
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ", ".join(out)


def read_json(path: Path, what: str) -> dict:
    """A manifest or sidecar, or one line saying why it cannot be read."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path} is missing: {what}; is this the folder a fastenc recipe wrote (-o)?") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} ({exc}): {what}; run `fastenc verify` on the folder") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path} is not a JSON object: {what}; run `fastenc verify` on the folder")
    return obj


def check_size(path: Path, expected_bytes: int, manifest: str) -> int:
    """The file's size, which must be what the manifest says (else the card would state false counts)."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        raise InputError(f"{path} is missing but {manifest} lists it: the output is incomplete; run `fastenc verify`") from None
    if size != expected_bytes:
        raise InputError(f"{path} holds {size:,} bytes but {manifest} says {expected_bytes:,}: the output was changed "
                         "after it was written; run `fastenc verify`")
    return size


def built_section(manifest: dict, recipe: str, api: str) -> str:
    """"How it was built": the exact command line (recorded by the CLI in ``build.command``),
    the fastenc version, and the request's options."""
    build = manifest.get("build") if isinstance(manifest.get("build"), dict) else {}
    command = build.get("command")
    version = manifest.get("fastenc_version") or (manifest.get("request") or {}).get("fastenc_version", "unknown")
    request = manifest.get("request") or {}
    lines = ["## How it was built", ""]
    if command:
        lines += [f"With fastenc {version}, from the folder `{build.get('cwd', '.')}`:", "", code(shlex.join(command), "bash")]
    else:
        lines += [f"With fastenc {version}, through the Python API (`{api}`; no command line was recorded), "
                  "with the inputs and options below.", ""]
    sources = request.get("sources") or []
    if sources:
        lines += ["Inputs (path, bytes; the request records their mtimes too):", ""]
        lines += [f"- `{s[0]}` ({num(s[1])} bytes)" for s in sources[:20]]
        if len(sources) > 20:
            lines.append(f"- ... {len(sources) - 20} more (listed in the manifest's `request.sources`)")
        lines.append("")
    options = request.get("options") or {}
    if options:
        lines += ["Options: " + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in options.items()), ""]
    if request.get("tokenizer_sha256"):
        lines += [f"Tokenizer sha256: `{request['tokenizer_sha256']}`.", ""]
    lines += [f"Rerunning the same `fastenc {recipe}` request finds this output and does nothing; `fastenc card OUT` "
              "rewrites this card from the output's files; `fastenc verify OUT` re-checks the output.", ""]
    return "\n".join(lines)
