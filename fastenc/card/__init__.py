"""Dataset cards: ``OUT/README.md`` for every recipe's output, built from the output's files alone.

A card has the shape of the cards in ``../shared/seeds/``: a YAML header, a counts table measured
on the real output (the bins' sizes, the ``.idx.npy`` headers) and checked against the manifest,
the layout, the format, a reading snippet written for this output's own file names, the
verification done and its counters (from the manifest and sidecars), and how it was built (the
command line the CLI recorded in the manifest's ``build``, and the fastenc version).

- ``render(out) -> str``: the card of the output folder ``out`` (one-line ``InputError`` if it
  is not a complete fastenc output); the same files always give the same bytes.
- ``write(out) -> Path``: (re)write ``out/README.md`` atomically (``fastenc card OUT``).

Each recipe renders its own card (its ``Format.card``, in its folder); the pieces they share are in
``card.common``. A run writes the card through ``fastenc.run.card_file`` with the recipe's renderer.
"""
from __future__ import annotations

import os
from pathlib import Path

from fastenc.errors import InputError, OutputError
from fastenc.run.card_file import CARD

__all__ = ["CARD", "render", "write"]


def _renderer(out: Path):
    from fastenc.recipes.registry import detect, recipes

    fmt = detect(out)
    if fmt.card is None:
        carded = [r.name for r in recipes() if r.format.card is not None]
        raise InputError(f"{out} is {fmt.name} output, which has no dataset card (cards are for the "
                         f"{', '.join(carded[:-1])} and {carded[-1]} recipes)")
    return fmt.card


def render(out: str | os.PathLike) -> str:
    """The card of the output folder ``out``, from its files alone."""
    out = Path(out)
    return _renderer(out)(out)


def write(out: str | os.PathLike) -> Path:
    """Rewrite ``out/README.md`` from the output's files, atomically, under the lock of the
    folder's writers (``fastenc.run.card_file.write``)."""
    from fastenc.run import card_file

    out = Path(out)
    render_card = _renderer(out)  # a folder that is no output gets its one-line error before any lock
    try:
        return card_file.write(out, render_card)
    except OSError as exc:
        raise OutputError(f"cannot write {out / CARD}: {exc.strerror or exc}; check the permissions and the free space "
                          f"(`fastenc card {out} --print` shows the card without writing it)") from exc
