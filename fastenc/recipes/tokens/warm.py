"""The tokens recipe's kernel family: the encoder's loops (uint16 and the wide one) as the recipe calls them."""
from __future__ import annotations

from pathlib import Path

from fastenc.recipes.warm_inputs import LANE_SIZED_OUT, write_parquet


def warm(work: Path) -> None:
    from fastenc.recipes.tokens.build import encode_tokens
    from fastenc.recipes.tokens.verify import verify_output

    src = write_parquet(work / "docs-tokens.parquet", "text", LANE_SIZED_OUT)
    for tok, fmt in (("gpt2", "megatron"), ("o200k_base", "llmc")):
        encode_tokens([src], work / f"tokens-{fmt}", tokenizer=tok, fmt=fmt, quiet=True)
        verify_output(work / f"tokens-{fmt}", None)


def probes() -> list:
    from fastenc.kernels.runs import encode_docs, encode_docs_wide
    from fastenc.recipes.tokens.kernel import delimit_into
    from fastenc.run.ahead import WithClassTable

    return [WithClassTable(encode_docs), encode_docs_wide, delimit_into]
