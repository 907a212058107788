"""The URL recipe's tokenizer: loading and checking it, and its copy in OUT/tokenizer/.

Every bin in an output directory shares the one ``OUT/tokenizer/``; it is staged with the first
bin and moved in whole (one rename), and its sha256 ties each sidecar to it.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from fastenc.errors import InputError, VocabError
from fastenc.recipes.urls.format import EOS_TOKEN, TOKENIZER_DIR, TOKENIZER_FILES


def load_tokenizer(tokenizer: str | os.PathLike):
    """(Encoder, the folder or file its files are copied from)."""
    from fastenc.encoder import load
    from fastenc.vocab import BUILTIN, builtin_tokenizer_dir

    enc = load(tokenizer)
    if str(tokenizer) in BUILTIN:
        src = builtin_tokenizer_dir(str(tokenizer))
    else:
        src = Path(tokenizer)
    if enc.info.pretokenizer != "url":
        raise VocabError(f"tokenizer {tokenizer} does not use the URL card's pre-split (it is {enc.info.pretokenizer!r}): use 'urls' or a URL tokenizer.json")
    eos = enc.info.special_tokens.get(EOS_TOKEN)
    if eos != 0:
        raise VocabError(f"tokenizer {tokenizer}: the URL bins need the special token {EOS_TOKEN!r} at id 0 (found {eos!r})")
    if enc.vocab_size > 65536:
        raise VocabError(f"tokenizer {tokenizer} has {enc.vocab_size} ids; URL bins are uint16: at most 65,536")
    return enc, src


def _tokenizer_sources(src: Path) -> list[Path]:
    if src.is_dir():
        return [src / name for name in TOKENIZER_FILES if (src / name).is_file()]
    return [src]  # a tokenizer.json given as a file: only itself


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_tokenizer_dir(out_dir: Path, sha256: str) -> bool:
    """True if OUT/tokenizer/ already holds this tokenizer; refuses another one."""
    dst = out_dir / TOKENIZER_DIR / "tokenizer.json"
    if not dst.is_file():
        return False
    have = sha256_file(dst)
    if have != sha256:
        raise InputError(
            f"{dst} is another tokenizer (sha256 {have[:16]}..., this run's is {sha256[:16]}...): bins of different "
            "vocabularies must not share a directory. Write to a new directory (-o)"
        )
    return True


def copy_tokenizer(src: Path, stage) -> None:
    """Stage a copy of the tokenizer's files as ``tokenizer/`` (published with the bin)."""
    for f in _tokenizer_sources(src):
        stage.copy_file(f, f"{TOKENIZER_DIR}/{'tokenizer.json' if f == src else f.name}")
