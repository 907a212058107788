"""The tokens recipe, declared for the registry: documents -> Megatron / datatrove / llm.c token files."""
from __future__ import annotations

from fastenc.recipes.base import Format, KernelFamily, Recipe
from fastenc.recipes.steps import spill_steps
from fastenc.recipes.tokens import build, card, command, decode, layout, verify, warm

FAMILY = KernelFamily("tokens", warm.warm, warm.probes, uses_encoder=True, gpt2_loop=True)


def _plan(inputs, output, **options):
    return build.plan_tokens(inputs, output, **options)


RECIPE = Recipe(
    name="tokens",
    help=command.HELP,
    add_arguments=command.add_arguments,
    run=command.run,
    format=Format(name=layout.FORMAT, manifest=layout.MANIFEST, ids=(layout.FORMAT,), verify=verify.verify_output,
                  named_in_manifest=True, card=card.render, decode_dir=decode.decode_dir, decode_bin=decode.decode_bin,
                  is_bin=decode.is_bin, families=("tokens",), described_as=f"{layout.MANIFEST} (tokens)"),
    families=lambda args: ("tokens",),
    kernel_families=(FAMILY,),
    steps=spill_steps(_plan, lambda job: len(job.infos), build.map_unit, build.OUTPUT, build.encode_tokens),
)
