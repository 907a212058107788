"""cl100k_base / o200k_base encode speed: fastenc against tiktoken, gigatoken, quicktok-v1,
bpe-openai and rs-bpe, on the same documents, 1 and 2 threads, first pass and warm.

    python bench/bench_encodings.py [--corpus PARQUET] [--mb N] [--passes 3] [--rounds 3] [--threads 1,2]
                                    [--encodings cl100k_base,o200k_base] [--tools fastenc,tiktoken,...] [--out-md F]

Each (encoding, tool, threads) runs in its own subprocess (the Rust peers size their thread pools
once per process: RAYON_NUM_THREADS). A worker reads the parquet column, spends its tool's one-off
start-up on one document, then times one pass over every document (the *first pass*: cold
caches for the tools that have them) and ``--passes`` more (``--repeat``, its old name, still works) (*warm*: their median). Exactness:
every worker hashes each document's ids (outside the timing) and the parent compares them with
tiktoken's ``encode_ordinary``; a tool that differs on any document is marked in the table
with the number of documents that differ. Ratios are peer time / fastenc time, same encoding
and thread count, from this one run. With ``--rounds R`` every worker runs R times, the tools
alternating (their order reversed every other round): each figure is the median over rounds, and
the per-round ratios are printed beside it (these VMs swing by 10-30% from minute to minute).
Each round's line also gives the first pass's system time and page faults: on these VMs memory
that the host has not backed yet (or has taken back) costs ~5 ms a MB at its first touch on huge
pages (~0.45 on 4 kB pages), whichever tool touches it, and that is most of the swing of a first
pass (bench/RESULTS.md has the sitting).

Peers (bench/peers.py; a tool that is not installed is skipped with one line): pip install -e '.[bench]'.
fastenc reads the Arrow column here (its best case; bench_gpt2.py measures the list[str] users hold). The
tiktoken oracle reads the rank files committed in vocab/ (no download).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import harness
import peers
from harness import add_common_flags, corpus_slice, doc_digests, parse_list, require

TOOLS = ["fastenc", "tiktoken", "gigatoken", "gigatoken-ordinary", "quicktok-v1", "bpe-openai", "rs-bpe"]
PATTERNS = peers.PATTERNS  # (bench_languages reads it here)


def worker(args) -> None:
    import json
    import resource

    import pyarrow.parquet as pq

    column = pq.read_table(args.corpus, columns=["text"]).column("text").combine_chunks()
    texts = column.to_pylist()
    runner = peers.build(args.worker, args.encoding, int(args.threads), input_kind="arrow")
    runner.encode(column.slice(0, 1), texts[:1])  # one-off start-up (fastenc: loading compiled kernels) untimed
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = runner.encode(column, texts)
    first = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    # The digests now, and the result let go before the warm passes: a pipeline hands each result on (kept
    # alive, fastenc's next pass writes into fresh memory, its earlier buffer being busy).
    digests = doc_digests(*runner.flat(result))[1].tolist()
    del result
    times = []
    for _ in range(args.passes):
        t0 = time.perf_counter()
        runner.encode(column, texts)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"first_s": first, "warm_s": statistics.median(times), "times": times, "digests": digests,
                      "first_sys_s": r1.ru_stime - r0.ru_stime, "first_faults": r1.ru_minflt - r0.ru_minflt}))


def _run_worker(tool: str, name: str, threads: int, args) -> dict:
    cmd = [sys.executable, __file__, "--worker", tool, "--encoding", name, "--threads", str(threads),
           "--passes", str(args.passes), "--corpus", str(args.corpus)]
    return harness.spawn_json(cmd, env=harness.thread_env(threads, numba_threads=max(threads, 2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_flags(parser, corpus_aliases=["--docs"], tools=TOOLS, passes=3, passes_aliases=["--repeat"])
    parser.add_argument("--encodings", default="cl100k_base,o200k_base")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--encoding", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    threads = parse_list(args.threads, "--threads", int)
    require(args.corpus, "--corpus")
    args.corpus = corpus_slice(args.corpus, args.mb)
    tools, skipped = peers.usable(parse_list(args.tools, "--tools"))

    import pyarrow.parquet as pq

    texts = pq.read_table(args.corpus, columns=["text"]).column("text").to_pylist()
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    with harness.out_md(args.out_md):
        print(harness.machine_header("cl100k_base / o200k_base encode core (`bench/bench_encodings.py`)",
                                     ("numba", "tiktoken", "gigatoken", "quicktok-v1", "bpe-openai", "rs-bpe")))
        print(f"- **Corpus:** `{args.corpus.name}`: {len(texts)} documents, {mb:.1f} MB of UTF-8; warm = median of "
              f"{args.passes} passes; medians over {args.rounds} alternating rounds")
        for line in skipped:
            print(f"- skipped: {line}")
        rows = []
        for name in parse_list(args.encodings, "--encodings"):
            want = doc_digests(*peers.from_lists(
                peers.tiktoken_encoding(name).encode_ordinary_batch(texts, num_threads=2)))[1].tolist()
            for t in threads:
                def one(tool, rnd, t=t):
                    r = _run_worker(tool, name, t, args)
                    if "error" not in r:
                        r["differ"] = sum(a != b for a, b in zip(r.pop("digests"), want))
                        print(f"<!-- {name} {tool} {t}T round {rnd + 1}: first {mb / r['first_s']:.1f} MB/s (system "
                              f"{r['first_sys_s']:.2f} s, {r['first_faults']:,} page faults), warm {mb / r['warm_s']:.1f} "
                              f"MB/s, {'exact' if r['differ'] == 0 else str(r['differ']) + ' docs differ'} -->", flush=True)
                    return r

                rounds = harness.run_rounds(tools, args.rounds, one, log=lambda line: print(line, flush=True) if "FAILED" in line else None)
                for tool in tools:
                    if tool not in rounds.runs:
                        continue
                    differ = max(r["differ"] for r in rounds.runs[tool].values())
                    first, warm = rounds.median(tool, "first_s"), rounds.median(tool, "warm_s")
                    cells = []
                    for key in ("first_s", "warm_s"):
                        if tool == "fastenc" or "fastenc" not in rounds.runs:
                            cells.append("—")
                            continue
                        per = ", ".join(f"{x:.2f}" for x in rounds.per_round_ratios(tool, "fastenc", key))
                        cells.append(f"{harness.ratio(rounds.median(tool, key), rounds.median('fastenc', key))}x ({per})")
                    rows.append([name, tool, t, harness.mbps(mb, first), harness.mbps(mb, warm),
                                 "yes" if differ == 0 else f"NO ({differ} docs differ)", " \\| ".join(cells)])
        print()
        print(harness.md_table(["encoding", "tool", "threads", "first pass MB/s", "warm MB/s", "exact",
                                "peer/fastenc time (first \\| warm)"], rows, align="llrrrll"))
        print(harness.footer())


if __name__ == "__main__":
    main()
