"""Warm encode speed by kind of text: fastenc against gigatoken, one language group at a time.

    python bench/bench_languages.py [--encoding gpt2|cl100k_base|o200k_base] [--docs ../shared/data/text/docs.parquet]
                                    [--groups en,de,code,...] [--rounds 2] [--min-mb 8]

bench_gpt2.py and bench_encodings.py time the whole corpus, where English is most of the bytes. This
one splits the documents by their ``lang`` column into groups (``GROUPS``: code is every ``code-*``,
Cyrillic every Cyrillic-script language; ``other`` what no group names) and times each group on its own,
1 thread, warm: each group's documents are repeated up to ``--min-mb`` MB (so that a small group takes long
enough to time), encoded twice untimed, then the fastest of 3 passes counts. Each tool runs in a fresh
process of its own per group and round, tools alternating (the order reversed every other round); the
speed is the best round's. Warm passes measure the encode loop with every piece seen before, the
regime where the kind of text, not the cache's filling, decides the speed.

gigatoken: for gpt2 its ``Tokenizer`` of the same tokenizer.json (as bench_gpt2.py), for cl100k/o200k its
``from_tiktoken`` without special tokens (as bench_encodings.py's gigatoken-ordinary). The last column
counts the documents whose ids differ between the two (gigatoken reads a literal ``<|endoftext|>`` in
a GPT-2 document as the special token; fastenc's parity with tiktoken is the test suite's job).
Prints one table for bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from _inputs import require  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
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
    if tool == "fastenc":
        import numba

        import fastenc

        numba.set_num_threads(1)
        enc = fastenc.load(encoding)
        return lambda col, texts: enc.encode_batch(col), lambda r: [r[0][r[1][i]:r[1][i + 1]].tolist() for i in range(len(r[1]) - 1)]
    import gigatoken

    if encoding == "gpt2":
        tok = gigatoken.Tokenizer(str(REPO / "vocab" / "gpt2" / "tokenizer.json"))
        run = lambda col, texts: tok.encode_batch(texts, parallel=False)  # noqa: E731
    else:
        from bench_encodings import PATTERNS

        tok = gigatoken.Tokenizer.from_tiktoken(str(REPO / "vocab" / encoding / f"{encoding}.tiktoken"),
                                                pretokenizer=PATTERNS[encoding], special_tokens={})
        run = lambda col, texts: tok.encode_batch(texts)  # noqa: E731
    return run, lambda r: [list(x) for x in r.to_list()]


def worker(tool: str, encoding: str, docs: Path, group: str, min_mb: float) -> None:
    import xxhash

    col, _, _ = load_group(docs, group, min_mb)
    texts = col.to_pylist()
    run, to_lists = _runner(tool, encoding)
    digests = [xxhash.xxh3_64_intdigest(json.dumps(ids).encode()) for ids in to_lists(run(col, texts))]
    run(col, texts)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        run(col, texts)
        times.append(time.perf_counter() - t)
    print(json.dumps({"mb_s": col.nbytes / min(times) / 1e6, "digests": digests}))


def _cpu_model() -> str:
    try:
        return next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encoding", default="gpt2", choices=["gpt2", "cl100k_base", "o200k_base"])
    p.add_argument("--docs", type=Path, default=SHARED / "text" / "docs.parquet")
    p.add_argument("--groups", default=",".join([*GROUPS, "other"]))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--min-mb", type=float, default=8.0)
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker[0], args.encoding, args.docs, args.worker[1], args.min_mb)
    require([args.docs], "--docs")
    import pyarrow.parquet as pq

    if not {"text", "lang"} <= set(pq.read_schema(args.docs).names):
        sys.exit(f"bench_languages.py: {args.docs} needs a 'text' and a 'lang' column (docs.parquet's layout)")
    try:
        import gigatoken  # noqa: F401
    except ImportError:
        sys.exit("bench_languages.py: gigatoken is not installed: pip install -e '.[bench]'")
    groups = args.groups.split(",")
    unknown = [g for g in groups if g != "other" and g not in GROUPS]
    if unknown:
        sys.exit(f"bench_languages.py: no group {unknown[0]!r}; the groups: {', '.join([*GROUPS, 'other'])}")
    print(f"# {args.encoding}, 1 thread, warm; {args.docs}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"CPU: {_cpu_model()}")
    print("| group | MB (x repeats) | fastenc MB/s | gigatoken MB/s | fastenc / gigatoken | docs differing |")
    print("|---|---:|---:|---:|---:|---:|")
    for group in groups:
        _, mb, repeats = load_group(args.docs, group, args.min_mb)
        if mb == 0:
            print(f"| {group} | 0 | no documents | | | |")
            continue
        speeds, digests = {"fastenc": [], "gigatoken": []}, {}
        for k in range(args.rounds):
            for tool in ("fastenc", "gigatoken") if k % 2 == 0 else ("gigatoken", "fastenc"):
                out = subprocess.run([sys.executable, __file__, "--encoding", args.encoding, "--docs", str(args.docs),
                                      "--min-mb", str(args.min_mb), "--worker", tool, group], capture_output=True, text=True)
                if out.returncode:
                    sys.exit(f"bench_languages.py: {tool} failed on {group}:\n{out.stderr[-2000:]}")
                r = json.loads(out.stdout.strip().splitlines()[-1])
                speeds[tool].append(r["mb_s"])
                digests[tool] = r["digests"]
        f, g = max(speeds["fastenc"]), max(speeds["gigatoken"])
        differ = sum(a != b for a, b in zip(digests["fastenc"], digests["gigatoken"]))
        print(f"| {group} | {mb:.1f} (x{repeats}) | {f:.0f} | {g:.0f} | "
              f"**{f / g:.2f}** ({', '.join(f'{a / b:.2f}' for a, b in zip(speeds['fastenc'], speeds['gigatoken']))}) | "
              f"{differ} |", flush=True)


if __name__ == "__main__":
    main()
