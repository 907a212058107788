"""Fault injection: one documented hook called before every write, fsync, rename, mkdir, link and
exchange of a run.

Every file a recipe publishes goes through ``fastenc.run.staging``, and that module calls
``step(op, path)`` before each of those operations. Nothing happens unless a hook is installed
with ``inject``; a hook may raise (``OSError(ENOSPC)``, ``KeyboardInterrupt``) or kill the
process to simulate a full disk, Ctrl-C or ``kill -9`` at exactly that point::

    from fastenc.run import faults

    with faults.inject(faults.FailAt(5, OSError(28, "No space left on device"))):
        encode_bytes(...)          # the 5th step raises

``ops``: ``"mkdir"``, ``"write"``, ``"fsync"``, ``"rename"``, ``"link"`` (a hard link into a
rebuilt shared folder) and ``"exchange"`` (``renameat2(RENAME_EXCHANGE)`` of that folder and
``OUT``, the commit of a shard added to a shared ``OUT``), each called before the operation, and
``"renamed"`` (``RENAMED``: called just after a rename or an exchange returned, where a real
Ctrl-C or ``kill -9`` can land too: it has happened, the caller's bookkeeping has not), and
``"write_back"`` (``WRITE_BACK``: before a file's write-back is started without waiting, which
comes after its last write and before it is read back: where a test changes a file to see the
read-back catch it). The hook is
process-wide (the URL recipe writes its bin from a background thread) and is meant for tests
and drills, not for production runs. ``FailAt`` and ``Recorder`` count the six ``OPS`` unless
told otherwise (``ops=(RENAMED,)``), so the step numbers of a failure drill stay those of
the operations that can fail.

Spawned worker processes (``--workers N``, ``fastenc.run.units``) cannot be reached by
``inject``: each installs the hook named by the environment variable ``FASTENC_FAULT=OP:N:ACTION``
when it starts (``install_from_env``), e.g. ``rename:2:kill``: the worker kills itself with
SIGKILL at its 2nd rename. ACTION: ``kill`` (SIGKILL), ``interrupt`` (KeyboardInterrupt),
``enospc``. The command's own process, which encodes units beside them, installs none.
"""
from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Callable, Iterator

__all__ = ["OPS", "RENAMED", "WRITE_BACK", "inject", "step", "FailAt", "Recorder", "install_from_env", "ENV"]

OPS = ("mkdir", "write", "fsync", "rename", "link", "exchange")
RENAMED = "renamed"  # after a rename or an exchange: nothing can fail there, but a signal can arrive
WRITE_BACK = "write_back"  # a file written, its write-back about to start, its read-back to come

Hook = Callable[[str, Path], None]
_hook: Hook | None = None


def step(op: str, path: str | os.PathLike) -> None:
    """Called by the staging layer before ``op`` on ``path``; runs the installed hook, if any."""
    hook = _hook
    if hook is not None:
        hook(op, Path(path))


@contextlib.contextmanager
def inject(hook: Hook) -> Iterator[Hook]:
    """Install ``hook(op, path)`` for the duration of the block (process-wide)."""
    global _hook
    old, _hook = _hook, hook
    try:
        yield hook
    finally:
        _hook = old


class Recorder:
    """A hook that records every step whose op is in ``ops`` (default: the six ``OPS``), as
    ``(op, path)`` pairs: run once to list the fault points."""

    def __init__(self, ops: tuple[str, ...] = OPS):
        self.ops = ops
        self.steps: list[tuple[str, Path]] = []
        self._lock = threading.Lock()

    def __call__(self, op: str, path: Path) -> None:
        if op not in self.ops:
            return
        with self._lock:
            self.steps.append((op, path))


class FailAt:
    """A hook that raises ``exc`` (or calls it, if callable) at the ``n``-th step (1-based)
    counting only steps whose op is in ``ops`` (default: all)."""

    def __init__(self, n: int, exc: BaseException | Callable[[], None], ops: tuple[str, ...] = OPS):
        self.n = n
        self.exc = exc
        self.ops = ops
        self.seen = 0
        self.fired: tuple[str, Path] | None = None
        self._lock = threading.Lock()

    def __call__(self, op: str, path: Path) -> None:
        if op not in self.ops:
            return
        with self._lock:
            self.seen += 1
            if self.seen != self.n:
                return
            self.fired = (op, path)
        if isinstance(self.exc, BaseException):
            raise self.exc
        self.exc()


ENV = "FASTENC_FAULT"


def _kill_self() -> None:
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def install_from_env() -> None:
    """Install the hook named by ``FASTENC_FAULT=OP:N:ACTION`` (see the module docstring), if set."""
    global _hook
    spec = os.environ.get(ENV)
    if not spec:
        return
    op, n, action = spec.split(":")
    actions = {"kill": _kill_self, "interrupt": KeyboardInterrupt(), "enospc": OSError(28, "No space left on device")}
    _hook = FailAt(int(n), actions[action], ops=(op,))
