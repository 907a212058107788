"""Kernel A/B: the working tree's ``encode_text`` against a git revision's, in one process.

    python bench/probes/ab_encode.py BASE_REV [--encoding gpt2] [--rounds 7] [--corpus PATH] [--limit N] [--base-tables]
                              [--first-rounds N [--fresh-first]]

Why in one process: on a shared or virtual machine, two processes run minutes apart see different
neighbours, clocks and page placement, and differences of 10-20% come and go. Here both kernels
run on the same documents in the same process, alternating, each with its own piece caches (huge
pages and sizes, as its own ``Encoder`` allocates them), timed in thread CPU time; the first pass (empty caches) is
reported, then ``--rounds`` warm passes, and the ids of the two are compared. Run it twice with
the same revision on both sides (``BASE_REV`` = ``HEAD`` on a clean tree) to see the noise floor.
First passes on emptied caches reuse each side's memory, whose physical placement is fixed for the
run, and one change measured 0.94 in one run and 1.08 in the next (session 23, o200k).
``--fresh-first`` gives every such pass newly allocated caches (HEAD vs HEAD, o200k, 10 rounds: 0.976).

The base revision's ``fastenc`` package is exported with ``git archive`` into a temporary folder
and imported as ``fastenc_base`` (its imports rewritten), so both versions can live in one process.
Both encoders share the working tree's vocabulary tables (the kernels take them as arguments), unless
``--base-tables`` gives the base side the tables its own ``fastenc.vocab`` builds (to measure a change
of the tables themselves).
"""
from __future__ import annotations

import argparse
import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness and the benches
from harness import DOCS as DEFAULT_DOCS, REPO  # noqa: E402


def export_base(rev: str, into: Path) -> None:
    """``fastenc`` at ``rev`` as the package ``fastenc_base`` under ``into``."""
    blob = subprocess.run(["git", "-C", str(REPO), "archive", rev, "fastenc"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    package = into / "fastenc_base"
    (into / "fastenc").rename(package)
    (package / "_vocab").symlink_to(REPO / "vocab")  # (installed as fastenc._vocab; the same files)
    for path in package.rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\bfastenc\.(?=[a-z_])", "fastenc_base.", text)
        text = re.sub(r"\bfrom fastenc import\b", "from fastenc_base import", text)
        path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", help="git revision to compare the working tree with (e.g. HEAD, main~3)")
    parser.add_argument("--encoding", default="gpt2")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--corpus", "--docs", dest="docs", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--limit", type=int, default=0, help="only the first N documents")
    parser.add_argument("--base-tables", action="store_true",
                        help="the base side encodes with the vocabulary tables the base revision builds")
    parser.add_argument("--first-rounds", type=int, default=0,
                        help="more first passes per side, on emptied caches whose memory is already faulted in")
    parser.add_argument("--fresh-first", action="store_true",
                        help="each of those passes on newly allocated caches instead of emptied ones: the "
                             "physical pages (and their cache and TLB behaviour) change from round to round, "
                             "and the page faults are timed, as in a fresh process")
    args = parser.parse_args()
    if not args.docs.exists():
        raise SystemExit(f"ab_encode: {args.docs} not found; pass --corpus PATH to a parquet file with a 'text' column")

    import numba
    import numpy as np
    import pyarrow.parquet as pq
    from numba import njit

    import fastenc
    from fastenc.arrow_io import arrow_to_flat
    from fastenc.kernels.encode import encode_text, takes_wide_loop
    from fastenc.kernels.piece_cache import (DEFAULT_LONG_SLOTS, DEFAULT_SHORT_SLOTS, DEFAULT_TINY_SLOTS, LONG_WORDS,
                                             SHORT_WORDS, TINY_WORDS, PieceCaches)
    from fastenc.kernels.piece_memo import init_piece_memo, new_piece_memo
    from fastenc.memory import huge_array
    from fastenc.tasks import read_only

    numba.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="fastenc-ab-"))
    export_base(args.base, tmp)
    sys.path.insert(0, str(tmp))
    base_encode_text = importlib.import_module("fastenc_base.kernels.encode").encode_text

    column = pq.read_table(args.docs, columns=["text"]).column("text").combine_chunks()
    if args.limit:
        column = column.slice(0, args.limit)
    data, offsets = arrow_to_flat(column)
    data = read_only(np.ascontiguousarray(data))
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    enc = fastenc.load(args.encoding)
    vocab = {"tree": enc.vocab, f"base {args.base}": enc.vocab}
    if args.base_tables:
        vocab[f"base {args.base}"] = importlib.import_module("fastenc_base").load(args.encoding).vocab

    def loop_over(kernel):
        @njit
        def run(data, offsets, vocab, classes, caches, out):
            at = 0
            for d in range(offsets.shape[0] - 1):
                at = kernel(data, offsets[d], offsets[d + 1], vocab, classes, caches, out, at)
            return at
        return run

    def caches(package):
        """Piece caches of the sizes that ``package``'s Encoder gives this vocabulary (revisions
        before session 23 have no ``piece_cache_slots``: the defaults, and the wide loop's long cache)."""
        encoder = importlib.import_module(f"{package}.encoder")
        if hasattr(encoder, "piece_cache_slots"):
            tiny, short, long = encoder.piece_cache_slots(enc.vocab.config)
        else:
            wide = takes_wide_loop(enc.vocab.config)
            tiny, short = DEFAULT_TINY_SLOTS, DEFAULT_SHORT_SLOTS
            long = getattr(encoder, "WIDE_LONG_SLOTS", DEFAULT_LONG_SLOTS) if wide else DEFAULT_LONG_SLOTS
        return PieceCaches(huge_array((tiny, TINY_WORDS), np.uint64), huge_array((short, SHORT_WORDS), np.uint64),
                           huge_array((long, LONG_WORDS), np.uint64), new_piece_memo())

    sides = {"tree": loop_over(encode_text), f"base {args.base}": loop_over(base_encode_text)}
    own = {"tree": caches("fastenc"), f"base {args.base}": caches("fastenc_base")}
    out = {name: np.empty(len(data), dtype=enc.dtype) for name in sides}
    tiny = PieceCaches(np.zeros((16, TINY_WORDS), np.uint64), np.zeros((16, SHORT_WORDS), np.uint64),
                       np.zeros((16, LONG_WORDS), np.uint64), new_piece_memo(16, 64))
    # The tree's side gets the classes argument fastenc's own loops get (Encoder.kernel_classes:
    # None for a URL vocabulary, its own specialisation); the base's side the class table.
    classes = {name: enc.classes for name in sides}
    classes["tree"] = getattr(enc, "kernel_classes", enc.classes)
    for name, run in sides.items():  # compile on one document, out of the timing
        run(data, offsets[:2], vocab[name], classes[name], tiny, out[name])
    mb = len(data) / 1e6
    first, count = {}, {}
    for name, run in sides.items():
        t = time.thread_time()
        count[name] = run(data, offsets, vocab[name], classes[name], own[name], out[name])
        first[name] = time.thread_time() - t
    (a, b) = sides
    same = count[a] == count[b] and np.array_equal(out[a][:count[a]], out[b][:count[b]])
    warm = {name: [] for name in sides}
    scratch = np.empty(len(data), dtype=enc.dtype)
    for _ in range(args.rounds):
        for name, run in sides.items():
            t = time.thread_time()
            run(data, offsets, vocab[name], classes[name], own[name], scratch)
            warm[name].append(time.thread_time() - t)
    again = {name: [] for name in sides}
    package = {"tree": "fastenc", f"base {args.base}": "fastenc_base"}
    for r in range(args.first_rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            if args.fresh_first:  # new memory each round: new physical pages, their faults timed too
                fresh = caches(package[name])
            else:
                fresh = own[name]
                for table in fresh:
                    table.fill(0)
                init_piece_memo(fresh.memo)
            t = time.thread_time()
            sides[name](data, offsets, vocab[name], classes[name], fresh, scratch)
            again[name].append(time.thread_time() - t)
            del fresh
    print(f"{args.docs.name}: {len(offsets) - 1} documents, {mb:.1f} MB, encoding {args.encoding}; "
          f"ids {'identical' if same else 'DIFFER'} ({count[a]:,} / {count[b]:,})")
    for name in sides:
        w = sorted(warm[name])
        print(f"{name:>24}: first {mb / first[name]:7.1f} MB/s   warm min {mb / w[0]:7.1f}  median {mb / w[len(w) // 2]:7.1f} MB/s (thread CPU)")
    if args.first_rounds:
        kind = "fresh" if args.fresh_first else "emptied"
        fa, fb = sorted(again[a]), sorted(again[b])
        for name in sides:
            f = sorted(again[name])
            print(f"{name:>24}: first on {kind} caches: min {mb / f[0]:7.1f}  median {mb / f[len(f) // 2]:7.1f} MB/s")
        print(f"tree / base speed, first on {kind} caches: min {fb[0] / fa[0]:.3f}  median {fb[len(fb) // 2] / fa[len(fa) // 2]:.3f}")
    wa, wb = sorted(warm[a]), sorted(warm[b])
    print(f"tree / base speed: first {first[b] / first[a]:.3f}  warm min {wb[0] / wa[0]:.3f}  median {wb[len(wb) // 2] / wa[len(wa) // 2]:.3f}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
