"""How a command stops: SIGINT (Ctrl-C) and SIGTERM (``timeout``, ``docker stop``, Slurm,
Kubernetes, Ray) alike, and never silently.

``install()`` is the first thing ``python -m fastenc`` and the ``fastenc`` script do, before any
slow import (numba, pyarrow), so a signal during start-up is one line and an exit status, never a
traceback. (Only the interpreter's own start-up comes before it, tens of milliseconds, where
Python's default handling applies.) The first signal raises ``Interrupted`` (a ``KeyboardInterrupt``) in the main thread:
every clean-up that runs on Ctrl-C runs on SIGTERM too (the map's workers are stopped, this run's
temporaries removed, finished units kept for a rerun), then ``fastenc.cli.main`` prints one line
and exits 128 + the signal's number (130 for SIGINT, 143 for SIGTERM). A second signal exits at
once: the workers die with this process (``fastenc.run.units``), and the next run deletes the
temporaries of processes that are gone.

An interrupt that lands inside an import waits until the import is done (an exception there can
leave a module half made, or be turned into an ImportError by a C extension). Python drops an
exception raised where no caller can receive it (a ctypes callback, the
``os.register_at_fork`` hooks that a fork runs): a Ctrl-C handled there was lost and the run went
on. ``Interrupted`` is raised again from there a moment later (``_unraisable``), the signal is
recorded (``received()``, checked once more when the command returns), and ``fastenc.run.units``
blocks both signals while it forks. A signal that the command's parent set to be ignored (a script's
``cmd &``) stays ignored, as Python itself does for SIGINT.
"""
from __future__ import annotations

import os
import signal
import sys

__all__ = ["SIGNALS", "Interrupted", "install", "received", "signal_name", "exit_code", "finishing", "interrupted_line", "report"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: int | None = None
_finishing = False


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived (``signum``); a ``KeyboardInterrupt``, so that all that stops on Ctrl-C stops on it."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code(signum: int | None) -> int:
    """128 + the signal's number, the shells' convention; 130 (SIGINT) when none was recorded."""
    return 128 + (signum or signal.SIGINT)


def received() -> int | None:
    """The first stop signal this process got since ``install()``, or None."""
    return _received


def interrupted_line() -> str:
    """The one line a command that stopped on a signal prints."""
    return (f"fastenc: interrupted ({signal_name(_received or signal.SIGINT)}): no partial output was published, each "
            "output appears whole or not at all; the files already encoded are kept: rerun the same command to resume")


def report() -> int:
    """Print ``interrupted_line()`` (straight to fd 2: before main() nothing else has written); the exit status."""
    _write(interrupted_line() + "\n")
    return exit_code(_received)


def _write(text: str) -> None:
    try:
        os.write(2, text.encode("utf-8", "replace"))  # not sys.stderr: the main thread may be inside a write to it
    except OSError:
        pass


def _handler(signum, frame) -> None:
    global _received, _again
    if signum == getattr(signal, "SIGALRM", None):  # the timer of ``_later``: the first signal, raised now
        if not _again:
            return
        _again = False
        signum = _received
    elif _received is not None:  # a second signal
        if _finishing:
            os._exit(exit_code(_received))
        _write(f"\nfastenc: interrupted again ({signal_name(signum)}): stopped at once; a rerun of the same command "
               "deletes what this run left and resumes\n")
        os._exit(exit_code(signum))
    _received = signum
    if _finishing:  # main() has returned: only the interpreter's exit is left
        os._exit(exit_code(signum))
    if _importing(frame) and _later():
        return
    raise Interrupted(signum)


def _importing(frame) -> bool:
    """Whether the main thread is inside an import. An exception raised there can leave a module
    half made (numba's, seen as an AttributeError later) or be turned into another one (NumPy's C
    extension reports an ImportError): the interrupt waits until the import is done."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _later() -> bool:
    """Raise the first signal's ``Interrupted`` a moment later, from a timer (SIGALRM); False where
    there is no timer (then it is raised now)."""
    global _again
    if not hasattr(signal, "setitimer"):
        return False
    _again = True
    signal.signal(signal.SIGALRM, _handler)
    signal.setitimer(signal.ITIMER_REAL, _AGAIN_AFTER)
    return True


_again = False
_AGAIN_AFTER = 0.01  # seconds: a moment for the import, or the code that dropped the exception, to return


def _unraisable(info) -> None:
    """``sys.unraisablehook``: Python drops an exception raised where no caller can get it (a
    ctypes callback, such as the one llvmlite calls as Numba loads a kernel; a fork's hooks; a
    ``__del__``), and prints it with a traceback. Our ``Interrupted`` is not printed; it is raised
    again a moment later (``_later``), in the code that runs then."""
    if not isinstance(info.exc_value, Interrupted) or not _later():
        _default_unraisable(info)


_default_unraisable = sys.unraisablehook


def install() -> None:
    """Handle SIGINT and SIGTERM as above (in the main thread; idempotent)."""
    for s in SIGNALS:
        if signal.getsignal(s) is signal.SIG_IGN:  # ignored by whoever started us (nohup, `cmd &`): keep it so
            continue
        signal.signal(s, _handler)
    sys.unraisablehook = _unraisable


def finishing() -> None:
    """After ``main()`` returned: a signal now ends the process at once, with no line (nothing is left to stop)."""
    global _finishing
    _finishing = True


def reset() -> None:
    """Forget a recorded signal (tests that call ``main()`` in one process many times)."""
    global _received, _finishing, _again
    _received, _finishing, _again = None, False, False
