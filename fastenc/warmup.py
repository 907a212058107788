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
from fastenc.recipes import registry
from fastenc.recipes.base import KernelFamily
from fastenc.recipes.warm_inputs import LANE_SIZED_OUT, write_parquet
from fastenc.run import ahead
from fastenc.tasks import usable_cpus

WIDE_BUILTINS = ("cl100k_base", "o200k_base")  # ids above 65,535: the "wide" family


# ---------------------------------------------------------------------------------------------
# Is it cached? (Numba's index files; no compiling)
# ---------------------------------------------------------------------------------------------


def _probe_kernels(family: str) -> list:
    """Top-level kernels of a family: if each has a cache entry for this CPU, so does the
    family (a caller's entry holds its callees' code)."""
    if family not in kernel_families():
        raise ValueError(f"unknown kernel family {family!r}")
    return kernel_families()[family].probes()


def cold_families(families) -> list[str]:
    """The families whose kernels are not all in Numba's cache for this CPU. Unknown counts as
    cached (no notice rather than a wrong one)."""
    return ahead.cold(families, lambda family: _probe_kernels(family))


def families_for(command: str, args) -> tuple:
    """The families a CLI command needs (none for commands without kernels)."""
    if command == "encode" and getattr(args, "tokenizer", None) in WIDE_BUILTINS:
        return ("wide",)  # (a tokenizer given by path is not opened here: a wide one compiles unannounced)
    if command == "encode" and getattr(args, "tokenizer", None) == "urls":
        return ("urls",)  # the URL vocabulary's loop (its own specialisation) is in the urls family
    if command == "encode":
        # any other tokenizer may take the wide loop (ids above 65,535, or a split pattern): compile it
        # before workers start, which must never compile (Numba's thread count is fixed once they run)
        return ("encoder",) + (("wide",) if getattr(args, "tokenizer", "gpt2") not in ("gpt2", None) else ())
    recipe = registry.commands().get(command)
    if recipe is not None:
        return tuple(recipe.families(args))
    if command == "verify":
        try:
            return registry.detect(Path(args.out)).families
        except Exception:  # noqa: BLE001 - verify itself reports a bad directory
            return ()
    return ()


# ---------------------------------------------------------------------------------------------
# Compiling a family: the real code on tiny inputs
# ---------------------------------------------------------------------------------------------

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
    src = write_parquet(work / "docs-wide.parquet", "text", LANE_SIZED_OUT)
    encode_gpt2([src], work / "wide-out", encoding="o200k_base", quiet=True)  # the recipe's uint32 kernels
    verify_output(work / "wide-out", [src])


def _encoder_probes() -> list:
    from fastenc.kernels.decode import decode_into
    from fastenc.kernels.runs import encode_docs
    from fastenc.kernels.solo import lane_docs, lane_one

    return [ahead.WithClassTable(encode_docs), decode_into, lane_one, lane_docs]


def _wide_probes() -> list:
    from fastenc.kernels.runs import encode_docs_wide

    return [encode_docs_wide]


# The library's own families, around the recipes' (the compile order: the encoder first, the wide loop last).
ENCODER = KernelFamily("encoder", warm_encoder, _encoder_probes, uses_encoder=True, gpt2_loop=True)
WIDE = KernelFamily("wide", warm_wide, _wide_probes, uses_encoder=True, gpt2_loop=True)


def kernel_families() -> dict:
    """Every kernel family by name, in compile order: the encoder, each recipe's, the wide loop."""
    return {"encoder": ENCODER, **registry.kernel_families(), "wide": WIDE}


# Parts: kernel groups with no callee in common, compiled in a helper process while this one
# compiles the rest (Numba compiles one function at a time per process). They call kernels
# directly, with the types the recipes use.


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


def parts() -> dict:
    """What a helper process may compile: the encoder's two sides, and the recipes' helper parts."""
    return {"bpe": part_bpe, "pieces": part_pieces, **dict(f.helper_part for f in kernel_families().values() if f.helper_part)}


def _part_ready(part: str) -> bool:
    """Whether a helper's part is in the cache (probed on one kernel it compiles last)."""
    if part == "bpe":
        from fastenc.kernels.tables import token_id_of

        return ahead.cached_for_this_cpu(token_id_of) is True
    return False


# ---------------------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------------------


def _start_helper(parts: list[str]):
    """``fastenc warmup --part P ...`` in the background; None if it cannot start."""
    return ahead.warmup_process(["--quiet", *(a for part in parts for a in ("--part", part))], stderr=subprocess.DEVNULL)


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
    compiling child and its helper with SIGKILL (``fastenc.run.ahead.compile_in_child``), which skips their clean-up.
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
    known = kernel_families()
    families = sorted(dict.fromkeys(families), key=list(known).index)
    encoder = any(known[f].uses_encoder for f in families)
    helper_parts = (["bpe"] if encoder else []) + [known[f].helper_part[0] for f in families if known[f].helper_part]
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
                part_pieces(work, gpt2=any(known[f].gpt2_loop for f in families))
                _wait_until(lambda: _part_ready("bpe"), helper)
                bar.update(1)
            for family in families:
                stage(family)
                if known[family].while_helper is not None and helper is not None:
                    known[family].while_helper(work)  # while the helper finishes its part
                    helper.wait()
                known[family].warm(work)
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
    own (``fastenc warmup``, with its bar on this stderr), not in this one (``fastenc.run.ahead``:
    a process with threads must spawn its ``--workers`` instead of forking them). Where the child
    cannot do it (it fails, or Numba could not write the cache), this process compiles them itself."""
    ahead.compile_ahead(families, probes_of=lambda family: _probe_kernels(family), quiet=quiet, notice=notice,
                        fallback=lambda cold: compile_families(cold, quiet=quiet))


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
    p.add_argument("families", nargs="*", metavar="FAMILY", help=f"only these ({', '.join(kernel_families())}); default: all")
    p.add_argument("-j", "--jobs", type=int, default=None, help="processes (default: 2 where there are 2 CPUs)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary line")
    p.add_argument("--part", action="append", choices=list(parts()), help=argparse.SUPPRESS)  # a helper process's job
    # compile_ahead's child: no summary line (the command that started it goes on with its own)
    p.add_argument("--ahead", action="store_true", help=argparse.SUPPRESS)


def run(args, command: dict | None = None) -> int:  # (command: how it was started; only writers record it)
    from fastenc.progress import summary_line

    if args.part:
        with scratch_folder() as tmp:
            for part in args.part:
                parts()[part](Path(tmp))
        return 0
    known = kernel_families()
    unknown = [f for f in args.families if f not in known]
    if unknown:
        raise InputError(f"unknown kernel family {unknown[0]!r}: choose from {', '.join(known)}")
    families = args.families or list(known)
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
