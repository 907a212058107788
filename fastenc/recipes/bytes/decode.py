"""``fastenc decode`` of a bytes output: every shard, train then val, each document between 0xFE bytes."""
from __future__ import annotations

import json
import re
from pathlib import Path

from fastenc.recipes.bytes import META_NAME, SEPARATOR, SPLITS
from fastenc.recipes.decoding import document_decoder


def bins(out: Path) -> list[Path]:
    meta = json.loads((out / META_NAME).read_text(encoding="utf-8"))
    return [out / s["file"] for split in SPLITS for s in meta["splits"][split]["shards"]]


def is_bin(path: Path) -> bool:
    return re.match(r"^(train|val)_\d+\.bin$", path.name) is not None


def documents(path: Path, tokenizer: str | None):
    for doc in path.read_bytes().split(bytes([SEPARATOR]))[1:]:
        yield doc, None


decode_dir, decode_bin = document_decoder(bins, documents)
