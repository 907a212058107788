"""The bytes recipe, declared for the registry: documents -> raw UTF-8 uint8 shards."""
from __future__ import annotations

from fastenc.recipes.base import Format, KernelFamily, Recipe
from fastenc.recipes.bytes import FORMAT, META_NAME, OUTPUT, encode_bytes, map_unit, plan_bytes, verify_output
from fastenc.recipes.bytes import card, command, decode, warm
from fastenc.recipes.steps import spill_steps

FAMILY = KernelFamily("bytes", warm.warm, warm.probes)

RECIPE = Recipe(
    name="bytes",
    help=command.HELP,
    add_arguments=command.add_arguments,
    run=command.run,
    format=Format(name=FORMAT, manifest=META_NAME, ids=(FORMAT,), verify=verify_output, named_in_manifest=True,
                  card=card.render, decode_dir=decode.decode_dir, decode_bin=decode.decode_bin, is_bin=decode.is_bin,
                  families=("bytes",), described_as=f"{META_NAME} (bytes)"),
    families=lambda args: ("bytes",),
    kernel_families=(FAMILY,),
    steps=spill_steps(plan_bytes, lambda job: len(job.infos), map_unit, OUTPUT, encode_bytes),
)
