"""Per-call cost and list[str] input, in one process: the working tree's fastenc, a git revision's
(``fastenc_base``, exported as in ``ab_encode.py``), gigatoken and tiktoken, alternating.

    python bench/probes/ab_percall.py BASE_REV [--rounds 5] [--chars 500] [--corpus PATH] [--select heldout|docs]
                               [--cells hello,docs,batch1,batch16,batch256,batch4096,list,arrow,convert,join]

Why one process: on a shared machine, processes minutes apart see different neighbours; here every
tool runs each cell in every round, in an order reversed every other round, and each figure is the
median over rounds of per-round ratios' inputs (the table also gives each round's ratio).

Cells (warm: each is run once untimed first; then the best of 3 timed loops of >= 0.1 s):
  hello      encode("hello world") (tiktoken: encode_ordinary)
  docs       encode() of each short document: the first --chars characters of the corpus documents
             with at least that many
  batchN     encode_batch of N short documents (a list of str; tiktoken: encode_ordinary_batch), 4096 // N
             batches a loop (the short documents repeated where there are fewer than 4096)
  list       encode_batch of the whole corpus as a list of str (the best of 2 passes)
  arrow      fastenc's encode_batch of the whole corpus as an Arrow column (the same text)
  convert    fastenc's list[str] -> (data, offsets) alone: the base revision's way (a bytes object per
             string through a Python function, joined) against ``encoder.texts_to_flat``
  join       (new column only) ``"".join(texts).encode()`` alone: a lower bound of converting a list by one
             join and one encode (the offsets then from each string's ``len``), the way not taken
Threads: each tool's default (fastenc: Numba's thread count; gigatoken: its pool; tiktoken's batch: 8).
The corpus is bench_gpt2's: "heldout" (default) the documents whose id hashes into the last fifth.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness and the benches
from ab_encode import export_base  # noqa: E402
from bench_gpt2 import _select, heldout  # noqa: E402,F401
from harness import DOCS as DEFAULT_DOCS, REPO, cpu_model, versions  # noqa: E402
from peers import GPT2_JSON  # noqa: E402
CELLS = ["hello", "docs", "batch1", "batch16", "batch256", "batch4096", "list", "arrow", "convert", "join"]


def _best(run, items: int, min_seconds: float = 0.1, repeat: int = 3) -> float:
    """Seconds per item of ``run()`` (``items`` calls): best of ``repeat`` loops of >= ``min_seconds``."""
    run()
    t = time.perf_counter()
    run()
    loops = max(1, int(min_seconds / max(time.perf_counter() - t, 1e-7)))
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(loops):
            run()
        best = min(best, (time.perf_counter() - t) / (loops * items))
    return best


def _old_conversion(texts):
    """The base revision's list[str] -> (data, offsets): a bytes object per string, then one join."""
    import numpy as np

    from fastenc.encoder import _to_utf8

    encoded = [_to_utf8(t) for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", help="git revision to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chars", type=int, default=500)
    parser.add_argument("--corpus", "--docs", dest="docs", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--select", choices=["heldout", "docs"], default="heldout", help="which documents (bench_gpt2's rule)")
    parser.add_argument("--cells", default=",".join(CELLS))
    args = parser.parse_args()
    cells = [c for c in args.cells.split(",") if c]
    if not args.docs.exists():
        raise SystemExit(f"ab_percall: {args.docs} not found; pass --corpus PATH to a parquet file with a 'text' column")

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    started = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()
    table = pq.read_table(args.docs)
    texts = table.column("text").to_pylist()
    ids = table.column("id").to_pylist() if "id" in table.column_names else None
    idx, how = _select(texts, args.select, ids)
    texts = [texts[i] for i in idx]
    column = pa.array(texts, type=pa.large_string())
    short = [t[: args.chars] for t in texts if len(t) >= args.chars]
    mb = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6
    short_bytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in short) / len(short)

    tmp = Path(tempfile.mkdtemp(prefix="fastenc-ab-percall-"))
    export_base(args.base, tmp)
    sys.path.insert(0, str(tmp))
    import gigatoken
    import tiktoken  # noqa: F401

    import fastenc
    from fastenc.encoder import texts_to_flat

    base = importlib.import_module("fastenc_base").load("gpt2")
    new = fastenc.load("gpt2")
    giga = gigatoken.Tokenizer(str(GPT2_JSON))
    tik = _tiktoken()
    tools = {
        "new": (new.encode, new.encode_batch),
        "base": (base.encode, base.encode_batch),
        "gigatoken": (giga.encode, giga.encode_batch),
        "tiktoken": (tik.encode_ordinary, tik.encode_ordinary_batch),
    }
    # exactness, untimed: every short document and the first 200 whole ones, against tiktoken
    for name, (one, _) in tools.items():
        bad = sum(1 for t in short + texts[:200] if list(np.asarray(one(t)).tolist()) != tik.encode_ordinary(t))
        if bad:
            print(f"**{name} differs from tiktoken on {bad} documents**")
    for name in ("new", "base"):
        got, offsets = tools[name][1](column)
        want = np.concatenate([np.asarray(x, dtype=np.int64) for x in tik.encode_ordinary_batch(texts)])
        assert np.array_equal(got.astype(np.int64), want), f"{name} encode_batch differs from tiktoken"

    def cell_runs(cell, name):
        one, batch = tools[name]
        if cell == "hello":
            return (lambda: one("hello world")), 1
        if cell == "docs":
            def each():
                for t in short:
                    one(t)
            return each, len(short)
        if cell.startswith("batch"):
            size = int(cell[5:])
            pool = short * -(-4096 // len(short))  # (repeated where there are fewer than 4096 short documents)
            chunks = [pool[k:k + size] for k in range(0, 4096, size)]

            def batches():
                for chunk in chunks:
                    batch(chunk)
            return batches, len(chunks)
        if cell == "list":
            return (lambda: batch(texts)), 1
        if cell == "arrow" and name in ("new", "base"):
            return (lambda: batch(column)), 1
        if cell == "convert" and name in ("new", "base"):
            return ((lambda: texts_to_flat(texts)) if name == "new" else (lambda: _old_conversion(texts))), 1
        if cell == "join" and name == "new":
            return (lambda: "".join(texts).encode("utf-8", "surrogatepass")), 1
        return None, 0

    results = {c: {n: [] for n in tools} for c in cells}
    order = list(tools)
    for round_ in range(args.rounds):
        for cell in cells:
            for name in order if round_ % 2 == 0 else order[::-1]:
                run, items = cell_runs(cell, name)
                if run is None:
                    continue
                whole = cell in ("list", "arrow", "convert", "join")
                results[cell][name].append(_best(run, items, min_seconds=0.0 if whole else 0.1, repeat=2 if whole else 3))
        print(f"<!-- round {round_ + 1} done -->", flush=True)

    print("## Per-call cost and list[str] input (`bench/probes/ab_percall.py`)\n")
    print(f"- **Command:** `python bench/probes/ab_percall.py {' '.join(sys.argv[1:])}` (repo root)")
    print(f"- **Date:** {started:%Y-%m-%d %H:%M} UTC; load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    print(f"- **CPU:** {cpu_model()}; {os.cpu_count()} CPUs")
    print(f"- **Versions:** {versions()}; base = `{args.base}`")
    print(f"- **Corpus:** `{args.docs}`, {how}: {len(texts)} documents, {mb:.1f} MB; short documents: the first "
          f"{args.chars} characters of the {len(short)} with at least that many ({short_bytes:.0f} bytes on average)")
    print(f"- **Method:** one process, {args.rounds} rounds, the tools alternating in every cell (order reversed every "
          "other round); medians over rounds; in brackets each round's ratio\n")
    print("| cell | new µs | base µs | gigatoken µs | tiktoken µs | new / gigatoken | base / gigatoken | new / tiktoken | "
          "base / tiktoken | new / base |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def med(cell, name):
        v = results[cell][name]
        return statistics.median(v) if v else None

    def ratio(cell, peer, name):
        a, b = results[cell][peer], results[cell][name]
        if not a or not b:
            return "–"
        per = [x / y for x, y in zip(a, b)]
        return f"**{statistics.median(per):.2f}** ({', '.join(f'{r:.2f}' for r in per)})"

    for cell in cells:
        fmt = lambda v: f"{v * 1e6:,.2f}" if v is not None else "–"  # noqa: E731
        print(f"| {cell} | " + " | ".join(fmt(med(cell, n)) for n in tools) + " | "
              + " | ".join([ratio(cell, "gigatoken", "new"), ratio(cell, "gigatoken", "base"), ratio(cell, "tiktoken", "new"),
                            ratio(cell, "tiktoken", "base"), ratio(cell, "base", "new")]) + " |")
    print("\nRatios: the other's time / this one's (> 1: this one faster). Times per call (per batch for batchN; per "
          f"pass for list/arrow/convert, {mb:.1f} MB).")


def _tiktoken():
    import subprocess

    import tiktoken

    make_cache = REPO.parent / "shared" / "data" / "tiktoken" / "make_cache.py"
    if "TIKTOKEN_CACHE_DIR" not in os.environ and make_cache.is_file():
        cache = Path(tempfile.mkdtemp(prefix="tiktoken-"))
        subprocess.run([sys.executable, str(make_cache), str(cache)], capture_output=True, check=True)
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    return tiktoken.get_encoding("gpt2")


if __name__ == "__main__":
    main()
