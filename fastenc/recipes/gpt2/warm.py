"""The gpt2 recipe's kernel family: what ``fastenc warmup gpt2`` compiles, and how to tell it is cached."""
from __future__ import annotations

from pathlib import Path

from fastenc.recipes.warm_inputs import DOCS, LANE_SIZED_OUT, write_parquet


def warm(work: Path) -> None:
    """The gpt2 recipe and its verify, and ``Encoder.encode_batch``/``encode_arrays``."""
    import fastenc
    from fastenc.recipes.gpt2 import encode_gpt2, verify_output

    enc = fastenc.load("gpt2")
    enc.encode_batch(DOCS)
    enc._encode_in_slot(b"Hello")  # (the batch kernel itself: a batch this small runs on the one-text lane)

    src = write_parquet(work / "docs-gpt2.parquet", "text", LANE_SIZED_OUT)
    encode_gpt2([src], work / "gpt2-out", quiet=True)
    verify_output(work / "gpt2-out", [src])


def probes() -> list:
    from fastenc.kernels.decode import decode_into
    from fastenc.kernels.runs import encode_docs
    from fastenc.run.ahead import WithClassTable

    return [WithClassTable(encode_docs), decode_into]
