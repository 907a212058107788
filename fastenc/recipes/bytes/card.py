"""The dataset card of a ``fastenc bytes`` output (the shape of ``fineweb-edu-bytes.md``)."""
from __future__ import annotations

from pathlib import Path

from fastenc.card.common import (built_section, plural, check_size, code, layout_block, num, read_json, size_category, table,
                                 yaml_header)
from fastenc.errors import InputError

from fastenc.recipes.bytes import FORMAT, META_NAME as MANIFEST


def _shards(out: Path, meta: dict) -> dict[str, list[dict]]:
    """Per split, its shards as listed in meta.json, each with its size measured on disk."""
    shards = {}
    for split in ("train", "val"):
        listed = meta["splits"][split]["shards"]
        for s in listed:
            check_size(out / s["file"], int(s["bytes"]), MANIFEST)
        shards[split] = listed
    return shards


def render(out: Path) -> str:
    meta = read_json(out / MANIFEST, "the bytes recipe's manifest")
    if meta.get("format") != FORMAT:
        raise InputError(f"{out / MANIFEST} is not a fastenc bytes manifest (format {meta.get('format')!r})")
    try:
        shards = _shards(out, meta)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{out / MANIFEST} is malformed ({type(exc).__name__}: {exc}): run `fastenc verify`") from None
    total = sum(int(s["bytes"]) for split in shards.values() for s in split)
    docs = {split: sum(int(s["documents"]) for s in shards[split]) for split in shards}
    parts = [
        yaml_header({"pretty_name": "Documents as raw UTF-8 bytes (fastenc bytes)", "license": "other",
                     "tags": ["byte-level", "language-modeling", "pretraining", "memmap"],
                     "size_categories": [size_category(total)]}),
        "# Documents as raw UTF-8 bytes",
        "",
        "Documents prepared for **byte-level language modeling**, in the spirit of nanoGPT's "
        "`train.bin` / `val.bin`, with no tokenizer at all: **one `uint8` per UTF-8 byte of text**, "
        f"written by `fastenc bytes` (fastenc {meta.get('fastenc_version', 'unknown')}).",
        "",
        table(["", ""], [
            ("Shards", f"{len(shards['train'])} train, {len(shards['val'])} val"),
            ("Documents", f"{num(docs['train'] + docs['val'])} ({num(docs['train'])} train, {num(docs['val'])} val)"),
            ("Bytes (tokens)", f"{num(total)} ({num(total - docs['train'] - docs['val'])} of text, one separator per document)"),
            ("Vocabulary", "256 byte values: 0..253 text, 254 `<\\|doc\\|>`, 255 reserved (never occurs)"),
            ("Token dtype", "`uint8`"),
        ]),
        _layout(shards),
        _format(meta),
        _usage(meta, shards),
        _verification(meta, shards),
        built_section(meta, "bytes", "fastenc.recipes.bytes.encode_bytes"),
    ]
    return "\n".join(parts).rstrip() + "\n"


def _layout(shards: dict) -> str:
    entries = [("README.md", "this card"), (MANIFEST, "exact counts per split and per shard, the rules, the sources")]
    for split in ("train", "val"):
        entries += [(s["file"], f"{num(s['bytes'])} bytes, {plural(s['documents'], 'document')}") for s in shards[split]]
    return "## Layout\n\n" + layout_block(entries, keep_head=5)


def _format(meta: dict) -> str:
    return "\n".join([
        "## Format",
        "",
        "Flat binary shards of `uint8`, directly memmap-able, no header:",
        "",
        "- Bytes `0..253`: the raw UTF-8 bytes of the text.",
        "- Byte `254`: `<|doc|>`, the document separator (0xFE never occurs in valid UTF-8). Every document "
        "**starts** with one, so every shard starts with 254 and can be read on its own.",
        "- Byte `255`: reserved, never occurs.",
        f"- Val rule: {meta['val_rule']}.",
        f"- Shard rule ({num(meta['shard_bytes'])} bytes): {meta['shard_rule']}.",
        "- A shard's `first_document` in `meta.json` is the global index of its first document, so every "
        "document can be traced back to its source row.",
        "",
    ])


def _usage(meta: dict, shards: dict) -> str:
    first = (shards["train"] or shards["val"] or [None])[0]
    lines = ["## Usage", "", "Run from this folder (or prefix the paths with it):", ""]
    if first is None:
        return "\n".join(lines + [code('import json\n\nmeta = json.load(open("meta.json"))\nprint(meta["documents"], "documents")', "python")])
    split = "train" if shards["train"] else "val"
    snippet = f'''import json
import numpy as np

meta = json.load(open("meta.json"))
shard = np.memmap("{first['file']}", dtype=np.uint8, mode="r")
assert len(shard) == meta["splits"]["{split}"]["shards"][0]["bytes"]

# random crop as a training example
x = shard[:8192]

# decode back to text: every document starts with byte 254
docs = bytes(shard[:1_000_000]).split(b"\\xfe")[1:]
print(len(docs), "documents;", docs[0].decode("utf-8", errors="replace")[:200])'''
    return "\n".join(lines + [code(snippet, "python")])


def _verification(meta: dict, shards: dict) -> str:
    n_shards = len(shards["train"]) + len(shards["val"])
    rows = sum(int(s["rows"]) for s in meta.get("sources", []))
    return "\n".join([
        "## Verification",
        "",
        f"- All {n_shards} shards were fsynced, re-read from disk and their xxh3_64 compared with the bytes "
        "written (each shard's `xxh3_64` is in `meta.json`); their sizes on disk match `meta.json` (checked "
        "again when this card was written).",
        f"- Documents written: {num(meta['documents'])}, equal to the {num(rows)} rows the inputs' parquet "
        f"footers announce less {num(meta.get('null_documents_skipped', 0))} null(s) skipped.",
        f"- Text bytes: {num(meta['text_bytes'])} written of {num(meta['source_text_bytes'])} read; bytes 254/255 "
        f"stripped: {num(meta['stripped_bytes'])} (in {num(meta['documents_with_stripped_bytes'])} document(s)); "
        f"documents that are not valid UTF-8: {num(meta.get('invalid_utf8_documents', 0))}.",
        "- `fastenc verify OUT [--source INPUT...]` re-checks all of this from the files alone (and against the source).",
        "",
    ])
