"""The recipe's read-back check of the bin it just wrote, before anything is published.

The pass keeps the source text of the URLs the check will need (``SampleWindows``); after the
write, ``verify_written`` decodes the head, middle and tail samples (and every URL flagged
irreversible) with the pure-Python decoder and compares them with that text.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from fastenc.recipes.urls.bin import count_tokens_equal
from fastenc.recipes.urls.format import show_bytes

VERIFY_SAMPLE = 1000  # URLs each from the head, the middle and the tail of the bin


class SampleWindows:
    """Keeps the source text of the URLs that the verify stage will need, while it streams by.

    The verify stage checks the first, the middle and the last ``VERIFY_SAMPLE`` URLs of the bin
    (by hash rank), but their ranks are known only after the sort, when the text is gone. The
    hashes of a shard are uniform over its range ``[lo, hi)``, so those URLs lie, with
    overwhelming probability, in three windows of the range: at each end one expected to hold 4x
    the sample, and around the middle one expected to hold the sample plus 8 standard deviations
    of the median's rank (sqrt(n) / 2) on each side (~100 k URLs for 36.6 M). The text of every
    URL in a window is kept. A URL still missing afterwards (a skewed input) is read back from
    the parquet file by row (``read_column_rows``), which is slower but as exact.
    """

    def __init__(self, expected: int, lo: int, hi: int):
        span = hi - lo
        n = max(expected, 1)
        end_w = span * 4 * VERIFY_SAMPLE // n
        mid_w = span * int(VERIFY_SAMPLE + 8 * n**0.5) // n
        if 2 * end_w + 2 * mid_w >= span // 2:  # small inputs: keep everything
            windows = [(lo, hi)]
        else:
            mid = lo + span // 2
            windows = [(lo, lo + end_w), (mid - mid_w, mid + mid_w), (hi - end_w, hi)]
        self.windows = [(np.uint64(a), b) for a, b in windows]
        self.text: dict[int, bytes] = {}

    def add(self, hashes: np.ndarray, data: np.ndarray, offsets: np.ndarray, first: int) -> None:
        keep = np.zeros(len(hashes), bool)
        for a, b in self.windows:
            keep |= (hashes >= a) if b >= 2**64 else ((hashes >= a) & (hashes < np.uint64(b)))
        for j in np.flatnonzero(keep).tolist():
            self.text[first + j] = data[offsets[j] : offsets[j + 1]].tobytes()


def sample_indices(n: int, k: int = VERIFY_SAMPLE) -> np.ndarray:
    """Sorted distinct bin positions: the first k URLs, the k around n // 2, and the last k."""
    mid = max(0, n // 2 - k // 2)
    parts = [np.arange(0, min(k, n)), np.arange(mid, min(mid + k, n)), np.arange(max(0, n - k), n)]
    return np.unique(np.concatenate(parts)).astype(np.int64)


class ReadBackCheck(NamedTuple):
    """One URL the verify stage decodes back: bin position k, its token span, its order key and
    the previous URL's (None: not checked), its source text and row, and whether it was flagged
    irreversible."""

    k: int
    start: int
    end: int
    key: int | None
    prev: int | None
    source: bytes
    row: int
    irreversible: bool


def verify_written(path: Path, enc, n_urls: int, n_tokens: int, checks: list[ReadBackCheck], num_shards: int,
                    shard: int | None, bar) -> dict:
    """Re-read the finished bin: its length, its zero count, and the checked URLs decoded back.

    Decoding and canonical() here are the pure-Python/numpy ones (``Encoder.decode_bytes``,
    ``fastenc.url_canonical.canonical_bytes``), independent of the kernels that wrote the bin; the
    hashes are the ``xxhash`` package's. For each URL: it starts with the only 0 of its span,
    decodes to canonical(source), and canonical() of that gives the source back (or the kernel
    flagged the URL as irreversible, and it really is); its xxh3 is its order key, not below the
    previous URL's, and in the shard.
    """
    import xxhash

    from fastenc.url_canonical import canonical_bytes

    problems: list[str] = []
    size = path.stat().st_size
    if size != 2 * n_tokens:
        problems.append(f"the bin has {size} bytes, expected {2 * n_tokens} ({n_tokens} uint16 tokens)")
    zeros = count_tokens_equal(path, 0)
    if zeros != n_urls:
        problems.append(f"the bin holds {zeros} zeros (<eos>), expected one per URL: {n_urls}")
    mismatches = 0
    examples = []
    with open(path, "rb") as f:
        for c in checks:
            f.seek(2 * c.start)
            ids = np.fromfile(f, dtype="<u2", count=max(0, c.end - c.start))
            ok = ids.size == c.end - c.start and ids.size >= 1 and ids[0] == 0 and not (ids[1:] == 0).any()
            if ok:
                stored = enc.decode_bytes(ids[1:])
                ok = stored == canonical_bytes(c.source) and (canonical_bytes(stored) == c.source) != c.irreversible
                h = xxhash.xxh3_64_intdigest(c.source)
                if ok and c.key is not None:
                    ok = h == c.key and c.prev <= c.key
                if ok and shard is not None:
                    ok = (h * num_shards) >> 64 == shard
            if not ok:
                mismatches += 1
                if len(examples) < 3:
                    examples.append(f"URL {c.k} of the bin (source row {c.row}): {show_bytes(c.source)}")
            bar.update(1)
    if mismatches:
        problems.append(f"{mismatches} of {len(checks)} checked URLs did not decode back to their source: " + "; ".join(examples))
    return {"urls_checked": len(checks), "mismatches": mismatches, "problems": problems}
