"""GPT-2 encode speed: fastenc against tiktoken, HF tokenizers and gigatok, on the same documents.

    python bench/bench_gpt2.py [--docs ../shared/data/text/docs.parquet] [--repeat 5] [--rounds 3]

One command runs everything. Each (tool, threads) pair runs in its own subprocess, because the
Rust peers size their thread pools once per process (RAYON_NUM_THREADS); every worker reads
the same parquet column, checks its total token count against tiktoken's, and reports the
median of ``--repeat`` timed passes after one untimed warm-up pass (for fastenc the warm-up
pass is also reported: it is the cold piece-cache speed; each tool's one-off start-up is spent
on one document before it). Then each tool
runs once more, on one thread, in a fresh process, over text it has not seen: warmed up on the
even-numbered documents, timed on the odd ones (the steady state of a long run, where caches are
warm but most text is new). Then fastenc's
first-run compile time (empty Numba cache) and warm start (compiled cache) are measured in
fresh processes, until the first ids come back.

Needs the bench extra: pip install -e '.[bench]'.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from _inputs import require  # noqa: E402  (bench/ is on sys.path when a bench runs)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DOCS = REPO.parent / "shared" / "data" / "text" / "docs.parquet"
GPT2_JSON = REPO / "vocab" / "gpt2" / "tokenizer.json"
TOOLS = ["fastenc", "tiktoken-loop", "tiktoken-batch", "hf-batch", "gigatok-batch"]


def _tiktoken():
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import build_tiktoken_gpt2  # the same offline oracle the tests use

    shared = REPO.parent / "shared" / "data"
    return build_tiktoken_gpt2(shared if shared.is_dir() else None)


def _make_runner(tool: str, threads: int):
    """A function texts -> total token count, for one tool at one thread count."""
    if tool == "fastenc":
        import numba

        import fastenc

        numba.set_num_threads(threads)
        enc = fastenc.load("gpt2")
        return lambda column, texts: len(enc.encode_batch(column)[0])
    if tool == "tiktoken-loop":
        enc = _tiktoken()
        return lambda column, texts: sum(len(enc.encode_ordinary(t)) for t in texts)
    if tool == "tiktoken-batch":
        enc = _tiktoken()
        return lambda column, texts: sum(map(len, enc.encode_ordinary_batch(texts, num_threads=threads)))
    if tool == "hf-batch":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(GPT2_JSON))
        tok.encode_special_tokens = True  # "<|endoftext|>" in a document is text, as in tiktoken
        return lambda column, texts: sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
    if tool == "gigatok-batch":
        import gigatok

        tok = gigatok.Tokenizer(str(GPT2_JSON))
        return lambda column, texts: sum(len(x) for x in tok.encode_batch(texts))
    raise SystemExit(f"unknown tool {tool}")


def worker(args) -> None:
    import pyarrow.parquet as pq

    column = pq.read_table(args.docs, columns=["text"]).column("text").combine_chunks()
    texts = column.to_pylist()
    run = _make_runner(args.worker, args.threads)
    # One document first, untimed: each tool's one-off start-up (for fastenc, loading the compiled
    # kernels from Numba's cache, ~0.5 s, reported apart as the warm start) stays out of the
    # "first pass", which is then the cold-cache speed.
    run(column.slice(0, 1), texts[:1])
    if args.scaling:
        # fastenc on 1 and 2 threads in one process, alternating pass by pass: the ratio of the
        # medians is then not skewed by the machine being slower in one process than another.
        import numba

        import fastenc

        enc = fastenc.load("gpt2")
        times: dict = {1: [], 2: []}
        for threads in (1, 2):
            numba.set_num_threads(threads)
            enc.encode_batch(column)  # one task's caches per thread: warm both layouts
        for _ in range(args.repeat):
            for threads in (1, 2):
                numba.set_num_threads(threads)
                t0 = time.perf_counter()
                enc.encode_batch(column)
                times[threads].append(time.perf_counter() - t0)
        print(json.dumps({"t1": statistics.median(times[1]), "t2": statistics.median(times[2])}))
        return
    if args.heldout:
        # The steady state of a long run: caches warmed on other documents (the even ones),
        # then one timed pass over text never seen before (the odd ones).
        even, odd = column.take(list(range(0, len(texts), 2))), column.take(list(range(1, len(texts), 2)))
        run(even, texts[0::2])
        t0 = time.perf_counter()
        tokens = run(odd, texts[1::2])
        seconds = time.perf_counter() - t0
        mb = sum(len(t.encode("utf-8")) for t in texts[1::2]) / 1e6
        print(json.dumps({"tokens": tokens, "heldout_s": seconds, "heldout_mb": mb}))
        return
    t0 = time.perf_counter()
    tokens = run(column, texts)
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        again = run(column, texts)
        times.append(time.perf_counter() - t0)
        assert again == tokens
    print(json.dumps({"tokens": tokens, "first_s": first, "median_s": statistics.median(times), "times": times}))


def _spawn(tool: str, threads: int, args, extra_env=None, heldout: bool = False, scaling: bool = False) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads), **(extra_env or {}))
    cmd = [sys.executable, __file__, "--worker", tool, "--threads", str(threads), "--repeat", str(args.repeat), "--docs", str(args.docs)]
    cmd += ["--heldout"] if heldout else []
    cmd += ["--scaling"] if scaling else []
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


_FIRST_IDS = (
    "import time; t = time.perf_counter(); import fastenc; "
    "ids = fastenc.load('gpt2').encode_batch(['Hello, world!']); print(time.perf_counter() - t)"
)


def start_times() -> tuple[float, float]:
    """(first run with an empty Numba cache, warm start with the compiled cache), in seconds."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, FASTENC_CACHE_DIR=cache)
        cold = float(subprocess.run([sys.executable, "-c", _FIRST_IDS], env=env, capture_output=True, text=True, check=True).stdout)
        warm = statistics.median(
            float(subprocess.run([sys.executable, "-c", _FIRST_IDS], env=env, capture_output=True, text=True, check=True).stdout)
            for _ in range(3)
        )
    return cold, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1, help="run every tool this many times, alternating")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--heldout", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scaling", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-heldout", action="store_true", help="skip the unseen-text runs")
    args = parser.parse_args()
    if not args.worker:
        require(args.docs, "--docs")
    if args.worker:
        return worker(args)

    import pyarrow.parquet as pq

    column = pq.read_table(args.docs, columns=["text"]).column("text")
    mb = sum(len(t.encode("utf-8")) for t in column.to_pylist()) / 1e6
    print(f"# {args.docs.name}: {len(column)} documents, {mb:.1f} MB of UTF-8; median of {args.repeat} passes")
    print(f"# load average at start: {os.getloadavg()[0]:.2f}")
    results = {}
    runs: dict = {}
    for round_ in range(args.rounds):
        # Rounds alternate the tools, so that a slow minute of this shared machine hits all of
        # them alike; each tool's figure is the median over rounds of its per-round median.
        for tool in args.tools.split(","):
            for threads in (1, 2):
                if tool == "tiktoken-loop" and threads == 2:
                    continue  # a Python loop is one thread by construction
                r = _spawn(tool, threads, args)
                if "error" in r:
                    print(f"{tool:15s} {threads}T  FAILED: {r['error']}")
                    continue
                runs.setdefault((tool, threads), []).append(r)
                print(
                    f"{tool:15s} {threads}T  {mb / r['median_s']:8.1f} MB/s  {r['tokens'] / r['median_s'] / 1e6:6.2f} Mtok/s"
                    f"  (first pass {mb / r['first_s']:.1f} MB/s)  tokens={r['tokens']}"
                    + (f"  [round {round_ + 1}/{args.rounds}]" if args.rounds > 1 else ""),
                    flush=True,
                )
    for key, rs in runs.items():
        results[key] = {
            "tokens": rs[0]["tokens"],
            "median_s": statistics.median(r["median_s"] for r in rs),
            "first_s": statistics.median(r["first_s"] for r in rs),
        }
    if args.rounds > 1:
        print(f"# medians over {args.rounds} rounds:")
        for (tool, threads), r in results.items():
            print(f"{tool:15s} {threads}T  {mb / r['median_s']:8.1f} MB/s  (first pass {mb / r['first_s']:.1f} MB/s)")
    ok = {k: v for k, v in results.items() if "error" not in v}
    token_counts = {v["tokens"] for v in ok.values()}
    print(f"# all tools agree on the total token count: {len(token_counts) == 1} ({sorted(token_counts)})")
    base = ok.get(("tiktoken-loop", 1))
    if base and ("fastenc", 1) in ok:
        f1 = ok[("fastenc", 1)]["median_s"]
        print("# ratios (time of peer / time of fastenc at the same thread count):")
        for (tool, threads), r in ok.items():
            if tool != "fastenc" and ("fastenc", threads) in ok:
                print(f"  fastenc vs {tool} {threads}T: {r['median_s'] / ok[('fastenc', threads)]['median_s']:.2f}x")
        print(f"  fastenc 1T vs tiktoken encode_ordinary loop: {base['median_s'] / f1:.2f}x")
        if ("fastenc", 2) in ok:
            print(f"  fastenc 2T vs its own 1T: {f1 / ok[('fastenc', 2)]['median_s']:.2f}x")
    if "fastenc" in args.tools.split(","):
        r = _spawn("fastenc", 2, args, scaling=True)
        if "error" not in r:
            print(f"# fastenc 1T and 2T alternating in one process (medians of {args.repeat}): "
                  f"{mb / r['t1']:.1f} and {mb / r['t2']:.1f} MB/s, 2T = {r['t1'] / r['t2']:.2f}x 1T")
    if not args.no_heldout:
        # Repeated passes over one 97 MB file flatter a cache: every piece has been seen. A long
        # run sees new text with warm caches; this measures that, on one thread, for each tool.
        print("# unseen text, warm caches: warm up on the even documents, time one pass over the odd ones (1 thread)")
        held = {}
        for tool in args.tools.split(","):
            r = held[tool] = _spawn(tool, 1, args, heldout=True)
            if "error" in r:
                print(f"{tool:15s} 1T  FAILED: {r['error']}")
                continue
            print(f"{tool:15s} 1T  {r['heldout_mb'] / r['heldout_s']:8.1f} MB/s on {r['heldout_mb']:.1f} MB  tokens={r['tokens']}", flush=True)
        if "error" not in held.get("fastenc", {"error": 1}) and "error" not in held.get("tiktoken-loop", {"error": 1}):
            print(f"  fastenc 1T vs tiktoken encode_ordinary loop on unseen text: "
                  f"{held['tiktoken-loop']['heldout_s'] / held['fastenc']['heldout_s']:.2f}x")
    cold, warm = start_times()
    print(f"# fastenc start: first run (empty Numba cache, compiles) {cold:.2f} s; warm start (compiled cache) {warm:.2f} s")


if __name__ == "__main__":
    main()
