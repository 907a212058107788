"""The URL recipe's kernel family: what ``fastenc warmup urls`` compiles, what a helper process
compiles meanwhile (hashing, sorting, gathering, decoding), and how to tell it is cached."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fastenc.recipes.warm_inputs import URLS, write_parquet


def _url_arrays():
    data = np.frombuffer("".join(URLS).encode(), np.uint8)
    offsets = np.zeros(len(URLS) + 1, np.int64)
    np.cumsum([len(u.encode()) for u in URLS], out=offsets[1:])
    return data, offsets


def warm_encoder(work: Path) -> None:
    """What the URL recipe needs of the encoder: ``encode_text`` (via ``encode_bytes``: the same
    types) and the fused canonical() + encode kernel."""
    import fastenc
    from fastenc.recipes.urls.encode import encode_url_chunk
    from fastenc.recipes.urls.threads import canonical_batch

    enc = fastenc.load("urls")
    enc.encode_bytes(b"https://com.example.www/a")
    data, offsets = _url_arrays()
    encode_url_chunk(enc, data, offsets, np.arange(len(URLS)))
    canonical_batch(data, offsets)


def warm(work: Path) -> None:
    """The URL recipe and its verify, and ``fastenc.load("urls")``'s own ``encode``/``decode``."""
    import fastenc
    from fastenc.recipes.urls import encode_shard, verify_output

    enc = fastenc.load("urls")
    enc.decode_bytes(enc.encode_bytes(b"https://com.example.www/a"))

    src = write_parquet(work / "part-00000.parquet", "url", URLS)
    encode_shard(src, work / "urls-out", num_shards=1, quiet=True)
    verify_output(work / "urls-out", [src])


def part_url_side(work: Path) -> None:
    """The URL recipe's kernels other than the encoder and canonical(): hashing, the shard check,
    sorting, gathering, decoding (``warm`` in the main process compiles canonical() with
    the encoder's URL kernel, which calls it)."""
    import fastenc
    from fastenc.kernels import url_pack
    from fastenc.recipes.urls.bin import iter_decoded
    from fastenc.recipes.urls.threads import gather_spans, hash_batch, sort_by_hash

    data, offsets = _url_arrays()
    hashes = hash_batch(data, offsets)
    url_pack.count_outside_shard(hashes, np.uint64(1), np.uint64(0), np.empty(5, np.int64), 5)
    url_pack.shard_of(hashes[0], np.uint64(1))
    order, _ = sort_by_hash(hashes, 2)
    tokens = np.array([0, 71, 72, 0, 73, 0, 0, 74, 75, 76], np.uint16)
    tok_offsets = np.array([0, 3, 5, 6, 7, 10, 10], np.int64)
    out = np.empty(10, np.uint16)
    out_offsets = np.empty(len(order) + 1, np.int64)
    gather_spans(tokens, tok_offsets, order, out, out_offsets, 2)
    for _, text, text_offsets in iter_decoded(tokens, fastenc.load("urls")):
        url_pack.first_difference(text, text_offsets, np.arange(len(text_offsets) - 1), text, text_offsets)


def probes() -> list:
    from fastenc.kernels import url_pack
    from fastenc.kernels.canonical import canonical_run
    from fastenc.kernels.xxh3 import xxh3_64_run

    return [url_pack.pack_url_run, url_pack.gather_slots, url_pack.sort_buckets, url_pack.span_offsets,
            url_pack.decode_urls, xxh3_64_run, canonical_run]
