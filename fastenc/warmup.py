"""Numba's compile step, made visible and done ahead: ``fastenc warmup`` and the first-run notice.

fastenc's kernels are ``@njit(cache=True)``: the first process on a machine compiles them
(tens of seconds on 2 cores) and saves machine code to Numba's cache; later processes load it
in well under a second. This module

- tells, before a command starts, whether the kernels it needs are in the cache for this CPU
  (``cold_families``: a look at Numba's cache index files, no compiling);
- if not, says so once on stderr and compiles them up front with a "compile" progress bar
  (``prepare``, called by the CLI; ``compile_ahead``), in a child process ``fastenc warmup``, so
  that the command's own process starts no threads and can still fork its ``--workers``; where
  there are two CPUs that child starts a helper process, which compiles one half of the kernels
  into the cache while the child compiles the other half;
- compiles everything for ``fastenc warmup`` (images, CI, cluster workers).

Kernel families: ``encoder`` (``fastenc.load(...).encode``/``decode``, ``fastenc encode``),
``urls``, ``gpt2`` (also ``encode_batch``) and ``bytes`` (each recipe, its read-back check and
``fastenc verify``), and ``wide`` (the loop for cl100k_base / o200k_base, which the others never
compile). A
family is compiled by running the real code on a tiny input, so that the kernels get exactly
the argument types the commands give them; the helper's "parts" call kernels directly and
only make things faster (a part that misses a type costs time, never correctness).

Where the cache lives, and what happens on read-only installs, shared home directories and
mixed CPUs: docs/compile.md.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fastenc.errors import InputError
from fastenc.tasks import usable_cpus

# CPU seconds to compile each family from an empty cache on 2 cores: a record only, the notice promises no
# time (it ranges several-fold with the machine and its load); bench/RESULTS.md, "Start-up".
# "wide" is the loop of vocabularies past 65,535 ids and of split patterns, which GPT-2 and URL runs do not compile.
ESTIMATED_SECONDS = {"encoder": 16, "urls": 18, "gpt2": 16, "bytes": 2, "wide": 27}

WIDE_BUILTINS = ("cl100k_base", "o200k_base")  # ids above 65,535: the "wide" family

# command -> the families it needs (``verify`` and ``decode``: by the output's format)
COMMAND_FAMILIES = {"urls": ("urls",), "gpt2": ("gpt2",), "bytes": ("bytes",), "encode": ("encoder",)}
FORMAT_FAMILIES = {"urls": ("urls",), "gpt2": ("gpt2",), "fastenc-bytes": ("bytes",)}


# ---------------------------------------------------------------------------------------------
# Is it cached? (Numba's index files; no compiling)
# ---------------------------------------------------------------------------------------------


def _probe_kernels(family: str) -> list:
    """Top-level kernels of a family: if each has a cache entry for this CPU, so does the
    family (a caller's entry holds its callees' code)."""
    if family == "encoder":
        from fastenc.kernels.decode import decode_into
        from fastenc.kernels.runs import encode_docs
        from fastenc.kernels.solo import lane_docs, lane_one

        return [_WithClassTable(encode_docs), decode_into, lane_one, lane_docs]
    if family == "wide":
        from fastenc.kernels.runs import encode_docs_wide

        return [encode_docs_wide]
    if family == "urls":
        from fastenc.kernels import url_pack
        from fastenc.kernels.canonical import canonical_run
        from fastenc.kernels.xxh3 import xxh3_64_run

        return [url_pack.pack_url_run, url_pack.gather_slots, url_pack.sort_buckets, url_pack.span_offsets,
                url_pack.decode_urls, xxh3_64_run, canonical_run]
    if family == "gpt2":
        from fastenc.kernels.decode import decode_into
        from fastenc.kernels.runs import encode_docs

        return [_WithClassTable(encode_docs), decode_into]
    if family == "bytes":
        from fastenc.kernels.bytes_pack import count_high_bytes, pack_documents

        return [pack_documents, count_high_bytes]
    raise ValueError(f"unknown kernel family {family!r}")


class _WithClassTable:
    """A probe for ``runs.encode_docs`` with a class table (GPT-2's loop), not ``classes=None``
    (the URL vocabulary's specialisation, which a URL run caches first: ``Encoder.kernel_classes``)."""

    CLASSES = 5  # encode_docs(data, offsets, first, last, vocab, classes, ...)

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher

    def wants(self, signature) -> bool:
        from numba.core import types

        return not isinstance(signature[self.CLASSES], (types.NoneType, types.Omitted))


def _cached_for_this_cpu(kernel) -> bool | None:
    """Whether Numba's cache index of ``kernel`` (a dispatcher, or a ``_WithClassTable`` probe) has
    an entry for this CPU and this source; None when that cannot be told (Numba internals changed,
    caching off)."""
    dispatcher = getattr(kernel, "dispatcher", kernel)
    wants = getattr(kernel, "wants", lambda signature: True)
    try:
        cache = dispatcher._cache
        if not getattr(cache, "_enabled", False) or not hasattr(cache, "_cache_file"):
            return None
        magic = dispatcher.targetctx.codegen().magic_tuple()
        index = cache._cache_file._load_index()  # {} when missing or made from other source
        return any(key[1] == magic and wants(key[0]) for key in index)
    except Exception:  # noqa: BLE001 - a best-effort look at internals
        return None


def cold_families(families) -> list[str]:
    """The families whose kernels are not all in Numba's cache for this CPU. Unknown counts as
    cached (no notice rather than a wrong one)."""
    cold = []
    for family in families:
        states = [_cached_for_this_cpu(k) for k in _probe_kernels(family)]
        if any(state is False for state in states):
            cold.append(family)
    return cold


def families_for(command: str, args) -> tuple:
    """The families a CLI command needs (none for commands without kernels)."""
    if command == "encode" and getattr(args, "tokenizer", None) in WIDE_BUILTINS:
        return ("wide",)  # (a tokenizer given by path is not opened here: a wide one compiles unannounced)
    if command == "encode" and getattr(args, "tokenizer", None) == "urls":
        return ("urls",)  # the URL vocabulary's loop (its own specialisation) is in the urls family
    if command in ("encode", "gpt2") and getattr(args, "tokenizer", "gpt2") not in ("gpt2", None):
        # any other tokenizer may take the wide loop (ids above 65,535, or a split pattern): compile it
        # before workers start, which must never compile (Numba's thread count is fixed once they run)
        return COMMAND_FAMILIES[command] + ("wide",)
    if command in COMMAND_FAMILIES:
        return COMMAND_FAMILIES[command]
    if command == "verify":
        from fastenc.verify import detect_format

        try:
            return FORMAT_FAMILIES.get(detect_format(Path(args.out)), ())
        except Exception:  # noqa: BLE001 - verify itself reports a bad directory
            return ()
    return ()


# ---------------------------------------------------------------------------------------------
# Compiling a family: the real code on tiny inputs
# ---------------------------------------------------------------------------------------------

_URLS = [
    "https://www.example.com/a/b?c=1#d",
    "http://sub.domain.co.uk:8080/path/to/page.html",
    "http://x:1.y/",  # canonical() is not self-inverse here: the irreversible path
    "",
    "ftp://[::1]/file",
    "https://日本.example.jp/ページ",
]
_DOCS = [
    "Hello, world! This is a test.",
    "Grüße aus Köln: 12345 numbers, emoji 🙂 and 中文字符.",
    "",
    "   indented\n\nparagraphs\twith tabs",
    "x" * 300,
]
# The recipes' batches are larger than the one-text lane takes (encoder._SOLO_BATCH_BYTES): a warm-up
# batch must be too, or the batch kernels the workers run are left to compile in the workers.
_LANE_SIZED_OUT = _DOCS * 1500


def _write_parquet(path: Path, column: str, values: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({column: pa.array(values, pa.string())}), path)
    return path


def warm_encoder(work: Path) -> None:
    """``fastenc encode`` and ``Encoder.encode``/``decode`` (``encode_batch``: the gpt2 family), for
    GPT-2's vocabulary. (A URL encoder's loop is a specialisation of its own, ``Encoder.kernel_classes``:
    the urls family compiles it.)"""
    import fastenc

    enc = fastenc.load("gpt2")
    enc.decode_bytes(enc.encode_bytes("Hello, world! Grüße 123".encode()))  # (the one-text lane)
    enc.encode_batch(["Grüße", "123"])  # (a small list: the lane's batch kernel)
    enc._encode_in_slot(b"Hello")  # (a call while the lane is busy: the batch kernel, on a task slot)


def warm_wide(work: Path) -> None:
    """The loop for vocabularies above 65,536 ids and split patterns (``encode_docs_wide``): cl100k_base
    and o200k_base (their pre-tokenizers differ; every split pattern takes the same compiled loop),
    through ``Encoder.encode``, and the gpt2 recipe with uint32 ids."""
    import fastenc
    from fastenc.recipes.gpt2 import encode_gpt2, verify_output

    for name in ("cl100k_base", "o200k_base"):
        enc = fastenc.load(name)
        enc.decode_bytes(enc.encode_bytes("Hello, world! Grüße 123 🙂 中文".encode()))
        enc._encode_in_slot(b"Hello")  # (the batch kernel itself, not only from the lane)
    src = _write_parquet(work / "docs-wide.parquet", "text", _LANE_SIZED_OUT)
    encode_gpt2([src], work / "wide-out", encoding="o200k_base", quiet=True)  # the recipe's uint32 kernels
    verify_output(work / "wide-out", [src])


def warm_url_encoder(work: Path) -> None:
    """What the URL recipe needs of the encoder: ``encode_text`` (via ``encode_bytes``: the same
    types) and the fused canonical() + encode kernel."""
    import numpy as np

    import fastenc
    from fastenc.recipes.urls.encode import encode_url_chunk
    from fastenc.recipes.urls.threads import canonical_batch

    enc = fastenc.load("urls")
    enc.encode_bytes(b"https://com.example.www/a")
    data = np.frombuffer("".join(_URLS).encode(), np.uint8)
    offsets = np.zeros(len(_URLS) + 1, np.int64)
    np.cumsum([len(u.encode()) for u in _URLS], out=offsets[1:])
    encode_url_chunk(enc, data, offsets, np.arange(len(_URLS)))
    canonical_batch(data, offsets)


def warm_urls(work: Path) -> None:
    """The URL recipe and its verify, and ``fastenc.load("urls")``'s own ``encode``/``decode``."""
    import fastenc
    from fastenc.recipes.urls import encode_shard, verify_output

    enc = fastenc.load("urls")
    enc.decode_bytes(enc.encode_bytes(b"https://com.example.www/a"))

    src = _write_parquet(work / "part-00000.parquet", "url", _URLS)
    encode_shard(src, work / "urls-out", num_shards=1, quiet=True)
    verify_output(work / "urls-out", [src])


def warm_gpt2(work: Path) -> None:
    """The gpt2 recipe and its verify, and ``Encoder.encode_batch``/``encode_arrays``."""
    import fastenc
    from fastenc.recipes.gpt2 import encode_gpt2, verify_output

    enc = fastenc.load("gpt2")
    enc.encode_batch(_DOCS)
    enc._encode_in_slot(b"Hello")  # (the batch kernel itself: a batch this small runs on the one-text lane)

    src = _write_parquet(work / "docs-gpt2.parquet", "text", _LANE_SIZED_OUT)
    encode_gpt2([src], work / "gpt2-out", quiet=True)
    verify_output(work / "gpt2-out", [src])


def warm_bytes(work: Path) -> None:
    from fastenc.recipes.bytes import encode_bytes, verify_output

    src = _write_parquet(work / "docs-bytes.parquet", "text", _DOCS)
    encode_bytes([src], work / "bytes-out", quiet=True)
    verify_output(work / "bytes-out", [src])


FAMILIES = {"encoder": warm_encoder, "urls": warm_urls, "gpt2": warm_gpt2, "bytes": warm_bytes, "wide": warm_wide}


# Parts: kernel groups with no callee in common, compiled in a helper process while this one
# compiles the rest (Numba compiles one function at a time per process). They call kernels
# directly, with the types the recipes use.


def part_url_side(work: Path) -> None:
    """The URL recipe's kernels other than the encoder and canonical(): hashing, the shard check,
    sorting, gathering, decoding (``warm_urls`` in the main process compiles canonical() with
    the encoder's URL kernel, which calls it)."""
    import numpy as np

    import fastenc
    from fastenc.kernels import url_pack
    from fastenc.recipes.urls.bin import iter_decoded
    from fastenc.recipes.urls.threads import gather_spans, hash_batch, sort_by_hash

    raw = b"".join(u.encode() for u in _URLS)
    data = np.frombuffer(raw, np.uint8)
    offsets = np.zeros(len(_URLS) + 1, np.int64)
    np.cumsum([len(u.encode()) for u in _URLS], out=offsets[1:])
    hashes = hash_batch(data, offsets)
    url_pack.count_outside_shard(hashes, np.uint64(1), np.uint64(0), np.empty(5, np.int64), 5)
    url_pack.shard_of(hashes[0], np.uint64(1))
    order, _ = sort_by_hash(hashes, 2)
    tokens = np.array([0, 71, 72, 0, 73, 0, 0, 74, 75, 76], np.uint16)
    tok_offsets = np.array([0, 3, 5, 6, 7, 10, 10], np.int64)
    out = np.empty(10, np.uint16)
    out_offsets = np.empty(len(order) + 1, np.int64)
    gather_spans(tokens, tok_offsets, order, out, out_offsets, 2)
    for _, text, text_offsets in iter_decoded(tokens, fastenc.load("urls")):
        url_pack.first_difference(text, text_offsets, np.arange(len(text_offsets) - 1), text, text_offsets)


def part_bpe(work: Path) -> None:
    """The BPE side of the encoder (merges, whole-token lookup, segments): what ``encode_text``
    calls besides the pre-tokenizers and piece caches."""
    import numpy as np

    import fastenc
    from fastenc.kernels.bpe import merge_long_piece, merge_short_piece
    from fastenc.kernels.segments import segment_end
    from fastenc.kernels.tables import token_id_of

    enc = fastenc.load("gpt2")
    v = enc.vocab
    data = np.frombuffer(b"hello worldwide", np.uint8)
    out = np.empty(16, np.uint16)
    merge_short_piece(data, np.int64(0), np.int64(5), v, np.empty(64, np.int64), out, np.int64(0))
    merge_long_piece(data, np.int64(0), np.int64(15), v, np.empty(7 * 4 * 64, np.int64), out, np.int64(0))
    token_id_of(v.token_table, v.token_bytes, v.token_offsets, data, np.int64(0), np.int64(5))
    segment_end(data, np.int64(0), np.int64(15), v.joinable)


def part_pieces(work: Path, gpt2: bool = True) -> None:
    """The other side of the encoder: the pre-tokenizers and the piece caches (GPT-2's
    pre-tokenizer only with ``gpt2``: a URL-only run's loop does not contain it)."""
    import numpy as np

    import fastenc
    from fastenc.kernels import piece_cache as pc
    from fastenc.kernels.pretok_gpt2 import gpt2_piece_end
    from fastenc.kernels.pretok_url import url_piece_end

    enc = fastenc.load("gpt2")
    data = np.frombuffer(b"hello worldwide, again", np.uint8)
    out = np.zeros(32, np.uint16)
    if gpt2:
        gpt2_piece_end(data, np.int64(0), np.int64(len(data)), enc.classes)
    url_piece_end(data, np.int64(0), np.int64(len(data)))
    c = enc.thread_caches(0)
    zero, two, five = np.int64(0), np.int64(2), np.int64(5)
    pc.tiny_cache_lookup(c.tiny, data, zero, two, out, zero, np.int64(32))
    pc.short_cache_lookup(c.short, data, zero, five, out, zero, np.int64(32))
    pc.cache_lookup(c.short, data, zero, five, out, zero, np.int64(32))
    # stores into scratch caches: the real ones must not learn wrong ids
    scratch = pc.new_piece_caches(1 << 4, 1 << 4, 1 << 4)
    pc.tiny_cache_store(scratch.tiny, data, zero, two, out, zero, np.int64(1), False)
    pc.cache_store(scratch.short, data, zero, five, out, zero, np.int64(1), False)


PARTS = {"url-side": part_url_side, "bpe": part_bpe, "pieces": part_pieces}
ENCODER_FAMILIES = ("encoder", "urls", "gpt2", "wide")
GPT2_LOOP_FAMILIES = ("encoder", "gpt2", "wide")  # the ones whose loops contain GPT-2's pre-tokenizer


def _part_ready(part: str) -> bool:
    """Whether a helper's part is in the cache (probed on one kernel it compiles last)."""
    if part == "bpe":
        from fastenc.kernels.tables import token_id_of

        return _cached_for_this_cpu(token_id_of) is True
    return False


# ---------------------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------------------


def _warmup_process(args: list[str], **popen):
    """``python -m fastenc warmup ARGS`` as a process of its own: this interpreter, this
    environment (so the same Numba cache), and this fastenc (its folder first on ``PYTHONPATH``:
    a process that imported fastenc from a checkout must not compile another copy); None if it
    cannot start."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        return subprocess.Popen([sys.executable, "-m", "fastenc", "warmup", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, env=env, **popen)
    except OSError:
        return None


def _start_helper(parts: list[str]):
    """``fastenc warmup --part P ...`` in the background; None if it cannot start."""
    return _warmup_process(["--quiet", *(a for part in parts for a in ("--part", part))], stderr=subprocess.DEVNULL)


class _Ticker:
    """Redraws a progress bar while Numba compiles, so that its clock runs: every second on a
    terminal, every 10 s in a log (like the recipes' bars, so logs stay short)."""

    def __init__(self, bar):
        self.bar = bar
        self.interval = 1.0 if getattr(sys.stderr, "isatty", lambda: False)() else 10.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(self.interval):
            self.bar.refresh()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def _wait_until(ready, proc) -> None:
    """Until ``ready()`` or the helper process ``proc`` has exited (a failed or missing helper
    only means this process compiles that part itself)."""
    while proc is not None and proc.poll() is None and not ready():
        time.sleep(0.1)


SCRATCH_PREFIX = "fastenc-warmup-"
_STALE_AFTER_S = 3600  # a warm-up takes minutes: an older folder of a dead process is a leftover


def scratch_folder() -> tempfile.TemporaryDirectory:
    """The warm-up runs' scratch folder, ``fastenc-warmup-<pid>-*`` in the temporary directory.

    A warm-up that is killed leaves it behind: Ctrl-C during a first run's compile kills the
    compiling child and its helper with SIGKILL (``_compile_in_child``), which skips their clean-up.
    So each warm-up first removes the folders of earlier ones whose process is gone."""
    remove_stale_scratch()
    return tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def remove_stale_scratch(root: str | os.PathLike | None = None, *, stale_after_s: float = _STALE_AFTER_S) -> list[Path]:
    """Delete the warm-up scratch folders in ``root`` (default: the temporary directory) that are
    ours (same user), untouched for ``stale_after_s``, and whose process no longer runs; returns them.
    (The age guards against a process of another pid namespace sharing the folder.)"""
    import shutil

    removed = []
    now = time.time()
    for p in Path(root or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = p.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        try:
            st = p.lstat()
        except OSError:
            continue
        if not pid.isdigit() or not p.is_dir() or p.is_symlink() or now - st.st_mtime < stale_after_s:
            continue
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            continue
        if _process_exists(int(pid)):
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def _process_exists(pid: int) -> bool:
    if os.name != "posix":
        return True  # (Windows' os.kill would end the process: keep the folder)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # (another user's, or cannot tell: keep its folder)
    return True


def compile_families(families, *, quiet: bool = False, jobs: int | None = None) -> float:
    """Compile (or load) the kernels of ``families``; returns the seconds it took.

    With ``jobs >= 2`` (default: 2 when there are 2 CPUs) a helper process compiles the BPE
    merges (and, for ``urls``, the hashing/sorting/decoding kernels) into the cache while this
    process compiles the pre-tokenizers and piece caches; then this process compiles the
    encoder and the families, loading the helper's kernels from the cache. A "compile" bar
    counts the families. (Before a run, ``compile_ahead`` calls this in a process of its own.)"""
    from fastenc.progress import progress

    jobs = min(2, usable_cpus()) if jobs is None else jobs
    families = sorted(dict.fromkeys(families), key=list(FAMILIES).index)
    encoder = any(f in ENCODER_FAMILIES for f in families)
    helper_parts = (["bpe"] if encoder else []) + (["url-side"] if "urls" in families else [])
    t0 = time.perf_counter()
    helper = _start_helper(helper_parts) if jobs >= 2 and helper_parts else None
    stages = (["pre-tokenizers"] if helper is not None and encoder else []) + families
    bar = progress(len(stages), unit="step", desc="compile", quiet=quiet, unit_scale=False)

    def stage(name: str) -> None:
        bar.set_postfix_str(name + (" (+ a helper process)" if helper is not None and helper.poll() is None else ""))

    try:
        with _Ticker(bar), scratch_folder() as tmp:
            work = Path(tmp)
            if helper is not None and encoder:
                stage("pre-tokenizers")
                part_pieces(work, gpt2=any(f in GPT2_LOOP_FAMILIES for f in families))
                _wait_until(lambda: _part_ready("bpe"), helper)
                bar.update(1)
            for family in families:
                stage(family)
                if family == "urls" and helper is not None:
                    warm_url_encoder(work)  # while the helper finishes the URL side
                    helper.wait()
                FAMILIES[family](work)
                bar.update(1)
            bar.set_postfix_str("done")
    except BaseException:  # e.g. Ctrl-C: do not wait for the helper's compile
        if helper is not None:
            helper.terminate()
        raise
    finally:
        if helper is not None and helper.poll() is None:
            helper.wait()
        bar.close()
    return time.perf_counter() - t0


def _inputs_exist(args) -> bool:
    """False when the command's inputs are missing: it then fails at once with its own message,
    rather than after compiling for half a minute."""
    try:
        if getattr(args, "inputs", None):
            from fastenc.arrow_io import resolve_inputs

            resolve_inputs([os.fspath(p) for p in args.inputs])
        text = getattr(args, "input", None)
        if text not in (None, "-") and not Path(text).is_file():
            return False
    except Exception:  # noqa: BLE001 - the command reports it
        return False
    return True


def compile_ahead(families, *, quiet: bool, notice: str | None = None) -> None:
    """Compile the cold kernels of ``families`` into the cache before a run, in a process of its
    own (``fastenc warmup``, with its bar on this stderr), not in this one.

    Why not here: compiling runs the real code on tiny inputs, which leaves fastenc's task threads
    and Numba's parallel threads in this process, and a process with threads must spawn its
    ``--workers`` instead of forking them (``fastenc.run.forking``): each worker then imports and
    loads everything again. After the child, this process loads the kernels from the cache as any
    warm run does. Where the child cannot do it (it fails, or Numba could not write the cache),
    this process compiles them itself."""
    cold = cold_families(families)
    if not cold:
        return
    if notice and not quiet:
        print(notice, file=sys.stderr, flush=True)
    if not _compile_in_child(cold, quiet=quiet):
        compile_families(cold_families(cold), quiet=quiet)


def _compile_in_child(families: list[str], *, quiet: bool) -> bool:
    """``fastenc warmup --ahead FAMILY...`` in a child process; whether the families are now cached.
    The child has a session of its own, so a Ctrl-C reaches this process only, which then kills the
    child and its helper at once (a compile inside LLVM would see a SIGINT only seconds later; Numba
    writes each cache file under a temporary name and renames it, so a kill leaves no torn entry)."""
    import signal

    child = _warmup_process(["--ahead", *(["--quiet"] if quiet else []), *families], start_new_session=True)
    if child is None:
        return False
    try:
        code = child.wait()
    except BaseException:  # Ctrl-C: do not leave a compile running behind the command
        try:
            if hasattr(os, "killpg"):
                os.killpg(child.pid, signal.SIGKILL)  # the child's session: it and its helper
            else:
                child.kill()
        except OSError:
            pass
        child.wait()
        if not quiet:
            print(file=sys.stderr, flush=True)  # (the child's bar ends without one: the command's message on its own line)
        raise
    return code == 0 and not cold_families(families)


def _exit_with_parent(interval: float = 0.25) -> None:
    """In ``compile_ahead``'s child: once the command that started it is gone (killed with ``kill -9``,
    which it cannot catch), stop compiling, with the helper, instead of running on for half a minute
    beside the rerun that compiles again. A daemon thread that watches the parent's pid; the child
    leads its own process group (``start_new_session``), so one ``killpg`` takes the helper too."""
    import signal

    parent = os.getppid()
    if not hasattr(os, "killpg") or parent <= 1:
        return

    def watch():
        while os.getppid() == parent:
            time.sleep(interval)
        try:
            if os.getpgid(0) == os.getpid():  # the leader of its own group: this process and the helper
                os.killpg(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)  # (not a group leader: started by hand, whose group is not its own to kill)

    threading.Thread(target=watch, daemon=True, name="fastenc-parent-watch").start()


def prepare(command: str, args) -> None:
    """Before a CLI command: if the kernels it needs are not cached for this CPU, say so once on
    stderr and compile them (with a progress bar) before the command's own bars start."""
    families = families_for(command, args)
    if not families or not _inputs_exist(args):
        return
    cold = cold_families(families)
    if not cold:
        return
    quiet = bool(getattr(args, "quiet", False))
    # no time is promised: it depends on the CPU and on what else runs on it
    notice = ("fastenc: compiling kernels (first run on this machine; a one-time cost, with a progress bar); "
              "they are cached for later runs (`fastenc warmup` does this ahead of time)")
    if command == "verify":  # nothing to run the verify kernels on beforehand: say it, go on
        if not quiet:
            print(notice, file=sys.stderr, flush=True)
        return
    try:
        compile_ahead(cold, quiet=quiet, notice=notice)
    except Exception as exc:  # noqa: BLE001 - the command itself compiles what it needs
        if not quiet:
            print(f"fastenc: compiling ahead failed ({type(exc).__name__}: {exc}); the command compiles as it goes",
                  file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# fastenc warmup
# ---------------------------------------------------------------------------------------------


def add_arguments(p) -> None:
    import argparse

    p.description = (
        "Compile every kernel into Numba's cache now (for images, CI and cluster workers), so that "
        "no later command compiles. The cache is NUMBA_CACHE_DIR if set (set it to a writable folder "
        "for read-only installs and shared nodes; entries of different CPU models live side by side), "
        "else __pycache__ beside fastenc's sources, else ~/.cache/numba. See docs/compile.md."
    )
    p.add_argument("families", nargs="*", metavar="FAMILY", help=f"only these ({', '.join(FAMILIES)}); default: all")
    p.add_argument("-j", "--jobs", type=int, default=None, help="processes (default: 2 where there are 2 CPUs)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")
    p.add_argument("--part", action="append", choices=list(PARTS), help=argparse.SUPPRESS)  # a helper process's job
    # compile_ahead's child: no summary line (the command that started it goes on with its own)
    p.add_argument("--ahead", action="store_true", help=argparse.SUPPRESS)


def run(args) -> int:
    from fastenc.progress import summary_line

    if args.part:
        with scratch_folder() as tmp:
            for part in args.part:
                PARTS[part](Path(tmp))
        return 0
    unknown = [f for f in args.families if f not in FAMILIES]
    if unknown:
        raise InputError(f"unknown kernel family {unknown[0]!r}: choose from {', '.join(FAMILIES)}")
    families = args.families or list(FAMILIES)
    if args.ahead:  # (no traceback here: the command then compiles in its own process, and reports a failure there)
        _exit_with_parent()
        try:
            compile_families(cold_families(families), quiet=args.quiet, jobs=args.jobs)
        except Exception:  # noqa: BLE001
            return 1
        return 0 if not cold_families(families) else 1
    todo = cold_families(families)
    if not todo:
        summary_line(f"fastenc warmup: kernels already cached for this CPU ({', '.join(families)}); {_cache_place()}",
                     quiet=args.quiet)
        return 0
    seconds = compile_families(todo, quiet=args.quiet, jobs=args.jobs)
    still = cold_families(todo)
    if still:
        summary_line(f"fastenc warmup: compiled, but Numba's cache holds no entry for {', '.join(still)}: "
                     f"is caching possible here? ({_cache_place()})", quiet=False)
        return 1
    summary_line(f"fastenc warmup: compiled {', '.join(todo)} in {seconds:.1f} s; {_cache_place()}", quiet=args.quiet)
    return 0


def _cache_place() -> str:
    """Where Numba keeps fastenc's compiled kernels (one kernel's cache folder, as an example)."""
    try:
        from fastenc.kernels.encode import encode_text

        return f"cache: {encode_text._cache.cache_path}"
    except Exception:  # noqa: BLE001
        return "cache: (unknown)"
