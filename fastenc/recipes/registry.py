"""The registry of recipes: the CLI, ``fastenc verify``, ``decode``, ``card``, ``warmup`` and
``fastenc.datatrove`` read it; none of them names a recipe.

Adding a recipe is its folder (``fastenc/recipes/<name>/``, with ``recipe.py`` declaring ``RECIPE``)
and one line in ``DECLARED`` (docs/recipes.md).
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path

from fastenc.errors import InputError

# One line per recipe: the module that declares it. The CLI lists the commands in this order.
DECLARED = (
    "fastenc.recipes.urls.recipe",
    "fastenc.recipes.gpt2.recipe",
    "fastenc.recipes.bytes.recipe",
    "fastenc.recipes.ids.recipe",
    "fastenc.recipes.tokens.recipe",
)


@lru_cache(maxsize=None)
def recipes() -> tuple:
    """Every registered ``Recipe`` (imported on first use: ``import fastenc.verify`` stays light)."""
    return tuple(importlib.import_module(module).RECIPE for module in DECLARED)


def commands() -> dict:
    """Recipe command name -> its ``Recipe`` (recipes without a command of their own left out)."""
    return {r.name: r for r in recipes() if r.run is not None}


def recipe(name: str):
    """The recipe called ``name`` (``ValueError`` naming the choices)."""
    for r in recipes():
        if r.name == name:
            return r
    raise ValueError(f"unknown recipe {name!r}: choose from {', '.join(r.name for r in recipes())}")


def formats() -> tuple:
    return tuple(r.format for r in recipes())


def format_named(name: str):
    """The ``Format`` whose name or manifest ``"format"`` id is ``name``, or None."""
    return next((f for f in formats() if name == f.name or name in f.ids), None)


def detect(out_dir: str | Path):
    """The ``Format`` of the output folder ``out_dir``, or a one-line ``InputError``: formats whose
    manifest names them first, then the others in registry order."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise InputError(f"{out_dir} is not a directory: pass the output directory of a fastenc recipe")
    ordered = sorted(formats(), key=lambda f: not f.named_in_manifest)
    for fmt in ordered:
        if fmt.found_in(out_dir):
            return fmt
    for fmt in ordered:  # a manifest of a known name whose "format" no recipe writes
        if fmt.named_in_manifest and (out_dir / fmt.manifest).is_file():
            raise InputError(f"{out_dir / fmt.manifest} is not a fastenc {fmt.name.removeprefix('fastenc-')} "
                             f"{fmt.manifest} (no \"format\": \"{fmt.ids[0]}\"): was it written by fastenc?")
    expected = ", ".join(f.described_as for f in formats() if f.described_as)
    raise InputError(f"{out_dir} does not look like fastenc output: expected {expected}. Pass the directory given "
                     "to -o, and check that its run finished")


def kernel_families() -> dict:
    """Family name -> ``KernelFamily``, of every recipe, in registry order."""
    return {f.name: f for r in recipes() for f in r.kernel_families}
