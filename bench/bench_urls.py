"""Benchmark: the URL encode kernel against HF tokenizers, and the whole URL recipe on a full-size shard.

    python bench/bench_urls.py                 # part 1: kernels, on the real corpus (~2-4 min)
    python bench/bench_urls.py --full          # + part 2: a 36.6 M-URL shard end to end (~5-10 min)
    [--corpus urls.parquet] [--mb N] [--passes 3] [--out-md F]  # --passes was --reps (still read)

Part 1, on every URL of ``../shared/data/urls/urls.parquet`` (636,445 real URLs), all given the same
canonical text and the same ``vocab/urls/tokenizer.json``:

- fastenc ``Encoder.encode_arrays`` (the encode kernel: URL pre-split + BPE, over flat Arrow-style
  buffers), 1 and 2 Numba threads; "fresh" = empty piece caches at the start of each repetition,
  "warm" = caches kept from the previous repetition (the recipe keeps them across chunks);
- fastenc ``encode_url_chunk`` (the recipe's fused kernel: canonical() + encode + the leading 0,
  URLs taken in hash order from anywhere in the buffer), warm, 1 and 2 threads;
- HF tokenizers ``Tokenizer.encode`` in a Python loop (one thread, on every 4th URL to save time)
  and ``encode_batch`` with ``RAYON_NUM_THREADS`` = 1 and 2, each in its own subprocess (rayon's
  pool is sized once per process).

Part 2 (``--full``): a full-size shard, 36.6 M URLs (the size of one real shard), made by
resampling and recombining the corpus: URL = scheme + authority of a random URL + the rest (path,
query, fragment) of another, and with probability 0.8 the rest of a third appended, which gives
about the card's ~35 tokens per URL (the corpus alone has ~24). Written once to
``--workdir/part-00000.parquet`` (zstd, row groups of 131,072; reused if present), then
``python -m fastenc part-00000.parquet -o OUT --num-shards 1`` runs in a fresh process (harness.run_fresh: its
CPU time and peak RSS from wait4; the shard check still hashes and tests every URL; with 1 shard every URL passes). Reported: the wall
time of the process, the recipe's own stage times (from the sidecar), the peak RSS, and the time of
``fastenc verify OUT`` (a full re-check of the bin from its files).

The machine may be shared: the load average is printed with every part.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import harness
from harness import REPO as ROOT, URLS as CORPUS, require

TOKENIZER = ROOT / "vocab" / "urls" / "tokenizer.json"
FULL_URLS = 36_600_000
ROW_GROUP = 131_072
P_SECOND_REST = 0.8


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def corpus_arrays(path: Path):
    import pyarrow.parquet as pq

    from fastenc.arrow_io import arrow_to_flat

    arr = pq.read_table(path, columns=["url"]).column("url").combine_chunks()
    data, offsets = arrow_to_flat(arr)
    return arr, data, offsets


# ---------------------------------------------------------------------------------------------
# Part 1: kernels
# ---------------------------------------------------------------------------------------------


def hf_worker(mode: str, corpus: Path, stride: int) -> dict:
    """Run in a subprocess: HF tokenizers over the canonical corpus; prints JSON."""
    import tokenizers

    from fastenc.url_canonical import canonical

    arr, _, _ = corpus_arrays(corpus)
    texts = [canonical(u) for u in arr.to_pylist()]
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    tok.encode_special_tokens = True  # fastenc's semantics for the literal text "<eos>"
    if mode == "loop":
        texts = texts[::stride]
        t = time.perf_counter()
        n_tokens = sum(len(tok.encode(s, add_special_tokens=False).ids) for s in texts)
        dt = time.perf_counter() - t
    else:
        tok.encode_batch(texts[:1000], add_special_tokens=False)  # start the thread pool
        t = time.perf_counter()
        encs = tok.encode_batch(texts, add_special_tokens=False)
        dt = time.perf_counter() - t
        n_tokens = sum(len(e.ids) for e in encs)
    return {"urls": len(texts), "tokens": n_tokens, "seconds": dt}


def run_hf(mode: str, threads: int, corpus: Path, stride: int) -> dict:
    env = dict(harness.thread_env(threads), TOKENIZERS_PARALLELISM="true", PYTHONPATH=str(ROOT))
    r = harness.spawn_json([sys.executable, __file__, "--hf-worker", mode, "--corpus", str(corpus), "--hf-stride", str(stride)],
                           env=env)
    if "error" in r:
        raise SystemExit(f"HF tokenizers ({mode}, {threads} threads) failed: {r['error']}")
    return r


def bench_kernels(corpus: Path, reps: int, stride: int) -> list[dict]:
    import numba
    import numpy as np

    import fastenc
    from fastenc.kernels.canonical import canonical_batch
    from fastenc.recipes.urls import EncodeBuffers, encode_url_chunk

    _, data, offsets = corpus_arrays(corpus)
    n = len(offsets) - 1
    canon = canonical_batch(data, offsets)
    enc = fastenc.load("urls")
    enc.encode_arrays(canon[: offsets[1000]], offsets[:1001])  # compile / load the cached kernels
    order = np.arange(n)
    encode_url_chunk(enc, data, offsets, order[:1000])
    rows = []
    max_threads = numba.config.NUMBA_NUM_THREADS
    for threads in sorted({1, min(2, max_threads)}):
        numba.set_num_threads(threads)
        times = []
        for _ in range(reps):
            enc.clear_caches()  # fresh piece caches
            t = time.perf_counter()
            ids, _ = enc.encode_arrays(canon, offsets)
            times.append(time.perf_counter() - t)
        rows.append(dict(name="fastenc encode_arrays (fresh caches)", threads=threads, urls=n, tokens=len(ids), seconds=statistics.median(times)))
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            ids, _ = enc.encode_arrays(canon, offsets)
            times.append(time.perf_counter() - t)
        rows.append(dict(name="fastenc encode_arrays (warm caches)", threads=threads, urls=n, tokens=len(ids), seconds=statistics.median(times)))
        bufs = EncodeBuffers()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            res = encode_url_chunk(enc, data, offsets, order, bufs=bufs)
            times.append(time.perf_counter() - t)
        rows.append(dict(name="fastenc recipe kernel: canonical + encode + [0] (warm)", threads=threads, urls=n,
                         tokens=len(res.tokens) - n, seconds=statistics.median(times)))
    numba.set_num_threads(max_threads)
    hf = run_hf("loop", 1, corpus, stride)
    rows.append(dict(name=f"HF tokenizers encode() loop (every {stride}th URL)", threads=1, **hf))
    for threads in (1, 2):
        hf = run_hf("batch", threads, corpus, stride)
        rows.append(dict(name="HF tokenizers encode_batch", threads=threads, **hf))
    return rows


def print_kernel_table(rows: list[dict]) -> None:
    hf1 = next(r for r in rows if r["name"].startswith("HF tokenizers encode() loop"))
    base = hf1["urls"] / hf1["seconds"]
    print(f"\n| {'what':<56} | threads | {'URLs':>9} | seconds | {'URLs/s':>10} | {'tokens/s':>11} | x HF loop |")
    print(f"|{'-' * 58}|--------:|{'-' * 11}:|--------:|{'-' * 11}:|{'-' * 12}:|----------:|")
    for r in rows:
        ups = r["urls"] / r["seconds"]
        print(f"| {r['name']:<56} | {r['threads']:>7} | {r['urls']:>9,} | {r['seconds']:>7.3f} | {ups:>10,.0f} | "
              f"{r['tokens'] / r['seconds']:>11,.0f} | {ups / base:>9.1f} |")


# ---------------------------------------------------------------------------------------------
# Part 2: a full-size shard
# ---------------------------------------------------------------------------------------------


def _split_points(data, offsets):
    """End of scheme + authority of every URL (start of its path/query/fragment)."""
    from numba import njit

    @njit
    def kernel(data, offsets, out):
        for i in range(offsets.shape[0] - 1):
            a, b = offsets[i], offsets[i + 1]
            p = a
            # skip "http://" or "https://" when present
            if b - a >= 8 and data[a + 4] == 115 and data[a + 5] == 58:
                p = a + 8
            elif b - a >= 7 and data[a + 4] == 58:
                p = a + 7
            while p < b and data[p] != 47 and data[p] != 63 and data[p] != 35:
                p += 1
            out[i] = p

    import numpy as np

    out = np.empty(len(offsets) - 1, np.int64)
    kernel(data, offsets, out)
    return out


def build_full_shard(corpus: Path, path: Path, n_urls: int, seed: int = 2048) -> dict:
    """Write ``n_urls`` recombined URLs to ``path`` (see the module docstring); returns stats."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from numba import njit

    @njit
    def fill(data, offsets, split, a, b, c, two, out, out_offsets):
        o = 0
        out_offsets[0] = 0
        for j in range(a.shape[0]):
            for q in range(offsets[a[j]], split[a[j]]):
                out[o] = data[q]
                o += 1
            for q in range(split[b[j]], offsets[b[j] + 1]):
                out[o] = data[q]
                o += 1
            if two[j]:
                for q in range(split[c[j]], offsets[c[j] + 1]):
                    out[o] = data[q]
                    o += 1
            out_offsets[j + 1] = o

    t0 = time.perf_counter()
    _, data, offsets = corpus_arrays(corpus)
    split = _split_points(data, offsets)
    n = len(offsets) - 1
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    total_bytes = 0
    with pq.ParquetWriter(tmp, pa.schema([("url", pa.string())]), compression="zstd") as writer:
        for start in range(0, n_urls, ROW_GROUP):
            m = min(ROW_GROUP, n_urls - start)
            a, b, c = rng.integers(0, n, m), rng.integers(0, n, m), rng.integers(0, n, m)
            two = rng.random(m) < P_SECOND_REST
            size = int((split[a] - offsets[a]).sum() + (offsets[b + 1] - split[b]).sum() + ((offsets[c + 1] - split[c]) * two).sum())
            out = np.empty(size, np.uint8)
            out_offsets = np.empty(m + 1, np.int64)
            fill(data, offsets, split, a, b, c, two, out, out_offsets)
            arr = pa.Array.from_buffers(pa.string(), m, [None, pa.py_buffer(out_offsets.astype(np.int32)), pa.py_buffer(out)])
            writer.write_table(pa.table({"url": arr}), row_group_size=ROW_GROUP)
            total_bytes += size
    tmp.rename(path)
    return {"urls": n_urls, "text_bytes": total_bytes, "file_bytes": path.stat().st_size, "seconds": time.perf_counter() - t0}


def _stages_from_summary(line: str | None) -> dict:
    """Stage seconds from the recipe's summary line ("... in 63.1 s, ... (read 1.0 s, hash 2.0, encode
    ...)"): the sidecar no longer carries timings (an output must not depend on the run's speed)."""
    stages = {"total": float("nan")}
    if line:
        m = re.search(r" in ([\d.]+) s, ", line)
        if m:
            stages["total"] = float(m.group(1))
        m = re.search(r"\(read ([^)]*)\)", line)
        for part in ("read " + m.group(1)).split(", ") if m else []:
            name, value = part.split(" ")[:2]
            stages[name] = float(value)
    for name in ("read", "hash", "encode", "sort", "write", "verify"):
        stages.setdefault(name, float("nan"))
    return stages


def bench_full(corpus: Path, workdir: Path, n_urls: int, runs: int, keep: bool) -> dict:
    import shutil

    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "part-00000.parquet"
    built = None
    if not src.is_file():
        print(f"building {src} ({n_urls:,} URLs) ...", file=sys.stderr, flush=True)
        built = build_full_shard(corpus, src, n_urls)
        print(f"built in {built['seconds']:.1f} s: {built['text_bytes'] / 1e9:.2f} GB of URLs, {built['file_bytes'] / 1e9:.2f} GB parquet",
              file=sys.stderr, flush=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    results = []
    out = workdir / "out"
    for run in range(runs):
        if out.exists():
            shutil.rmtree(out)
        load_before = load()
        r = harness.run_fresh([sys.executable, "-m", "fastenc", str(src), "-o", str(out), "--num-shards", "1"], env=env)
        if r.returncode != 0:
            raise SystemExit(f"the recipe failed:\n{r.stderr[-3000:]}")
        meta = json.loads((out / "tokens-s00000.json").read_text())
        summary = [line for line in r.stderr.split("\n") if line.startswith("fastenc urls:")]
        v = harness.run_fresh([sys.executable, "-m", "fastenc", "verify", str(out)], env=env)
        results.append({
            "run": run + 1,
            "urls": meta["urls"],
            "tokens": meta["tokens"],
            "tokens_per_url": meta["tokens"] / meta["urls"],
            "process_seconds": r.wall,
            "stages": _stages_from_summary(summary[-1] if summary else None),
            "peak_rss_mb": r.peak_rss_mb,
            "cpu_seconds": r.cpu,
            "summary": summary[-1] if summary else None,
            "verify_ok": v.returncode == 0,
            "verify_seconds": v.wall,
            "verify_peak_rss_mb": v.peak_rss_mb,
            "load_before": load_before,
            "load_after": load(),
        })
        print(json.dumps(results[-1], indent=1), file=sys.stderr, flush=True)
    if not keep and out.exists():
        shutil.rmtree(out)
    return {"input": str(src), "built": built, "runs": results}


def print_full(full: dict) -> None:
    print(f"\nfull-size shard: {full['input']}")
    print("| run | URLs | tokens/URL | process s | cpu s | read | hash | encode | sort | write | verify | recipe total | URLs/s | peak RSS MB | fastenc verify OUT s | load before/after |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in full["runs"]:
        s = r["stages"]
        print(f"| {r['run']} | {r['urls']:,} | {r['tokens_per_url']:.1f} | {r['process_seconds']:.1f} | {r['cpu_seconds']:.1f} | "
              f"{s['read']:.1f} | {s['hash']:.1f} | {s['encode']:.1f} | {s['sort']:.1f} | {s['write']:.1f} | {s['verify']:.1f} | {s['total']:.1f} | "
              f"{r['urls'] / r['process_seconds']:,.0f} | {r['peak_rss_mb']:,.0f} | {r['verify_seconds']:.1f} ({'ok' if r['verify_ok'] else 'FAILED'}) | "
              f"{r['load_before']} -> {r['load_after']} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_flags(p, corpus=CORPUS, rounds=None, threads=None, passes=3, passes_aliases=["--reps"])
    p.add_argument("--hf-stride", type=int, default=4, help="the HF encode() loop runs on every Nth URL")
    p.add_argument("--full", action="store_true", help="also run the whole recipe on a full-size shard")
    p.add_argument("--full-only", action="store_true", help="only the full-size shard")
    p.add_argument("--full-urls", type=int, default=FULL_URLS)
    p.add_argument("--full-runs", type=int, default=1)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/fastenc-bench-urls"))
    p.add_argument("--keep", action="store_true", help="keep the full-size output directory")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--hf-worker", choices=["loop", "batch"], help=argparse.SUPPRESS)
    args = p.parse_args()
    require(args.corpus, "--corpus", "examples/part-00042.parquet")
    if args.hf_worker:
        print(json.dumps(hf_worker(args.hf_worker, args.corpus, args.hf_stride)))
        return
    args.corpus = harness.corpus_slice(args.corpus, args.mb, column="url")
    with harness.out_md(args.out_md):
        run(args)


def run(args) -> None:
    print(harness.machine_header("URL encode kernel vs HF tokenizers (`bench/bench_urls.py`)", ("numba", "tokenizers")))
    out: dict = {"machine": f"{os.cpu_count()} CPUs", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if not args.full_only:
        out["load_before_kernels"] = load()
        rows = bench_kernels(args.corpus, args.passes, args.hf_stride)
        out["kernels"] = rows
        out["load_after_kernels"] = load()
        print(f"kernels on {args.corpus.name} ({rows[0]['urls']:,} URLs), load {out['load_before_kernels']} -> {out['load_after_kernels']}")
        print_kernel_table(rows)
    if args.full or args.full_only:
        out["full"] = bench_full(args.corpus, args.workdir, args.full_urls, args.full_runs, args.keep)
        print_full(out["full"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(harness.footer())


if __name__ == "__main__":
    main()
