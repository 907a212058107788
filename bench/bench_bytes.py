"""Benchmark: the raw-bytes recipe against the floor of the same work, on the same input, in one run.

    python bench/bench_bytes.py [--corpus docs.parquet] [--mb N] [--copies 5] [--rounds 3] [--out-md F]

(Old names still read: --input for --corpus, --repeat for --copies, --reps for --rounds.)
The input is ``--corpus`` listed ``--copies`` times (5 x docs.parquet = 484 MB of text), so both
sides read the same parquet column and write the same number of bytes:

- floor:  pyarrow ``ParquetFile.iter_batches`` over the text column (the same batch sizes as the
  recipe) + writing each batch's value bytes and one byte per document to one file, fsynced.
  Nothing else: no separators placed, no val routing, no shards, no hashing, no meta.
- recipe: ``fastenc.recipes.bytes.encode_bytes`` (separators, val split, 500 MB shards, xxh3,
  temporary names + renames, meta.json).
- recipe-warm: the same, in a process where the Numba kernels were already loaded (the
  steady state of a long run; ``recipe`` includes loading Numba and the cached kernels, ~0.5-1 s).

Each measurement runs in its own subprocess (so each gets its own peak RSS, VmHWM), the
three alternate ``--rounds`` times (harness.alternate: the order reversed every other round), and the medians are printed. MB/s are MB of source text
(10^6 bytes) per second of the timed work (imports excluded, except Numba's for ``recipe``);
"process" is the whole subprocess wall time, interpreter start-up included. "cpu s" is the user +
system CPU time of the timed work (getrusage): on a shared machine it is less disturbed by other
processes than wall time, so its ratio is printed too.
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
from harness import REPO as ROOT, cpu_seconds as _cpu_seconds, peak_rss_mb as _peak_rss_mb, require


def child_floor(paths: list[str], column: str, out_dir: Path, batch_bytes: int) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    c0 = _cpu_seconds()
    t0 = time.perf_counter()
    text = docs = 0
    with open(out_dir / "floor.bin", "wb") as f:
        for path in paths:
            pf = pq.ParquetFile(path)
            md = pf.metadata
            leaf = [pf.schema.column(j).path for j in range(len(pf.schema))].index(column)
            for rg in range(md.num_row_groups):
                g = md.row_group(rg)
                rows = max(1, min(g.num_rows, batch_bytes * g.num_rows // max(1, g.column(leaf).total_uncompressed_size)))
                for rb in pf.iter_batches(batch_size=rows, row_groups=[rg], columns=[column]):
                    arr = rb.column(0)
                    offs = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset : arr.offset + len(arr) + 1]
                    data = memoryview(arr.buffers()[2])[int(offs[0]) : int(offs[-1])]
                    f.write(data)
                    f.write(bytes(len(arr)))  # as many bytes as the separators take
                    text += len(data)
                    docs += len(arr)
        f.flush()
        os.fsync(f.fileno())
    dt = time.perf_counter() - t0
    return {"seconds": dt, "cpu_seconds": _cpu_seconds() - c0, "text_bytes": text, "written": text + docs, "documents": docs}


def child_recipe(paths: list[str], column: str, out_dir: Path, batch_bytes: int, warm: bool) -> dict:
    from fastenc.recipes.bytes import encode_bytes

    if warm:
        import numpy as np

        from fastenc.kernels.bytes_pack import count_high_bytes, pack_documents

        d, o = np.frombuffer(b"ab\xfe", np.uint8), np.array([0, 3], np.int64)
        pack_documents(d, o, np.uint8(254), np.int64(256), np.empty(4, np.uint8))
        count_high_bytes(d, o, np.uint8(254), np.empty(1, np.int64))
    c0 = _cpu_seconds()
    t0 = time.perf_counter()
    meta = encode_bytes(paths, out_dir / "out", column=column, batch_bytes=batch_bytes, quiet=True)
    dt = time.perf_counter() - t0
    return {"seconds": dt, "cpu_seconds": _cpu_seconds() - c0, "text_bytes": meta["source_text_bytes"], "written": meta["bytes"], "documents": meta["documents"]}


def run_child(kind: str, args) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"bench-bytes-{kind}-", dir=args.tmp))
    cmd = [sys.executable, __file__, "--child", kind, "--tmp", str(work), "--column", args.column,
           "--batch-bytes", str(args.batch_bytes), "--corpus", *([str(args.corpus)] * args.copies)]
    try:
        r = harness.run_fresh(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if r.returncode:
        raise SystemExit(f"{kind} failed:\n{r.stderr}")
    res = r.json()
    res["process_seconds"] = r.wall
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_flags(ap, corpus_aliases=["--input"], corpus_nargs="+", rounds_aliases=["--reps"], threads=None)
    ap.add_argument("--copies", "--repeat", dest="copies", type=int, default=5,
                    help="list the input this many times (default 5: ~484 MB of text)")
    ap.add_argument("--column", default="text")
    ap.add_argument("--batch-bytes", type=int, default=16 << 20)
    ap.add_argument("--tmp", default=None, help="scratch directory for outputs (default: the system's)")
    ap.add_argument("--child", choices=["floor", "recipe", "recipe-warm"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.child:
        require(args.corpus, "--corpus")

    if args.child:
        out = Path(args.tmp)
        if args.child == "floor":
            res = child_floor(args.corpus, args.column, out, args.batch_bytes)
        else:
            res = child_recipe(args.corpus, args.column, out, args.batch_bytes, warm=args.child == "recipe-warm")
        res["peak_rss_mb"] = _peak_rss_mb()
        print(json.dumps(res))
        return

    if len(args.corpus) != 1:
        raise SystemExit("give one --corpus (it is listed --copies times)")
    scratch = Path(tempfile.mkdtemp(prefix="bench-bytes-", dir=args.tmp))
    try:
        args.corpus = harness.corpus_slice(args.corpus[0], args.mb, scratch)
        with harness.out_md(args.out_md):
            report(args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(args) -> None:
    kinds = ["floor", "recipe", "recipe-warm"]
    runs = {k: [] for k in kinds}
    run_child("recipe", args)  # warm the page cache and the Numba on-disk cache (not counted)
    for rep, k in harness.alternate(kinds, args.rounds):
        res = run_child(k, args)
        runs[k].append(res)
        mbps = res["text_bytes"] / res["seconds"] / 1e6
        print(f"  round {rep + 1}: {k:12s} {res['seconds']:6.2f} s  {mbps:7.1f} MB/s  cpu {res['cpu_seconds']:5.2f} s  "
              f"process {res['process_seconds']:5.2f} s  peak RSS {res['peak_rss_mb']:6.0f} MB", file=sys.stderr)
    text = runs["floor"][0]["text_bytes"]
    assert all(r["text_bytes"] == text for rs in runs.values() for r in rs)
    assert all(r["written"] == runs["floor"][0]["written"] for rs in runs.values() for r in rs), "different byte counts written"
    med = {k: statistics.median(r["seconds"] for r in rs) for k, rs in runs.items()}
    proc = {k: statistics.median(r["process_seconds"] for r in rs) for k, rs in runs.items()}
    cpu = {k: statistics.median(r["cpu_seconds"] for r in rs) for k, rs in runs.items()}
    rss = {k: max(r["peak_rss_mb"] for r in rs) for k, rs in runs.items()}
    print(harness.machine_header("Raw bytes recipe vs the pyarrow floor (`bench/bench_bytes.py`)", ("numba", "pyarrow")))
    print(f"- **Input:** `{args.corpus}` x {args.copies} = {text / 1e6:.1f} MB of text, {runs['floor'][0]['documents']:,} "
          f"documents; {args.rounds} alternating rounds, medians; batch {args.batch_bytes >> 20} MiB\n")
    print(harness.md_table(["side", "seconds", "MB/s", "floor / side (time)", "cpu s", "floor / side (cpu)", "process s",
                            "peak RSS MB"],
                           [[k, f"{med[k]:.2f}", f"{text / med[k] / 1e6:.1f}", f"{med['floor'] / med[k]:.2f}", f"{cpu[k]:.2f}",
                             f"{cpu['floor'] / cpu[k]:.2f}", f"{proc[k]:.2f}", f"{rss[k]:.0f}"] for k in kinds]))
    print(harness.footer())


if __name__ == "__main__":
    main()
