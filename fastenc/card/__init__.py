"""Dataset cards: ``OUT/README.md`` for every recipe's output, built from the output's files alone.

A card has the shape of the cards in ``../shared/seeds/``: a YAML header, a counts table measured
on the real output (the bins' sizes, the ``.idx.npy`` headers) and checked against the manifest,
the layout, the format, a reading snippet written for this output's own file names, the
verification done and its counters (from the manifest and sidecars), and how it was built (the
command line the CLI recorded in the manifest's ``build``, and the fastenc version).

- ``render(out) -> str``: the card of the output folder ``out`` (one-line ``InputError`` if it
  is not a complete fastenc output); the same files always give the same bytes.
- ``write(out) -> Path``: (re)write ``out/README.md`` atomically (``fastenc card OUT``).
- ``write_staged(stage, fmt)``: what a run calls on its staging folder just before the commit.

One module per recipe (``card.bytes``, ``card.gpt2``, ``card.urls``), shared pieces in ``card.common`` (not ``card.render``: a submodule of that name would shadow the function).
"""
from __future__ import annotations

import contextlib
import importlib
import os
from pathlib import Path

from fastenc.errors import InputError, OutputError

__all__ = ["CARD", "render", "write", "write_staged", "MODULES"]

CARD = "README.md"

#: ``fastenc.verify.detect_format``'s names (and manifests' ``"format"``) -> the card module
MODULES = {
    "fastenc-bytes": "fastenc.card.bytes",
    "gpt2": "fastenc.card.gpt2",
    "fastenc-gpt2": "fastenc.card.gpt2",
    "urls": "fastenc.card.urls",
    "fastenc-urls": "fastenc.card.urls",
}


def _module(fmt: str, out: Path):
    if fmt not in MODULES:
        raise InputError(f"{out} is {fmt} output, which has no dataset card (cards are for the urls, gpt2 and bytes recipes)")
    return importlib.import_module(MODULES[fmt])


def render(out: str | os.PathLike) -> str:
    """The card of the output folder ``out``, from its files alone."""
    from fastenc.verify import detect_format

    out = Path(out)
    return _module(detect_format(out), out).render(out)


def write(out: str | os.PathLike) -> Path:
    """Rewrite ``out/README.md`` from the output's files: written to a temporary name, fsynced and
    renamed (a reader never sees half a card). The render and the rename hold the lock of the
    folder's writers (``staging.out_lock``, beside the folder; every format, one rule), so that
    two URL shards finishing at once cannot leave a card that misses one of them: the last writer
    renders after every commit before it."""
    from fastenc.verify import detect_format

    out = Path(out)
    detect_format(out)  # a folder that is no output gets its one-line error before any lock
    try:
        return _write_locked(out)
    except OSError as exc:
        raise OutputError(f"cannot write {out / CARD}: {exc.strerror or exc}; check the permissions and the free space "
                          f"(`fastenc card {out} --print` shows the card without writing it)") from exc


def _write_locked(out: Path) -> Path:
    from fastenc.run import staging

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


def write_staged(stage, fmt: str) -> None:
    """Write the card into a run's staging folder (``stage``, a ``fastenc.run.staging.Stage``
    holding the whole output and its manifest), through the stage like every file of the output."""
    if fmt in MODULES:
        stage.write_text(CARD, importlib.import_module(MODULES[fmt]).render(stage.dir))
