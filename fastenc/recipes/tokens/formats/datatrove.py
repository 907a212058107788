"""datatrove / nanotron tokenized files: ``NAME.ds`` + ``NAME.ds.index`` + ``NAME.ds.metadata``.

The bytes, as datatrove 0.10.1's ``TokenizedFile`` (``datatrove/pipeline/tokens/tokenizer.py``)
writes them for ``DocumentTokenizer`` and ``DocumentTokenizerMerger``, and as
``DatatroveFolderDataset`` (``datatrove/utils/dataset.py``, which nanotron's datatrove loader
uses) and the merger's ``load_doc_ends`` / ``get_data_reader`` read them::

    NAME.ds           the ids of every document, concatenated: token_size 2 (``<H`` uint16) when
                      the vocabulary has at most 65,536 ids, else 4 (``<I`` uint32)
                      (``PipelineStepWithTokenizer.token_size``); nothing else
    NAME.ds.index     ``<Q`` uint64 per document: the token offset where it ends (a running sum;
                      the last == the number of ids in NAME.ds); no header, no count
    NAME.ds.metadata  text, lines joined by ``\\n``, no final newline:
                        ``<tokenizer name>|<token_size>``   (the merger reads this line's token size)
                        ``<token count>``
                        ``<token count as humanize.metric(count, unit="T")>``, e.g. ``1.23 MT``

``DocumentTokenizer`` adds the EOS with a post-processor (``$A <EOS>``): fastenc's delimiters
(``fastenc.recipes.tokens.delimit``) put what the model expects there. The readers find files by
the ``.ds`` suffix (``DatatroveFolderDataset(folder, filename_pattern=...)``), so the data file is
renamed last: ``.ds.index`` and ``.ds.metadata`` first, then ``.ds`` (the commit).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from fastenc.errors import UsageError
from fastenc.recipes.tokens.formats._files import (BadTokenFile, Counters, OutFile, TokenDocs, as_batch, discard_all,
                                                   file_size, memmap, write_array)

__all__ = ["DatatroveWriter", "read_datatrove", "write_datatrove", "token_size", "metric", "paths"]

FIX = "rewrite it with fastenc tokens --format datatrove (or datatrove's DocumentTokenizer)"


def token_size(n_ids: int) -> int:
    """datatrove's rule: 4 bytes if the vocabulary is larger than 65,536 ids, else 2."""
    return 4 if n_ids > np.iinfo(np.uint16).max + 1 else 2


def paths(ds_path) -> tuple[Path, Path, Path]:
    ds = Path(ds_path)
    return ds, ds.with_name(ds.name + ".index"), ds.with_name(ds.name + ".metadata")


def metric(value: float, unit: str = "T", precision: int = 3) -> str:
    """``humanize.metric`` (humanize 4.x, which datatrove writes the third metadata line with):
    ``123 kT``, ``1.23 MT``. Only people read this line; the test compares it with humanize's."""
    if value == 0:
        exponent = 0
    else:
        exponent = math.floor(math.log10(abs(value)))
    if exponent >= 33 or exponent < -30:
        return f"{value:.{precision - 1}e}{unit}"
    old_bucket = exponent // 3 * 3
    value = value / 10 ** old_bucket
    digits = int(max(0, precision - exponent % 3 - 1))
    if exponent < 30 and round(abs(value), digits) >= 10 ** (exponent % 3 + 1):
        exponent += 1
        new_bucket = exponent // 3 * 3
        value /= 10 ** (new_bucket - old_bucket)
        digits = int(max(0, precision - exponent % 3 - 1))
    if exponent >= 3:
        prefix = "kMGTPEZYRQ"[exponent // 3 - 1]
    elif exponent < 0:
        prefix = "mμnpfazyrq"[(-exponent - 1) // 3]
    else:
        prefix = ""
    space = " " if (unit or prefix) else ""
    return f"{value:.{digits}f}{space}{prefix}{unit}"


class DatatroveWriter:
    """Write one ``NAME.ds`` (+ ``.index``, ``.metadata``) from batches of documents.

    ``tokenizer_name``: the metadata's first field (the tokenizer's name or path, as
    ``DocumentTokenizer(tokenizer_name_or_path=...)`` records it). ``add``, ``finish``, ``abort`` and
    ``temp`` as ``MegatronWriter``'s. Memory: one batch (the index is streamed as it grows).
    """

    def __init__(self, ds_path, tokenizer_name: str, size: int = 2, temp: bool = True):
        if size not in (2, 4):
            raise UsageError(f"datatrove's token_size is 2 or 4 bytes, not {size}")
        if "|" in tokenizer_name or "\n" in tokenizer_name:
            raise UsageError(f"tokenizer name {tokenizer_name!r}: datatrove's metadata line cannot hold '|' or a newline")
        self.size = size
        self.dtype = np.dtype(np.uint16 if size == 2 else np.uint32)
        self.tokenizer_name = tokenizer_name
        self.ds_path, self.index_path, self.meta_path = paths(ds_path)
        self.counters = Counters()
        self._temp = temp
        self._ds = OutFile(self.ds_path, temp)
        self._index = OutFile(self.index_path, temp)
        self._meta = None
        self.state = "open"

    def add(self, ids, lengths) -> None:
        ids, lengths, top = as_batch(ids, lengths, self.dtype, f"{self.ds_path}")
        write_array(self._ds, ids)
        c = self.counters
        write_array(self._index, (np.cumsum(lengths) + c.tokens).astype("<u8"))
        c.documents += len(lengths)
        c.tokens += len(ids)
        c.max_id = max(c.max_id, top)

    def metadata_text(self) -> str:
        n = self.counters.tokens
        return "\n".join([f"{self.tokenizer_name}|{self.size}", str(n), metric(n, unit="T")])

    def finish(self) -> dict:
        """fsync the three files, rename ``.ds.index``, ``.ds.metadata``, then ``.ds`` (the commit)."""
        try:
            self._ds.finish()
            self._index.finish()
            self._meta = OutFile(self.meta_path, self._temp)
            self._meta.file.write(self.metadata_text().encode("utf-8"))
            self._meta.finish()
            self._index.commit()
            self._meta.commit()
            self._ds.commit()
        except BaseException:
            self.abort()
            raise
        self.state = "finished"
        self.counters.files = [self.ds_path, self.index_path, self.meta_path]
        return self.counters.as_dict()

    def abort(self) -> None:
        if self.state == "aborted":
            return
        self.state = "aborted"
        discard_all((self._ds, self._index, self._meta), self._ds)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and self.state == "open":
            self.abort()
        return None


def write_datatrove(ds_path, ids, lengths, tokenizer_name: str, size: int = 2, temp: bool = True) -> dict:
    """One batch as a whole ``.ds`` file set (tests, small inputs)."""
    with DatatroveWriter(ds_path, tokenizer_name, size, temp) as w:
        w.add(ids, lengths)
        return w.finish()


def read_metadata(meta_path: Path) -> tuple[str, int, int]:
    """(tokenizer name, token size, token count) of a ``.ds.metadata``."""
    file_size(meta_path, f"the .ds has no .ds.metadata beside it: {FIX}")
    lines = meta_path.read_text(encoding="utf-8").splitlines()
    try:
        name, size = lines[0].rsplit("|", 1)
        return name, int(size), int(lines[1])
    except (IndexError, ValueError):
        raise BadTokenFile(f"{meta_path} is not datatrove metadata ('name|token_size', then the token count); "
                           f"{FIX}") from None


def read_datatrove(ds_path, size: int | None = None) -> TokenDocs:
    """Open ``NAME.ds`` with its ``.ds.index`` (and ``.ds.metadata``, for the token size and count
    unless ``size`` is given), every size checked: the ids (memory-mapped) and document offsets.
    A wrong or truncated file raises ``BadTokenFile`` (one line)."""
    ds, index_path, meta_path = paths(ds_path)
    ds_size = file_size(ds, f"pass the path of a .ds file or {FIX}")
    count = None
    if size is None:
        _, size, count = read_metadata(meta_path)
    if size not in (2, 4):
        raise BadTokenFile(f"{meta_path} gives token size {size}; datatrove writes 2 or 4: {FIX}")
    if ds_size % size:
        raise BadTokenFile(f"{ds} is {ds_size} bytes, not a whole number of {size}-byte ids; it is truncated: {FIX}")
    n = ds_size // size
    if count is not None and count != n:
        raise BadTokenFile(f"{ds} holds {n} ids, its .metadata says {count}; it is truncated or not its metadata's: {FIX}")
    index_size = file_size(index_path, f"the .ds has no .ds.index beside it: {FIX}")
    if index_size % 8:
        raise BadTokenFile(f"{index_path} is {index_size} bytes, not a whole number of uint64 ends; {FIX}")
    ends = memmap(index_path, np.dtype("<u8"), 0, index_size // 8)
    if len(ends) and ((np.diff(ends.astype(np.int64)) < 0).any() or int(ends[-1]) != n):
        raise BadTokenFile(f"{index_path}: the document ends must rise to the .ds's {n} ids (last is "
                           f"{int(ends[-1])}); it is not this .ds's index: {FIX}")
    if not len(ends) and n:
        raise BadTokenFile(f"{index_path} is empty but {ds} holds {n} ids; {FIX}")
    ids = memmap(ds, np.dtype("<u2" if size == 2 else "<u4"), 0, n)
    offsets = np.concatenate([[0], np.asarray(ends, dtype=np.int64)])
    return TokenDocs(ids, offsets, (ds, index_path, meta_path))
