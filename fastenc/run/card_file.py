"""An output's dataset card file, ``OUT/README.md``: rendered by a callable the recipe gives
(``OutputSpec.card``), written atomically under the lock of the folder's writers."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable

from fastenc.run import staging

CARD = "README.md"


def write(out: Path, render: Callable[[Path], str]) -> Path:
    """Rewrite ``out/README.md`` with ``render(out)``: written to a temporary name, fsynced and
    renamed (a reader never sees half a card). The render and the rename hold the lock of the
    folder's writers (``staging.out_lock``, beside the folder; every format, one rule), so that
    two URL shards finishing at once cannot leave a card that misses one of them: the last writer
    renders after every commit before it."""
    with staging.out_lock(out):
        text = render(out)
        with contextlib.suppress(OSError):
            if (out / CARD).read_text(encoding="utf-8") == text:
                return out / CARD  # already this card: nothing to rewrite
        tmp = out / staging.temp_name(CARD)
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out / CARD)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        _fsync_dir(out)
    return out / CARD


def _fsync_dir(directory: Path) -> None:
    """fsync the folder after the rename. Not through ``fastenc.run.faults``: this rewrite of a
    shared URL folder's card (``fastenc card``, or after a sidecar-last commit) is not one of a
    run's commit steps."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # some file systems cannot fsync a folder
            os.fsync(fd)
    finally:
        os.close(fd)
