"""The URL recipe's distributed steps: a unit is a shard, finished by its own sidecar, so the
finalize step only checks that every shard is there (each shard published itself)."""
from __future__ import annotations

from typing import Callable

from fastenc.recipes.base import Steps
from fastenc.recipes.steps import without
from fastenc.recipes.urls import encode_unit, read_sidecars, shards_missing


def map_rank(inputs, output, options, rank: int, world_size: int, count: Callable[[str], None]) -> None:
    opts = without(options, "quiet", "threads", "shard")
    mine = range(rank, len(inputs), world_size)
    for i in shards_missing(inputs, output, indices=mine, **opts):
        encode_unit(inputs, output, None, opts, True, i, threads=options.get("threads"))
        count("units_mapped")


def finalize(inputs, output, options):
    from fastenc.run.units import missing_units

    opts = without(options, "quiet", "threads", "shard")
    missing = set(shards_missing(inputs, output, **opts))  # every sidecar, and its bin's xxh3
    missing_units(range(len(inputs)), lambda i: i not in missing, output)
    return read_sidecars(inputs, output)  # each shard published itself: nothing to reduce


STEPS = Steps(map_rank=map_rank, finalize=finalize)
