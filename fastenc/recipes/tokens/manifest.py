"""Reading a tokens output back: its manifest, its delimiters and each shard's documents."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fastenc.errors import InputError
from fastenc.recipes.tokens import read_tokens
from fastenc.recipes.tokens.delimit import Delimiters
from fastenc.recipes.tokens.layout import FORMAT, MANIFEST, SPLITS


def load(out: Path) -> dict:
    try:
        m = json.loads((Path(out) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {Path(out) / MANIFEST}: {exc}; pass the folder given to fastenc tokens -o") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise InputError(f"{Path(out) / MANIFEST} is not a fastenc tokens manifest")
    return m


def delimiters(m: dict) -> Delimiters:
    d = m["delimiters"]
    return Delimiters(d["bos_id"], d["eos_id"], d["bos"], d["eos"], d["n_ids"], np.dtype(d["dtype"]), d["format"],
                      d["family"], d["source"])


def shards(m: dict):
    """``(split, shard)`` in file order: val first, as llm.c numbers them."""
    return [(split, s) for split in SPLITS for s in m["splits"][split]["shards"]]


def owner(path: Path) -> Path | None:
    """The output folder holding the shard file ``path`` (datatrove's are one folder down)."""
    for folder in (path.parent, path.parent.parent):
        if (folder / MANIFEST).is_file():
            return folder
    return None


def base_of(path: Path) -> str:
    name = str(path)
    for suffix in (".ds.index", ".ds.metadata", ".ds", ".bin", ".idx"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
