"""The one place that builds each tool's encoder for an encoding: fastenc and its peers (gigatoken, tiktoken,
HF tokenizers, quicktok-v1, bpe-openai, rs-bpe, tokie).

``build(tool, encoding, threads)`` returns a ``Runner``: ``encode(column, texts)`` is the only call a bench
times (each tool gets its natural input and returns its natural output), ``flat(out)`` turns that output into
(ids as uint32, per-document counts) for the exactness check, untimed. A peer whose package is absent, or which
cannot read an encoding, raises ``NotInstalled`` with one line; ``usable(tools, encoding)`` sorts a list into
the ones that will run and the skip lines to print.

Semantics: fastenc, tiktoken, bpe-openai, rs-bpe, quicktok-v1, gigatoken-ordinary and HF (with
``encode_special_tokens``) encode text as ``encode_ordinary`` does; gigatoken (as users load it) and tokie read
a literal "<|endoftext|>" in the text as the special token, so documents holding it differ by design.
"""
from __future__ import annotations

import hashlib
import importlib
import itertools
from dataclasses import dataclass
from typing import Callable
from unittest import mock

from harness import REPO, SHARED_DATA

TOOLS = ["fastenc", "gigatoken", "gigatoken-ordinary", "tiktoken", "tiktoken-loop", "hf", "quicktok-v1", "bpe-openai",
         "rs-bpe", "tokie"]
ALIASES = {"tiktoken-batch": "tiktoken", "hf-batch": "hf"}  # the names older benches print and accept
SINGLE_THREADED = {"tiktoken-loop"}  # a Python loop runs on one thread by construction
PACKAGES = {"fastenc": "numba", "gigatoken": "gigatoken", "gigatoken-ordinary": "gigatoken", "tiktoken": "tiktoken",
            "tiktoken-loop": "tiktoken", "hf": "tokenizers", "quicktok-v1": "quicktok", "bpe-openai": "bpe_openai",
            "rs-bpe": "rs_bpe", "tokie": "tokie"}
GPT2_JSON = REPO / "vocab" / "gpt2" / "tokenizer.json"
PATTERNS = {"cl100k_base": "cl100k", "o200k_base": "o200k"}  # gigatoken's names for the split patterns


class NotInstalled(Exception):
    """The tool cannot run here (its package is absent, or it does not read this encoding): one line, a skip."""


@dataclass
class Runner:
    encode: Callable  # (column, texts) -> the tool's own output: the only call timed
    flat: Callable  # output -> (ids uint32, counts int64), untimed


def canonical(tool: str) -> str:
    return ALIASES.get(tool, tool)


def missing(tool: str) -> str | None:
    """Why ``tool`` cannot be built here, or None."""
    tool = canonical(tool)
    if tool not in PACKAGES:
        return f"unknown tool {tool!r} (choose from {', '.join(TOOLS)})"
    try:
        importlib.import_module(PACKAGES[tool])
    except ImportError:
        return f"{tool}: not installed (pip install -e '.[bench]')"
    return None


def usable(tools: list[str]) -> tuple[list[str], list[str]]:
    """(the tools that can be built, one skip line per other)."""
    ok, skipped = [], []
    for t in tools:
        if canonical(t) not in PACKAGES:  # a typo is an error, not a skip
            raise SystemExit(f"unknown tool {t!r} (choose from {', '.join(TOOLS)})")
        why = missing(t)
        (skipped.append(why) if why else ok.append(t))
    return ok, skipped


# --- tiktoken, offline ------------------------------------------------------------------------------------


def tiktoken_encoding(name: str):
    """tiktoken's own Encoding, built from files on disk (never the network): the committed rank files for
    cl100k_base / o200k_base (hash-checked), ../shared/data/gpt2 for gpt2 (hash-checked by tiktoken)."""
    import tiktoken
    import tiktoken.load
    import tiktoken_ext.openai_public as op

    if name == "gpt2":
        folder = SHARED_DATA / "gpt2"
        if not (folder / "vocab.bpe").is_file():
            raise NotInstalled(f"tiktoken gpt2: {folder}/vocab.bpe and encoder.json are absent (the shared data)")
        real = tiktoken.load.data_gym_to_mergeable_bpe_ranks

        def local(vocab_bpe_file, encoder_json_file, vocab_bpe_hash=None, encoder_json_hash=None):
            return real(str(folder / "vocab.bpe"), str(folder / "encoder.json"), vocab_bpe_hash, encoder_json_hash)

        with mock.patch.object(op, "data_gym_to_mergeable_bpe_ranks", local):
            return tiktoken.Encoding(**op.gpt2())
    path = REPO / "vocab" / name / f"{name}.tiktoken"
    if not path.is_file():
        raise NotInstalled(f"tiktoken {name}: no rank file {path}")

    def load(url, expected_hash=None):
        if expected_hash and hashlib.sha256(path.read_bytes()).hexdigest() != expected_hash:
            raise NotInstalled(f"{path} is not tiktoken's {name} file (sha256 differs)")
        return tiktoken.load.load_tiktoken_bpe(str(path))

    with mock.patch.object(op, "load_tiktoken_bpe", load):
        return tiktoken.Encoding(**getattr(op, name)())


# --- output conversions ------------------------------------------------------------------------------------


def from_lists(out):
    import numpy as np

    counts = np.fromiter((len(x) for x in out), dtype=np.int64, count=len(out))
    flat = np.fromiter(itertools.chain.from_iterable(out), dtype=np.uint32, count=int(counts.sum()))
    return flat, counts


def _ids_offsets(out):
    import numpy as np

    return np.asarray(out[0]).astype(np.uint32), np.diff(np.asarray(out[1])).astype(np.int64)


def _ids_lengths(out):
    import numpy as np

    return np.asarray(out[0]).astype(np.uint32), np.asarray(out[1]).astype(np.int64)


def _awkward(out):
    import awkward as ak
    import numpy as np

    return np.asarray(ak.flatten(out, axis=1), dtype=np.uint32), np.asarray(ak.num(out, axis=1), dtype=np.int64)


# --- the builders ------------------------------------------------------------------------------------------


def build(tool: str, encoding: str, threads: int = 1, input_kind: str = "list") -> Runner:
    """The runner of ``tool`` for ``encoding`` at ``threads`` (the caller's process has RAYON_NUM_THREADS /
    NUMBA_NUM_THREADS set: harness.thread_env). ``input_kind`` is fastenc's input: "list" (a list of str,
    what users hold) or "arrow" (the Arrow column, zero-copy); every peer takes the list."""
    tool = canonical(tool)
    why = missing(tool)
    if why:
        raise NotInstalled(why)
    if tool == "fastenc":
        import numba

        import fastenc

        numba.set_num_threads(threads)
        enc = fastenc.load(encoding)
        if input_kind == "arrow":
            return Runner(lambda column, texts: enc.encode_batch(column), _ids_offsets)
        return Runner(lambda column, texts: enc.encode_batch(texts), _ids_offsets)
    if tool in ("gigatoken", "gigatoken-ordinary"):
        import gigatoken

        if encoding == "gpt2":  # its tokenizer.json: the pattern and the specials as HF defines them
            tok = gigatoken.Tokenizer(str(GPT2_JSON))
            parallel = threads > 1
            return Runner(lambda column, texts: tok.encode_batch(texts, parallel=parallel), _awkward)
        path = REPO / "vocab" / encoding / f"{encoding}.tiktoken"
        if encoding not in PATTERNS or not path.is_file():
            raise NotInstalled(f"{tool}: no tiktoken file or pattern for {encoding}")
        if tool == "gigatoken":  # as users load it: specials from the file name ("<|endoftext|>" is one id)
            tok = gigatoken.Tokenizer.from_tiktoken(str(path))
        else:  # no specials: tiktoken's encode_ordinary
            tok = gigatoken.Tokenizer.from_tiktoken(str(path), pretokenizer=PATTERNS[encoding], special_tokens={})
        return Runner(lambda column, texts: tok.encode_batch(texts), _awkward)
    if tool == "tiktoken":
        enc = tiktoken_encoding(encoding)
        return Runner(lambda column, texts: enc.encode_ordinary_batch(texts, num_threads=threads), from_lists)
    if tool == "tiktoken-loop":
        enc = tiktoken_encoding(encoding)
        return Runner(lambda column, texts: [enc.encode_ordinary(t) for t in texts], from_lists)
    if tool == "hf":
        from tokenizers import Tokenizer

        if encoding != "gpt2":
            raise NotInstalled(f"hf: no tokenizer.json for {encoding} in vocab/")
        tok = Tokenizer.from_file(str(GPT2_JSON))
        tok.encode_special_tokens = True  # "<|endoftext|>" in a document is text, as in encode_ordinary
        return Runner(lambda column, texts: tok.encode_batch(texts, add_special_tokens=False),
                      lambda out: from_lists([e.ids for e in out]))
    if tool == "quicktok-v1":
        import quicktok

        try:
            tok = quicktok.get_encoding(encoding)
        except Exception as err:  # its own table of encodings: a name it lacks is a skip, not a crash
            raise NotInstalled(f"quicktok-v1: {encoding}: {err}") from None
        return Runner(lambda column, texts: tok.encode_batch(texts, threads=threads), _ids_offsets)
    if tool == "bpe-openai":
        import bpe_openai

        try:
            enc = bpe_openai.get_encoding(encoding)
        except Exception as err:
            raise NotInstalled(f"bpe-openai: {encoding}: {str(err)[:100]}") from None  # e.g. it fetches gpt2 online
        enc._runtime.config.chunk_limit = 1 << 40  # its default refuses a document of > 200,000 tokens
        return Runner(lambda column, texts: enc.encode_ordinary_batch(texts, num_threads=threads), from_lists)
    if tool == "rs-bpe":
        from rs_bpe.bpe import openai

        if not hasattr(openai, encoding):
            raise NotInstalled(f"rs-bpe: no {encoding}")
        tok = getattr(openai, encoding)()
        if threads == 1:
            return Runner(lambda column, texts: tok.encode_batch(texts)[0], from_lists)
        options = openai.ParallelOptions(1, 64, threads)  # (min_batch_size, chunk_size, max_threads)
        return Runner(lambda column, texts: tok.encode_batch_parallel(texts, options)[0], from_lists)
    if tool == "tokie":
        import tokie

        if encoding != "gpt2":
            raise NotInstalled(f"tokie: no tokenizer.json for {encoding} in vocab/")
        tok = tokie.Tokenizer.from_json(str(GPT2_JSON))  # its thread pool is its own (rayon): RAYON_NUM_THREADS
        return Runner(lambda column, texts: tok.encode_batch_flat(texts, add_special_tokens=False), _ids_lengths)
    raise NotInstalled(f"unknown tool {tool!r} (choose from {', '.join(TOOLS)})")


def per_call(tool: str, encoding: str):
    """(one, batch, as_list) for per-call timing: one(text) -> ids, batch(texts) -> the tool's batch output,
    as_list(one's output) -> a list of ints (for the exactness check, untimed)."""
    tool = canonical(tool)
    why = missing(tool)
    if why:
        raise NotInstalled(why)
    if tool == "fastenc":
        import fastenc

        enc = fastenc.load(encoding)
        return enc.encode, enc.encode_batch, list
    if tool == "gigatoken":
        import gigatoken
        import numpy as np

        if encoding == "gpt2":
            tok = gigatoken.Tokenizer(str(GPT2_JSON))
        else:
            tok = gigatoken.Tokenizer.from_tiktoken(str(REPO / "vocab" / encoding / f"{encoding}.tiktoken"))
        return tok.encode, tok.encode_batch, (lambda ids: np.asarray(ids).tolist())
    if tool in ("tiktoken", "tiktoken-loop"):
        enc = tiktoken_encoding(encoding)
        return enc.encode_ordinary, enc.encode_ordinary_batch, list
    if tool == "tokie" and encoding == "gpt2":
        import tokie

        tok = tokie.Tokenizer.from_json(str(GPT2_JSON))
        return (lambda t: tok.encode(t, add_special_tokens=False).ids), (lambda ts: tok.encode_batch_flat(ts, add_special_tokens=False)), list
    raise NotInstalled(f"{tool}: no per-call API here for {encoding}")
