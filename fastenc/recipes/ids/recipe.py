"""The output of ``fastenc encode -o DIR``, declared for the registry: a format without a recipe
command of its own (``fastenc encode`` writes it), read by verify and decode."""
from __future__ import annotations

from fastenc.recipes.base import Format, Recipe
from fastenc.recipes.ids import FORMAT, META, verify_output
from fastenc.recipes.ids import decode

RECIPE = Recipe(
    name="ids",
    format=Format(name=FORMAT, manifest=META, ids=(FORMAT,), verify=verify_output, named_in_manifest=True,
                  decode_dir=decode.decode_dir, decode_bin=decode.decode_bin, is_bin=decode.is_bin),
)
