"""Where Numba's compile time goes: run one fastenc command in this process and attribute
every compilation to the kernel (and type signature) it was for.

    NUMBA_CACHE_DIR=$(mktemp -d) python bench/probes/compile_profile.py -- examples/part-00042.parquet --num-shards 64 -o OUT
    python bench/probes/compile_profile.py --json prof.json -- gpt2 docs.parquet -o OUT

Listens to Numba's own events (``numba.core.event``): ``numba:compile`` (one per dispatcher
and signature; nested when a kernel's callee is compiled while the caller is typed),
``numba:llvm_lock`` (LLVM work: IR building, optimisation, machine code) and
``numba:run_pass`` (compiler passes, e.g. the parfor passes that ``parallel=True`` adds).
Reported per kernel and signature, in CPU seconds of the compiling thread: inclusive seconds, exclusive seconds (minus nested
compiles), and the LLVM seconds spent while it was the innermost compile. Also the time of
cache loads (a dispatcher that found its signature on disk), which a warm run is made of.
Use an empty ``NUMBA_CACHE_DIR`` for a cold measurement.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's fastenc, whatever is installed


def _clock() -> float:
    """CPU seconds of the calling thread: a compile runs in one thread, and CPU time does not
    grow when other jobs share the machine (wall time does, 2-3x on a loaded 2-core box)."""
    return time.thread_time()


class CompileRecorder:
    """Collects per-(kernel, signature) compile times from Numba's event stream."""

    def __init__(self):
        from numba.core import event

        self._event = event
        self._local = threading.local()
        self.rows: dict = defaultdict(lambda: {"incl": 0.0, "excl": 0.0, "llvm": 0.0, "n": 0})
        self.passes: dict = defaultdict(float)
        self.lock = threading.Lock()

    def _stack(self):
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    # numba.core.event.Listener protocol (duck-typed: on_start / on_end / notify)
    def install(self):
        recorder = self
        ev = self._event

        class _Compile(ev.Listener):
            def on_start(self, event):
                disp = event.data["dispatcher"]
                key = (f"{disp.py_func.__module__}.{disp.py_func.__qualname__}", _sig(event.data["args"]))
                recorder._stack().append([key, _clock(), 0.0])

            def on_end(self, event):
                key, t0, nested = recorder._stack().pop()
                dt = _clock() - t0
                with recorder.lock:
                    row = recorder.rows[key]
                    row["incl"] += dt
                    row["excl"] += dt - nested
                    row["n"] += 1
                if recorder._stack():
                    recorder._stack()[-1][2] += dt

        class _Llvm(ev.Listener):
            def on_start(self, event):
                recorder._local.llvm_t0 = _clock()

            def on_end(self, event):
                dt = _clock() - recorder._local.llvm_t0
                stack = recorder._stack()
                key = stack[-1][0] if stack else ("(outside a compile: linking, cache load)", "")
                with recorder.lock:
                    recorder.rows[key]["llvm"] += dt

        class _Pass(ev.Listener):
            def on_start(self, event):
                recorder._local.pass_t0 = _clock()

            def on_end(self, event):
                dt = _clock() - recorder._local.pass_t0
                with recorder.lock:
                    recorder.passes[event.data["name"]] += dt

        ev.register("numba:compile", _Compile())
        ev.register("numba:llvm_lock", _Llvm())
        ev.register("numba:run_pass", _Pass())
        return self

    def report(self) -> dict:
        rows = sorted(self.rows.items(), key=lambda kv: -kv[1]["excl"])
        per_kernel: dict = defaultdict(lambda: {"excl": 0.0, "signatures": 0})
        for (name, sig), row in rows:
            if sig:
                per_kernel[name]["excl"] += row["excl"]
                per_kernel[name]["signatures"] += 1
        return {
            "rows": [{"kernel": k[0], "signature": k[1], **v} for k, v in rows],
            "per_kernel": dict(sorted(per_kernel.items(), key=lambda kv: -kv[1]["excl"])),
            "passes": dict(sorted(self.passes.items(), key=lambda kv: -kv[1])),
            "pass_totals": _pass_totals(self.passes),
            "total_compile": sum(r["excl"] for (n, s), r in self.rows.items() if s),
        }


def _pass_totals(passes: dict) -> dict:
    """Seconds per compiler pass, over all functions (Numba names a pass ``name [function]``)."""
    totals: dict = defaultdict(float)
    for name, dt in passes.items():
        totals[name.split(" [", 1)[0]] += dt
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def _sig(args) -> str:
    return "(" + ", ".join(str(a) for a in args) + ")"


def print_report(rep: dict, wall: float, file=sys.stdout, top: int = 40) -> None:
    print(f"process wall {wall:.2f} s; compile (sum of exclusive) {rep['total_compile']:.2f} s", file=file)
    print("\nper kernel (exclusive s, signatures compiled):", file=file)
    for name, v in rep["per_kernel"].items():
        if v["excl"] >= 0.05:
            print(f"  {v['excl']:7.2f}  x{v['signatures']}  {name}", file=file)
    print(f"\ntop {top} (kernel, signature): exclusive / inclusive / llvm seconds", file=file)
    for r in rep["rows"][:top]:
        sig = r["signature"] if len(r["signature"]) < 160 else r["signature"][:157] + "..."
        print(f"  {r['excl']:6.2f} {r['incl']:6.2f} {r['llvm']:6.2f}  {r['kernel']}{sig}", file=file)
    print("\ncompiler passes over all functions (seconds, top 8):", file=file)
    for name, dt in list(rep["pass_totals"].items())[:8]:
        print(f"  {dt:6.2f}  {name}", file=file)
    print("\ncompiler passes (seconds, top 12):", file=file)
    for name, dt in list(rep["passes"].items())[:12]:
        print(f"  {dt:6.2f}  {name}", file=file)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="also write the report here")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("argv", nargs=argparse.REMAINDER, help="fastenc arguments (after --)")
    args = ap.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    t0 = time.perf_counter()
    recorder = CompileRecorder().install()
    from fastenc.cli import main as fastenc_main

    rc = fastenc_main(argv)
    wall = time.perf_counter() - t0
    rep = recorder.report()
    print_report(rep, wall, top=args.top)
    if args.json:
        args.json.write_text(json.dumps({"wall": wall, "argv": argv, **rep}, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
