"""Whole datasets (docs/scale.md): 1 vs N workers, and the reduce phase's share of a run.

    python bench/bench_scale.py [--urls ../shared/data/urls/urls.parquet] [--corpus ../shared/data/text/docs.parquet]
                                [--mb N] [--shards 8] [--copies 13] [--doc-copies 16] [--workers 2] [--work DIR]
                                [--rounds 3] [--out-md F]

- URLs: ``--shards`` shards of ~``rows x copies / shards`` URLs each (8 x ~1.03 M by default),
  made from the real corpus: every URL is repeated ``--copies`` times with a query suffix
  (``?v=k``), in the source's SURT order (so the BPE caches see real neighbourhoods), and each
  copy goes to the shard its xxh3 names (``(h * shards) >> 64``): real shards of a
  ``--shards``-shard corpus, which ``fastenc urls --num-shards`` checks.
- GPT-2: the docs corpus (``--doc-copies`` times over) cut into 8 files, recipe defaults.

For each recipe and worker count, each run in a fresh process of its own (as a command is: a
process that has run other work has thread pools that rule out forking its workers,
``fastenc.run.forking``), with a command's start-up settings (``fastenc.run.process.kernels_only_process``,
which ``fastenc.cli.main`` applies): wall seconds of the whole run (warm kernel cache, the
workers' start-up included, the process's own imports not), CPU seconds (this process and its workers: on a
shared machine the wall time follows the load, the CPU time much less), the map phase, and the rest (the reduce and the
publication, from the end of the map to the end of the run; for urls, each shard publishes itself: no reduce). Every run's output is compared
byte for byte with the first run's (by digest; then it is deleted: the inputs stay in ``--work``). Prints one
table (paste it into bench/RESULTS.md). ``--corpus`` was ``--docs`` (still read); ``--mb N`` takes only the
first N MB of each source (the URLs' column, the documents' text) before the copies are made.

Two baselines. *1 core*: one process pinned to one CPU (``sched_setaffinity``, every thread of it),
the baseline of a per-core speed-up: N workers on N cores against one worker on one core. *1x1*: one
process of one Numba thread on the free machine, where its parquet reader thread (which decodes the
next batch while the encoder works; ~0.19 s of CPU per 97 MB of GPT-2 text, half of a warm encode)
runs on the other core: that run already uses more than one core, so N workers cannot be N times it.

And one ceiling per worker count N, *N independent 1-core runs*: N processes at once, each pinned to a CPU of its
own and running the recipe alone over its contiguous share of the files into an output of its own (no fork, no
shared work folder, no reduce across them; wall: the slowest, CPU: the sum). It is what N cores of this machine
give this recipe with no coordination at all: on these VMs two busy vCPUs slow each other down (memory, page
cache, the host), by an amount that changes from one sitting to the next. "2 x 1" against it is the share of the
scaling that fastenc's map/reduce costs; against "1 core", the machine's share is in it too (bench/RESULTS.md
has the sitting that measured it). Its outputs are N separate ones, so its "identical" column reads n/a.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import harness
from harness import require


def make_url_shards(src: Path, folder: Path, shards: int, copies: int) -> list[Path]:
    from fastenc.arrow_io import arrow_to_flat
    from fastenc.recipes.urls.threads import hash_batch

    urls = pq.read_table(src, columns=["url"]).column("url").combine_chunks()
    rep = pa.array(np.repeat(np.arange(len(urls)), copies))
    suffix = pa.array(np.tile([f"?v={k}" for k in range(copies)], len(urls)))
    many = pc.binary_join_element_wise(urls.take(rep), suffix, "")
    data, offsets = arrow_to_flat(many)
    shard = (hash_batch(data, offsets) >> np.uint64(64 - int(np.log2(shards)))).astype(np.int64)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(shards):
        p = folder / f"part-{k:05d}.parquet"
        pq.write_table(pa.table({"url": many.filter(pa.array(shard == k))}), p, row_group_size=100_000)
        paths.append(p)
    return paths


def make_doc_files(src: Path, folder: Path, n: int, copies: int) -> list[Path]:
    t = pq.read_table(src)
    t = pa.concat_tables([t] * copies)  # a bigger corpus (the encoder's caches make the copies cheaper)
    folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, t.num_rows, n + 1).astype(int)
    paths = []
    for k in range(n):
        p = folder / f"docs-{k:05d}.parquet"
        pq.write_table(t.slice(bounds[k], bounds[k + 1] - bounds[k]), p)
        paths.append(p)
    return paths


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def discard(out: Path) -> None:
    """Delete a run's output (its digest taken) and what the run left beside it: four plans' outputs
    of both recipes are ~6.6 GB, and a sitting that leaves them in /tmp fills the disk over a few
    sittings (a nearly full ext4 also writes slower, which would skew the next sitting)."""
    shutil.rmtree(out, ignore_errors=True)
    for p in out.parent.glob(out.name + ".fastenc-*"):  # its lock file (and a work folder, after a failure)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def timed_run(recipe: str, paths, out: Path, workers: int, shards: int, threads: int | None, with_digest: bool = True) -> dict:
    """One run; returns wall seconds of the whole and of its map phase."""
    from fastenc.recipes.bytes import encode_bytes  # noqa: F401
    from fastenc.recipes.gpt2 import encode_gpt2
    from fastenc.recipes.urls import encode_shards
    from fastenc.run import units

    shutil.rmtree(out, ignore_errors=True)
    # Start on a quiet disk: the inputs just made, the previous run's output and its deletion would
    # otherwise still be written back (and discarded) during this run, and its fsyncs wait on them
    # (gpt2, 16 copies: 0.9-1.2 s after the map in the first rounds, against ~0.5 s on a quiet disk).
    os.sync()
    phases = {"map": 0.0}
    real = units.map_units

    def timed_map(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            phases["map_end"] = time.perf_counter()
            phases["map"] += phases["map_end"] - t

    units.map_units = timed_map
    import fastenc.recipes.urls as urls_mod

    urls_mod.map_units = timed_map  # urls imported the name
    t0, cpu0 = time.perf_counter(), _cpu()
    try:
        if recipe == "urls":
            if workers == 1:  # the one-process path calls encode_shard in a loop, not map_units
                t = time.perf_counter()
                encode_shards(paths, out, num_shards=shards, threads=threads, quiet=True)
                phases["map"] = time.perf_counter() - t
            else:
                encode_shards(paths, out, num_shards=shards, workers=workers, threads=threads, quiet=True)
        else:
            encode_gpt2(paths, out, workers=workers, threads=threads, quiet=True)
    finally:
        units.map_units = urls_mod.map_units = real
    end, cpu = time.perf_counter(), _cpu() - cpu0
    total = end - t0
    # reduce+publish: from the end of the map to the end of the run (what a streamed reduce left
    # for after the map, the parts' checks, the publication, the spills' deletion); the set-up
    # before the map (reading footers, loading the vocabulary) is not part of it
    rest = end - phases["map_end"] if "map_end" in phases else total - phases["map"]
    r = {"total": total, "cpu": cpu, "map": phases["map"], "rest": rest}
    if with_digest:
        r["digest"] = digest(out)
    return r


def _start_child(recipe: str, paths, out: Path, workers: int, shards: int, threads: int | None, one_core: bool,
                 cpu: int | None = None):
    """A fresh process running ``timed_run`` (``--child``); ``one_core``: pinned to one CPU (``cpu``, else the
    lowest this process may use). ``_child_result`` waits for it."""
    import json
    import subprocess

    spec = {"recipe": recipe, "paths": [str(p) for p in paths], "out": str(out), "workers": workers, "shards": shards,
            "threads": threads, "one_core": one_core}
    if cpu is not None:
        spec["cpu"] = cpu
    return subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _child_result(proc) -> dict:
    import json

    stdout, stderr = proc.communicate()
    if proc.returncode:
        sys.stderr.write(stderr)
        raise SystemExit(f"a bench run failed (exit {proc.returncode}); its output is above")
    return json.loads(stdout.strip().splitlines()[-1])


def run_in_child(recipe: str, paths, out: Path, workers: int, shards: int, threads: int | None, one_core: bool = False) -> dict:
    """``timed_run`` in a fresh process (``--child``); its digest is taken here. ``one_core``: the
    process (every thread of it: the encoder, the parquet reader, pyarrow's pool) is pinned to one CPU."""
    r = _child_result(_start_child(recipe, paths, out, workers, shards, threads, one_core))
    r["digest"] = digest(out)
    return r


def run_split_in_children(recipe: str, paths, out: Path, parts: int, shards: int) -> dict:
    """The ceiling for ``parts`` workers (module docstring): ``parts`` fresh processes at once, each pinned to a
    CPU of its own, each a whole 1-core run over its contiguous share of ``paths`` into an output of its own."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < parts:
        raise SystemExit(f"{parts} independent 1-core runs need {parts} CPUs; this process may use {len(cpus)}")
    shares = [paths[len(paths) * j // parts : len(paths) * (j + 1) // parts] for j in range(parts)]
    outs = [out.with_name(f"{out.name}-{j}") for j in range(parts)]
    procs = [_start_child(recipe, share, o, 1, shards, 1, True, cpu) for share, o, cpu in zip(shares, outs, cpus)]
    rs = []
    try:
        for proc, o in zip(procs, outs):
            rs.append(_child_result(proc))
            discard(o)
    finally:  # one run failed: stop the others rather than leave them running after the bench exits
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {"total": max(r["total"] for r in rs), "cpu": sum(r["cpu"] for r in rs), "map": max(r["map"] for r in rs),
            "rest": max(r["rest"] for r in rs), "digest": None}


def _child(spec: str) -> None:
    import json

    a = json.loads(spec)
    # A command's start-up, as `fastenc gpt2|urls` has it (fastenc.cli.main): no Numba extensions
    # loaded, cached kernels loaded without Numba's registry refresh. Without it the run's process
    # paid ~0.46 s more before forking (0.26 s refresh; 0.20 s importing awkward, which gigatoken
    # brings into the bench venv), a serial stretch on every worker count's critical path.
    from fastenc.run.process import kernels_only_process

    kernels_only_process()
    if a.get("one_core"):  # before any thread exists: all inherit it
        os.sched_setaffinity(0, {a.get("cpu", min(os.sched_getaffinity(0)))})
    r = timed_run(a["recipe"], [Path(p) for p in a["paths"]], Path(a["out"]), a["workers"], a["shards"], a["threads"],
                  with_digest=False)
    print(json.dumps(r))


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the pool's workers are joined)."""
    import resource

    return harness.cpu_seconds(resource.RUSAGE_SELF) + harness.cpu_seconds(resource.RUSAGE_CHILDREN)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_flags(p, corpus_aliases=["--docs"], threads=None)
    p.add_argument("--urls", type=Path, default=harness.URLS)
    p.add_argument("--shards", type=int, default=8, help="a power of two")
    p.add_argument("--copies", type=int, default=13, help="copies of each URL (13: 8 shards of ~1.03 M URLs)")
    p.add_argument("--doc-copies", type=int, default=16,
                   help="copies of the docs corpus cut into the 8 gpt2 files (16: ~13,250 documents, ~190 MB of text a "
                        "file, ~1.4 s of one core each, the URL shards' size in work; at 4 a file takes ~0.35 s and "
                        "the run's fixed costs, start-up and the last steps, weigh four times as much)")
    p.add_argument("--workers", type=int, nargs="+", default=[2], help="worker counts to run besides one process")
    p.add_argument("--work", type=Path, default=Path("/tmp/fastenc-bench-scale"))
    p.add_argument("--only", choices=["urls", "gpt2"], default=None)
    p.add_argument("--in-process", action="store_true", help="every run in this process, one after another")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return _child(args.child)
    args.docs = args.corpus
    require([args.urls, args.docs], "--urls/--corpus")
    with harness.out_md(args.out_md):
        run(args)


def run(args) -> None:
    from fastenc.warmup import cold_families, compile_families

    compile_families(cold_families(("urls", "gpt2")), quiet=True)
    inputs = {}
    args.work.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "urls"):
        urls = harness.corpus_slice(args.urls, args.mb, args.work, column="url")
        inputs["urls"] = make_url_shards(urls, args.work / "urls-in", args.shards, args.copies)
    if args.only in (None, "gpt2"):
        inputs["gpt2"] = make_doc_files(harness.corpus_slice(args.docs, args.mb, args.work), args.work / "docs-in", 8,
                                        args.doc_copies)
    import numba

    cores = numba.config.NUMBA_NUM_THREADS
    # (workers, threads per worker, kind): "core" one process confined to one core (every thread of it: the
    # baseline of a per-core speed-up), "free" a run on the free machine (one process of one Numba thread, whose
    # parquet reader thread then runs beside the encoder on the other core; one process on every core, the
    # default; then N processes), "split" N independent 1-core runs at once (the ceiling, module docstring)
    plans = ([] if args.in_process else [(1, 1, "core")]) + [(1, 1, "free"), (1, cores, "free")] + \
        [(w, max(1, cores // w), "free") for w in args.workers if w > 1] + \
        ([] if args.in_process else [(w, 1, "split") for w in args.workers if 1 < w <= len(os.sched_getaffinity(0))])
    print(harness.machine_header("Whole datasets: 1 vs N workers (`bench/bench_scale.py`)", ("numba", "pyarrow")))
    print(f"- **Method:** every plan in a fresh process, {args.rounds} alternating rounds, medians; speed-ups paired by round\n")
    print("| recipe | files | rows per file | workers x threads | wall s | CPU s | map s | reduce+publish s | reduce share | "
          "speed-up vs 1 core | vs 1x1 | identical |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for recipe, paths in inputs.items():
        rows = int(np.mean([pq.ParquetFile(x).metadata.num_rows for x in paths]))
        results = {plan: [] for plan in plans}
        for _, (w, t, kind) in harness.alternate(plans, args.rounds):  # every plan once a round
            out = args.work / {"core": f"out-{recipe}-1core", "free": f"out-{recipe}-{w}x{t}",
                               "split": f"out-{recipe}-{w}-split"}[kind]
            if kind == "split":
                r = run_split_in_children(recipe, paths, out, w, args.shards)
            elif kind == "core":
                r = run_in_child(recipe, paths, out, w, args.shards, t, one_core=True)
            else:
                runner = timed_run if args.in_process else run_in_child
                r = runner(recipe, paths, out, w, args.shards, t)
            discard(out)
            results[(w, t, kind)].append(r)
        first = results[plans[0]][0]
        core = next((results[p] for p in plans if p[2] == "core"), None)
        base = next(results[p] for p in plans if p[2] == "free")
        for (w, t, kind), rs in results.items():
            med = {key: statistics.median(r[key] for r in rs) for key in ("total", "cpu", "map", "rest")}
            label = {"core": f"{w} x {t} (1 core)", "free": f"{w} x {t}", "split": f"{w} independent 1-core runs"}[kind]
            same = "n/a" if kind == "split" else all(r["digest"] == first["digest"] for r in rs)
            print(f"| {recipe} | {len(paths)} | {rows:,} | {label} | {med['total']:.1f} | {med['cpu']:.1f} | {med['map']:.1f} | "
                  f"{med['rest']:.1f} | {med['rest'] / med['total']:.1%} | {_ratios(core, rs)} | {_ratios(base, rs)} | "
                  f"{same} |", flush=True)
    print(harness.footer())


def _ratios(baseline, runs) -> str:
    """The baseline's wall time over each run's, paired by round (one round's runs ran minutes apart at
    most): the median, and each round's when there are several."""
    if baseline is None:
        return "-"
    ratios = [b["total"] / r["total"] for b, r in zip(baseline, runs)]
    rounds = f" ({', '.join(f'{x:.2f}' for x in ratios)})" if len(ratios) > 1 else ""
    return f"{statistics.median(ratios):.2f}x{rounds}"


if __name__ == "__main__":
    main()
