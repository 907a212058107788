"""The distributed steps of a recipe whose units are spills reduced at the end (gpt2, bytes):
map a rank's share of the units, then check every unit and run the reduce (``fastenc.datatrove``)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from fastenc.recipes.base import Steps


def without(options: dict, *names: str) -> dict:
    """``options`` less ``names`` and ``workers`` (each step runs its units itself)."""
    return {k: v for k, v in options.items() if k not in names and k != "workers"}


def spill_steps(plan: Callable, units_of: Callable, map_unit: Callable, output_spec, encode: Callable) -> Steps:
    """``Steps`` from a recipe's ``plan(inputs, out, **options) -> job``, ``units_of(job) -> int``,
    ``map_unit(job, i)``, its ``OutputSpec`` and its whole run ``encode(inputs, out, **options)``."""

    def job_of(inputs, output, options):
        return plan(inputs, output, **without(options, "quiet", "threads", "overwrite"))

    def map_rank(inputs, output, options, rank: int, world_size: int, count: Callable[[str], None]) -> None:
        from fastenc.run.units import WorkDir

        job = job_of(inputs, output, options)
        work = WorkDir(output, job.request).open(clean=False)
        for i in range(rank, units_of(job), world_size):
            if work.finished(i) is None:
                map_unit(job, i)
                count("units_mapped")
            else:
                count("units_already_done")

    def finalize(inputs, output, options):
        from fastenc.run import finished_same
        from fastenc.run.units import WorkDir, missing_units

        job = job_of(inputs, output, options)
        work = WorkDir(output, job.request)
        if finished_same(Path(output), output_spec, job.request) is None:  # (a finalize run twice finds it done)
            missing_units(range(units_of(job)), lambda i: work.finished(i) is not None, str(work.dir))
        return encode(inputs, output, **{"quiet": True, **options})

    return Steps(map_rank=map_rank, finalize=finalize)
