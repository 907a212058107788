"""Benchmark: the GPT-2 long-context recipe against its encode kernel and a tiktoken pipeline, in one run.

    python bench/bench_gpt2_recipe.py [--corpus docs.parquet] [--mb N] [--copies 1] [--rounds 3] [--threads N] [--out-md F]

(Old names still read: --input for --corpus, --repeat for --copies, --reps for --rounds.)
The input is ``--corpus`` listed ``--copies`` times (docs.parquet: 96.8 MB of text, 6,626
documents in all seven buckets, up to 621 k tokens). Every side does the same work on it:

- kernel:   ``Encoder.encode_arrays`` over the text batches, already read into memory (not timed),
  Numba kernels loaded (a tiny call first), piece caches cold: the encode kernel's own speed, the
  ceiling of the recipe.
- recipe:   ``fastenc.recipes.gpt2.encode_gpt2`` as the CLI runs it, all seven buckets kept:
  read the parquet, encode, compare every count with ``gpt2_tokens``, bucket, write the parts
  (temporary names, fsync, renames), decode a sample back from disk, re-read and check every
  part, meta.json and summary. Numba kernels loaded first, as in a long run; ``recipe-cold``
  is the same including Numba's import and cache load (what a short CLI run pays once).
- tiktoken: a straightforward pipeline doing the same work: pyarrow batches -> ``to_pylist`` ->
  ``encode_ordinary_batch(num_threads=2)`` -> compare counts with ``gpt2_tokens`` -> bucket ->
  per bucket a ``uint16`` numpy write of each document into the open part (same part rule),
  offsets kept in a list and ``np.save``d, every 1000th document decoded and compared, each
  part re-read (``np.load`` + ``np.memmap``) and its invariants checked.
- tiktoken-encode: ``encode_ordinary_batch(num_threads=2)`` alone over the texts, already read
  into Python strings (not timed): tiktoken's own speed, for scale.

Each measurement runs in its own subprocess (its own peak RSS, VmHWM); the sides
alternate ``--rounds`` times (harness.alternate: the order reversed every other round) and medians are printed. MB/s are MB (10^6 bytes) of source text
per second of wall time of the timed work. "cpu s" is user + system CPU time of the timed work
(all threads): on a shared machine it is steadier than wall time. Outputs of the recipe and the
tiktoken pipeline are compared (same bins and idx, byte for byte) once at the start.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness
import peers
from harness import REPO as ROOT, cpu_seconds as _cpu_seconds, peak_rss_mb as _peak_rss_mb, require

BATCH_BYTES = 32 << 20
PART_TOKENS = 1 << 28
EDGES = [4096, 8192, 16384, 32768, 65536, 131072]
BUCKETS = ["b0_lt_4096", "b1_4096_8192", "b2_8192_16384", "b3_16384_32768", "b4_32768_65536", "b5_65536_131072", "b6_gte_131072"]


def _text_bytes(paths) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    return sum(int(pc.sum(pc.binary_length(pq.read_table(p, columns=["text"]).column(0))).as_py() or 0) for p in paths)


# ----------------------------------------------------------------------------------------------
# The sides
# ----------------------------------------------------------------------------------------------


def child_kernel(paths, out_dir: Path, threads) -> dict:
    import numba
    import numpy as np

    import fastenc
    from fastenc.arrow_io import iter_string_batches, resolve_inputs

    if threads:
        numba.set_num_threads(threads)
    enc = fastenc.load("gpt2")
    enc.encode_arrays(np.frombuffer(b"warm up", np.uint8), np.array([0, 7], np.int64))
    enc.clear_caches()  # cold piece caches, as the recipe starts with
    batches = list(iter_string_batches(resolve_inputs(paths), "text", batch_bytes=BATCH_BYTES))
    c0 = _cpu_seconds()
    t0 = time.perf_counter()
    tokens = 0
    for b in batches:
        ids, _ = enc.encode_arrays(b.data, b.offsets)
        tokens += ids.size
    dt = time.perf_counter() - t0
    return {"seconds": dt, "cpu_seconds": _cpu_seconds() - c0, "text_bytes": sum(int(b.data.size) for b in batches), "tokens": tokens}


def child_recipe(paths, out_dir: Path, threads, warm: bool) -> dict:
    c0 = _cpu_seconds()
    t0 = time.perf_counter()
    if warm:
        import numpy as np

        import fastenc

        fastenc.load("gpt2").encode_arrays(np.frombuffer(b"warm up", np.uint8), np.array([0, 7], np.int64))
        fastenc.load("gpt2").clear_caches()
        c0 = _cpu_seconds()
        t0 = time.perf_counter()
    from fastenc.recipes.gpt2 import encode_gpt2

    s = encode_gpt2(paths, out_dir / "out", part_tokens=PART_TOKENS, batch_bytes=BATCH_BYTES, threads=threads, quiet=True)
    dt = time.perf_counter() - t0
    return {"seconds": dt, "cpu_seconds": _cpu_seconds() - c0, "text_bytes": s["source_text_bytes"], "tokens": s["total"]["tokens"]}


def tiktoken_encoding():
    return peers.tiktoken_encoding("gpt2")  # offline, from ../shared/data/gpt2


def child_tiktoken(paths, out_dir: Path, threads) -> dict:
    import bisect

    import numpy as np
    import pyarrow.parquet as pq

    enc = tiktoken_encoding()
    c0 = _cpu_seconds()
    t0 = time.perf_counter()
    out = out_dir / "out"
    parts = {b: None for b in range(7)}  # bucket -> [file, offsets list, part number, tokens]
    counters = {b: 0 for b in range(7)}
    done = []

    def close(b):
        f, offs, k, _ = parts[b]
        f.close()
        stem = out / BUCKETS[b] / f"part_{k:02d}"
        np.save(str(stem) + ".idx.npy", np.array(offs, dtype=np.int64))
        done.append((b, stem))

    text_bytes = tokens = 0
    for path in paths:
        pf = pq.ParquetFile(path)
        for rb in pf.iter_batches(batch_size=2048, columns=["text", "gpt2_tokens"]):
            texts = rb.column(0).to_pylist()
            expected = rb.column(1).to_pylist()
            encoded = enc.encode_ordinary_batch(texts, num_threads=threads or 2)
            for i, (text, ids) in enumerate(zip(texts, encoded)):
                n = len(ids)
                text_bytes += len(text.encode("utf-8"))
                if n != expected[i]:
                    raise SystemExit(f"count mismatch at {path}")
                if n == 0:
                    continue
                tokens += n
                b = bisect.bisect_right(EDGES, n)
                p = parts[b]
                if p is None or (p[3] and p[3] + n > PART_TOKENS):
                    k = 0 if p is None else p[2] + 1
                    if p is not None:
                        close(b)
                    (out / BUCKETS[b]).mkdir(parents=True, exist_ok=True)
                    p = parts[b] = [open(out / BUCKETS[b] / f"part_{k:02d}.bin", "wb"), [0], k, 0]
                np.asarray(ids, dtype=np.uint16).tofile(p[0])
                p[3] += n
                p[1].append(p[3])
                if counters[b] % 1000 == 0 and enc.decode_bytes(ids) != text.encode("utf-8"):
                    raise SystemExit("round trip mismatch")
                counters[b] += 1
    for b in range(7):
        if parts[b] is not None:
            close(b)
    for b, stem in done:  # verify each part from disk
        idx = np.load(str(stem) + ".idx.npy")
        tok = np.memmap(str(stem) + ".bin", dtype=np.uint16, mode="r")
        assert len(tok) == idx[-1] and idx[0] == 0 and (np.diff(idx) > 0).all() and int(tok.max()) < 50257
        del tok
    dt = time.perf_counter() - t0
    return {"seconds": dt, "cpu_seconds": _cpu_seconds() - c0, "text_bytes": text_bytes, "tokens": tokens}


def child_tiktoken_encode(paths, out_dir: Path, threads) -> dict:
    import pyarrow.parquet as pq

    enc = tiktoken_encoding()
    texts = [t for p in paths for t in pq.read_table(p, columns=["text"]).column(0).to_pylist()]
    c0 = _cpu_seconds()
    t0 = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), 2048):
        tokens += sum(map(len, enc.encode_ordinary_batch(texts[i : i + 2048], num_threads=threads or 2)))
    dt = time.perf_counter() - t0
    return {"seconds": dt, "cpu_seconds": _cpu_seconds() - c0, "text_bytes": sum(len(t.encode("utf-8")) for t in texts), "tokens": tokens}


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------

KINDS = ["kernel", "recipe", "recipe-cold", "tiktoken", "tiktoken-encode"]


def run_child(kind: str, args, keep: Path | None = None) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"bench-gpt2-{kind}-", dir=args.tmp))
    cmd = [sys.executable, __file__, "--child", kind, "--tmp", str(work), "--corpus", *([str(args.corpus)] * args.copies)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    try:
        r = harness.run_fresh(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if keep is not None and r.returncode == 0:
            shutil.copytree(work / "out", keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if r.returncode:
        raise SystemExit(f"{kind} failed:\n{r.stderr}")
    res = r.json()
    res["process_seconds"] = r.wall
    return res


def same_bins(a: Path, b: Path) -> bool:
    names = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.suffix in (".bin", ".npy"))
    other = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.suffix in (".bin", ".npy"))
    return names == other and all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_flags(ap, corpus_aliases=["--input"], corpus_nargs="+", rounds_aliases=["--reps"], threads=None)
    ap.add_argument("--copies", "--repeat", dest="copies", type=int, default=1, help="list the input this many times")
    ap.add_argument("--threads", type=int, default=None, help="encoder threads (default: every core; tiktoken: 2)")
    ap.add_argument("--tools", "--kinds", dest="kinds", default=",".join(KINDS), help="which sides to run")
    ap.add_argument("--tmp", default=None, help="scratch directory for outputs (default: the system's)")
    ap.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.child:
        require(args.corpus, "--corpus")

    if args.child:
        out = Path(args.tmp)
        if args.child == "kernel":
            res = child_kernel(args.corpus, out, args.threads)
        elif args.child == "tiktoken":
            res = child_tiktoken(args.corpus, out, args.threads)
        elif args.child == "tiktoken-encode":
            res = child_tiktoken_encode(args.corpus, out, args.threads)
        else:
            res = child_recipe(args.corpus, out, args.threads, warm=args.child == "recipe")
        res["peak_rss_mb"] = _peak_rss_mb()
        print(json.dumps(res))
        return

    if len(args.corpus) != 1:
        raise SystemExit("give one --corpus (it is listed --copies times)")
    scratch = Path(tempfile.mkdtemp(prefix="bench-gpt2-slice-", dir=args.tmp))
    try:
        args.corpus = harness.corpus_slice(args.corpus[0], args.mb, scratch)
        with harness.out_md(args.out_md):
            report(args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(args) -> None:
    kinds = [k for k in args.kinds.split(",") if k]
    # once, not timed: warm the page and Numba caches, and check both pipelines write the same bins
    check = Path(tempfile.mkdtemp(prefix="bench-gpt2-check-", dir=args.tmp))
    try:
        run_child("recipe", args, keep=check / "recipe")
        if "tiktoken" in kinds:
            run_child("tiktoken", args, keep=check / "tiktoken")
            if not same_bins(check / "recipe", check / "tiktoken"):
                raise SystemExit("the recipe and the tiktoken pipeline wrote different bins")
            print("recipe and tiktoken pipeline: identical .bin and .idx.npy files", file=sys.stderr)
    finally:
        shutil.rmtree(check, ignore_errors=True)
    runs = {k: [] for k in kinds}
    for rep, k in harness.alternate(kinds, args.rounds):
        res = run_child(k, args)
        runs[k].append(res)
        print(f"  round {rep + 1}: {k:15s} {res['seconds']:6.2f} s  {res['text_bytes'] / res['seconds'] / 1e6:7.1f} MB/s  "
              f"cpu {res['cpu_seconds']:5.2f} s  process {res['process_seconds']:5.2f} s  peak RSS {res['peak_rss_mb']:6.0f} MB",
              file=sys.stderr)
    text = runs[kinds[0]][0]["text_bytes"]
    assert all(r["text_bytes"] == text for rs in runs.values() for r in rs), "sides read different text"
    med = {k: statistics.median(r["seconds"] for r in rs) for k, rs in runs.items()}
    cpu = {k: statistics.median(r["cpu_seconds"] for r in rs) for k, rs in runs.items()}
    proc = {k: statistics.median(r["process_seconds"] for r in rs) for k, rs in runs.items()}
    rss = {k: max(r["peak_rss_mb"] for r in rs) for k, rs in runs.items()}
    ref = "kernel" if "kernel" in kinds else kinds[0]
    tt = "tiktoken" in med
    print(harness.machine_header("GPT-2 recipe vs its encode kernel and a tiktoken pipeline (`bench/bench_gpt2_recipe.py`)",
                                 ("numba", "tiktoken", "pyarrow")))
    print(f"- **Input:** `{args.corpus}` x {args.copies} = {text / 1e6:.1f} MB of text; {args.rounds} alternating rounds, "
          f"medians; encoder threads: {args.threads or os.cpu_count()}; tiktoken threads: {args.threads or 2}\n")
    rows = [[k, f"{med[k]:.2f}", f"{text / med[k] / 1e6:.1f}", f"{med[ref] / med[k]:.2f}",
             f"{med['tiktoken'] / med[k]:.2f}" if tt else "–", f"{cpu[k]:.2f}", f"{cpu[ref] / cpu[k]:.2f}",
             f"{cpu['tiktoken'] / cpu[k]:.2f}" if tt else "–", f"{proc[k]:.2f}", f"{rss[k]:.0f}"] for k in kinds]
    print(harness.md_table(["side", "seconds", "MB/s", f"{ref} / side", "tiktoken / side", "cpu s", f"{ref} / side (cpu)",
                            "tiktoken / side (cpu)", "process s", "peak RSS MB"], rows))
    print("\n(seconds, MB/s and the first two ratios: wall time; 'cpu s' and the last two ratios: CPU time of all threads)")
    print(harness.footer())


if __name__ == "__main__":
    main()
