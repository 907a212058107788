"""``fastenc decode`` of an ``encode -o DIR`` output: the whole text of ``ids.bin``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fastenc.recipes.decoding import document_decoder
from fastenc.recipes.ids import FORMAT, META


def bins(out: Path) -> list[Path]:
    return [out / json.loads((out / META).read_text(encoding="utf-8"))["file"]]


def is_bin(path: Path) -> bool:
    meta = path.with_name(META)
    return meta.is_file() and f'"{FORMAT}"' in meta.read_text(encoding="utf-8")


def documents(path: Path, tokenizer: str | None):
    import fastenc

    meta = json.loads(path.with_name(META).read_text(encoding="utf-8"))
    enc = fastenc.load(tokenizer or meta["tokenizer"])
    ids = np.fromfile(path, dtype=np.dtype(meta["dtype"]).newbyteorder("<"))
    yield enc.decode_bytes(ids), ids


decode_dir, decode_bin = document_decoder(bins, documents)
