"""The URL recipe's output format: file names, sidecar constants and the rules a bin follows.

Shared by the recipe (``fastenc.recipes.urls``), its read-back check and ``fastenc verify``
(``fastenc.recipes.urls.verify``); see ``../shared/seeds/urls-tokenized.md`` and docs/urls.md.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

FORMAT = "fastenc-urls"
FORMAT_VERSION = 1
EOS_TOKEN = "<eos>"
TOKENIZER_DIR = "tokenizer"
# Files copied from the tokenizer's folder to OUT/tokenizer/ (those that exist).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "training_meta.json", "special_tokens_map.json", "README.md")
_PART_RE = re.compile(r"part-(\d+)")
_SIDECAR_RE = re.compile(r"^tokens-s(\d{5,})\.json$")
_BIN_RE = re.compile(r"^tokens-s(\d{5,})\.bin$")

SHARD_RULE = "floor(xxh3_64(url) * num_shards / 2**64) == shard, url = the original URL's bytes (not canonical)"
ORDER_RULE = "xxh3_64(url) ascending over the original URL's bytes; equal hashes in source row order"
LAYOUT = "each URL is [eos_token_id] ++ ids of canonical(url); decode, then apply canonical() once to get the URL back"


def bin_name(shard: int) -> str:
    return f"tokens-s{shard:05d}.bin"


def sidecar_name(shard: int) -> str:
    return f"tokens-s{shard:05d}.json"


def sidecar_paths(out: Path) -> list[Path]:
    """The sidecars in the output folder ``out``, by name: one per committed shard."""
    return sorted(p for p in out.iterdir() if _SIDECAR_RE.match(p.name))


def uncommitted_bins(out: Path) -> list[str]:
    """The bins in ``out`` without their sidecar: a run killed between the bin's rename and the
    sidecar's (the commit) left them, and they are never output (docs/atomic-output.md). The one
    rule that verify, decode and the dataset card apply."""
    return sorted(p.name for p in out.iterdir() if _BIN_RE.match(p.name) and not p.with_suffix(".json").is_file())


def shard_from_name(path: str | os.PathLike) -> int | None:
    """The shard index in a file name such as ``part-00042.parquet`` (the last ``part-NNNNN``), or None."""
    found = _PART_RE.findall(Path(path).name)
    return int(found[-1]) if found else None


# How a URL is quoted in error messages (shortened, never failing on invalid UTF-8).
def show_bytes(url: bytes, limit: int = 160) -> str:
    text = url.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + "...")
