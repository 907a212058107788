"""The output of ``fastenc encode -o DIR``: ``DIR/ids.bin`` (flat little-endian ids, uint16 when
every id fits, else uint32) and ``DIR/meta.json``, written through the run skeleton like every
recipe's output: the folder appears whole, a rerun of the same request does nothing.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

FORMAT = "fastenc-ids"
IDS_BIN = "ids.bin"
META = "meta.json"


def _spec():
    from fastenc.run import OutputSpec

    return OutputSpec(recipe="encode", format=FORMAT, manifest=META, files_of=lambda m: [(IDS_BIN, m["bytes"])],
                      is_own=lambda name: name in (IDS_BIN, META))


def write_ids(ids, enc, out, path: Path | None, data: bytes, tokenizer: str, *, overwrite: bool = False, quiet: bool = False,
              pattern: str | None = None, command: dict | None = None) -> dict:
    """Write ``ids`` as ``out/ids.bin`` + ``out/meta.json``, published in one step. ``pattern``:
    the split of a .tiktoken file given by path, recorded so that ``verify`` loads it the same way."""
    from fastenc import __version__
    from fastenc.progress import summary_line
    from fastenc.run import Run, make_request

    options = {"tokenizer": str(tokenizer), "input_sha256": hashlib.sha256(data).hexdigest()}
    if pattern is not None:  # (requests without one are unchanged)
        options["pattern"] = pattern
    request = make_request("encode", [path] if path else [], options, enc.sha256)
    raw = ids.astype(ids.dtype.newbyteorder("<"), copy=False).tobytes()
    with Run(_spec(), out, request, overwrite=overwrite, command=command) as run:
        if run.done is not None:
            summary_line(f"fastenc encode: {run.out} already holds these ids; nothing to do", quiet=quiet)
            return run.done
        run.stage.write_bytes(IDS_BIN, raw)
        meta = {"format": FORMAT, "fastenc_version": __version__, "file": IDS_BIN, "ids": int(ids.size), "bytes": len(raw),
                "dtype": str(ids.dtype), "byteorder": "little", "tokenizer": str(tokenizer), "tokenizer_sha256": enc.sha256,
                **({"tokenizer_pattern": pattern} if pattern is not None else {}),
                "source": str(path) if path else "-", "request": request}
        run.publish(meta)
    summary_line(f"fastenc encode: {ids.size:,} ids ({ids.dtype}, little-endian) -> {run.out / IDS_BIN}", quiet=quiet)
    return meta


def verify_output(out_dir: Path, source=None) -> dict:
    """``fastenc verify DIR`` for ``encode -o DIR``: the ids file has the size, dtype and ids the
    meta records, and every id is below the tokenizer's vocabulary size."""
    from fastenc.verify import checked

    return checked(FORMAT, out_dir, META, _verify)


def _verify(out_dir: Path, report: dict) -> None:
    import json

    import numpy as np

    import fastenc

    meta = json.loads((out_dir / META).read_text(encoding="utf-8"))
    ids = np.fromfile(out_dir / IDS_BIN, dtype=np.dtype(meta["dtype"]).newbyteorder("<"))
    if ids.nbytes != meta["bytes"] or ids.size != meta["ids"]:
        report["problems"].append(f"{IDS_BIN} holds {ids.size} ids ({ids.nbytes} bytes), {META} says {meta['ids']} ({meta['bytes']})")
    enc = fastenc.load(meta["tokenizer"], pattern=meta.get("tokenizer_pattern"))
    if ids.size and int(ids.max()) >= enc.vocab_size:
        report["problems"].append(f"{IDS_BIN} holds id {int(ids.max())}, not below the vocabulary size {enc.vocab_size}")
    report.update(ids=int(ids.size))
