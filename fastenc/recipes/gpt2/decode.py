"""``fastenc decode`` of a gpt2 output: every part of the kept buckets, each document decoded."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fastenc.recipes.decoding import document_decoder
from fastenc.recipes.gpt2.format import SUMMARY_JSON


def bins(out: Path) -> list[Path]:
    summary = json.loads((out / SUMMARY_JSON).read_text(encoding="utf-8"))
    return [out / f"{part['stem']}.bin" for name in summary["kept_buckets"] for part in summary["buckets"][name]["parts"]]


def is_bin(path: Path) -> bool:
    return path.with_name(path.name[:-4] + ".idx.npy").is_file()


def documents(path: Path, tokenizer: str | None):
    """``(document bytes, ids)`` of one part."""
    import fastenc

    # the part's sidecar names its tokenizer, split pattern and dtype (uint32 past 65,535 ids)
    side = path.with_name(path.name[:-4] + ".meta.json")
    meta = json.loads(side.read_text(encoding="utf-8")) if side.is_file() else {}
    enc = fastenc.load(tokenizer or meta.get("tokenizer", "gpt2"),
                       pattern=None if tokenizer else meta.get("tokenizer_pattern"))
    dtype = np.dtype(meta.get("dtype", "uint16")).newbyteorder("<")
    idx = np.load(path.with_name(path.name[:-4] + ".idx.npy"), mmap_mode="r")
    tokens = np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.zeros(0, dtype)
    for i in range(idx.size - 1):
        ids = tokens[idx[i] : idx[i + 1]]
        yield enc.decode_bytes(ids), ids


decode_dir, decode_bin = document_decoder(bins, documents)
