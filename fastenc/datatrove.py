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
    from fastenc.datatrove import BytesMap, Finalize

    opts = dict(shard_bytes=100_000_000)
    LocalPipelineExecutor([BytesMap(files, "out", **opts)], tasks=4, workers=2, logging_dir="logs/map").run()
    LocalPipelineExecutor([Finalize("bytes", files, "out", **opts)], tasks=1, logging_dir="logs/finalize").run()

The options are those of ``encode_bytes`` / ``encode_gpt2`` / ``encode_shards`` (the map and the
finalize step must be given the same ones: the request is checked). Each task runs its units on
``threads`` Numba threads (default: every core the task sees; give datatrove's ``cpus_per_task``
and ``threads`` the same value on shared nodes). This module imports datatrove: install the
``[dist]`` extra. ``import fastenc`` never imports it.
"""
from __future__ import annotations

import os
from typing import Sequence

from datatrove.pipeline.base import PipelineStep

__all__ = ["BytesMap", "Gpt2Map", "UrlsMap", "Finalize", "RECIPES"]

RECIPES = ("bytes", "gpt2", "urls")


class _Units:
    """One recipe's run as units: how many, run one, is one done, and the whole run (finalize)."""

    def __init__(self, recipe: str, inputs: Sequence, output: str, options: dict):
        if recipe not in RECIPES:
            raise ValueError(f"unknown recipe {recipe!r}: choose from {', '.join(RECIPES)}")
        from fastenc.arrow_io import as_input_list, resolve_inputs

        # folders and globs resolved once, here, so that every rank splits the same list of files
        self.inputs = [os.fspath(p) for p in resolve_inputs(as_input_list(inputs))]
        self.recipe, self.output, self.options = recipe, os.fspath(output), options

    def _job(self):
        if self.recipe == "bytes":
            from fastenc.recipes.bytes import map_unit, plan_bytes

            job = plan_bytes(self.inputs, self.output, **_without(self.options, "quiet", "threads", "overwrite"))
            return job, len(job.infos), map_unit
        from fastenc.recipes.gpt2 import map_unit, plan_gpt2

        job = plan_gpt2(self.inputs, self.output, **_without(self.options, "quiet", "threads", "overwrite"))
        return job, len(job.src.infos), map_unit

    def run_ranks(self, rank: int, world_size: int, step: PipelineStep) -> None:
        """Map the units of this rank whose output does not verify yet."""
        if self.recipe == "urls":
            from fastenc.recipes.urls import encode_unit, shards_missing

            opts = _without(self.options, "quiet", "threads", "shard")
            mine = range(rank, len(self.inputs), world_size)
            for i in shards_missing(self.inputs, self.output, indices=mine, **opts):
                encode_unit(self.inputs, self.output, None, opts, True, i, threads=self.options.get("threads"))
                step.stat_update("units_mapped")
            return
        from fastenc.run.units import WorkDir

        job, n, map_unit = self._job()
        work = WorkDir(self.output, job.request).open(clean=False)
        for i in range(rank, n, world_size):
            if work.finished(i) is None:
                map_unit(job, i)
                step.stat_update("units_mapped")
            else:
                step.stat_update("units_already_done")

    def finalize(self) -> object:
        """Check every unit, then reduce and publish (nothing is re-encoded)."""
        from fastenc.run.units import WorkDir, missing_units

        if self.recipe == "urls":
            from fastenc.recipes.urls import read_sidecars, shards_missing

            opts = _without(self.options, "quiet", "threads", "shard")
            missing = set(shards_missing(self.inputs, self.output, **opts))  # every sidecar, and its bin's xxh3
            missing_units(range(len(self.inputs)), lambda i: i not in missing, self.output)
            return read_sidecars(self.inputs, self.output)  # each shard published itself: nothing to reduce
        job, n, _ = self._job()
        work = WorkDir(self.output, job.request)
        if not _published(self.recipe, self.inputs, self.output, self.options):
            missing_units(range(n), lambda i: work.finished(i) is not None, str(work.dir))
        return _encode(self.recipe, self.inputs, self.output, self.options)


def _published(recipe: str, inputs, output: str, options: dict) -> bool:
    """Whether ``output`` already holds this very output (a finalize step run twice)."""
    from fastenc.run import finished_same
    from pathlib import Path

    if recipe == "bytes":
        from fastenc.recipes.bytes import OUTPUT, plan_bytes as plan
    else:
        from fastenc.recipes.gpt2 import OUTPUT, plan_gpt2 as plan
    job = plan(inputs, output, **_without(options, "quiet", "threads", "overwrite"))
    return finished_same(Path(output), OUTPUT, job.request) is not None


def _encode(recipe: str, inputs, output: str, options: dict):
    opts = {"quiet": True, **options}
    if recipe == "bytes":
        from fastenc.recipes.bytes import encode_bytes

        return encode_bytes(inputs, output, **opts)
    from fastenc.recipes.gpt2 import encode_gpt2

    return encode_gpt2(inputs, output, **opts)


def _without(options: dict, *names: str) -> dict:
    return {k: v for k, v in options.items() if k not in names and k != "workers"}


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
