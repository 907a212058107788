"""The URL recipe, declared for the registry: URL parquet shards -> xxh3-ordered uint16 bins + sidecars."""
from __future__ import annotations

from fastenc.recipes.base import Format, KernelFamily, Recipe
from fastenc.recipes.urls import FORMAT, verify_output
from fastenc.recipes.urls import card, command, decode, steps, warm

FAMILY = KernelFamily("urls", warm.warm, warm.probes, uses_encoder=True, helper_part=("url-side", warm.part_url_side),
                      while_helper=warm.warm_encoder)

RECIPE = Recipe(
    name="urls",
    help=command.HELP,
    add_arguments=command.add_arguments,
    run=command.run,
    format=Format(name="urls", manifest="tokens-sNNNNN.json", ids=(FORMAT,), verify=verify_output,
                  detect=lambda out: any(out.glob("tokens-s*.json")), card=card.render,
                  decode_dir=decode.decode_dir, decode_bin=decode.decode_bin, is_bin=decode.is_bin,
                  families=("urls",), described_as="tokens-s*.json sidecars (urls)"),
    families=lambda args: ("urls",),
    kernel_families=(FAMILY,),
    steps=steps.STEPS,
)
