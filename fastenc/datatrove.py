"""fastenc's recipes as datatrove pipeline steps: one map step per recipe, one finalize step.

Run the map step with ``tasks=T`` under any datatrove executor (``LocalPipelineExecutor``,
``SlurmPipelineExecutor``, ``RayPipelineExecutor``): task ``rank`` of ``world_size`` encodes the
units (input files) ``rank, rank + world_size, ...`` into their spills (docs/scale.md), skipping
units whose spill already verifies. Then run the finalize step with ``tasks=1`` (after the map
job: ``depends=`` on Local and Slurm, or simply after it): it checks that **every** unit has a
verified spill -- datatrove's completion markers decide what to schedule, never what is correct
(a Ray task that fails can still exit 0) -- and runs the reduce: the output is published in one
step, byte-identical to ``fastenc bytes/gpt2/urls`` on one process::

    from datatrove.executor import LocalPipelineExecutor
    from fastenc.datatrove import Finalize, Map

    opts = dict(fmt="megatron", tokenizer="o200k_base")
    LocalPipelineExecutor([Map("tokens", files, "out", **opts)], tasks=4, workers=2, logging_dir="logs/map").run()
    LocalPipelineExecutor([Finalize("tokens", files, "out", **opts)], tasks=1, logging_dir="logs/finalize").run()

``Map(recipe, ...)`` serves every registered recipe; ``BytesMap``, ``Gpt2Map`` and ``UrlsMap`` name three of them.
The options are those of the recipe's writer (``encode_tokens``, ``encode_bytes``, ... : the map and the
finalize step must be given the same ones: the request is checked). Each task runs its units on
``threads`` Numba threads (default: every core the task sees; give datatrove's ``cpus_per_task``
and ``threads`` the same value on shared nodes). This module imports datatrove: install the
``[dist]`` extra. ``import fastenc`` never imports it.
"""
from __future__ import annotations

import os
from typing import Sequence

from datatrove.pipeline.base import PipelineStep

__all__ = ["Map", "BytesMap", "Gpt2Map", "UrlsMap", "Finalize", "recipe_names"]


def recipe_names() -> tuple:
    """The recipes that have datatrove steps (every registered one with ``Recipe.steps``)."""
    from fastenc.recipes.registry import recipes

    return tuple(r.name for r in recipes() if r.steps is not None)


class _Units:
    """One recipe's run as units: run a rank's share, and the whole run (finalize): its ``Recipe.steps``."""

    def __init__(self, recipe: str, inputs: Sequence, output: str, options: dict):
        from fastenc.arrow_io import as_input_list, resolve_inputs
        from fastenc.recipes import registry

        if recipe not in recipe_names():
            raise ValueError(f"unknown recipe {recipe!r}: choose from {', '.join(recipe_names())}")
        self.steps = registry.recipe(recipe).steps
        # folders and globs resolved once, here, so that every rank splits the same list of files
        self.inputs = [os.fspath(p) for p in resolve_inputs(as_input_list(inputs))]
        self.recipe, self.output, self.options = recipe, os.fspath(output), options

    def run_ranks(self, rank: int, world_size: int, step: PipelineStep) -> None:
        """Map the units of this rank whose output does not verify yet."""
        self.steps.map_rank(self.inputs, self.output, self.options, rank, world_size, step.stat_update)

    def finalize(self) -> object:
        """Check every unit, then reduce and publish (nothing is re-encoded)."""
        return self.steps.finalize(self.inputs, self.output, self.options)


class _MapStep(PipelineStep):
    """A datatrove step that maps this task's share of one recipe's units (see the module docstring)."""

    type = "fastenc"
    recipe = ""

    def __init__(self, inputs: Sequence[str | os.PathLike], output: str | os.PathLike, **options):
        super().__init__()
        self.units = _Units(self.recipe, inputs, output, options)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        from fastenc.run.lifecycle import thread_count

        with thread_count(self.units.options.get("threads")):
            self.units.run_ranks(rank, world_size, self)
        if data is not None:  # a step in a longer pipeline passes on what it was given
            yield from data


class Map(_MapStep):
    """Map step of any registered recipe, named by its first argument (as ``Finalize`` is)."""

    name = "fastenc: map"

    def __init__(self, recipe: str, inputs: Sequence[str | os.PathLike], output: str | os.PathLike, **options):
        self.recipe = recipe
        super().__init__(inputs, output, **options)


class BytesMap(_MapStep):
    """Map step of ``fastenc bytes`` (options of ``encode_bytes``)."""

    name = "fastenc bytes: map"
    recipe = "bytes"


class Gpt2Map(_MapStep):
    """Map step of ``fastenc gpt2`` (options of ``encode_gpt2``)."""

    name = "fastenc gpt2: map"
    recipe = "gpt2"


class UrlsMap(_MapStep):
    """Map step of ``fastenc urls``: a unit is a shard, finished by its own sidecar (options of ``encode_shards``)."""

    name = "fastenc urls: map"
    recipe = "urls"


class Finalize(PipelineStep):
    """The last step (run it with ``tasks=1``): every unit verified, then the reduce and the publication."""

    name = "fastenc: finalize"
    type = "fastenc"

    def __init__(self, recipe: str, inputs: Sequence[str | os.PathLike], output: str | os.PathLike, **options):
        super().__init__()
        self.units = _Units(recipe, inputs, output, options)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        if rank == 0:  # one task publishes; any others have nothing to do
            self.units.finalize()
            self.stat_update("published")
        if data is not None:
            yield from data
