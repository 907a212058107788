"""Split-pattern encode speed per model family: fastenc against gigatoken, tiktoken and HF tokenizers.

    python bench/bench_patterns.py [--docs PATH] [--mb 10] [--families llama3,qwen2,...] [--threads 1,2]
                                   [--rounds 3] [--repeat 1] [--hf-mb 1] [--tools ...] [--no-compile]

Families (each a real vocabulary from ../shared/data/tokenizers, or mistral-common's tekken.json):
  llama3       llama3.tiktoken, Llama 3's pattern (fastenc: the compiled DFA scanner; gigatoken "olmo3")
  qwen2        qwen.tiktoken, Qwen2's pattern (DFA scanner; gigatoken "qwen2")
  tekken       mistral-common's tekken_240911.json (DFA scanner; gigatoken "nemotron" on its ranks)
  llama4       llama4.tiktoken, o200k's pattern (fastenc's hand-written o200k scanner; gigatoken "o200k")
  llama4_dfa   the same, with o200k's pattern written so that fastenc compiles it ("[\\r\\n\\/]*" for "[\\r\\n/]*"):
               the DFA scanner against the hand-written one on one vocabulary
  deepseek_v3  a tokenizer.json of the Llama 3 ranks with DeepSeek-V3's Sequence of three Splits then
               ByteLevel(use_regex=false) (DFA scanner; gigatoken reads the tokenizer.json). tiktoken takes one
               regex, not a Sequence: no tiktoken peer, HF tokenizers is the oracle.
Every peer gets the same ranks and split: tiktoken an Encoding(ranks, pattern) and encode_ordinary_batch; HF
tokenizers a tokenizer.json built here (merges from the ranks: each token's last tiktoken merge, in rank order)
and encode_batch; gigatoken Tokenizer.from_tiktoken(rank file, pretokenizer=its name for the split) and
encode_batch. Input is a list[str] for every tool, fastenc included (as users call it).

Regimes, as in bench_gpt2.py: "first" is one pass over all documents in a fresh process with empty caches
(after one document spent on start-up), "warm" the median of --repeat further passes. Each (family, tool,
threads) runs in its own subprocess; tools alternate within a round (order reversed every other round); each
figure is the median over --rounds rounds; ratios are peer time / fastenc time (> 1: fastenc faster). HF
tokenizers is timed on the first --hf-mb of the documents only, so its MB/s are of that text.

Exactness: every run's ids are hashed per document (outside the timing) against the oracle (tiktoken's
encode_ordinary with the family's ranks and pattern; HF tokenizers for deepseek_v3) and the documents that
differ are counted. Tekken ids are the ranks + 1000 (mistral-common's special-token offset) for every tool.

Compile: fastenc.load(rank file, pattern=<a regex no cache has seen>) + its first encode, in a fresh process
with an empty NUMBA_CACHE_DIR/FASTENC_CACHE_DIR (every kernel compiles), then a second new regex with those
caches warm (the scanner kernel is shared; only the pattern's program is built), then that pattern once more
(nothing to build: the difference is the program's build).

``--baseline DIR`` adds the tool ``fastenc-base``: fastenc imported from another checkout (DIR on PYTHONPATH, its
kernels cached in their own NUMBA_CACHE_DIR), alternating with this one in the same rounds (an A/B of two commits).

Needs the bench extra and mistral-common: pip install -e '.[bench]' mistral-common.
"""
from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import cpu_flags as _cpu_flags, cpu_model as _cpu_model, doc_digests as _digests, mbps as _mbps  # noqa: E402
from harness import rss as _rss, timed as _timed, versions as _versions  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO.parent / "shared"
DOCS_IN_SHARED = Path("data") / "text" / "docs.parquet"
TOOLS = ["fastenc", "fastenc-base", "gigatoken", "tiktoken", "hf"]
FAMILIES = ["llama3", "qwen2", "tekken", "llama4", "llama4_dfa", "deepseek_v3"]
TEKKEN_SPECIALS = 1000

# DeepSeek-V3's tokenizer.json pre_tokenizer: three Isolated splits, then ByteLevel without its own regex.
DEEPSEEK_SPLITS = [
    r"\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    # CR and LF as the literal characters, as DeepSeek-V3's tokenizer.json has them (gigatoken matches the string)
    r'[!"#$%&' r"'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^" "\r\n" r"\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+["
    "\r\n" r"]*|\s*[" "\r\n" r"]+|\s+(?!\S)|\s+",
]
# Two patterns no cache has seen (Llama 3's with another digit run), for the compile timing.
NEW_PATTERNS = [
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,4}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
]


class Missing(Exception):
    """Something the bench needs is not there: reported as one line, never a traceback."""


def _oracle_module(shared: Path):
    sys.path.insert(0, str(shared / "data" / "tokenizers"))
    try:
        import oracle
    finally:
        sys.path.pop(0)
    return oracle


def _tekken_json() -> Path:
    import mistral_common

    return Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"


# --- the family specs (built once in the main process, read by the workers) -------------------------------


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (HF ByteLevel)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def hf_tokenizer_json(ranks: dict[bytes, int], pre_tokenizer: dict, offset: int = 0) -> dict:
    """A HF BPE tokenizer.json of tiktoken ranks (id = rank + offset).

    Merges: every split of every token into two tokens, ordered by the merged token's rank (then the parts'):
    HF's lowest-merge-first then picks the pair tiktoken's lowest-rank-first picks (a last-merge-only list
    misses pairs tiktoken merges and gives other ids). ignore_merges: a piece that is itself a token is that
    token, as tiktoken does (Llama 3 has tokens its merges never reach, e.g. " Tiếng")."""
    b2u = _bytes_to_unicode()
    text = lambda b: "".join(b2u[x] for x in b)  # noqa: E731
    vocab = {text(tok): rank + offset for tok, rank in ranks.items()}
    keyed = []
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            a, b = tok[:i], tok[i:]
            if a in ranks and b in ranks:
                keyed.append((rank, ranks[a], ranks[b], a, b))
    keyed.sort()
    merges = [[text(a), text(b)] for _, _, _, a, b in keyed]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": False,
                                                                             "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": merges},
    }


def _split(regex: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def _write_ranks(ranks: dict[bytes, int], path: Path) -> Path:
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda kv: kv[1])))
    return path


def build_family(name: str, shared: Path, tmp: Path) -> dict:
    """Everything the workers of one family load: rank file, pattern, tokenizer.json, gigatoken's scheme."""
    oracle = _oracle_module(shared)
    tok_dir = shared / "data" / "tokenizers"
    hf_path = tmp / f"{name}.tokenizer.json"
    if name in ("llama3", "qwen2", "llama4", "llama4_dfa"):
        model = {"qwen2": "qwen", "llama4_dfa": "llama4"}.get(name, name)
        ranks = oracle.ranks(model)
        pattern = oracle.MODELS[model]["pattern"]
        # llama4_dfa: a string no hand-written scanner claims, with the same meaning (an escaped slash)
        fastenc_pattern = pattern.replace("[\\r\\n/]*", "[\\r\\n\\/]*") if name == "llama4_dfa" else name
        assert fastenc_pattern != pattern or name != "llama4_dfa"
        spec = dict(rank_file=str(tok_dir / oracle.MODELS[model]["file"]), pattern=pattern, fastenc_pattern=fastenc_pattern,
                    gigatoken={"llama3": "olmo3", "qwen2": "qwen2", "llama4": "o200k", "llama4_dfa": "o200k"}[name],
                    offset=0, fastenc_path=None, gigatoken_json=False)
        pre = {"type": "Sequence", "pretokenizers": [_split(pattern), BYTE_LEVEL]}
    elif name == "tekken":
        path = _tekken_json()
        if not path.is_file():
            raise Missing(f"missing {path}: pip install mistral-common")
        tk = json.loads(path.read_text())
        cfg = tk["config"]
        n_ranks = cfg["default_vocab_size"] - cfg["default_num_special_tokens"]
        ranks = {base64.b64decode(e["token_bytes"]): e["rank"] for e in tk["vocab"][:n_ranks]}
        pattern = cfg["pattern"]
        spec = dict(rank_file=str(_write_ranks(ranks, tmp / "tekken.tiktoken")), pattern=pattern, fastenc_pattern=None,
                    gigatoken="nemotron", offset=cfg["default_num_special_tokens"], fastenc_path=str(path),
                    gigatoken_json=False)
        pre = {"type": "Sequence", "pretokenizers": [_split(pattern), BYTE_LEVEL]}
    elif name == "deepseek_v3":
        ranks = oracle.ranks("llama3")
        pre = {"type": "Sequence", "pretokenizers": [_split(r) for r in DEEPSEEK_SPLITS] + [BYTE_LEVEL]}
        spec = dict(rank_file=str(tok_dir / oracle.MODELS["llama3"]["file"]), pattern=None, fastenc_pattern=None,
                    gigatoken="deepseek_v3", offset=0, fastenc_path=str(hf_path), gigatoken_json=True)
    else:
        raise Missing(f"unknown family {name!r} (choose from {', '.join(FAMILIES)})")
    hf_path.write_text(json.dumps(hf_tokenizer_json(ranks, pre, spec["offset"])), encoding="utf-8")
    spec.update(name=name, hf_json=str(hf_path))
    return spec


# --- worker side ------------------------------------------------------------------------------------------


def _make_runner(tool: str, threads: int, spec: dict):
    """(encode, flatten, note): encode(texts) -> the tool's output (the only call timed); flatten(output) ->
    (flat ids as uint32, per-document counts); note: how the tool was loaded."""
    import itertools

    import numpy as np

    def lists(out):
        counts = np.fromiter((len(x) for x in out), dtype=np.int64, count=len(out))
        flat = np.fromiter(itertools.chain.from_iterable(out), dtype=np.uint32, count=int(counts.sum()))
        return flat, counts

    off = spec["offset"]
    if tool in ("fastenc", "fastenc-base"):
        import numba

        import fastenc

        numba.set_num_threads(threads)
        if spec["fastenc_path"]:
            enc, note = fastenc.load(spec["fastenc_path"]), f"load({Path(spec['fastenc_path']).name})"
        else:
            shown = spec["fastenc_pattern"] if len(spec["fastenc_pattern"]) < 20 else "<o200k's regex, compiled>"
            enc, note = fastenc.load(spec["rank_file"], pattern=spec["fastenc_pattern"]), f"pattern={shown!r}"
        if tool == "fastenc-base":
            note += f" from {Path(fastenc.__file__).parents[1]}"
        return (lambda texts: enc.encode_batch(texts)), (lambda out: (out[0].astype(np.uint32), np.diff(out[1]))), note
    if tool == "gigatoken":
        import awkward as ak
        import gigatoken

        tok = None
        if not spec["gigatoken_json"]:
            try:
                tok = gigatoken.Tokenizer.from_tiktoken(spec["rank_file"], pretokenizer=spec["gigatoken"])
                note = f"from_tiktoken(pretokenizer={spec['gigatoken']!r})"
            except BaseException as err:  # a Rust panic is a BaseException: fall back to the same vocab as tokenizer.json
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                note = f"from_tiktoken(pretokenizer={spec['gigatoken']!r}) panics ({first}); Tokenizer(tokenizer.json)"
        if tok is None:
            tok = gigatoken.Tokenizer(spec["hf_json"])
            note = note if not spec["gigatoken_json"] else "Tokenizer(tokenizer.json)"
        parallel = threads > 1
        return (lambda texts: tok.encode_batch(texts, parallel=parallel)), (
            lambda out: (np.asarray(ak.flatten(out, axis=1), dtype=np.uint32) + np.uint32(off),
                         np.asarray(ak.num(out, axis=1), dtype=np.int64))), note
    if tool == "tiktoken":
        import tiktoken

        ranks = _load_ranks(spec["rank_file"])
        enc = tiktoken.Encoding(name=spec["name"], pat_str=spec["pattern"], mergeable_ranks=ranks, special_tokens={})

        def flat(out):
            ids, counts = lists(out)
            return ids + np.uint32(off), counts

        return (lambda texts: enc.encode_ordinary_batch(texts, num_threads=threads)), flat, "Encoding(ranks, pattern)"
    if tool == "hf":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(spec["hf_json"])
        return (lambda texts: tok.encode_batch(texts, add_special_tokens=False)), (lambda out: lists([e.ids for e in out])), \
            "Tokenizer.from_file(tokenizer.json)"
    raise SystemExit(f"unknown tool {tool}")


def _load_ranks(path: str) -> dict[bytes, int]:
    out = {}
    for line in Path(path).read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            out[base64.b64decode(tok)] = int(rank)
    return out


def worker(args) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    spec = json.loads(Path(args.spec_file).read_text())
    texts = pq.read_table(args.corpus_file, columns=["text"]).column("text").to_pylist()
    if args.limit:
        texts = texts[: args.limit]
    encode, flatten, note = _make_runner(args.worker, args.threads, spec)
    encode(texts[:1])  # the one-off start-up (kernels, thread pool), out of every timed pass
    out, first_s, first_cpu = _timed(encode, texts)
    counts, hashes = _digests(*flatten(out))
    del out
    walls, cpus = [], []
    for _ in range(args.repeat):
        again, wall, cpu = _timed(encode, texts)
        walls.append(wall)
        cpus.append(cpu)
        del again
    np.save(args.digest_file, np.stack([counts.astype(np.uint64), hashes]))
    print(json.dumps({"first_s": first_s, "first_cpu": first_cpu, "warm_s": statistics.median(walls),
                      "warm_cpu": statistics.median(cpus), "tokens": int(counts.sum()), "note": note,
                      "rss_peak": _rss("VmHWM")}))


# --- main side ------------------------------------------------------------------------------------------


def _spawn(tool: str, threads: int, args, spec_file: Path, digest_file: Path, hf_docs: int) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads))
    if tool == "fastenc-base":
        env["PYTHONPATH"] = os.pathsep.join([str(args.baseline)] + [p for p in [env.get("PYTHONPATH")] if p])
        env["NUMBA_CACHE_DIR"] = str(args.baseline_cache)  # (its kernels apart from this checkout's, and from its tree)
    cmd = [sys.executable, __file__, "--worker", tool, "--threads", str(threads), "--repeat", str(args.repeat),
           "--corpus-file", str(args.corpus_file), "--digest-file", str(digest_file), "--spec-file", str(spec_file)]
    if tool == "hf":
        cmd += ["--limit", str(hf_docs)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        lines = [l for l in out.stderr.strip().splitlines() if l.strip()]
        return {"error": lines[-1] if lines else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _oracle_digests(spec: dict, texts: list[str]):
    """(counts, hashes) per document of the reference: tiktoken encode_ordinary, or HF for a Sequence."""
    import itertools

    import numpy as np

    if spec["pattern"] is not None:
        import tiktoken

        enc = tiktoken.Encoding(name=spec["name"], pat_str=spec["pattern"], mergeable_ranks=_load_ranks(spec["rank_file"]),
                                special_tokens={})
        run = lambda chunk: enc.encode_ordinary_batch(chunk, num_threads=os.cpu_count() or 1)  # noqa: E731
        off = spec["offset"]
    else:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(spec["hf_json"])
        run = lambda chunk: [e.ids for e in tok.encode_batch(chunk, add_special_tokens=False)]  # noqa: E731
        off = 0
    counts, hashes = [], []
    for start in range(0, len(texts), 256):
        out = run(texts[start : start + 256])
        c = np.fromiter((len(x) for x in out), dtype=np.int64, count=len(out))
        flat = np.fromiter(itertools.chain.from_iterable(out), dtype=np.uint32, count=int(c.sum())) + np.uint32(off)
        c, h = _digests(flat, c)
        counts.append(c)
        hashes.append(h)
    return np.concatenate(counts), np.concatenate(hashes)


def _differ(digest_file: Path, oracle) -> list[int]:
    import numpy as np

    counts, hashes = np.load(digest_file)
    n = len(counts)
    bad = (counts.astype(np.int64) != oracle[0][:n]) | (hashes != oracle[1][:n])
    return np.flatnonzero(bad).tolist()


def _median(rs: list[dict], key: str):
    vals = [r[key] for r in rs if key in r]
    return statistics.median(vals) if vals else None


def _ratio(peer, ours) -> str:
    return f"{peer / ours:.2f}" if peer and ours else "–"


def _prepare_corpus(args, tmp: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not args.docs.is_file():
        raise Missing(f"{args.docs} does not exist (the shared corpora are not beside this checkout): pass --docs PATH, "
                      "e.g. --docs tests/data/docs_fixture.parquet")
    try:
        texts = pq.read_table(args.docs, columns=["text"]).column("text").to_pylist()
    except (KeyError, pa.ArrowInvalid) as err:
        raise Missing(f"{args.docs}: cannot read a 'text' column ({str(err).splitlines()[0]})") from None
    chosen, nbytes = [], []
    for t in texts:  # the first documents, in order, up to --mb
        if t is None:
            continue
        if sum(nbytes) >= args.mb * 1e6:
            break
        chosen.append(t)
        nbytes.append(len(t.encode("utf-8", "surrogatepass")))
    hf_docs, acc = 0, 0
    for b in nbytes:
        if acc >= args.hf_mb * 1e6:
            break
        hf_docs, acc = hf_docs + 1, acc + b
    args.corpus_file = tmp / "corpus.parquet"
    pq.write_table(pa.table({"text": pa.array(chosen, type=pa.large_string())}), args.corpus_file)
    return {"texts": chosen, "mb": sum(nbytes) / 1e6, "hf_docs": max(hf_docs, 1), "hf_mb": acc / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=Path, help=f"a parquet file with a 'text' column (default: ../shared/{DOCS_IN_SHARED})")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared data folder (default: ../shared)")
    parser.add_argument("--mb", type=float, default=10, help="encode the first documents up to this many MB (default 10)")
    parser.add_argument("--hf-mb", type=float, default=1, help="HF tokenizers is timed on the first documents up to this many MB")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--tools", default=",".join(t for t in TOOLS if t != "fastenc-base"),
                        help="comma-separated (default: all but fastenc-base, which --baseline adds)")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    parser.add_argument("--rounds", type=int, default=3, help="run every tool this many times, alternating (medians)")
    parser.add_argument("--repeat", type=int, default=1, help="warm passes per process (median)")
    parser.add_argument("--no-compile", action="store_true", help="skip the new-pattern compile timing")
    parser.add_argument("--baseline", type=Path, help="another fastenc checkout, timed as the tool fastenc-base")
    parser.add_argument("--baseline-cache", type=Path, default=Path(tempfile.gettempdir()) / "fastenc-bench-baseline-numba",
                        help="NUMBA_CACHE_DIR of fastenc-base (kept between runs)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--corpus-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--digest-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--spec-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        return worker(args)
    args.docs = args.docs or args.shared / DOCS_IN_SHARED
    try:
        threads = sorted({int(t) for t in args.threads.split(",") if t})
    except ValueError:
        raise SystemExit(f"bench_patterns: --threads takes comma-separated integers, got {args.threads!r}") from None
    families = [f for f in args.families.split(",") if f]
    tools = [t for t in args.tools.split(",") if t]
    if args.baseline and "fastenc-base" not in tools:
        tools.insert(tools.index("fastenc") + 1 if "fastenc" in tools else 0, "fastenc-base")
    try:
        for t in tools:
            if t not in TOOLS:
                raise Missing(f"unknown tool {t!r} (choose from {', '.join(TOOLS)})")
        if "fastenc-base" in tools and not (args.baseline and (args.baseline / "fastenc" / "__init__.py").is_file()):
            raise Missing("the tool fastenc-base needs --baseline DIR, a checkout of fastenc")
        if not (args.shared / "data" / "tokenizers" / "oracle.py").is_file():
            raise Missing(f"{args.shared / 'data' / 'tokenizers'} does not exist (the shared rank files are not beside "
                          "this checkout): pass --shared DIR")
        with tempfile.TemporaryDirectory(prefix="bench_patterns_") as tmp:
            run(args, families, tools, threads, Path(tmp))
    except Missing as err:
        raise SystemExit(f"bench_patterns: {err}") from None


def run(args, families, tools, threads, tmp: Path) -> None:
    started = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()
    corpus = _prepare_corpus(args, tmp)
    print("## Split patterns: per family against gigatoken, tiktoken, HF (`bench/bench_patterns.py`)\n")
    print(f"- **Command:** `{shlex.join(['python', 'bench/bench_patterns.py', *sys.argv[1:]])}` (repo root)")
    print(f"- **Date:** {started:%Y-%m-%d %H:%M} UTC; load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    print(f"- **CPU:** `lscpu` Model name: {_cpu_model()}; {os.cpu_count()} CPUs; flags: {_cpu_flags()}")
    print(f"- **Versions:** {_versions()}")
    if args.baseline:
        rev = subprocess.run(["git", "-C", str(args.baseline), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        print(f"- **Baseline (fastenc-base):** `{args.baseline}` at {rev or 'an unknown commit'}")
    print(f"- **Corpus:** `{args.docs}`, the first {len(corpus['texts'])} documents, {corpus['mb']:.1f} MB of UTF-8, as a "
          f"list[str] for every tool; HF tokenizers on the first {corpus['hf_docs']} ({corpus['hf_mb']:.1f} MB)")
    print(f"- **Method:** {args.rounds} rounds, tools alternating, each (family, tool, threads) in a fresh process; "
          f"first = first pass with empty caches, warm = median of {args.repeat} further passes; medians over rounds; "
          "ratios = peer wall time / fastenc's (> 1: fastenc faster)", flush=True)
    for fam in families:
        t0 = time.perf_counter()
        spec = build_family(fam, args.shared, tmp)
        spec_file = tmp / f"{fam}.spec.json"
        spec_file.write_text(json.dumps(spec))
        oracle = _oracle_digests(spec, corpus["texts"])
        print(f"<!-- {fam}: built tokenizer.json and oracle in {time.perf_counter() - t0:.1f} s -->", flush=True)
        fam_tools = [t for t in tools if not (t == "tiktoken" and spec["pattern"] is None)]
        runs: dict = {}
        bad: dict = {}
        failed: list[str] = []
        for round_ in range(args.rounds):
            for t in threads:
                for tool in fam_tools if round_ % 2 == 0 else fam_tools[::-1]:
                    digest = tmp / f"{fam}-{tool}-{t}.npy"
                    r = _spawn(tool, t, args, spec_file, digest, corpus["hf_docs"])
                    if "error" in r:
                        failed.append(f"{tool} {t}T round {round_ + 1}: {r['error']}")
                        print(f"<!-- FAILED {fam} {failed[-1]} -->", flush=True)
                        continue
                    runs.setdefault((tool, t), []).append(r)
                    bad.setdefault((tool, t), set()).update(_differ(digest, oracle))
                    print(f"<!-- round {round_ + 1} {fam} {tool} {t}T: first {r['first_s']:.3f} s, warm {r['warm_s']:.3f} s -->",
                          flush=True)
        report(fam, spec, corpus, fam_tools, threads, runs, bad, failed, oracle)
    if "fastenc" in tools and not args.no_compile:
        compile_times(args)
    ended = datetime.datetime.now(datetime.timezone.utc)
    print(f"\nFinished {ended:%H:%M} UTC; load average at the end {os.getloadavg()[0]:.2f}.")


def report(fam, spec, corpus, tools, threads, runs, bad, failed, oracle) -> None:
    med = {k: {key: _median(rs, key) for key in ("first_s", "first_cpu", "warm_s", "warm_cpu")} for k, rs in runs.items()}
    ref = "tiktoken encode_ordinary" if spec["pattern"] is not None else "HF tokenizers"
    print(f"\n### {fam}\n")
    notes = {tool: next((r["note"] for (tl, _), rs in runs.items() if tl == tool for r in rs), None) for tool in tools}
    print("Loaded as: " + "; ".join(f"{t} `{n}`" for t, n in notes.items() if n) + f". Oracle: {ref}.\n")
    print("| tool | threads | first MB/s | warm MB/s | warm MB per CPU-s | tokens | docs ≠ oracle |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        for tool in tools:
            if (tool, t) not in med:
                print(f"| {tool} | {t} | – | – | – | – | could not run |")
                continue
            m = med[(tool, t)]
            mb = corpus["hf_mb"] if tool == "hf" else corpus["mb"]
            want = int(oracle[0][: corpus["hf_docs"]].sum()) if tool == "hf" else int(oracle[0].sum())
            toks = sorted({r["tokens"] for r in runs[(tool, t)]})
            tok = ", ".join(f"{x:,}" for x in toks) + ("" if toks == [want] else f" (oracle {want:,})")
            b = sorted(bad.get((tool, t), ()))
            print(f"| {tool} | {t} | {_mbps(mb, m['first_s'])} | {_mbps(mb, m['warm_s'])} | {_mbps(mb, m['warm_cpu'])} | "
                  f"{tok} | {f'**{len(b)}**: {b[:5]}' if b else 0} |")
    peers = [p for p in tools if p != "fastenc"]
    if "fastenc" in tools and peers:
        print(f"\nfastenc / peer speed (peer's wall time / fastenc's; > 1: fastenc faster; HF on its {corpus['hf_mb']:.1f} MB "
              "prefix, against fastenc's MB/s on the full corpus):\n")
        print("| threads | " + " | ".join(f"{reg} x {p}" for p in peers for reg in ("first", "warm")) + " |")
        print("|---:|" + "---:|" * (2 * len(peers)))
        for t in threads:
            fe = med.get(("fastenc", t))
            cells = []
            for p in peers:
                for reg in ("first", "warm"):
                    pm = med.get((p, t))
                    if not fe or not pm:
                        cells.append("–")
                    elif p == "hf":  # different amounts of text: compare speeds, not times
                        cells.append(_ratio(corpus["mb"] / fe[f"{reg}_s"], corpus["hf_mb"] / pm[f"{reg}_s"]))
                    else:
                        cells.append(_ratio(pm[f"{reg}_s"], fe[f"{reg}_s"]))
            print(f"| {t} | " + " | ".join(cells) + " |")
    for line in failed:
        print(f"\nFAILED ({fam}): {line}")


_COMPILE = (
    "import sys, time; t = time.perf_counter(); import fastenc; "
    "enc = fastenc.load(sys.argv[1], pattern=sys.argv[2]); load = time.perf_counter() - t; "
    "enc.encode_batch(['Hello, world! 12345 naïve 你好']); print(load, time.perf_counter() - t)"
)


def compile_times(args) -> None:
    """A new pattern with empty caches (every kernel compiles), then another with the caches warm."""
    rank_file = args.shared / "data" / "tokenizers" / "llama3.tiktoken"
    with tempfile.TemporaryDirectory(prefix="bench_patterns_cache_") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, FASTENC_CACHE_DIR=cache)
        lines = []
        # the third run loads a pattern already built: what is left is import + rank-file load, not compile
        for label, pattern in (("empty caches", NEW_PATTERNS[0]), ("warm caches, another new pattern", NEW_PATTERNS[1]),
                               ("warm caches, that pattern again (no build)", NEW_PATTERNS[1])):
            out = subprocess.run([sys.executable, "-c", _COMPILE, str(rank_file), pattern], env=env, capture_output=True,
                                 text=True)
            if out.returncode:
                lines.append(f"- {label}: failed ({(out.stderr.strip().splitlines() or ['?'])[-1]})")
                continue
            load_s, total_s = (float(x) for x in out.stdout.split())
            lines.append(f"- {label}: {total_s:.1f} s to the first ids (load {load_s:.1f} s, first encode {total_s - load_s:.1f} s)")
    print("\nfastenc compile of a new split pattern (fresh process; `fastenc.load(llama3.tiktoken, pattern=<new regex>)` + "
          "one encode; a fresh NUMBA_CACHE_DIR/FASTENC_CACHE_DIR):\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
