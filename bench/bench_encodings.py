"""cl100k_base / o200k_base encode speed: fastenc against tiktoken, gigatoken, quicktok-v1,
bpe-openai and rs-bpe, on the same documents, 1 and 2 threads, first pass and warm.

    python bench/bench_encodings.py [--docs ../shared/data/text/docs.parquet] [--repeat 3] [--rounds 3]
                                    [--encodings cl100k_base,o200k_base] [--tools fastenc,tiktoken,...]

Each (encoding, tool, threads) runs in its own subprocess (the Rust peers size their thread pools
once per process: RAYON_NUM_THREADS). A worker reads the parquet column, spends its tool's one-off
start-up on one document, then times one pass over every document (the *first pass*: cold
caches for the tools that have them) and ``--repeat`` more (*warm*: their median). Exactness:
every worker hashes each document's ids (outside the timing) and the parent compares them with
tiktoken's ``encode_ordinary``; a tool that differs on any document is marked in the table
with the number of documents that differ. Ratios are peer time / fastenc time, same encoding
and thread count, from this one run. With ``--rounds R`` every worker runs R times, the tools
alternating (their order reversed every other round): each figure is the median over rounds, and
the per-round ratios are printed beside it (these VMs swing by 10-30% from minute to minute).
Each round's line also gives the first pass's system time and page faults: on these VMs memory
that the host has not backed yet (or has taken back) costs ~5 ms a MB at its first touch on huge
pages (~0.45 on 4 kB pages), whichever tool touches it, and that is most of the swing of a first
pass (bench/RESULTS.md, session 41).

Peers: pip install tiktoken gigatoken quicktok-v1 bpe-openai rs-bpe. The tiktoken oracle reads the
rank files committed in vocab/ (tests/test_encodings.py's route, no download).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DOCS = REPO.parent / "shared" / "data" / "text" / "docs.parquet"
TOOLS = ["fastenc", "tiktoken", "gigatoken", "gigatoken-ordinary", "quicktok-v1", "bpe-openai", "rs-bpe"]
PATTERNS = {"cl100k_base": "cl100k", "o200k_base": "o200k"}

from _inputs import require  # noqa: E402  (bench/ is on sys.path when a bench runs)


def _tiktoken(name: str):
    sys.path.insert(0, str(REPO / "tests"))
    from test_encodings import _from_committed_files  # the tests' offline oracle (hash-checked)

    return _from_committed_files(name)


def _make_runner(tool: str, name: str, threads: int):
    """(encode: (column, texts) -> result, to_lists: result -> list of per-document id sequences)."""
    if tool == "fastenc":
        import numba

        import fastenc

        numba.set_num_threads(threads)
        enc = fastenc.load(name)

        def split(r):
            ids, off = r
            return [ids[off[i]:off[i + 1]] for i in range(len(off) - 1)]

        return (lambda column, texts: enc.encode_batch(column)), split
    if tool == "tiktoken":
        enc = _tiktoken(name)
        return (lambda column, texts: enc.encode_ordinary_batch(texts, num_threads=threads)), list
    if tool in ("gigatoken", "gigatoken-ordinary"):
        import gigatoken

        path = str(REPO / "vocab" / name / f"{name}.tiktoken")
        if tool == "gigatoken":  # as the issue names it: specials from the file name, so the text
            tok = gigatoken.Tokenizer.from_tiktoken(path)  # "<|endoftext|>" becomes one id (not encode_ordinary)
        else:  # no special tokens: tiktoken's encode_ordinary
            tok = gigatoken.Tokenizer.from_tiktoken(path, pretokenizer=PATTERNS[name], special_tokens={})
        return (lambda column, texts: tok.encode_batch(texts)), lambda r: [list(x) for x in r.to_list()]
    if tool == "quicktok-v1":
        import quicktok

        tok = quicktok.get_encoding(name)

        def split(r):
            ids, off = r
            return [ids[off[i]:off[i + 1]] for i in range(len(off) - 1)]

        return (lambda column, texts: tok.encode_batch(texts, threads=threads)), split
    if tool == "bpe-openai":
        import bpe_openai

        enc = bpe_openai.get_encoding(name)
        enc._runtime.config.chunk_limit = 1 << 40  # its default refuses a document of > 200,000 tokens
        return (lambda column, texts: enc.encode_ordinary_batch(texts, num_threads=threads)), list
    if tool == "rs-bpe":
        from rs_bpe.bpe import openai

        tok = getattr(openai, name)()
        if threads == 1:
            return (lambda column, texts: tok.encode_batch(texts)[0]), list
        options = openai.ParallelOptions(1, 64, threads)  # (min_batch_size, chunk_size, max_threads)
        return (lambda column, texts: tok.encode_batch_parallel(texts, options)[0]), list
    raise SystemExit(f"unknown tool {tool}")


def _digests(docs) -> list[int]:
    import numpy as np
    import xxhash

    return [xxhash.xxh3_64_intdigest(np.asarray(d, dtype=np.uint32).tobytes()) for d in docs]


def worker(args) -> None:
    import pyarrow.parquet as pq

    column = pq.read_table(args.docs, columns=["text"]).column("text").combine_chunks()
    texts = column.to_pylist()
    run, to_lists = _make_runner(args.worker, args.encoding, int(args.threads))
    run(column.slice(0, 1), texts[:1])  # one-off start-up (fastenc: loading compiled kernels) untimed
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = run(column, texts)
    first = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    # The digests now, and the result let go before the warm passes: a pipeline hands each result
    # on. (Kept alive, it made fastenc's next pass write into fresh memory, its earlier buffer being
    # busy: the first warm pass of o200k at 2 threads took 0.40-0.44 s where the next took 0.23.)
    digests = _digests(to_lists(result))
    del result
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        run(column, texts)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"first_s": first, "warm_s": statistics.median(times), "times": times, "digests": digests,
                      "first_sys_s": r1.ru_stime - r0.ru_stime, "first_faults": r1.ru_minflt - r0.ru_minflt}))


def _spawn(tool: str, name: str, threads: int, args) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(max(threads, 2)))
    cmd = [sys.executable, __file__, "--worker", tool, "--encoding", name, "--threads", str(threads),
           "--repeat", str(args.repeat), "--docs", str(args.docs)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        tail = out.stderr.strip().splitlines()
        return {"error": tail[-1] if tail else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; figures are medians over them")
    parser.add_argument("--encodings", default="cl100k_base,o200k_base")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--encoding", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    args.threads = [int(t) for t in args.threads.split(",")]
    require(args.docs, "--docs")

    import pyarrow.parquet as pq

    texts = pq.read_table(args.docs, columns=["text"]).column("text").to_pylist()
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print(f"# {args.docs.name}: {len(texts)} documents, {mb:.1f} MB of UTF-8; warm = median of {args.repeat} passes; "
          f"medians over {args.rounds} alternating rounds")
    print(f"# load average at start: {os.getloadavg()[0]:.2f}")
    rows = []
    for name in args.encodings.split(","):
        want = _digests(_tiktoken(name).encode_ordinary_batch(texts, num_threads=2))
        runs: dict = {}  # (tool, threads) -> one result per round
        for rnd in range(args.rounds):
            for threads in args.threads:
                tools = args.tools.split(",")
                for tool in (tools if rnd % 2 == 0 else tools[::-1]):
                    r = _spawn(tool, name, threads, args)
                    if "error" in r:
                        print(f"{name:12s} {tool:12s} {threads}T  FAILED: {r['error']}", flush=True)
                        continue
                    r["differ"] = sum(a != b for a, b in zip(r.pop("digests"), want))
                    runs.setdefault((tool, threads), []).append(r)
                    print(f"{name:12s} {tool:12s} {threads}T  round {rnd + 1}  first {mb / r['first_s']:7.1f} MB/s  "
                          f"(system {r['first_sys_s']:.2f} s, {r['first_faults']:,} page faults)  "
                          f"warm {mb / r['warm_s']:7.1f} MB/s  {'exact' if r['differ'] == 0 else str(r['differ']) + ' docs differ'}",
                          flush=True)
        results = {key: {"first_s": statistics.median(r["first_s"] for r in rs),
                         "warm_s": statistics.median(r["warm_s"] for r in rs),
                         "differ": max(r["differ"] for r in rs), "rounds": rs} for key, rs in runs.items()}
        for (tool, threads), r in results.items():
            base = results.get(("fastenc", threads))
            ratio = "— | —"
            if base and tool != "fastenc":
                paired = list(zip(r["rounds"], base["rounds"]))
                per_round = lambda k: ", ".join(f"{a[k] / b[k]:.2f}" for a, b in paired)  # noqa: E731
                ratio = (f"{r['first_s'] / base['first_s']:.2f}x ({per_round('first_s')}) | "
                         f"{r['warm_s'] / base['warm_s']:.2f}x ({per_round('warm_s')})")
            rows.append(f"| {name} | {tool} | {threads} | {mb / r['first_s']:.1f} | {mb / r['warm_s']:.1f} | "
                        f"{'yes' if r['differ'] == 0 else 'NO (' + str(r['differ']) + ' docs differ)'} | {ratio} |")
    print("\n| encoding | tool | threads | first pass MB/s | warm MB/s | exact | peer/fastenc time (first \\| warm) |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
