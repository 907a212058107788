"""Tokens for the trainers: the trainer file formats and document delimiting, and the
``fastenc tokens`` recipe on them (``build``: the run; ``layout``: names and rules; ``shards``:
a split's shards; ``command``, ``card``, ``verify``, ``decode``, ``warm``, ``recipe``).

The formats and delimiters are pure of any run machinery:

    from fastenc.recipes.tokens import delimit, open_writer, read_tokens

    enc = fastenc.load("gpt2")
    delims = delimit.resolve(enc, "megatron", bos=args.bos, eos=args.eos)  # defaults per model
    with open_writer("megatron", OUT / "train_00000", delims, tokenizer_name="gpt2") as w:
        for batch in batches:                                  # bounded memory: one batch
            ids, offsets = enc.encode_batch(batch)             # ids concatenated, n_docs + 1 offsets
            w.add(*delims.apply(ids, np.diff(offsets)))        # BOS/EOS where the model wants them
        counters = w.finish()                                  # temporaries renamed: the commit
    docs = read_tokens("megatron", OUT / "train_00000")        # TokenDocs(ids, offsets, paths)

``open_writer`` / ``read_tokens`` name each format's files from one ``base`` path: Megatron's
prefix (``base.bin`` + ``base.idx``), datatrove's ``base.ds`` (+ ``.index``, ``.metadata``), llm.c's
``base.bin``. The formats' bytes: ``formats.megatron``, ``formats.datatrove``, ``formats.llmc``
and docs/trainer-formats.md.
"""
from __future__ import annotations

from pathlib import Path

from fastenc.recipes.tokens import delimit
from fastenc.recipes.tokens.delimit import Delimiters, resolve
from fastenc.recipes.tokens.formats import BadTokenFile, TokenDocs
from fastenc.recipes.tokens.formats import datatrove as _datatrove
from fastenc.recipes.tokens.formats import llmc as _llmc
from fastenc.recipes.tokens.formats import megatron as _megatron

__all__ = ["delimit", "Delimiters", "resolve", "open_writer", "read_tokens", "output_paths", "BadTokenFile",
           "TokenDocs", "FORMATS"]

FORMATS = delimit.FORMATS


def output_paths(fmt: str, base) -> list[Path]:
    """The files a writer of ``fmt`` makes for ``base`` (the data file last: the one renamed last
    is the commit, ``.idx`` for Megatron, ``.ds`` for datatrove)."""
    base = str(base)
    if fmt == "megatron":
        return list(_megatron.paths(base))
    if fmt == "datatrove":
        ds, index, meta = _datatrove.paths(base + ".ds")
        return [index, meta, ds]
    if fmt == "llmc":
        return [Path(base + ".bin")]
    raise delimit.UsageError(f"unknown format {fmt!r}; pass one of {', '.join(FORMATS)}")


def open_writer(fmt: str, base, delimiters: Delimiters, tokenizer_name: str = "", temp: bool = True):
    """A streaming writer of ``fmt`` at ``base`` storing ids in ``delimiters.dtype``.

    ``tokenizer_name``: datatrove's metadata field (the name or path the tokenizer was loaded
    from). ``temp=False``: write at the final names (the caller's staging folder is the temporary).
    """
    if fmt != delimiters.fmt:
        raise delimit.UsageError(f"the delimiters were resolved for {delimiters.fmt}, not {fmt}")
    base = str(base)
    if fmt == "megatron":
        return _megatron.MegatronWriter(base, delimiters.dtype, temp)
    if fmt == "datatrove":
        return _datatrove.DatatroveWriter(base + ".ds", tokenizer_name or "unknown", delimiters.dtype.itemsize, temp)
    if fmt == "llmc":
        return _llmc.LlmcWriter(base + ".bin", delimiters.dtype, temp)
    raise delimit.UsageError(f"unknown format {fmt!r}; pass one of {', '.join(FORMATS)}")


def read_tokens(fmt: str, base, delimiters: Delimiters | None = None) -> TokenDocs:
    """Read what ``open_writer(fmt, base, ...)`` wrote (or the trainer's own tools did): ids and
    document offsets, every size checked; llm.c's boundaries come from ``delimiters``."""
    base = str(base)
    if fmt == "megatron":
        return _megatron.read_megatron(base)
    if fmt == "datatrove":
        return _datatrove.read_datatrove(base + ".ds")
    if fmt == "llmc":
        return _llmc.read_llmc(base + ".bin", delimiters)
    raise delimit.UsageError(f"unknown format {fmt!r}; pass one of {', '.join(FORMATS)}")
