"""The dataset card of a ``fastenc gpt2`` output (the shape of ``gpt2-long-context.md``)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from fastenc.card.common import (built_section, plural, check_size, code, layout_block, num, read_json, size_category, table,
                                 yaml_header)
from fastenc.errors import InputError

from fastenc.recipes.gpt2.format import FORMAT, SUMMARY_JSON as MANIFEST


def _idx_docs(path: Path) -> int:
    """Documents in a part, from its ``.idx.npy`` header alone (``ndocs + 1`` offsets)."""
    try:
        with open(path, "rb") as f:
            npy_format.read_magic(f)
            shape, _, _ = npy_format.read_array_header_1_0(f)
    except FileNotFoundError:
        raise InputError(f"{path} is missing but {MANIFEST} lists its part: run `fastenc verify`") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not a valid .npy file ({exc}): run `fastenc verify`") from None
    return int(shape[0]) - 1


def _parts(out: Path, summary: dict) -> list[dict]:
    """Every part of the kept buckets, with its documents and tokens measured from its files."""
    item = np.dtype(summary["dtype"]).itemsize
    parts = []
    for bucket in summary["kept_buckets"]:
        for part in summary["buckets"][bucket]["parts"]:
            stem = part["stem"]
            size = check_size(out / f"{stem}.bin", item * int(part["tokens"]), MANIFEST)
            docs = _idx_docs(out / f"{stem}.idx.npy")
            if docs != int(part["docs"]):
                raise InputError(f"{out / stem}.idx.npy indexes {docs} documents but {MANIFEST} says {part['docs']}: "
                                 "run `fastenc verify`")
            parts.append({"bucket": bucket, "stem": stem, "docs": docs, "tokens": size // item})
    return parts


def render(out: Path) -> str:
    summary = read_json(out / MANIFEST, "the gpt2 recipe's summary")
    if summary.get("format") != FORMAT:
        raise InputError(f"{out / MANIFEST} is not a fastenc gpt2 summary (format {summary.get('format')!r})")
    try:
        parts = _parts(out, summary)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{out / MANIFEST} is malformed ({type(exc).__name__}: {exc}): run `fastenc verify`") from None
    docs = sum(p["docs"] for p in parts)
    tokens = sum(p["tokens"] for p in parts)
    name = summary["tokenizer"]
    short = name if "/" not in name else Path(name).name
    sections = [
        yaml_header({"pretty_name": f"Documents tokenized with {short}, bucketed by length (fastenc gpt2)",
                     "license": "other", "task_categories": ["text-generation"],
                     "tags": [short, "tokenized", "long-context", "pretraining", "memmap"],
                     "size_categories": [size_category(tokens)]}),
        f"# Documents tokenized with {short}, bucketed by length",
        "",
        f"Documents encoded with **{short}** ({summary['encoding']}), stored as flat `{summary['dtype']}` token "
        f"streams with an `int64` offset index per part, grouped into buckets by token count; written by "
        f"`fastenc gpt2` (fastenc {summary.get('fastenc_version', 'unknown')}).",
        "",
        table(["", ""], [
            ("Buckets", ", ".join(f"`{b}`" for b in summary["kept_buckets"])),
            ("Parts", num(len(parts))),
            ("Documents", num(docs)),
            ("Tokens", num(tokens)),
            ("Vocabulary", f"{num(summary['vocab_size'])} ({short})"),
            ("Token dtype", f"`{summary['dtype']}`, little-endian; index `int64`"),
        ]),
        _buckets(summary, parts),
        _layout(summary, parts),
        _format(summary),
        _usage(summary, parts),
        _verification(summary, parts),
        built_section(summary, "gpt2", "fastenc.recipes.gpt2.encode_gpt2"),
    ]
    return "\n".join(sections).rstrip() + "\n"


def _buckets(summary: dict, parts: list[dict]) -> str:
    rows = []
    for bucket, info in summary["buckets"].items():
        mine = [p for p in parts if p["bucket"] == bucket]
        hi = info["max_tokens"]
        rng = f"{num(info['min_tokens'])} <= n < {num(hi)}" if hi is not None else f"n >= {num(info['min_tokens'])}"
        if info["kept"]:
            rows.append((f"`{bucket}`", rng, len(mine), num(sum(p["docs"] for p in mine)), num(sum(p["tokens"] for p in mine))))
        else:
            rows.append((f"`{bucket}`", rng, "not published", num(info["docs"]), num(info["tokens"])))
    return "## Buckets\n\n" + table(["bucket", "tokens per document", "parts", "documents", "tokens"], rows)


def _layout(summary: dict, parts: list[dict]) -> str:
    entries = [("README.md", "this card"), (MANIFEST, "documents and tokens per bucket, checks, sources, the request"),
               ("summary.tsv", "the same counts as a table")]
    dtype = summary["dtype"]
    for p in parts:
        entries += [(f"{p['stem']}.bin", f"{dtype} ids, {num(p['tokens'])} tokens"),
                    (f"{p['stem']}.idx.npy", f"int64 offsets, {num(p['docs'])} documents + 1"),
                    (f"{p['stem']}.meta.json", "the part's counts and verification counters")]
    return "## Layout\n\n" + layout_block(entries, keep_head=6)


def _format(summary: dict) -> str:
    return "\n".join([
        "## Format",
        "",
        "| file | dtype | contents |",
        "|---|---|---|",
        f"| `part_XX.bin` | `{summary['dtype']}` | token ids, documents concatenated, no separator |",
        "| `part_XX.idx.npy` | `int64` | cumulative offsets, length `ndocs + 1`, `idx[0] == 0` |",
        "| `part_XX.meta.json` | - | the part's document and token counts, sources, verification counters |",
        "",
        f"- Encoding: {summary['encoding']}.",
        "- **No separator is inserted.** Document boundaries are carried exactly by the index, so a packing "
        "step must insert its own delimiter if it needs one.",
        f"- Part rule ({num(summary['part_tokens'])} tokens): {summary['part_rule']}.",
        "- Empty documents (0 tokens) are not stored (they would break the strictly increasing index): "
        f"{num(summary.get('empty_documents_skipped', 0))} skipped.",
        "",
    ])


def _usage(summary: dict, parts: list[dict]) -> str:
    lines = ["## Usage", "", "Run from this folder (or prefix the paths with it):", ""]
    if not parts:
        return "\n".join(lines + [code('import json\n\nsummary = json.load(open("summary.json"))\nprint(summary["kept"])', "python")])
    p = parts[0]
    load_args = json.dumps(summary["tokenizer"])
    if summary.get("tokenizer_pattern"):  # a .tiktoken rank file: its split pattern is named
        load_args += f", pattern={json.dumps(summary['tokenizer_pattern'])}"
    note = ("  # or tiktoken.get_encoding(...) of the same name: the same ids, the same text"
            if summary["tokenizer"] in ("gpt2", "cl100k_base", "o200k_base") else "")
    snippet = f'''import numpy as np

stem = "{p['stem']}"
idx = np.load(stem + ".idx.npy")                            # int64, ndocs + 1
tok = np.memmap(stem + ".bin", dtype=np.{summary['dtype']}, mode="r")  # the token stream
n_docs = len(idx) - 1
doc_0 = tok[idx[0]:idx[1]]  # document 0 as an array of token ids

import fastenc{note}
enc = fastenc.load({load_args})
print(n_docs, "documents;", enc.decode(doc_0.tolist())[:200])'''
    iterate = '''for i in range(len(idx) - 1):
    doc = tok[idx[i]:idx[i + 1]]'''
    return "\n".join(lines + [code(snippet, "python"), "To iterate every document of a part:", "", code(iterate, "python")])


def _verification(summary: dict, parts: list[dict]) -> str:
    checks = summary["checks"]
    if checks.get("count_column"):
        counted = (f"- Every document's token count was compared with the source's `{checks['count_column']}` column: "
                   f"**{num(checks['count_mismatches'])} mismatches across {num(checks['count_checked'])} documents** "
                   f"({num(checks['count_checked_kept'])} of them in the published buckets).")
    else:
        counted = ("- No token counts were compared with the source: it had no count column for this encoding "
                   "(`gpt2_tokens` counts GPT-2 tokens; `--count-column` names another).")
    return "\n".join([
        "## Verification",
        "",
        counted,
        f"- Documents and tokens per bucket are in `summary.json` / `summary.tsv`; of {num(summary['documents_read'])} "
        f"documents read, {num(summary['kept']['docs'])} are published here ({num(summary['null_documents_skipped'])} "
        f"null(s) and {num(summary['empty_documents_skipped'])} empty skipped, "
        f"{num(summary.get('invalid_utf8_documents', 0))} not valid UTF-8).",
        f"- Index integrity checked on every one of the {num(checks['parts_checked'])} parts, re-read from disk: "
        "`len(bin) == idx[-1]`, `idx[0] == 0`, `idx` strictly increasing, every document inside its bucket's range, "
        f"`max(token_id) < {num(summary['vocab_size'])}`, the bytes read equal the bytes written (xxh3_64).",
        f"- Exact text round trip: {num(checks['roundtrip_checked'])} sampled documents (each part's first and every "
        f"{num(summary['decode_every'])}th of each bucket) decoded back from disk and compared byte for byte with the "
        f"source: {num(checks['roundtrip_mismatches'])} mismatches.",
        f"- The {num(len(parts))} parts' sizes and indexes match `summary.json` (checked again when this card was written).",
        "- `fastenc verify OUT [--source INPUT...]` re-checks all of this from the files alone (and against the source).",
        "",
    ])
