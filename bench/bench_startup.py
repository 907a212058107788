"""Start-up cost: first run (empty Numba cache) and warm start of every fastenc command.

    python bench/bench_startup.py                  # 3 cold + 3 warm runs of each command, medians
    python bench/bench_startup.py --rounds 1 --breakdown --only quickstart,gpt2 [--out-md F]   # --rounds was --reps

Each run is a fresh ``python -m fastenc ...`` process, timed from start to exit (wall) and by
the CPU time it used (user + system, from wait4 by harness.run_fresh: steadier than wall time on a
shared machine). "cold": ``NUMBA_CACHE_DIR`` is a new empty folder, so every kernel the command needs
is compiled, as on a new machine, container or CI job; "warm": the same command again with that
folder kept (a new output folder each time; three warm runs per cold one).

Commands (tiny inputs, so the time is start-up, not work):

- quickstart: the README's ``fastenc examples/part-00042.parquet --num-shards 64 -o OUT``
- gpt2 / bytes: the first 20 documents of ``tests/data/docs_fixture.parquet``
- verify: ``fastenc verify`` of the quick-start's output (made once, beforehand)
- encode: ``fastenc encode`` of a 3-line text file (GPT-2, ids printed)
- warmup: ``fastenc warmup`` (everything; cold = what an image build or CI step pays once)

``--breakdown`` also runs each cold command once under ``bench/probes/compile_profile.py`` and prints
the kernels that took the most compile time (exclusive seconds: a kernel's own compile, not its
callees'). The load average is printed with every command: other jobs on the machine slow
compiles down as much as they slow anything else.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import harness
from harness import REPO as ROOT

PY = sys.executable


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def make_inputs(work: Path) -> dict:
    import pyarrow.parquet as pq

    docs = work / "docs.parquet"
    pq.write_table(pq.read_table(ROOT / "tests" / "data" / "docs_fixture.parquet").slice(0, 20), docs)
    text = work / "hello.txt"
    text.write_text("Hello, world! Grüße aus Köln.\nA second line, with 123 numbers.\n  indented\n", encoding="utf-8")
    return {"docs": docs, "text": text, "shard": ROOT / "examples" / "part-00042.parquet"}


def command(name: str, inputs: dict, out: Path, verify_dir: Path) -> list[str]:
    if name == "quickstart":
        return [str(inputs["shard"]), "--num-shards", "64", "-o", str(out)]
    if name == "gpt2":
        return ["gpt2", str(inputs["docs"]), "-o", str(out)]
    if name == "bytes":
        return ["bytes", str(inputs["docs"]), "-o", str(out)]
    if name == "verify":
        return ["verify", str(verify_dir)]
    if name == "encode":
        return ["encode", str(inputs["text"])]
    if name == "warmup":
        return ["warmup"]
    raise ValueError(name)


def timed(argv: list[str], cache: Path, *, profile_json: Path | None = None) -> dict:
    """Run one process; wall seconds, CPU seconds, exit status and the stderr's last line."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    # Python's own bytecode cache, as an installed package has it (pip compiles .pyc files): a
    # sandbox that sets PYTHONDONTWRITEBYTECODE makes every run compile fastenc's ~40 modules
    # from source again (~0.14 s of a warm run on the AMD EPYC VM) and no user sees that.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if profile_json is None:
        cmd = [PY, "-m", "fastenc", *argv]
    else:
        cmd = [PY, str(ROOT / "bench" / "probes" / "compile_profile.py"), "--json", str(profile_json), "--", *argv]
    run = harness.run_fresh(cmd, cwd=ROOT, env=env)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    lines = [ln for ln in run.stderr.replace("\r", "\n").splitlines() if ln.strip()]
    return {"wall": run.wall, "cpu": run.cpu, "stderr_first": lines[:1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_flags(ap, corpus=None, rounds_aliases=["--reps"], threads=None)  # the inputs are fixed and tiny
    ap.add_argument("--only", default="quickstart,gpt2,bytes,verify,encode,warmup")
    ap.add_argument("--breakdown", action="store_true", help="per-kernel compile times of one cold run each")
    ap.add_argument("--json", type=Path, help="write all results here")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n]
    work = Path(tempfile.mkdtemp(prefix="fastenc-startup-"))
    results: dict = {"cpu_model": harness.cpu_model(), "nproc": os.cpu_count(), "commands": {}}
    with harness.out_md(args.out_md):
        print(harness.machine_header("Start-up: first-run compile and warm start (`bench/bench_startup.py`)", ("numba",)))
        print(f"- **Method:** per command {args.rounds} cold run(s) (empty Numba cache) and 3 warm runs after each; medians\n")
        print(harness.md_table(["command", "cold wall s", "cold CPU s", "cold walls", "warm wall s", "warm CPU s", "load"], []))
        _run(args, names, work, results)
        print(harness.footer())
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def _run(args, names, work, results) -> None:
    try:
        inputs = make_inputs(work)
        verify_dir = work / "verify-target"
        if "verify" in names:
            timed(command("quickstart", inputs, verify_dir, verify_dir), work / "cache-verify-target")
        for name in names:
            cold, warm = [], []
            for rep in range(args.rounds):
                cache = work / f"cache-{name}-{rep}"
                cold.append(timed(command(name, inputs, work / f"out-{name}-c{rep}", verify_dir), cache))
                for again in range(3):  # warm runs are short and noisy: three of each
                    warm.append(timed(command(name, inputs, work / f"out-{name}-w{rep}{again}", verify_dir), cache))
                shutil.rmtree(cache, ignore_errors=True)
            row = {
                "cold_wall": statistics.median(r["wall"] for r in cold),
                "cold_cpu": statistics.median(r["cpu"] for r in cold),
                "warm_wall": statistics.median(r["wall"] for r in warm),
                "warm_cpu": statistics.median(r["cpu"] for r in warm),
                "cold_walls": [round(r["wall"], 2) for r in cold],
                "first_stderr_line": cold[0]["stderr_first"],
                "load": load(),
            }
            if args.breakdown and name != "warmup":
                prof = work / f"profile-{name}.json"
                timed(command(name, inputs, work / f"out-{name}-p", verify_dir), work / f"cache-{name}-p", profile_json=prof)
                rep_ = json.loads(prof.read_text())
                row["compile_total"] = rep_["total_compile"]
                row["top_kernels"] = {k: round(v["excl"], 2) for k, v in list(rep_["per_kernel"].items())[:8]}
            results["commands"][name] = row
            print(f"| {name} | {row['cold_wall']:.2f} | {row['cold_cpu']:.2f} | {row['cold_walls']} | {row['warm_wall']:.2f} | "
                  f"{row['warm_cpu']:.2f} | {row['load']} |", flush=True)
            if "top_kernels" in row:
                print(f"| ↳ compile {row['compile_total']:.1f} s | " + ", ".join(
                    f"{k.rsplit('.', 1)[-1]} {v}" for k, v in row["top_kernels"].items()) + " | | | | | |", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
