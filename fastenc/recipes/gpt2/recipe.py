"""The gpt2 recipe, declared for the registry: documents -> token bins bucketed by token count."""
from __future__ import annotations

from fastenc.recipes.base import Format, KernelFamily, Recipe
from fastenc.recipes.gpt2 import FORMAT, OUTPUT, SUMMARY_JSON, encode_gpt2, map_unit, plan_gpt2, verify_output
from fastenc.recipes.gpt2 import card, command, decode, warm
from fastenc.recipes.steps import spill_steps

FAMILY = KernelFamily("gpt2", warm.warm, warm.probes, uses_encoder=True, gpt2_loop=True)


def families(args) -> tuple:
    """Any tokenizer but GPT-2's may take the wide loop (ids above 65,535, or a split pattern):
    compiled before the workers start, which must never compile (Numba's thread count is fixed once they run)."""
    return ("gpt2",) + (("wide",) if getattr(args, "tokenizer", "gpt2") not in ("gpt2", None) else ())


RECIPE = Recipe(
    name="gpt2",
    help=command.HELP,
    add_arguments=command.add_arguments,
    run=command.run,
    format=Format(name="gpt2", manifest=SUMMARY_JSON, ids=(FORMAT,), verify=verify_output,
                  detect=lambda out: (out / SUMMARY_JSON).is_file(), card=card.render,
                  decode_dir=decode.decode_dir, decode_bin=decode.decode_bin, is_bin=decode.is_bin,
                  families=("gpt2",), described_as=f"{SUMMARY_JSON} (gpt2)"),
    families=families,
    kernel_families=(FAMILY,),
    steps=spill_steps(plan_gpt2, lambda job: len(job.src.infos), map_unit, OUTPUT, encode_gpt2),
)
