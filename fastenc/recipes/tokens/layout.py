"""The ``fastenc tokens`` output's names and rules: manifest, shard names per format, the val rule,
the shard rules and the shuffle (what the writer, verify, decode and the card share)."""
from __future__ import annotations

import re

import numpy as np

FORMAT = "fastenc-tokens"
FORMAT_VERSION = 1
MANIFEST = "tokens.json"
#: llm.c numbers its shards val first (``fineweb_val_000000.bin``, then train from 000001)
SPLITS = ("val", "train")
LLMC_NAME = "data"
DEFAULT_LLMC_SHARD_TOKENS = 100_000_000  # llm.c's fineweb.py shard_size
DEFAULT_LLMC_VAL_EVERY = 1000  # modded-nanogpt and llm.c read a val file: llm.c gets one by default
DEFAULT_BATCH_BYTES = 8 << 20
TEXT_CANDIDATES = ("text", "content")

_MEGATRON_RE = re.compile(r"^(train|val)_\d{5,}_text_document\.(bin|idx)$")
_LLMC_RE = re.compile(rf"^{LLMC_NAME}_(train|val)_\d{{6,}}\.bin$")


def shard_base(fmt: str, split: str, index: int) -> str:
    """The shard's base path relative to OUT: Megatron's ``preprocess_data.py`` prefix
    (``..._text_document``), a folder per split for datatrove (``DatatroveFolderDataset`` reads every
    ``.ds`` of a folder), llm.c's ``NAME_split_NNNNNN``."""
    if fmt == "megatron":
        return f"{split}_{index:05d}_text_document"
    if fmt == "datatrove":
        return f"{split}/{index:05d}"
    return f"{LLMC_NAME}_{split}_{index:06d}"


def data_file(fmt: str, base: str) -> str:
    """The file of a shard that holds its ids (hashed in the manifest)."""
    return base + (".ds" if fmt == "datatrove" else ".bin")


def is_own(name: str) -> bool:
    """A top-level entry of OUT that a tokens output owns."""
    return name == MANIFEST or name in ("train", "val") or bool(_MEGATRON_RE.match(name) or _LLMC_RE.match(name))


def is_val(i, val_every: int):
    """Document ``i`` (0-based, in input order over all inputs) goes to val iff ``i % k == k - 1``."""
    if val_every == 0:
        return np.zeros_like(i, dtype=bool) if isinstance(i, np.ndarray) else False
    return i % val_every == val_every - 1


def global_index(split: str, ordinal, val_every: int):
    """The input-order index of the ``ordinal``-th document of ``split`` (inverse of the val rule)."""
    if val_every == 0:
        return ordinal
    if split == "val":
        return ordinal * val_every + val_every - 1
    return ordinal + ordinal // (val_every - 1)


def split_sizes(n_docs: int, val_every: int) -> dict:
    n_val = n_docs // val_every if val_every else 0
    return {"val": n_val, "train": n_docs - n_val}


def val_rule_text(val_every: int) -> str:
    if val_every == 0:
        return "no val split: every document goes to train"
    return (f"document i (0-based, in input order over all inputs) goes to val iff i % {val_every} == "
            f"{val_every - 1}: the {val_every}th, {2 * val_every}th, ... document")


def shard_rule_text(fmt: str, shard_tokens: int | None) -> str:
    if shard_tokens is None:
        return "one shard per split, documents whole"
    if fmt == "llmc":
        return (f"every shard but the last of a split holds exactly {shard_tokens:,} tokens; a document may "
                "continue in the next shard (llm.c's fineweb.py)")
    return (f"a document goes into the open shard if the shard is empty or the document (delimiters included) "
            f"still fits within {shard_tokens:,} tokens, else it starts the next shard; documents stay whole")


def order(n: int, seed: int | None, split: str) -> np.ndarray:
    """The input-order ordinals of a split's documents in output order: as read, or a permutation
    drawn from the seed and the split's name alone (so any --workers/--threads give the same)."""
    if seed is None:
        return np.arange(n, dtype=np.int64)
    return np.random.Generator(np.random.PCG64([seed, SPLITS.index(split)])).permutation(n).astype(np.int64)


def shuffle_text(seed: int | None) -> str:
    if seed is None:
        return "none: documents in input order"
    return (f"each split's documents in the order numpy.random.Generator(PCG64([{seed}, s])).permutation(n) gives, "
            "s = 0 for val and 1 for train")
