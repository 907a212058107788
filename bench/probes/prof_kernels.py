"""Where one encode pass spends its time, by compiled kernel function (perf sampling, names mapped).

    python bench/probes/prof_kernels.py --corpus PATH [--encoding gpt2] [--warm] [--threads 1] [--top 25]

Numba's JIT code shows in ``perf`` as bare addresses. This script compiles the kernels afresh into a
throw-away ``NUMBA_CACHE_DIR`` (a cached library keeps no object code to read symbols from: ~1 min on
2 cores), reads each compiled library's object code, takes its function symbols and sizes with ``nm``,
places them at the address the library was loaded at, and writes ``/tmp/perf-PID.map``, which ``perf
report`` reads. Then it samples one ``encode_batch`` pass over the documents (``--warm``: a second
pass, caches filled by the first) with ``perf record -e cpu-clock`` (no hardware counters needed) and
prints the functions by share of samples. Functions that LLVM inlined are counted in their caller.
Needs ``perf`` and ``nm`` (binutils) on PATH.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _functions(obj: bytes) -> list[tuple[int, int, str]]:
    """(offset, size, symbol) of the text symbols of an ELF object."""
    with tempfile.NamedTemporaryFile(suffix=".o", delete=False) as f:
        f.write(obj)
    try:
        out = subprocess.run(["nm", "-S", "--defined-only", f.name], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2].lower() == "t":
            rows.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    return rows


def _readable(symbol: str) -> str:
    """``module.function`` from an Itanium-mangled Numba name (``_ZN7fastenc7kernels3bpe17merge_short_piece...``)."""
    rest, parts = symbol[3:] if symbol.startswith("_ZN") else symbol, []
    while (m := re.match(r"\d+", rest)):
        n = int(m.group())
        rest = rest[m.end():]
        parts.append(rest[:n])
        rest = rest[n:]
    names = [p for p in parts if p and p not in ("fastenc", "kernels") and not p.startswith("_3c")]
    return ".".join(names)[:80] or symbol[:80]


def _elf(x):
    if isinstance(x, bytes) and x[:4] == b"\x7fELF":
        return x
    if isinstance(x, (tuple, list)):
        for y in x:
            if (found := _elf(y)) is not None:
                return found
    return None


def write_perf_map() -> int:
    """Write /tmp/perf-PID.map for every compiled overload of fastenc.kernels; returns the symbol count."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import fastenc.kernels as kernels

    rows = {}
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"fastenc.kernels.{info.name}")
        for obj in vars(module).values():
            if not isinstance(obj, CPUDispatcher):
                continue
            for cres in obj.overloads.values():
                entry = cres.fndesc.mangled_name
                try:
                    address = cres.library.get_pointer_to_function(entry)
                    obj_code = _elf(cres.library.serialize_using_object_code())
                except Exception:  # loaded from a cache: no object code to read
                    continue
                if not address or obj_code is None:
                    continue
                symbols = _functions(obj_code)
                base = next((address - off for off, _, s in symbols if s == entry), None)
                if base is not None:
                    for off, size, s in symbols:
                        rows[base + off] = (size, _readable(s))
    rows.update(_runtime_rows())
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as f:
        for address in sorted(rows):
            size, name = rows[address]
            f.write(f"{address:x} {size:x} {name}\n")
    return len(rows)


def _runtime_rows() -> dict:
    """Numba's reference-count functions, which its runtime compiles at start-up (not in
    fastenc.kernels): unnamed, the atomic updates a kernel still pays show as bare addresses (4.7% of
    an o200k first pass did, bench/RESULTS.md, session 43). Each is under 16 bytes; 16 covers it."""
    from numba.core.runtime import rtsys

    rows = {}
    for name in ("NRT_incref", "NRT_decref"):
        try:
            address = rtsys.library.get_pointer_to_function(name)
        except Exception:  # another Numba: left unnamed
            continue
        if address:
            rows[address] = (16, name)
    return rows


def worker(args) -> None:
    import pyarrow.parquet as pq

    import fastenc

    column = pq.read_table(args.docs, columns=["text"]).column("text").combine_chunks()
    enc = fastenc.load(args.encoding)
    enc.encode_batch(column.slice(0, 1))  # compile and load everything the pass calls
    if args.warm:
        enc.encode_batch(column)
    n = write_perf_map()
    perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-g", "-p", str(os.getpid()),
                             "-o", args.out], stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf attaches
    t = time.perf_counter()
    enc.encode_batch(column)
    dt = time.perf_counter() - t
    perf.send_signal(2)
    perf.wait()
    print(f"# {args.encoding}, {'warm' if args.warm else 'first'} pass, {args.threads} thread(s): {dt:.3f} s, "
          f"{column.nbytes / dt / 1e6:.1f} MB/s (under perf); {n} kernel symbols mapped")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", "--docs", dest="docs", required=True, help="a parquet file with a 'text' column")
    ap.add_argument("--encoding", default="gpt2")
    ap.add_argument("--warm", action="store_true", help="profile a second pass (warm caches)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "fastenc-prof.perf.data"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not Path(args.docs).is_file():
        sys.exit(f"prof_kernels.py: {args.docs} does not exist; pass --corpus a parquet file with a 'text' column")
    if args.worker:
        return worker(args)
    with tempfile.TemporaryDirectory(prefix="fastenc-prof-nbc-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, NUMBA_NUM_THREADS=str(args.threads))
        subprocess.run([sys.executable, __file__, "--worker", *sys.argv[1:]], env=env, check=True)
    report = subprocess.run(["perf", "report", "-i", args.out, "--no-children", "--sort", "sym", "--stdio"],
                            capture_output=True, text=True).stdout
    lines = [ln for ln in report.splitlines() if re.match(r"\s+\d+\.\d+%\s", ln)]
    print("\n".join(lines[: args.top]))


if __name__ == "__main__":
    main()
