"""Where one run of a recipe spends its time: a timeline of its units, per process (docs/scale.md).

    python bench/probes/scale_timeline.py urls|gpt2 [--plan 1core|WxT] [--work /tmp/fastenc-bench-scale]
                                   [--urls ../shared/data/urls/urls.parquet] [--corpus ../shared/data/text/docs.parquet]

Runs the recipe once, in this process, over ``bench_scale.py``'s inputs (made first if absent,
with its defaults), with a command's start-up (``kernels_only_process``). ``--plan 1core``: one
process pinned to one CPU (bench_scale's baseline); ``2x1``: 2 workers of 1 Numba thread. Prints
each unit's start, end, wall and CPU seconds and its process (p0 is the run's own process, which
encodes units too), the process's system seconds and page faults meanwhile; for urls each shard's
stages (read, hash, encode, sort, write, verify), for gpt2 each unit's reduce and the parts'
closing; then per process its first unit against the median of the others (a process's first unit
runs on cold piece caches and fresh memory).

Then the page cache over the run, from a sampler in a process of its own (a thread here would make
the run spawn its workers instead of forking them): how much ``Cached`` grew, the peak of
``Dirty``, the MB the disks took, and both each second. On a VM that hands freed memory back to the
host, writes into a page cache that keeps growing get slower (gpt2 at twice the bench's files:
bench/RESULTS.md, session 35).

First it measures this machine's first touch of memory: fresh 2 MB pages, the same pages again
at once, and 4 kB pages, in ms per MB. On a VM whose balloon reports free pages to the host
(Firecracker, some clouds), fresh memory costs ~15x recycled memory: a worker's caches (64 MB)
and buffers pay it in every new process. The run starts 3 s after the probe, once the memory the
probe freed is the host's again (else the first units run on it, cheaper than a command's would).
The run's output is deleted after it (the inputs are kept). A probe for bench/RESULTS.md, not
part of fastenc: it wraps private functions of the recipes and may need updating when they change.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness and the benches
from bench_scale import discard  # noqa: E402
from harness import SHARED_DATA as SHARED, require  # noqa: E402

_RETURNED_AFTER_S = 3.0  # Linux's free page reporting waits 2 s before handing freed memory back to the host

_LOG = Path(tempfile.gettempdir()) / f"fastenc-timeline-{os.getpid()}.jsonl"


def first_touch_ms_per_mb(mb: int = 256) -> dict:
    """ms per MB to write one byte per 4 kB page of new anonymous memory: on 2 MB pages (new to this
    process; on a VM that reports free pages, the host backs them again unless memory was freed in
    the last ~2 s), on the same pages again right after they were freed, and on 4 kB pages."""
    def touch(huge: bool) -> float:
        m = mmap.mmap(-1, mb << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if huge and hasattr(mmap, "MADV_HUGEPAGE"):
            m.madvise(mmap.MADV_HUGEPAGE)
        a = np.frombuffer(m, np.uint8)
        t = time.perf_counter()
        a[::4096] = 1
        dt = time.perf_counter() - t
        del a
        m.close()
        return dt * 1000 / mb

    return {"2 MB pages": touch(True), "2 MB pages freed just before": touch(True), "4 kB pages": touch(False)}


def _record(kind: str, unit: int, t0: float, cpu: float = 0.0, extra: dict | None = None) -> None:
    row = [kind, os.getpid(), unit, t0, time.clock_gettime(time.CLOCK_MONOTONIC), cpu, extra or {}]
    with open(_LOG, "a") as f:
        f.write(json.dumps(row) + "\n")


def _attribute(module: str, qualname: str):
    import importlib

    owner = importlib.import_module(module)
    for part in qualname.split("."):
        owner = getattr(owner, part)
    return owner


class _Timed:
    """``owner.name`` recording each call as a row of ``kind``; pickled as a reference to where it
    stands (a forked worker has it there too), since the recipes pickle their unit functions."""

    def __init__(self, owner, name: str, kind: str, unit_of, cpu: bool = True):
        self.real, self.kind, self.unit_of, self.cpu = getattr(owner, name), kind, unit_of, cpu
        self.where = (owner.__module__ if isinstance(owner, type) else owner.__name__,
                      f"{owner.__qualname__}.{name}" if isinstance(owner, type) else name)
        setattr(owner, name, self)

    def __reduce__(self):
        return _attribute, self.where

    def __get__(self, obj, objtype=None):  # a method of a class stays one
        return self if obj is None else (lambda *a, **k: self(obj, *a, **k))

    def __call__(self, *args, **kwargs):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0, c0 = time.clock_gettime(time.CLOCK_MONOTONIC), time.process_time()
        try:
            return self.real(*args, **kwargs)
        finally:
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            # the process's, over the call (gpt2's reduce thread runs beside its units: theirs overlap)
            use = {"sys": r1.ru_stime - r0.ru_stime, "faults": r1.ru_minflt - r0.ru_minflt}
            _record(self.kind, self.unit_of(args, kwargs), t0, time.process_time() - c0 if self.cpu else 0.0, use)


def _second(args, kwargs):
    return args[1]


def _sixth(args, kwargs):
    return args[5]


def instrument(recipe: str) -> None:
    if recipe == "urls":
        import fastenc.recipes.urls as urls

        _Timed(urls, "encode_unit", "unit", _sixth)
        real_summary = urls._print_summary

        def stages(job, run, meta, nulls):  # called (quiet or not) at the end of each shard
            _record("stages", job.shard, time.clock_gettime(time.CLOCK_MONOTONIC), 0.0, dict(run.stats.seconds))
            return real_summary(job, run, meta, nulls)

        urls._print_summary = stages
    else:
        import fastenc.recipes.gpt2 as gpt2

        _Timed(gpt2, "map_unit", "unit", _second)
        _Timed(gpt2._Reduce, "unit", "reduce", _second, cpu=False)  # (on the reduce's thread: no CPU of its own)
        _Timed(gpt2, "_summary", "close", lambda a, k: -1, cpu=False)


_SAMPLER = r"""
import os, sys, time
out = open(sys.argv[1], "w")
disks = set(os.listdir("/sys/block")) if os.path.isdir("/sys/block") else set()
while True:
    mem = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":")
            mem[key] = int(value.split()[0])
    written = 0
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if p[2] in disks:
                written += int(p[9])  # sectors of 512 bytes
    out.write(f"{time.clock_gettime(time.CLOCK_MONOTONIC)} {mem.get('Cached', 0)} {mem.get('Dirty', 0)} {written}\n")
    out.flush()
    time.sleep(0.1)
"""


def start_sampler(path: Path):
    """A process that writes ``time Cached-kB Dirty-kB disk-sectors-written`` every 0.1 s to ``path``
    (Linux; None elsewhere)."""
    import subprocess

    if not os.path.exists("/proc/meminfo"):
        return None
    return subprocess.Popen([sys.executable, "-c", _SAMPLER, str(path)])


def report_page_cache(path: Path, t0: float, end: float) -> None:
    rows = [tuple(float(x) for x in line.split()) for line in path.read_text().splitlines() if line.count(" ") == 3]
    rows = [r for r in rows if t0 - 0.2 <= r[0] <= end + 0.2]
    if len(rows) < 2:
        return
    mb = 1 / 1024
    print(f"page cache: Cached {rows[0][1] * mb:,.0f} -> {rows[-1][1] * mb:,.0f} MB (peak {max(r[1] for r in rows) * mb:,.0f}), "
          f"Dirty peak {max(r[2] for r in rows) * mb:,.0f} MB, disks took {(rows[-1][3] - rows[0][3]) / 2048:,.0f} MB")
    marks = []
    for second in range(int(end - t0) + 1):
        r = min(rows, key=lambda r: abs(r[0] - t0 - second))
        marks.append(f"{second}s {r[1] * mb:,.0f}/{r[2] * mb:,.0f}")
    print("Cached/Dirty MB each second: " + ", ".join(marks))


def run(recipe: str, plan: str, paths: list, out: Path) -> float:
    workers, threads = (1, 1) if plan == "1core" else (int(x) for x in plan.split("x"))
    shutil.rmtree(out, ignore_errors=True)
    os.sync()  # start on a quiet disk (bench_scale.py says why)
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    if recipe == "urls":
        from fastenc.recipes.urls import encode_shards

        encode_shards(paths, out, num_shards=len(paths), workers=workers, threads=threads, quiet=True)
    else:
        from fastenc.recipes.gpt2 import encode_gpt2

        encode_gpt2(paths, out, workers=workers, threads=threads, quiet=True)
    return t0


def report(t0: float, end: float) -> None:
    rows = [json.loads(line) for line in _LOG.read_text().splitlines()]
    pids = [r[1] for r in sorted(rows, key=lambda r: r[3])]
    order = list(dict.fromkeys([os.getpid()] + pids))
    print("what | process | unit | start s | end s | wall s | CPU s | process sys s, page faults, stages")
    for kind, pid, unit, a, b, cpu, extra in sorted(rows, key=lambda r: (r[4] if r[0] == "stages" else r[3], r[0])):
        if kind == "stages":
            continue
        stages = next((r[6] for r in rows if r[0] == "stages" and r[1] == pid and r[2] == unit and kind == "unit"), {})
        use = [f"sys {extra['sys']:.2f} faults {extra['faults']}"] if extra else []
        text = " ".join(use + [f"{k} {v:.2f}" for k, v in stages.items()])
        print(f"{kind} | p{order.index(pid)} | {unit} | {a - t0:.2f} | {b - t0:.2f} | {b - a:.2f} | "
              f"{cpu:.2f} | {text}")
    print(f"run | | | 0.00 | {end - t0:.2f} | {end - t0:.2f} | |")
    for pid in order:
        walls = [r[4] - r[3] for r in sorted(rows, key=lambda r: r[3]) if r[0] == "unit" and r[1] == pid]
        if len(walls) > 1:
            rest = statistics.median(walls[1:])
            print(f"p{order.index(pid)}: first unit {walls[0]:.2f} s, the others' median {rest:.2f} s "
                  f"(first - median: {walls[0] - rest:+.2f} s)")


def inputs(recipe: str, work: Path, src: Path) -> list:
    """bench_scale.py's inputs in ``work`` (its defaults), made from ``src`` if absent."""
    from bench_scale import make_doc_files, make_url_shards

    folder = work / ("urls-in" if recipe == "urls" else "docs-in")
    found = sorted(folder.glob("*.parquet"))
    if found:
        return found
    require([src], "--urls" if recipe == "urls" else "--corpus")
    if recipe == "urls":
        return make_url_shards(src, folder, 8, 13)
    return make_doc_files(src, folder, 8, 16)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recipe", choices=["urls", "gpt2"])
    p.add_argument("--plan", default="2x1", help="1core, or WORKERSxTHREADS (default 2x1)")
    p.add_argument("--work", type=Path, default=Path("/tmp/fastenc-bench-scale"))
    p.add_argument("--urls", type=Path, default=SHARED / "urls" / "urls.parquet", help="made into shards if absent")
    p.add_argument("--corpus", "--docs", dest="docs", type=Path, default=SHARED / "text" / "docs.parquet", help="made into files if absent")
    args = p.parse_args()
    if args.plan != "1core" and "x" not in args.plan:
        p.error("--plan is 1core or WORKERSxTHREADS, e.g. 2x1")
    paths = inputs(args.recipe, args.work, args.urls if args.recipe == "urls" else args.docs)
    from fastenc.run.process import kernels_only_process
    from fastenc.warmup import cold_families, compile_families

    compile_families(cold_families((args.recipe,)), quiet=True)  # (in a process of its own: this one can fork)
    print("first touch, ms per MB:", ", ".join(f"{k} {v:.2f}" for k, v in first_touch_ms_per_mb().items()))
    # The probe's freed memory is recycled memory for a while (a balloon reports free pages after ~2 s): a run
    # started at once would find its first unit's memory cheaper than a fresh command does (URLs, 2 x 1: +0.38-0.81 s
    # a first unit against +0.65-0.96 s, session 33). Wait until it is returned.
    time.sleep(_RETURNED_AFTER_S)
    kernels_only_process()
    if args.plan == "1core":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # before any thread exists: all inherit it
    instrument(args.recipe)
    _LOG.write_text("")
    out = args.work / f"timeline-{args.recipe}-{args.plan}"
    samples = _LOG.with_suffix(".memory")
    sampler = start_sampler(samples)
    try:
        t0 = run(args.recipe, args.plan, paths, out)
        end = time.clock_gettime(time.CLOCK_MONOTONIC)
        report(t0, end)
        if sampler is not None:
            report_page_cache(samples, t0, end)
    finally:
        if sampler is not None:
            sampler.kill()
            sampler.wait()
        _LOG.unlink(missing_ok=True)
        samples.unlink(missing_ok=True)
        discard(out)  # (the inputs stay for the next run)


if __name__ == "__main__":
    main()
