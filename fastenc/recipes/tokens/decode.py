"""``fastenc decode`` of a tokens output: every shard (val first), each document's text without its
delimiters (``--ids``: the ids as stored, delimiters included)."""
from __future__ import annotations

from pathlib import Path

from fastenc.recipes.decoding import document_decoder
from fastenc.recipes.tokens import read_tokens
from fastenc.recipes.tokens.layout import data_file
from fastenc.recipes.tokens.manifest import base_of, delimiters, load, owner, shards


def bins(out: Path) -> list[Path]:
    m = load(out)
    return [out / data_file(m["trainer_format"], s["base"]) for _, s in shards(m)]


def is_bin(path: Path) -> bool:
    return path.suffix in (".bin", ".ds", ".idx") and owner(path) is not None


def documents(path: Path, tokenizer: str | None):
    from fastenc.recipes.tokens.build import load_tokenizer

    m = load(owner(path))
    delims = delimiters(m)
    tok = m["tokenizer"]
    enc = load_tokenizer(tokenizer or tok["name"], None if tokenizer else tok["pattern"])
    docs = read_tokens(m["trainer_format"], base_of(path), delims)
    for i in range(docs.n_docs):
        ids = docs.document(i)
        yield enc.decode_bytes(delims.strip(ids)), ids


decode_dir, decode_bin = document_decoder(bins, documents)
