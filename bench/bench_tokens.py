"""Benchmark: ``fastenc tokens`` against what users run today to make trainer files, end to end.

    python bench/bench_tokens.py [--input docs.parquet] [--mb 30] [--procs 1,2] [--rounds 3]

The first ``--mb`` MB of text of ``--input`` (whole documents) is written once, not timed, as four
parquet files (units for the processes). At each process count P every side tokenizes it with GPT-2
and writes its trainer files, in its own subprocess, one core per process (``RAYON_NUM_THREADS=1``
for HF tokenizers, ``--threads 1`` for fastenc), sides alternating for ``--rounds`` rounds:

- kernel:     fastenc's ``Encoder.encode_arrays`` alone over the text batches already in memory, on P
  Numba threads: the ceiling of the recipe.
- tokens:     ``fastenc tokens --format megatron --workers P`` (read, encode, EOS, spill, reduce,
  fsync, publish, card).
- datatrove:  datatrove's ``LocalPipelineExecutor`` of ``ParquetReader`` + ``DocumentTokenizer`` (HF
  tokenizers, GPT-2's tokenizer.json, ``eos_token``; no shuffle, as fastenc's default) on 4 tasks and
  P workers, writing ``.ds`` files.
- megatron:   Megatron's ``tools/preprocess_data.py`` way: a ``multiprocessing.Pool(P)`` ``imap`` of
  one document at a time (chunks of 25) to tiktoken's ``encode_ordinary`` plus the EOD id, the main
  process appending each document to ``.bin`` and writing ``.idx`` at the end.

Once, before the rounds: the fastenc and Megatron-way outputs are compared byte for byte (.bin and
.idx), and datatrove's token count is printed beside fastenc's (HF tokenizers reads a literal
``<|endoftext|>`` in a text as the special token, tiktoken's ``encode_ordinary`` as text). MB/s are MB (10^6 bytes) of text per second of
the timed work's wall time; medians are printed, then the ratios the issue asks for.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import require  # noqa: E402  (bench/ is on sys.path when a bench runs)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_INPUT = ROOT.parent / "shared" / "data" / "text" / "docs.parquet"
GPT2_JSON = ROOT / "vocab" / "gpt2" / "tokenizer.json"
KINDS = ["kernel", "tokens", "datatrove", "megatron"]
UNITS = 4
EOT = 50256


def _cpu_seconds() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def make_input(src: Path, mb: float, folder: Path) -> list[Path]:
    """The first ``mb`` MB of text of ``src`` as ``UNITS`` parquet files."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(src, columns=["text"])
    sizes = pc.binary_length(table.column(0)).to_numpy(zero_copy_only=False).cumsum()
    table = table.slice(0, int((sizes < mb * 1e6).sum()) + 1)
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-table.num_rows // UNITS)
    paths = []
    for k in range(UNITS):
        paths.append(folder / f"part{k}.parquet")
        pq.write_table(table.slice(k * step, step), paths[-1], row_group_size=512)
    return paths


def text_bytes(paths) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    return sum(int(pc.sum(pc.binary_length(pq.read_table(p, columns=["text"]).column(0))).as_py() or 0) for p in paths)


# ----------------------------------------------------------------------------------------------
# The sides (each in its own process)
# ----------------------------------------------------------------------------------------------


def child_kernel(paths, out: Path, procs: int) -> dict:
    import numba
    import numpy as np

    import fastenc
    from fastenc.arrow_io import iter_string_batches, resolve_inputs

    numba.set_num_threads(procs)
    enc = fastenc.load("gpt2")
    enc.encode_arrays(np.frombuffer(b"warm up", np.uint8), np.array([0, 7], np.int64))
    enc.clear_caches()
    batches = list(iter_string_batches(resolve_inputs(paths), "text", batch_bytes=8 << 20))
    t0 = time.perf_counter()
    tokens = sum(enc.encode_arrays(b.data, b.offsets)[0].size for b in batches)
    return {"seconds": time.perf_counter() - t0, "tokens": tokens + sum(b.num_rows for b in batches)}


def child_tokens(paths, out: Path, procs: int) -> dict:
    import numpy as np

    import fastenc
    from fastenc.recipes.tokens.build import encode_tokens

    fastenc.load("gpt2").encode_arrays(np.frombuffer(b"warm up", np.uint8), np.array([0, 7], np.int64))
    fastenc.load("gpt2").clear_caches()
    t0 = time.perf_counter()
    m = encode_tokens(paths, out / "out", fmt="megatron", workers=procs, threads=1, quiet=True)
    return {"seconds": time.perf_counter() - t0, "tokens": m["tokens"]}


def child_datatrove(paths, out: Path, procs: int) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    t0 = time.perf_counter()
    LocalPipelineExecutor(pipeline=[
        ParquetReader(str(paths[0].parent), glob_pattern="*.parquet", text_key="text"),
        DocumentTokenizer(str(out / "out"), tokenizer_name_or_path=str(GPT2_JSON), eos_token="<|endoftext|>",
                          shuffle_documents=False),
    ], tasks=len(paths), workers=procs, logging_dir=str(out / "logs"), skip_completed=False).run()
    dt = time.perf_counter() - t0
    tokens = sum(p.stat().st_size // 2 for p in (out / "out").rglob("*.ds"))
    return {"seconds": dt, "tokens": tokens}


_ENC = None


def _encode_one(text: str) -> list[int]:
    return _ENC.encode_ordinary(text) + [EOT]  # preprocess_data.py --append-eod


def _init_tiktoken() -> None:
    global _ENC
    import tiktoken

    _ENC = tiktoken.get_encoding("gpt2") if os.environ.get("TIKTOKEN_CACHE_DIR") else _offline_gpt2()


def _offline_gpt2():
    """tiktoken's GPT-2 from the committed tokenizer.json (no download)."""
    import tiktoken
    import tiktoken_ext.openai_public as op

    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import mergeable_ranks_from_tokenizer_json

    return tiktoken.Encoding(name="gpt2", pat_str=op.r50k_pat_str, mergeable_ranks=mergeable_ranks_from_tokenizer_json(GPT2_JSON),
                             special_tokens={"<|endoftext|>": EOT}, explicit_n_vocab=50257)


def child_megatron(paths, out: Path, procs: int) -> dict:
    import multiprocessing
    import struct

    import numpy as np
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    (out / "out").mkdir(parents=True)
    lengths = []
    with multiprocessing.Pool(procs, initializer=_init_tiktoken) as pool, open(out / "out" / "train.bin", "wb") as f:
        texts = (t for p in paths for t in pq.read_table(p, columns=["text"]).column(0).to_pylist())
        for ids in pool.imap(_encode_one, texts, 25):
            f.write(np.array(ids, dtype=np.uint16).tobytes(order="C"))  # IndexedDatasetBuilder.add_item
            lengths.append(len(ids))
    n = len(lengths)
    lens = np.array(lengths, dtype=np.int32)
    pointers = np.concatenate([[0], np.cumsum(lens[:-1].astype(np.int64) * 2)]).astype(np.int64)
    with open(out / "out" / "train.idx", "wb") as f:  # IndexedDatasetBuilder.finalize's _IndexWriter
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8) + struct.pack("<Q", n)
                + struct.pack("<Q", n + 1) + lens.tobytes() + pointers.tobytes() + np.arange(n + 1, dtype=np.int64).tobytes())
    return {"seconds": time.perf_counter() - t0, "tokens": int(lens.sum())}


CHILDREN = {"kernel": child_kernel, "tokens": child_tokens, "datatrove": child_datatrove, "megatron": child_megatron}


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------


def run_child(kind: str, paths, procs: int, tmp: str | None, keep: Path | None = None) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"bench-tokens-{kind}-", dir=tmp))
    cmd = [sys.executable, __file__, "--child", kind, "--procs", str(procs), "--tmp", str(work), "--input", *map(str, paths)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
        if keep is not None and r.returncode == 0:
            shutil.copytree(work / "out", keep)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if r.returncode:
        raise SystemExit(f"{kind} failed:\n{r.stderr[-3000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["process_seconds"] = time.perf_counter() - t0
    return res


def check_outputs(paths, tmp) -> None:
    """fastenc's Megatron files equal the Megatron-way pipeline's, byte for byte; datatrove's token count equals."""
    check = Path(tempfile.mkdtemp(prefix="bench-tokens-check-", dir=tmp))
    try:
        a = run_child("tokens", paths, 1, tmp, keep=check / "tokens")
        run_child("megatron", paths, 1, tmp, keep=check / "megatron")
        d = run_child("datatrove", paths, 1, tmp)
        for suffix in (".bin", ".idx"):
            if (check / "tokens" / f"train_00000_text_document{suffix}").read_bytes() != (check / "megatron" / f"train{suffix}").read_bytes():
                raise SystemExit(f"fastenc tokens and the Megatron-way pipeline wrote different {suffix} files")
        # HF tokenizers turns a literal "<|endoftext|>" inside a text into the special token; tiktoken's
        # encode_ordinary (and so fastenc and the Megatron way) encodes it as text: a few tokens apart
        print(f"check: fastenc tokens == Megatron-way .bin/.idx byte for byte; datatrove {d['tokens']:,} tokens, "
              f"fastenc {a['tokens']:,}", file=sys.stderr)
    finally:
        shutil.rmtree(check, ignore_errors=True)


def report(runs: dict, nbytes: int, procs: list[int]) -> None:
    med = {key: statistics.median(r["seconds"] for r in rs) for key, rs in runs.items()}
    print(f"\n{nbytes / 1e6:.1f} MB of text; medians of {len(next(iter(runs.values())))} alternating rounds\n")
    print("| processes | side | seconds | MB/s |")
    print("|---|---|---|---|")
    for (p, kind), s in med.items():
        print(f"| {p} | {kind} | {s:.2f} | {nbytes / s / 1e6:.1f} |")
    print("\n| processes | tokens / kernel (speed) | tokens vs datatrove | tokens vs Megatron-way (tiktoken) |")
    print("|---|---|---|---|")
    for p in procs:
        t = med.get((p, "tokens"))
        if t is None:
            continue
        cell = lambda k: f"{med[(p, k)] / t:.2f}x" if (p, k) in med else "-"  # noqa: E731
        kern = f"{med[(p, 'kernel')] / t:.2f}" if (p, "kernel") in med else "-"
        print(f"| {p} | {kern} | {cell('datatrove')} | {cell('megatron')} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", nargs="+", default=[str(DEFAULT_INPUT)])
    ap.add_argument("--mb", type=float, default=30.0, help="MB of text taken from the start of --input")
    ap.add_argument("--procs", default="1,2", help="process counts to run each side at")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians are reported")
    ap.add_argument("--kinds", default=",".join(KINDS), help="which sides to run")
    ap.add_argument("--tmp", default=None, help="scratch directory (default: the system's)")
    ap.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child]([Path(p) for p in args.input], Path(args.tmp), int(args.procs))))
        return
    require(args.input, "--input")
    procs = [int(p) for p in args.procs.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    folder = Path(tempfile.mkdtemp(prefix="bench-tokens-in-", dir=args.tmp))
    try:
        paths = make_input(Path(args.input[0]), args.mb, folder)
        nbytes = text_bytes(paths)
        check_outputs(paths, args.tmp)
        runs: dict = {}
        for rnd in range(args.rounds):
            for p in procs:
                for kind in kinds:
                    res = run_child(kind, paths, p, args.tmp)
                    runs.setdefault((p, kind), []).append(res)
                    print(f"  round {rnd}: P={p} {kind:10s} {res['seconds']:6.2f} s  {nbytes / res['seconds'] / 1e6:6.1f} MB/s",
                          file=sys.stderr)
        report(runs, nbytes, procs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
