"""Kernels compiled ahead, in a child process, before a run forks its workers; knows no recipe.

Compiling runs the real code on tiny inputs, which leaves fastenc's task threads and Numba's
parallel threads in the process, and a process with threads must spawn its ``--workers`` instead
of forking them (``fastenc.run.forking``). So a first run compiles in a child, ``fastenc warmup
--ahead FAMILY...`` (a process, not an import: the warm-ups live above the run), and then loads
the kernels from Numba's cache as any warm run does.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable


class WithClassTable:
    """A probe for ``runs.encode_docs`` with a class table (GPT-2's loop), not ``classes=None``
    (the URL vocabulary's specialisation, which a URL run caches first: ``Encoder.kernel_classes``)."""

    CLASSES = 5  # encode_docs(data, offsets, first, last, vocab, classes, ...)

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher

    def wants(self, signature) -> bool:
        from numba.core import types

        return not isinstance(signature[self.CLASSES], (types.NoneType, types.Omitted))


def cached_for_this_cpu(kernel) -> bool | None:
    """Whether Numba's cache index of ``kernel`` (a dispatcher, or a ``WithClassTable`` probe) has
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


def cold(families: Iterable[str], probes_of: Callable[[str], list]) -> list[str]:
    """The families whose probe kernels are not all in Numba's cache for this CPU. Unknown counts
    as cached (no notice rather than a wrong one)."""
    return [f for f in families if any(cached_for_this_cpu(k) is False for k in probes_of(f))]


def warmup_process(args: list[str], **popen):
    """``python -m fastenc warmup ARGS`` as a process of its own: this interpreter, this
    environment (so the same Numba cache), and this fastenc (its folder first on ``PYTHONPATH``:
    a process that imported fastenc from a checkout must not compile another copy); None if it
    cannot start."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        return subprocess.Popen([sys.executable, "-m", "fastenc", "warmup", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, env=env, **popen)
    except OSError:
        return None


def compile_in_child(families: list[str], *, quiet: bool) -> bool:
    """``fastenc warmup --ahead FAMILY...`` in a child process; whether it succeeded.
    The child has a session of its own, so a Ctrl-C reaches this process only, which then kills the
    child and its helper at once (a compile inside LLVM would see a SIGINT only seconds later; Numba
    writes each cache file under a temporary name and renames it, so a kill leaves no torn entry)."""
    import signal

    child = warmup_process(["--ahead", *(["--quiet"] if quiet else []), *families], start_new_session=True)
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
    return code == 0


def compile_ahead(families, *, probes_of: Callable[[str], list], quiet: bool, notice: str | None = None,
                  fallback: Callable[[list[str]], None] | None = None) -> None:
    """Compile the cold kernels of ``families`` into the cache in a child process, not in this one.
    Where the child cannot do it (it fails, or Numba could not write the cache), ``fallback(cold)``
    compiles them here."""
    todo = cold(families, probes_of)
    if not todo:
        return
    if notice and not quiet:
        print(notice, file=sys.stderr, flush=True)
    if not (compile_in_child(todo, quiet=quiet) and not cold(todo, probes_of)) and fallback is not None:
        fallback(cold(todo, probes_of))
