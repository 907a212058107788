"""GPT-2 encode speed: fastenc against gigatoken, tiktoken and HF tokenizers, on the same documents, in one run.

    python bench/bench_gpt2.py [--corpus PATH] [--mb N] [--select {heldout,docs,reverse,cjk}] [--input {list,arrow}]
                               [--rounds 3] [--passes 3] [--tools fastenc,gigatoken,...] [--threads 1,2] [--hf-docs 300]
    python bench/bench_gpt2.py --per-call [--select ...] [--rounds 5] [--chars 500]

One command runs everything and prints Markdown that pastes into bench/RESULTS.md: the CPU model, date,
load average and exact command first, then the tables.

Regimes (fastenc and gigatoken keep per-thread caches, so one number per tool would mislead):
  first   one pass over all documents with empty caches, after each tool's one-off start-up (loading
          kernels, building its tables, spawning its thread pool) has been spent on one document;
  warm    the median of --passes further passes over the same documents in the same process;
  unseen  a fresh process encodes the even-numbered documents untimed, then is timed on the odd ones:
          the steady state of a long run, warm caches but text never seen before.
Every (tool, threads, regime) runs in its own subprocess (the Rust peers size their thread pools once per
process: RAYON_NUM_THREADS; fastenc gets NUMBA_NUM_THREADS). Within a round the tools alternate (fastenc
next to gigatoken; the order is reversed every other round), and each figure is the median over --rounds
rounds. Times are wall clock (what a user waits for) and process CPU time (all threads; on a shared, noisy
machine it moves less); MB are of UTF-8 text.

Each tool returns its natural output, and only that call is timed: fastenc (ids, offsets) arrays; gigatoken,
tiktoken and HF awkward array / lists of ints / Encodings. Input: gigatoken, tiktoken and HF take a list of
str; fastenc takes what --input says, a list of str (the default: what users hold) or the Arrow column (read
zero-copy). HF tokenizers (~1.5 MB/s on this corpus) is timed on the first
--hf-docs documents only, which the output states.

Exactness: tiktoken's encode_ordinary (built offline from ../shared/data/gpt2 by bench/peers.py) is the oracle.
Every run hashes each document's ids (outside the timing) and counts the documents that differ from the
oracle (gigatoken reads a literal "<|endoftext|>" in the text as the special token: those documents are
reported, not hidden), and each tool's total token count is printed.

Memory: each worker's peak resident set (VmHWM, read before the exactness check's copies of the ids), next
to its resident size with only the corpus loaded; for fastenc also the piece caches' bytes per task slot (read
from Encoder._task_caches(): reserved, and 4 KiB pages actually holding entries; the threads of a batch share
task 0's tiny, short and long caches).

Selections (--select; the old spelling --corpus heldout still works): "heldout" (the default) the documents whose id hashes into the last fifth
(HELDOUT_RULE): text the kernels were not tuned on; "docs" the documents as given; "reverse" the same
documents in reverse order (a different first pass and different even/odd halves); "cjk" only documents
whose text is mostly CJK, Thai or Japanese (see CJK_RULE). --corpus PATH (old name --docs) takes any parquet
file with a `text` column (and an `id` column for "heldout"; without one, the row number is hashed); --mb N
keeps its first documents up to N MB before the selection.

Per-call mode (--per-call): what a loop of small calls pays. Short documents are the first --chars
characters of each corpus document (those with at least that many); cells: encode("hello world"),
encode() of each short document, and encode_batch of 1, 16, 256 and 4096 short documents (4096 in all
per loop, repeated where the corpus has fewer; fastenc
encode_batch on a list of str, gigatoken encode_batch, tiktoken encode_ordinary / encode_ordinary_batch). Each
tool runs in its own process per round, tools alternating (order reversed every other round), each cell the
best of --passes timed loops of at least ~0.2 s; figures are medians over rounds, with ratios against
fastenc from the same rounds. Exactness: each tool's ids of the short documents are hashed and compared with
tiktoken's.

The tools are built by bench/peers.py; the figures, header and tables come from bench/harness.py.
Needs the bench extra: pip install -e '.[bench]'.
"""
from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import peers
from harness import SHARED as DEFAULT_SHARED, mbps as _mbps, median as _median, ratio as _ratio
from harness import Missing, doc_digests as _digests, reset_peak_rss as _reset_peak_rss, rss as _rss, timed as _timed

DOCS_IN_SHARED = Path("data") / "text" / "docs.parquet"
GPT2_JSON = peers.GPT2_JSON
TOOLS = ["fastenc", "gigatoken", "tiktoken-loop", "tiktoken-batch", "hf-batch", "tokie"]
SINGLE_THREADED = peers.SINGLE_THREADED
REGIMES = ["first", "warm", "unseen"]
SELECTIONS = ["heldout", "docs", "reverse", "cjk"]
EOT = "<|endoftext|>"

# Thai; Hangul jamo, compatibility jamo and syllables; CJK punctuation, Hiragana, Katakana; Han (extension A,
# the main block, compatibility ideographs, the supplementary planes); half-width and full-width forms.
_CJK = re.compile(
    "[\u0e00-\u0e7f\u1100-\u11ff\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u3130-\u318f"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
)
_SPACE = re.compile(r"\s")
HELDOUT_SHARE = 0.2
HELDOUT_RULE = (
    f"the documents whose id's sha256 (its first 8 bytes, as an integer) modulo 100 is at least "
    f"{100 - round(100 * HELDOUT_SHARE)}: the last {HELDOUT_SHARE:.0%} by id hash"
)
BATCH_SIZES = (1, 16, 256, 4096)
CJK_SHARE = 0.5
CJK_RULE = (
    f"documents where Han, Hiragana, Katakana, Hangul, Thai or CJK punctuation/full-width characters are at "
    f"least {CJK_SHARE:.0%} of the non-whitespace characters"
)


# --- worker side: one (tool, threads, regime) in its own process --------------------------------------------


def _tiktoken_gpt2():
    return peers.tiktoken_encoding("gpt2")  # offline, from ../shared/data/gpt2


def _make_runner(tool: str, threads: int, input_kind: str = "arrow"):
    """(encode, flatten) of bench/peers.py: encode(column, texts) is the only call timed."""
    runner = peers.build(tool, "gpt2", threads, input_kind)
    return runner.encode, runner.flat


def _fastenc_cache_bytes(threads: int) -> dict:
    """The piece caches' memory: reserved (nbytes) and touched (4 KiB pages holding data), per thread.

    Reads ``Encoder._task_caches()`` generically (whatever tables it holds): an array whose first axis has one
    entry per thread counts per thread, any other array as shared.
    """
    import numpy as np

    import fastenc

    caches = fastenc.load("gpt2")._task_caches()
    arrays = [a for a in (caches if isinstance(caches, tuple) else [caches]) if isinstance(a, np.ndarray)]
    per_thread = [a for a in arrays if a.ndim >= 2 and a.shape[0] == threads]
    shared = [a for a in arrays if not any(a is b for b in per_thread)]

    def touched(a) -> int:
        flat = a.reshape(-1).view(np.uint8)
        pages = flat[: len(flat) // 4096 * 4096].reshape(-1, 4096)
        return int(pages.any(axis=1).sum()) * 4096 + (4096 if flat[len(flat) // 4096 * 4096 :].any() else 0)

    return {
        "reserved_per_thread": sum(a[0].nbytes for a in per_thread),
        "touched_per_thread": [sum(touched(a[t]) for a in per_thread) for t in range(threads)],
        "shared_reserved": sum(a.nbytes for a in shared),
        "shared_touched": sum(touched(a) for a in shared),
        "tables": {f: list(getattr(caches, f).shape) for f in getattr(caches, "_fields", ())},
    }


def worker(args) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    column = pq.read_table(args.corpus_file, columns=["text"]).column("text").combine_chunks()
    if args.limit:
        column = column.slice(0, args.limit)
    # fastenc reads the Arrow column with --input arrow; only then are no Python strings made for it.
    texts = column.to_pylist() if args.worker != "fastenc" or args.input == "list" else None
    # Memory: resident with the corpus loaded, then the peak of everything after (the tool's code, tables,
    # caches and outputs). The high-water mark is restarted before each stretch of encoding and read before
    # the exactness check, whose copies of the ids are not the tool's.
    n = len(column)
    sub = lambda idx: (column.take(idx), [texts[i] for i in idx] if texts is not None else None)  # noqa: E731
    even, odd = list(range(0, n, 2)), list(range(1, n, 2))
    one_in = sub([0])
    even_in, odd_in = (sub(even), sub(odd)) if args.regime == "unseen" else (None, None)
    result: dict = {"rss_corpus": _rss("VmRSS")}
    _reset_peak_rss()
    encode, flatten = _make_runner(args.worker, args.threads, args.input)
    encode(*one_in)  # the one-off start-up, out of every timed pass
    peaks = []
    if args.regime == "unseen":
        encode(*even_in)
        out, result["unseen_s"], result["unseen_cpu"] = _timed(encode, *odd_in)
        peaks.append(_rss("VmHWM"))
        counts, hashes = _digests(*flatten(out))
        np.save(args.digest_file, np.stack([np.asarray(odd, dtype=np.uint64), counts.astype(np.uint64), hashes]))
    else:
        out, result["first_s"], result["first_cpu"] = _timed(encode, column, texts)
        peaks.append(_rss("VmHWM"))
        counts, hashes = _digests(*flatten(out))
        del out
        walls, cpus, same = [], [], True
        for i in range(args.passes):
            _reset_peak_rss()
            again, wall, cpu = _timed(encode, column, texts)
            peaks.append(_rss("VmHWM"))
            walls.append(wall)
            cpus.append(cpu)
            if i == args.passes - 1:  # the warm output must be the cold one, document by document
                same = bool((_digests(*flatten(again))[1] == hashes).all())
            del again
        result.update(warm_s=statistics.median(walls), warm_cpu=statistics.median(cpus), warm_walls=walls, warm_same=same)
        np.save(args.digest_file, np.stack([np.arange(n, dtype=np.uint64), counts.astype(np.uint64), hashes]))
    result["tokens"] = int(counts.sum())
    result["rss_peak"] = max(peaks)
    if args.worker == "fastenc":
        try:
            result["caches"] = _fastenc_cache_bytes(args.threads)
        except Exception as err:  # the encoder's internals changed: report it, keep the timings
            result["caches_error"] = f"{type(err).__name__}: {err}"
    print(json.dumps(result))


# --- main side ------------------------------------------------------------------------------------------


def _run_worker(tool: str, threads: int, regime: str, args, digest_file: Path) -> dict:
    cmd = [sys.executable, __file__, "--worker", tool, "--threads", str(threads), "--passes", str(args.passes),
           "--regime", regime, "--corpus-file", str(args.corpus_file), "--digest-file", str(digest_file), "--input", args.input]
    if tool == "hf-batch":
        cmd += ["--limit", str(args.hf_docs)]
    return harness.spawn_json(cmd, env=harness.thread_env(threads))


def _check_setup(args, tools: list[str]) -> None:
    """Everything the run needs, or Missing(one line)."""
    for tool in tools:
        if tool not in TOOLS and peers.canonical(tool) not in peers.TOOLS:
            raise Missing(f"unknown tool {tool!r} (choose from {', '.join(TOOLS)})")
    for pkg in ["pyarrow", "xxhash", "tiktoken", "numpy"] + (["awkward"] if "gigatoken" in tools else []):
        try:
            importlib.import_module(pkg)
        except ImportError:
            raise Missing(f"missing Python package {pkg!r}: install the bench extra, pip install -e '.[bench]'") from None
    if not args.shared.is_dir():
        raise Missing(f"missing the shared data folder {args.shared} (corpora and tiktoken's offline files, beside the "
                      "checkout); pass --shared DIR")
    for need in (args.shared / "data" / "gpt2" / "vocab.bpe", args.shared / "data" / "gpt2" / "encoder.json"):
        if not need.is_file():
            raise Missing(f"missing {need} (the shared data beside the checkout, for tiktoken's offline oracle); pass --shared DIR")
    if not args.docs.is_file():
        raise Missing(f"missing {args.docs} (the corpus); pass --corpus PATH to a parquet file with a 'text' column")
    if not GPT2_JSON.is_file():
        raise Missing(f"missing {GPT2_JSON}")


def heldout(ids) -> list[int]:
    """The positions of the held-out documents (HELDOUT_RULE), in order; ``ids``: each document's id."""
    import hashlib

    cut = 100 - round(100 * HELDOUT_SHARE)
    return [i for i, d in enumerate(ids) if int.from_bytes(hashlib.sha256(str(d).encode()).digest()[:8], "little") % 100 >= cut]


def _select(texts: list[str], corpus: str, ids=None) -> tuple[list[int], str]:
    """The indices of the documents of a corpus choice, in order, and a sentence saying how they were chosen."""
    if corpus == "heldout":
        keyed = "id" if ids is not None else "row number"
        return heldout(ids if ids is not None else range(len(texts))), f"held out: {HELDOUT_RULE} (keyed by {keyed}), in order"
    if corpus == "reverse":
        return list(range(len(texts)))[::-1], "all documents, in reverse order"
    if corpus == "cjk":
        keep = []
        for i, t in enumerate(texts):
            visible = len(t) - len(_SPACE.findall(t))
            if visible and len(_CJK.findall(t)) >= CJK_SHARE * visible:
                keep.append(i)
        return keep, f"only the {CJK_RULE}, in their order"
    return list(range(len(texts))), "all documents, as given"


def _prepare_corpus(args, tmp: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        args.docs = harness.corpus_slice(args.docs, args.mb, tmp)  # --mb: only the first documents
        column = pq.read_table(args.docs, columns=["text"]).column("text")
    except (KeyError, pa.ArrowInvalid) as err:
        raise Missing(f"{args.docs}: cannot read a 'text' column ({str(err).splitlines()[0]})") from None
    texts = column.to_pylist()
    if any(t is None for t in texts):
        raise Missing(f"{args.docs}: the 'text' column has nulls")
    schema = pq.read_schema(args.docs)
    ids = pq.read_table(args.docs, columns=["id"]).column("id").to_pylist() if "id" in schema.names else None
    idx, how = _select(texts, args.select, ids)
    if len(idx) < 2:
        raise Missing(f"selection {args.select!r} of {args.docs} has {len(idx)} document(s); the unseen regime needs 2 or more")
    chosen = [texts[i] for i in idx]
    args.corpus_file = tmp / "corpus.parquet"
    pq.write_table(pa.table({"text": pa.array(chosen, type=pa.large_string())}), args.corpus_file)
    nbytes = [len(t.encode("utf-8", "surrogatepass")) for t in chosen]
    args.hf_docs = min(args.hf_docs, len(chosen))
    return {"texts": chosen, "how": how, "mb": sum(nbytes) / 1e6, "odd_mb": sum(nbytes[1::2]) / 1e6,
            "hf_mb": sum(nbytes[: args.hf_docs]) / 1e6, "hf_odd_mb": sum(nbytes[1 : args.hf_docs : 2]) / 1e6,
            "eot": {i for i, t in enumerate(chosen) if EOT in t}}


def _oracle(texts: list[str]):
    """(counts, hashes) of tiktoken encode_ordinary per document (untimed, on every CPU).

    In slices of documents: all of docs.parquet's ids at once would be ~40 M Python ints (~1.5 GB).
    """
    import numpy as np

    enc = _tiktoken_gpt2()
    counts, hashes = [], []
    for start in range(0, len(texts), 512):
        out = enc.encode_ordinary_batch(texts[start : start + 512], num_threads=os.cpu_count() or 1)
        c = np.fromiter((len(x) for x in out), dtype=np.int64, count=len(out))
        c, h = _digests(np.fromiter(itertools.chain.from_iterable(out), dtype=np.uint32, count=int(c.sum())), c)
        counts.append(c)
        hashes.append(h)
    return np.concatenate(counts), np.concatenate(hashes)


def _differ(digest_file: Path, oracle) -> list[int]:
    import numpy as np

    idx, counts, hashes = np.load(digest_file)
    idx = idx.astype(np.int64)
    bad = (counts.astype(np.int64) != oracle[0][idx]) | (hashes != oracle[1][idx])
    return idx[bad].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_flags(parser, corpus=None, corpus_aliases=["--docs"], tools=TOOLS, passes=3, passes_aliases=["--repeat"])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared data folder (default: ../shared)")
    parser.add_argument("--select", choices=SELECTIONS, default="heldout",
                        help="which documents of the corpus: heldout (default), docs (all), reverse, cjk")
    parser.add_argument("--input", choices=["list", "arrow"], default="list",
                        help="fastenc's input: a list of str (default, what users hold) or the Arrow column")
    parser.add_argument("--per-call", action="store_true",
                        help="time a loop of small calls (encode, encode_batch of 1..4096 short documents) instead")
    parser.add_argument("--chars", type=int, default=500, help="--per-call: the short documents' length in characters")
    parser.add_argument("--hf-docs", type=int, default=300, help="HF tokenizers is timed on this many first documents")
    parser.add_argument("--no-unseen", "--no-heldout", dest="no_unseen", action="store_true", help="skip the unseen-text runs")
    parser.add_argument("--no-start-times", action="store_true", help="skip fastenc's compile / warm-start timing")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--regime", default="passes", help=argparse.SUPPRESS)
    parser.add_argument("--percall-worker", help=argparse.SUPPRESS)
    parser.add_argument("--corpus-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--digest-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.corpus is not None and str(args.corpus) in SELECTIONS and not args.corpus.exists():
        args.select, args.corpus = str(args.corpus), None  # the old spelling: --corpus heldout
    args.docs = args.corpus
    if args.percall_worker:
        return percall_worker(args)
    if args.worker:
        args.threads = int(args.threads)
        return worker(args)
    args.docs = args.docs or args.shared / DOCS_IN_SHARED
    tools, args.skipped = peers.usable([t for t in args.tools.split(",") if t])  # an absent peer: a line, not a stop
    try:
        threads = sorted({int(t) for t in args.threads.split(",") if t})
    except ValueError:
        raise SystemExit(f"bench_gpt2: --threads takes comma-separated integers, got {args.threads!r}") from None
    try:
        with tempfile.TemporaryDirectory(prefix="bench_gpt2_") as tmp, harness.out_md(args.out_md):
            run(args, tools, threads, Path(tmp))
    except Missing as err:
        raise SystemExit(f"bench_gpt2: {err}") from None


def run(args, tools: list[str], threads: list[int], tmp: Path) -> None:
    if args.per_call:
        named = [{"tiktoken-loop": "tiktoken", "tiktoken-batch": "tiktoken"}.get(t, t) for t in tools]
        return run_per_call(args, [t for t in PER_CALL_TOOLS if t in named] or list(PER_CALL_TOOLS), tmp)
    _check_setup(args, tools)
    corpus = _prepare_corpus(args, tmp)
    print(harness.machine_header("GPT-2 encode core (`bench/bench_gpt2.py`)", ("numba", "gigatoken", "tiktoken", "tokenizers", "tokie")))
    for line in args.skipped:
        print(f"- skipped: {line}")
    print(f"- **Corpus:** `{args.docs}`, {corpus['how']}: {len(corpus['texts'])} documents, {corpus['mb']:.1f} MB of UTF-8 "
          f"(unseen regime: timed on the {len(corpus['texts']) // 2} odd documents, {corpus['odd_mb']:.1f} MB)")
    print(f"- **Input:** fastenc.encode_batch gets {'a list of str' if args.input == 'list' else 'the Arrow column'}; "
          "the peers a list of str")
    if "hf-batch" in tools:
        print(f"- **HF tokenizers** is timed on the first {args.hf_docs} documents only ({corpus['hf_mb']:.1f} MB): its MB/s are "
              "of that text, not comparable cell by cell")
    print(f"- **Method:** {args.rounds} round{'s' if args.rounds != 1 else ''}, tools alternating; warm = median of {args.passes} passes; every figure a median "
          "over rounds; wall MB/s and MB per CPU-second (process CPU time, all threads)", flush=True)
    oracle = _oracle(corpus["texts"])
    regimes = ["passes"] + ([] if args.no_unseen else ["unseen"])
    pairs = [(tool, t) for t in threads for tool in tools if not (tool in SINGLE_THREADED and t > 1)]
    runs: dict = {}
    differ: dict = {}
    failed: list[str] = []
    for round_ in range(args.rounds):
        for regime in regimes:
            for t in threads:
                group = [p for p in pairs if p[1] == t]
                for tool, _ in group if round_ % 2 == 0 else group[::-1]:
                    digest = tmp / f"{tool}-{t}-{regime}.npy"
                    r = _run_worker(tool, t, regime, args, digest)
                    if "error" in r:
                        failed.append(f"{tool} {t}T {regime} round {round_ + 1}: {r['error']}")
                        print(f"<!-- FAILED {failed[-1]} -->", flush=True)
                        continue
                    r["round"] = round_
                    runs.setdefault((tool, t), []).append(r)
                    bad = differ.setdefault((tool, t, regime), set())
                    bad.update(_differ(digest, oracle))
                    if regime == "passes" and not r["warm_same"]:
                        bad.add(-1)  # -1: the warm output differed from the first pass's
                    print(f"<!-- round {round_ + 1} {tool} {t}T {regime}: "
                          + ", ".join(f"{k}={v:.3f}" for k, v in r.items() if isinstance(v, float)) + " -->", flush=True)
    report(args, corpus, tools, threads, runs, differ, failed, oracle)
    if "fastenc" in tools and not args.no_start_times:
        cold, warm = start_times()
        print(f"\nfastenc start: first run with an empty Numba cache (compiles) {cold:.2f} s; warm start (compiled cache, "
              f"fresh process, until the first ids) {warm:.2f} s")
    print(harness.footer())


def _mb(corpus: dict, tool: str, regime: str) -> float:
    if tool == "hf-batch":
        return corpus["hf_odd_mb"] if regime == "unseen" else corpus["hf_mb"]
    return corpus["odd_mb"] if regime == "unseen" else corpus["mb"]


def report(args, corpus, tools, threads, runs, differ, failed, oracle) -> None:
    med = {key: {f"{reg}_{kind}": _median(rs, f"{reg}_{kind}") for reg in REGIMES for kind in ("s", "cpu")} for key, rs in runs.items()}
    print("\n| tool | threads | first MB/s | (per CPU-s) | warm MB/s | (per CPU-s) | unseen MB/s | (per CPU-s) | tokens | docs ≠ tiktoken | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    oracle_total = int(oracle[0].sum())
    hf_total = int(oracle[0][: args.hf_docs].sum())
    for (tool, t), m in med.items():
        cells = []
        for reg in REGIMES:
            mb = _mb(corpus, tool, reg)
            cells += [_mbps(mb, m[f"{reg}_s"]), _mbps(mb, m[f"{reg}_cpu"])]
        tokens = sorted({r["tokens"] for r in runs[(tool, t)] if "first_s" in r})
        bad = set().union(*(differ.get((tool, t, reg), set()) for reg in ("passes", "unseen")))
        want = hf_total if tool == "hf-batch" else oracle_total
        tok = ", ".join(f"{x:,}" for x in tokens) + ("" if tokens == [want] else f" (tiktoken {want:,})")
        rss = max(r["rss_peak"] for r in runs[(tool, t)]) / 2**20
        print(f"| {tool} | {t} | " + " | ".join(cells) + f" | {tok} | {_bad_docs(bad, corpus)} | {rss:.0f} |")
    print(f"\ntiktoken encode_ordinary (the oracle): {oracle_total:,} tokens over all {len(oracle[0])} documents"
          + (f"; {hf_total:,} over HF's first {args.hf_docs}" if "hf-batch" in tools else ""))
    _ratio_tables(corpus, threads, runs, med)
    _memory(runs, threads)
    for line in failed:
        print(f"\nFAILED: {line}")


def _bad_docs(bad: set, corpus: dict) -> str:
    if not bad:
        return "0"
    warm = " (warm pass differs from first!)" if -1 in bad else ""
    docs = sorted(bad - {-1})
    eot = sum(1 for i in docs if i in corpus["eot"])
    return f"**{len(docs)}**" + (f" ({eot} contain `{EOT}`)" if eot else "") + (f": {docs[:5]}" if docs else "") + warm


def _ratio_tables(corpus, threads, runs, med) -> None:
    fe, gt = "fastenc", "gigatoken"
    if any((fe, t) in med and (gt, t) in med for t in threads):
        print("\nfastenc / gigatoken speed (gigatoken's time / fastenc's; > 1: fastenc faster). Median over rounds of each; "
              "in brackets the per-round ratios (the two ran next to each other in each round):\n")
        print("| regime | " + " | ".join(f"{t}T wall | {t}T CPU" for t in threads) + " |")
        print("|---|" + "---:|---:|" * len(threads))
        for reg in [r for r in REGIMES if any(m[f"{r}_s"] for m in med.values())]:  # unseen: not with --no-unseen
            cells = []
            for t in threads:
                if (fe, t) not in med or (gt, t) not in med:
                    cells += ["–", "–"]
                    continue
                for kind in ("s", "cpu"):
                    a, b = med[(gt, t)][f"{reg}_{kind}"], med[(fe, t)][f"{reg}_{kind}"]
                    g_by_round = {r["round"]: r for r in _of(runs[(gt, t)], reg)}
                    per_round = [_ratio(g_by_round[f["round"]].get(f"{reg}_{kind}"), f.get(f"{reg}_{kind}"))
                                 for f in _of(runs[(fe, t)], reg) if f["round"] in g_by_round]
                    cells.append(f"**{_ratio(a, b)}** ({', '.join(per_round)})")
            print(f"| {reg} | " + " | ".join(cells) + " |")
    if len(threads) > 1:
        lo, hi = threads[0], threads[-1]
        for tool in (fe, gt):
            if (tool, lo) in med and (tool, hi) in med:
                print(f"\n{tool} {hi} threads / {lo} (wall): " + ", ".join(
                    f"{reg} {_ratio(med[(tool, lo)][f'{reg}_s'], med[(tool, hi)][f'{reg}_s'])}x" for reg in REGIMES))
    peers = [p for p in ("tiktoken-loop", "tiktoken-batch") if any(k[0] == p for k in med)]
    if peers:
        print("\nSpeed against tiktoken (tiktoken's wall time / the tool's, same documents; tiktoken-batch at the same thread "
              "count, the loop on one thread):\n")
        print("| tool | threads | " + " | ".join(f"{reg} x {p}" for reg in REGIMES for p in peers) + " |")
        print("|---|---:|" + "---:|" * (len(REGIMES) * len(peers)))
        for tool in (fe, gt):
            for t in threads:
                if (tool, t) not in med:
                    continue
                cells = []
                for reg in REGIMES:
                    for p in peers:
                        base = med.get((p, 1 if p in SINGLE_THREADED else t), {}).get(f"{reg}_s")
                        cells.append(_ratio(base, med[(tool, t)][f"{reg}_s"]))
                print(f"| {tool} | {t} | " + " | ".join(cells) + " |")


def _of(rs: list[dict], regime: str) -> list[dict]:
    """The runs that hold a regime's figures (first/warm come from one process, unseen from another)."""
    key = "unseen_s" if regime == "unseen" else "first_s"
    return [r for r in rs if key in r]


def _memory(runs, threads) -> None:
    lines = []
    for t in threads:
        fr = [r for r in runs.get(("fastenc", t), []) if "caches" in r]
        errs = {r["caches_error"] for r in runs.get(("fastenc", t), []) if "caches_error" in r}
        if errs:
            lines.append(f"- fastenc {t}T: piece cache sizes not read ({'; '.join(sorted(errs))})")
        if runs.get(("fastenc", t)):
            lines.append(f"- fastenc {t}T: {_rss_line(runs[('fastenc', t)])}")
        if fr:
            c = fr[-1]["caches"]
            touched = [max(r["caches"]["touched_per_thread"][k] for r in fr) for k in range(t)]
            shared = f"; shared tables {c['shared_reserved'] / 2**20:.1f} MB reserved" if c["shared_reserved"] else ""
            lines.append(f"  piece caches: {c['reserved_per_thread'] / 2**20:.1f} MB reserved per task, touched (4 KiB pages "
                         f"holding an entry) by task: {[round(x / 2**20, 1) for x in touched]} MB (at 2+ threads every task "
                         f"fills task 0's tiny/short/long caches, each its own memo){shared}; shapes {c['tables']}")
        if runs.get(("gigatoken", t)):
            lines.append(f"- gigatoken {t}T: {_rss_line(runs[('gigatoken', t)])}")
    if lines:
        print("\nMemory (peak resident set, VmHWM, of each worker process: the largest over rounds and regimes):\n")
        print("\n".join(lines))


def _rss_line(rs: list[dict]) -> str:
    peak, corpus = max(r["rss_peak"] for r in rs), min(r["rss_corpus"] for r in rs)
    return (f"peak RSS {peak / 2**20:.0f} MB = {corpus / 2**20:.0f} MB with the corpus loaded (Python, pyarrow, the text) "
            f"+ {(peak - corpus) / 2**20:.0f} MB for the tool (its code, tables, caches and output ids)")


# --- per-call mode ----------------------------------------------------------------------------------------

PER_CALL_TOOLS = ("fastenc", "gigatoken", "tiktoken", "tokie")
HELLO = "hello world"


def _per_call_api(tool: str):
    """(one, batch, as_lists) of bench/peers.py for GPT-2."""
    return peers.per_call(tool, "gpt2")


def _best_per_item(run, items: int, repeat: int, min_seconds: float = 0.2) -> float:
    """Seconds per item of ``run()`` (which does ``items`` calls): the best of ``repeat`` timed loops, each
    of enough runs to last ``min_seconds`` (after one untimed run: warm caches, as in a long loop)."""
    run()
    t = time.perf_counter()
    run()
    once = max(time.perf_counter() - t, 1e-7)
    loops = max(1, int(min_seconds / once))
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(loops):
            run()
        best = min(best, (time.perf_counter() - t) / (loops * items))
    return best


def percall_worker(args) -> None:
    import numpy as np
    import pyarrow.parquet as pq
    import xxhash

    docs = pq.read_table(args.corpus_file, columns=["text"]).column("text").to_pylist()
    one, batch, as_lists = _per_call_api(args.percall_worker)
    one(HELLO)  # (start-up: loading, compiling from the cache, thread pools)
    batch(docs[:2])
    result = {"hello": _best_per_item(lambda: one(HELLO), 1, args.passes)}

    def each():
        for text in docs:
            one(text)

    result["docs"] = _best_per_item(each, len(docs), args.passes)
    pool = docs * -(-max(BATCH_SIZES) // len(docs))  # (repeated where there are fewer short documents than that)
    for size in BATCH_SIZES:
        chunks = [pool[k : k + size] for k in range(0, max(BATCH_SIZES), size)]

        def batches(chunks=chunks):
            for chunk in chunks:
                batch(chunk)

        result[f"batch{size}"] = _best_per_item(batches, len(chunks), args.passes)
    ids = [as_lists(one(t)) for t in docs]
    result["digest"] = xxhash.xxh3_64_hexdigest(np.concatenate([np.asarray(x, dtype=np.uint32) for x in ids] + [
        np.asarray([len(x) for x in ids], dtype=np.uint32)]).tobytes())
    print(json.dumps(result))


def _short_docs(texts: list[str], chars: int) -> list[str]:
    return [t[:chars] for t in texts if len(t) >= chars]


def run_per_call(args, tools: list[str], tmp: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import xxhash

    _check_setup(args, [{"tiktoken": "tiktoken-loop"}.get(t, t) for t in tools])
    corpus = _prepare_corpus(args, tmp)
    docs = _short_docs(corpus["texts"], args.chars)
    if not docs:
        raise Missing(f"no document of the corpus has {args.chars} characters (--chars)")
    corpus_file = tmp / "short.parquet"
    pq.write_table(pa.table({"text": pa.array(docs, type=pa.large_string())}), corpus_file)
    nbytes = [len(t.encode("utf-8", "surrogatepass")) for t in docs]
    mean_bytes = sum(nbytes) / len(nbytes)
    oracle = _tiktoken_gpt2()
    want = [oracle.encode_ordinary(t) for t in docs]
    want_digest = xxhash.xxh3_64_hexdigest(np.concatenate([np.asarray(x, dtype=np.uint32) for x in want] + [
        np.asarray([len(x) for x in want], dtype=np.uint32)]).tobytes())
    print(harness.machine_header("GPT-2 per-call cost (`bench/bench_gpt2.py --per-call`)", ("numba", "gigatoken", "tiktoken", "tokie")))
    for line in args.skipped:
        print(f"- skipped: {line}")
    print(f"- **Short documents:** the first {args.chars} characters of each document of `{args.docs}` ({corpus['how']}) "
          f"with at least that many: {len(docs)} documents, {mean_bytes:.0f} bytes of UTF-8 on average")
    print(f"- **Method:** {args.rounds} rounds, each tool in a fresh process per round, tools alternating (order reversed "
          f"every other round); each cell the best of {args.passes} timed loops (>= 0.2 s each, after one untimed: warm); "
          "figures are medians over rounds; thread counts each tool's default (fastenc encode_batch: Numba's, "
          "gigatoken: its pool, tiktoken: encode_ordinary_batch's)", flush=True)
    runs: dict = {t: [] for t in tools}
    failed = []
    for round_ in range(args.rounds):
        for tool in tools if round_ % 2 == 0 else tools[::-1]:
            cmd = [sys.executable, __file__, "--percall-worker", tool, "--corpus-file", str(corpus_file), "--passes",
                   str(args.passes)]
            r = harness.spawn_json(cmd)
            if "error" in r:
                failed.append(f"{tool} round {round_ + 1}: {r['error']}")
                print(f"<!-- FAILED {failed[-1]} -->", flush=True)
                continue
            r["round"] = round_
            runs[tool].append(r)
            print(f"<!-- round {round_ + 1} {tool}: " + ", ".join(f"{k}={v * 1e6:.2f}us" for k, v in r.items()
                                                               if isinstance(v, float)) + " -->", flush=True)
    cells = ["hello", "docs"] + [f"batch{n}" for n in BATCH_SIZES]
    names = {"hello": f"encode({HELLO!r})", "docs": f"encode() of each short document"}
    names.update({f"batch{n}": f"encode_batch of {n}" for n in BATCH_SIZES})
    med = {t: {c: _median(rs, c) for c in cells} for t, rs in runs.items()}
    print("\n| cell | " + " | ".join(f"{t} µs/call | {t} MB/s" for t in tools) + " | fastenc / gigatoken | fastenc / tiktoken |")
    print("|---|" + "---:|---:|" * len(tools) + "---:|---:|")
    for c in cells:
        if not any(med[t][c] for t in tools):
            continue
        items = 1 if c in ("hello", "docs") else int(c[5:])
        per_call_bytes = len(HELLO) if c == "hello" else mean_bytes * items
        row = []
        for t in tools:
            v = med[t][c]
            row += [f"{v * 1e6:.2f}" if v else "–", f"{per_call_bytes / v / 1e6:.1f}" if v else "–"]
        ratios = []
        for peer in ("gigatoken", "tiktoken"):
            if peer not in runs or "fastenc" not in runs:
                ratios.append("–")
                continue
            by_round = {r["round"]: r for r in runs[peer]}
            per_round = [_ratio(by_round[f["round"]].get(c), f.get(c)) for f in runs["fastenc"] if f["round"] in by_round]
            ratios.append(f"**{_ratio(med[peer][c], med['fastenc'][c])}** ({', '.join(per_round)})")
        print(f"| {names[c]} | " + " | ".join(row) + " | " + " | ".join(ratios) + " |")
    print("\nRatios: the peer's time / fastenc's (> 1: fastenc faster); median over rounds, then each round's own.")
    print("Exactness (ids of every short document by encode(), against tiktoken encode_ordinary): " + "; ".join(
        f"{t} " + ("same" if all(r["digest"] == want_digest for r in runs[t]) else "**DIFFERS**") for t in tools if runs[t]))
    for line in failed:
        print(f"\nFAILED: {line}")
    print(harness.footer())


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


if __name__ == "__main__":
    main()
