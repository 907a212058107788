"""The tiny inputs that every recipe's warm-up runs its real code on (``fastenc warmup``)."""
from __future__ import annotations

from pathlib import Path

URLS = [
    "https://www.example.com/a/b?c=1#d",
    "http://sub.domain.co.uk:8080/path/to/page.html",
    "http://x:1.y/",  # canonical() is not self-inverse here: the irreversible path
    "",
    "ftp://[::1]/file",
    "https://日本.example.jp/ページ",
]
DOCS = [
    "Hello, world! This is a test.",
    "Grüße aus Köln: 12345 numbers, emoji 🙂 and 中文字符.",
    "",
    "   indented\n\nparagraphs\twith tabs",
    "x" * 300,
]
# The recipes' batches are larger than the one-text lane takes (encoder._SOLO_BATCH_BYTES): a warm-up
# batch must be too, or the batch kernels the workers run are left to compile in the workers.
LANE_SIZED_OUT = DOCS * 1500


def write_parquet(path: Path, column: str, values: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({column: pa.array(values, pa.string())}), path)
    return path
