"""fastenc.kernels.xxh3 against the xxhash package (the oracle): every length class, the corpus."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

from fastenc.arrow_io import arrow_to_flat
from fastenc.kernels.xxh3 import XXH3_SECRET, _default_secret, xxh3_64, xxh3_64_batch, xxh3_64_secret

URLS = Path(__file__).resolve().parents[2] / "shared" / "data" / "urls" / "urls.parquet"
needs_urls = pytest.mark.skipif(not URLS.exists(), reason="shared corpus ../shared/data/urls not present (fresh clone)")


def _flat(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(items) + 1, np.int64)
    offsets[1:] = np.cumsum([len(b) for b in items])
    return np.frombuffer(b"".join(items), np.uint8), offsets


def test_default_secret_built_in_kernel_equals_constant():
    assert XXH3_SECRET.dtype == np.uint8 and XXH3_SECRET.shape == (192,)
    np.testing.assert_array_equal(_default_secret(), XXH3_SECRET)


@pytest.mark.slow
def test_every_length_0_to_2000_at_odd_offsets():
    # Covers 0, 1-3, 4-8, 9-16, 17-128, 129-240 and the long path up to ~2 blocks (1024 B each)
    # incl. every partial-stripe/last-stripe remainder. An odd start catches index slips.
    rng = np.random.default_rng(20240601)
    buf = rng.integers(0, 256, 2000 + 7, dtype=np.uint8)
    bad = []
    for n in range(0, 2001):
        start = 3 + (n % 4)
        want = xxhash.xxh3_64_intdigest(buf[start : start + n].tobytes())
        if int(xxh3_64(buf, start, start + n)) != want or int(xxh3_64_secret(buf, start, start + n, XXH3_SECRET)) != want:
            bad.append(n)
    assert bad == [], f"xxh3_64 differs from xxhash at lengths {bad[:20]}"


@pytest.mark.parametrize("n", [10_000, 100_000, 1_000_000, 1024 * 1024 + 1, 1024 * 1024 - 1])
def test_long_inputs_many_blocks(n):
    buf = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    assert int(xxh3_64(buf, 0, n)) == xxhash.xxh3_64_intdigest(buf.tobytes())


def test_constant_inputs_and_extremes():
    for n in (0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 4096):
        for byte in (0x00, 0xFF):
            b = bytes([byte]) * n
            assert int(xxh3_64(np.frombuffer(b, np.uint8), 0, n)) == xxhash.xxh3_64_intdigest(b), (n, byte)


def test_batch_matches_oracle_and_handles_empty_and_sliced():
    rng = np.random.default_rng(7)
    items = [rng.integers(0, 256, int(k), dtype=np.uint8).tobytes() for k in rng.integers(0, 400, 500)]
    items += [b"", b"", b"x" * 5000]
    data, offsets = _flat(items)
    got = xxh3_64_batch(data, offsets)
    assert got.dtype == np.uint64
    assert got.tolist() == [xxhash.xxh3_64_intdigest(b) for b in items]
    # a slice of the offsets (Arrow slices do not start at 0)
    assert xxh3_64_batch(data, offsets[100:201]).tolist() == got[100:200].tolist()
    assert xxh3_64_batch(data, offsets[:1]).shape == (0,)


@settings(max_examples=examples(2000), deadline=None)
@given(st.binary(max_size=700), st.integers(0, 9))
def test_fuzz_binary(b, pad):
    buf = np.frombuffer(bytes(pad) + b + bytes(3), np.uint8)
    assert int(xxh3_64(buf, pad, pad + len(b))) == xxhash.xxh3_64_intdigest(b)


@needs_urls
@pytest.mark.slow
def test_every_corpus_url():
    col = pq.read_table(URLS, columns=["url"])["url"]
    data, offsets = arrow_to_flat(col)
    got = xxh3_64_batch(data, offsets)
    raw = data.tobytes()
    want = np.fromiter(
        (xxhash.xxh3_64_intdigest(raw[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)),
        dtype=np.uint64,
        count=len(offsets) - 1,
    )
    mismatches = np.flatnonzero(got != want)
    assert mismatches.size == 0, f"{mismatches.size} URLs differ, first rows {mismatches[:5].tolist()}"
