"""Progress bars and the one-line summary, both on stderr (stdout stays free for data).

``progress(total, unit, desc, quiet)`` returns a tqdm bar; ``unit="B"`` counts bytes and shows
them in MB/GB (decimal, like the dataset cards). ``summary_line(text, quiet=...)`` prints the
single line a recipe ends with. ``--quiet`` silences both.
"""
from __future__ import annotations

import sys

from tqdm import tqdm

__all__ = ["progress", "summary_line", "format_bytes", "format_rate"]


class _Bar(tqdm):
    """tqdm without its monitor thread (started by the first bar, even a disabled one, and kept
    for the process's life): fastenc's bars do not need it, and a process with a thread of its
    own cannot fork its ``--workers`` safely (``fastenc.run.forking``). A subclass, so that the
    caller's own tqdm bars keep theirs."""

    monitor_interval = 0


def progress(total: float | None = None, unit: str = "B", desc: str = "", quiet: bool = False, **kwargs) -> tqdm:
    """A tqdm bar on stderr, or a disabled one (same API, no output) when ``quiet``.

    With ``unit="B"`` call ``update(nbytes)``: the bar scales to kB/MB/GB with powers of 1000.
    When stderr is not a terminal (a log file, CI) the bar redraws at most every 10 s, so logs
    stay short, and its last state is kept. ``total`` may be an estimate; ``close()`` then shows the true count.
    """
    is_tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    options = dict(
        total=total,
        unit=unit,
        desc=desc,
        file=sys.stderr,
        disable=quiet,
        dynamic_ncols=True,
        mininterval=0.2 if is_tty else 10.0,
        # on a terminal the bar vanishes and the summary line stays; in a log the last state
        # stays, ended by a newline, so the summary starts on a line of its own
        leave=not is_tty,
    )
    if unit == "B":
        options.update(unit_scale=True, unit_divisor=1000)
    options.update(kwargs)
    return _Bar(**options)


def format_bytes(n: int | float) -> str:
    """``96754310 -> '96.75 MB'`` (decimal units)."""
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def format_rate(nbytes: int | float, seconds: float) -> str:
    """``'186.3 MB/s'``; ``'-'`` when no time was measured."""
    if seconds <= 0:
        return "- MB/s"
    return f"{nbytes / seconds / 1e6:.1f} MB/s"


def summary_line(text: str, *, quiet: bool = False, file=None) -> None:
    """Print ``text`` as one line on stderr (or ``file``), unless ``quiet``."""
    if quiet:
        return
    print(" ".join(text.split("\n")), file=file or sys.stderr, flush=True)
