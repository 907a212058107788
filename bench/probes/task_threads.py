"""Speed of the batch kernels: Numba's ``parallel=True`` (prange) against the same tasks on
Python threads (``fastenc.tasks``, what the recipes now run), in one process, same inputs,
alternating, medians.

    python bench/probes/task_threads.py [--threads 2] [--rounds 5]

Pairs (prange kernel / threads driver):
- GPT-2 encode of ``../shared/data/text/docs.parquet`` (warm piece caches):
  ``encode_batch_counts`` + ``compact_runs`` / ``Encoder.encode_arrays``
- xxh3 of every URL of ``../shared/data/urls/urls.parquet``: ``xxh3_64_batch`` / ``hash_batch``
- canonical() of every URL: ``canonical_batch`` kernel / thread driver
- stable argsort of 10 M random uint64 keys: ``hash_order`` / ``sort_by_hash``
- gather of the URL token spans in hash order: ``gather_spans`` kernel / thread driver
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness and the benches
from harness import SHARED, require  # noqa: E402

SHARED = Path(os.environ.get("FASTENC_SHARED", SHARED)) / "data"  # a worktree: set FASTENC_SHARED


def timeit(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", "--repeat", dest="rounds", type=int, default=5, help="alternating rounds (medians)")
    ap.add_argument("--corpus", "--docs", dest="docs", type=Path, default=SHARED / "text" / "docs.parquet")
    ap.add_argument("--urls", type=Path, default=SHARED / "urls" / "urls.parquet")
    args = ap.parse_args()
    require([args.docs, args.urls], "--corpus/--urls")

    import numba
    import numpy as np
    import pyarrow.parquet as pq

    import fastenc
    from fastenc.arrow_io import arrow_to_flat
    from fastenc.kernels import url_pack
    from fastenc.kernels.canonical import canonical_batch as canonical_prange
    from fastenc.kernels.encode import compact_runs, encode_batch_counts
    from fastenc.kernels.xxh3 import xxh3_64_batch
    from fastenc.recipes.urls import threads as th

    numba.set_num_threads(args.threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.threads} threads, "
          f"median of {args.rounds}, load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []

    enc = fastenc.load("gpt2")
    col = pq.read_table(args.docs, columns=["text"]).column("text").combine_chunks()
    data, offsets = arrow_to_flat(col)

    def gpt2_prange():
        caches = enc._task_caches()
        out = np.empty(int(offsets[-1] - offsets[0]), enc.dtype)
        counts = np.zeros(len(offsets) - 1, np.int64)
        encode_batch_counts(data, offsets, enc.vocab, enc.classes, caches, out, counts)
        return compact_runs(out, offsets, counts, caches.short.shape[0])

    def gpt2_threads():
        return len(enc.encode_arrays(data, offsets)[0])

    assert gpt2_prange() == gpt2_threads()  # compiles both; warms the caches
    rows.append(("GPT-2 encode (MB/s)", len(data) / 1e6, gpt2_prange, gpt2_threads))

    ucol = pq.read_table(args.urls, columns=["url"]).column("url").combine_chunks()
    udata, uoffsets = arrow_to_flat(ucol)
    assert (xxh3_64_batch(udata, uoffsets) == th.hash_batch(udata, uoffsets)).all()
    rows.append(("xxh3 of URLs (MB/s)", len(udata) / 1e6, lambda: xxh3_64_batch(udata, uoffsets),
                 lambda: th.hash_batch(udata, uoffsets)))
    assert (canonical_prange(udata, uoffsets) == th.canonical_batch(udata, uoffsets)).all()
    rows.append(("canonical() of URLs (MB/s)", len(udata) / 1e6, lambda: canonical_prange(udata, uoffsets),
                 lambda: th.canonical_batch(udata, uoffsets)))

    keys = np.random.default_rng(0).integers(0, 2**64 - 1, 10_000_000, dtype=np.uint64)
    a, b = url_pack.hash_order(keys, args.threads)[0], th.sort_by_hash(keys, args.threads)[0]
    assert (a == b).all()
    rows.append(("sort 10 M hashes (M keys/s)", 10.0, lambda: url_pack.hash_order(keys, args.threads),
                 lambda: th.sort_by_hash(keys, args.threads)))

    n = len(uoffsets) - 1
    lengths = np.random.default_rng(1).integers(1, 60, n)
    tok_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=tok_offsets[1:])
    tokens = np.arange(int(tok_offsets[-1]), dtype=np.uint64).astype(np.uint16)
    order = np.random.default_rng(2).permutation(n)
    out1, out2 = np.empty_like(tokens), np.empty_like(tokens)
    oo1, oo2 = np.empty(n + 1, np.int64), np.empty(n + 1, np.int64)
    url_pack.gather_spans(tokens, tok_offsets, order, out1, oo1, args.threads)
    th.gather_spans(tokens, tok_offsets, order, out2, oo2, args.threads)
    assert (out1 == out2).all() and (oo1 == oo2).all()
    rows.append(("gather token spans (M tokens/s)", len(tokens) / 1e6,
                 lambda: url_pack.gather_spans(tokens, tok_offsets, order, out1, oo1, args.threads),
                 lambda: th.gather_spans(tokens, tok_offsets, order, out2, oo2, args.threads)))

    print(f"{'':34s} {'prange':>10s} {'threads':>10s} {'threads/prange':>15s}")
    for name, amount, prange_fn, threads_fn in rows:
        tp, tt = [], []
        for _ in range(args.rounds):  # alternating, so that load changes hit both
            tp.append(timeit(prange_fn, 1))
            tt.append(timeit(threads_fn, 1))
        rp, rt = amount / statistics.median(tp), amount / statistics.median(tt)
        print(f"{name:34s} {rp:10.1f} {rt:10.1f} {rt / rp:15.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
