"""Warm encode speed by kind of text: fastenc against gigatoken, one language group at a time.

    python bench/bench_languages.py [--encoding gpt2|cl100k_base|o200k_base] [--corpus docs.parquet] [--mb N]
                                    [--groups en,de,code,...] [--rounds 2] [--min-mb 8] [--tools fastenc,gigatoken]

bench_gpt2.py and bench_encodings.py time the whole corpus, where English is most of the bytes. This
one splits the documents by their ``lang`` column into groups (``GROUPS``: code is every ``code-*``,
Cyrillic every Cyrillic-script language; ``other`` what no group names) and times each group on its own,
1 thread, warm: each group's documents are repeated up to ``--min-mb`` MB (so that a small group takes long
enough to time), encoded twice untimed, then the fastest of 3 passes counts. Each tool runs in a fresh
process of its own per group and round, tools alternating (the order reversed every other round); the
speed is the best round's. Warm passes measure the encode loop with every piece seen before, the
regime where the kind of text, not the cache's filling, decides the speed.

gigatoken: bench/peers.py's gigatoken-ordinary (for gpt2 its ``Tokenizer`` of the same tokenizer.json, for
cl100k/o200k ``from_tiktoken`` without special tokens); any other peer of peers.py can be named in --tools. The last column
counts the documents whose ids differ between the two (gigatoken reads a literal ``<|endoftext|>`` in
a GPT-2 document as the special token; fastenc's parity with tiktoken is the test suite's job).
Prints one table for bench/RESULTS.md (--out-md writes it to a file too). --corpus was --docs (still read).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import harness
import peers

PEER_AS = {"gigatoken": "gigatoken-ordinary"}  # this bench's gigatoken encodes as encode_ordinary does
GROUPS = {
    "en": ["en"], "de": ["de"], "fr-es-it-pt": ["fr", "es", "it", "pt"], "code": "code-",
    "ja": ["ja"], "zh": ["zh"], "cyrillic": ["ru", "uk", "be", "bg", "sr", "mk"], "el": ["el"], "ar": ["ar"],
    "vi": ["vi"], "mr-bn-hy": ["mr", "bn", "hy"],
}


def _member(lang: str, group: str) -> bool:
    spec = GROUPS[group]
    return lang.startswith(spec) if isinstance(spec, str) else lang in spec


def group_of(lang: str) -> str:
    return next((g for g in GROUPS if _member(lang or "", g)), "other")


def load_group(docs: Path, group: str, min_mb: float):
    """The group's texts (a pyarrow string array) repeated up to ``min_mb`` MB, its own size in MB, and
    how many times it is repeated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(docs, columns=["text", "lang"])
    keep = [group_of(lang) == group for lang in table.column("lang").to_pylist()]
    col = table.filter(pa.array(keep)).column("text").combine_chunks()
    if len(col) == 0:
        return col, 0.0, 0
    repeats = max(1, int(min_mb * 1e6 // col.nbytes))
    return pa.concat_arrays([col] * repeats), col.nbytes / 1e6, repeats


def _runner(tool: str, encoding: str):
    runner = peers.build(PEER_AS.get(tool, tool), encoding, 1, input_kind="arrow")
    return runner.encode, runner.flat


def worker(tool: str, encoding: str, docs: Path, group: str, min_mb: float) -> None:
    col, _, _ = load_group(docs, group, min_mb)
    texts = col.to_pylist()
    run, to_lists = _runner(tool, encoding)
    digests = harness.doc_digests(*to_lists(run(col, texts)))[1].tolist()
    run(col, texts)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        run(col, texts)
        times.append(time.perf_counter() - t)
    print(json.dumps({"mb_s": col.nbytes / min(times) / 1e6, "digests": digests}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_flags(p, corpus_aliases=["--docs"], rounds=2, threads=None, tools=["fastenc", "gigatoken"])
    p.add_argument("--encoding", default="gpt2", choices=["gpt2", "cl100k_base", "o200k_base"])
    p.add_argument("--groups", default=",".join([*GROUPS, "other"]))
    p.add_argument("--min-mb", type=float, default=8.0, help="repeat each group's documents up to this many MB")
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker[0], args.encoding, args.corpus, args.worker[1], args.min_mb)
    harness.require([args.corpus], "--corpus")
    args.docs = args.corpus = harness.corpus_slice(args.corpus, args.mb)
    import pyarrow.parquet as pq

    if not {"text", "lang"} <= set(pq.read_schema(args.docs).names):
        sys.exit(f"bench_languages.py: {args.docs} needs a 'text' and a 'lang' column (docs.parquet's layout)")
    tools, skipped = peers.usable(harness.parse_list(args.tools, "--tools"))
    if "fastenc" not in tools or len(tools) < 2:
        sys.exit(f"bench_languages.py: needs fastenc and a peer ({'; '.join(skipped) or 'name one in --tools'})")
    with harness.out_md(args.out_md):
        report(args, tools, skipped)


def report(args, tools, skipped) -> None:
    groups = args.groups.split(",")
    unknown = [g for g in groups if g != "other" and g not in GROUPS]
    if unknown:
        sys.exit(f"bench_languages.py: no group {unknown[0]!r}; the groups: {', '.join([*GROUPS, 'other'])}")
    print(harness.machine_header(f"Warm encode speed by kind of text, {args.encoding} (`bench/bench_languages.py`)",
                                 ("numba", "gigatoken", "tiktoken")))
    print(f"- **Method:** 1 thread, warm; `{args.corpus}`; groups repeated up to {args.min_mb:g} MB; the best of "
          f"{args.rounds} alternating rounds")
    for line in skipped:
        print(f"- skipped: {line}")
    peer_list = [t for t in tools if t != "fastenc"]
    print()
    print("| group | MB (x repeats) | " + " | ".join(f"{t} MB/s" for t in tools) + " | "
          + " | ".join(f"fastenc / {t}" for t in peer_list) + " | docs differing |")
    print("|---|---:|" + "---:|" * (len(tools) + len(peer_list)) + "---:|")
    for group in groups:
        _, mb, repeats = load_group(args.docs, group, args.min_mb)
        if mb == 0:
            print(f"| {group} | 0 | no documents |" + " |" * (len(tools) + len(peer_list)))
            continue
        speeds, digests = {t: [] for t in tools}, {}
        for k, tool in harness.alternate(tools, args.rounds):
            r = harness.spawn_json([sys.executable, __file__, "--encoding", args.encoding, "--corpus", str(args.docs),
                                    "--min-mb", str(args.min_mb), "--worker", tool, group])
            if "error" in r:
                sys.exit(f"bench_languages.py: {tool} failed on {group}: {r['error']}")
            speeds[tool].append(r["mb_s"])
            digests[tool] = r["digests"]
        best = {t: max(v) for t, v in speeds.items()}
        ratios = [f"**{best['fastenc'] / best[t]:.2f}** ("
                  + ", ".join(f"{a / b:.2f}" for a, b in zip(speeds["fastenc"], speeds[t])) + ")" for t in peer_list]
        differ = max(sum(a != b for a, b in zip(digests["fastenc"], digests[t])) for t in peer_list)
        print(f"| {group} | {mb:.1f} (x{repeats}) | " + " | ".join(f"{best[t]:.0f}" for t in tools) + " | "
              + " | ".join(ratios) + f" | {differ} |", flush=True)
    print(harness.footer())


if __name__ == "__main__":
    main()
