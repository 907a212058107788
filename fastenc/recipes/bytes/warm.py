"""The bytes recipe's kernel family: what ``fastenc warmup bytes`` compiles, and how to tell it is cached."""
from __future__ import annotations

from pathlib import Path

from fastenc.recipes.warm_inputs import DOCS, write_parquet


def warm(work: Path) -> None:
    from fastenc.recipes.bytes import encode_bytes, verify_output

    src = write_parquet(work / "docs-bytes.parquet", "text", DOCS)
    encode_bytes([src], work / "bytes-out", quiet=True)
    verify_output(work / "bytes-out", [src])


def probes() -> list:
    from fastenc.kernels.bytes_pack import count_high_bytes, pack_documents

    return [pack_documents, count_high_bytes]
