"""The command line shared by the datatrove example scripts (not an example itself)."""
from __future__ import annotations

import argparse
import glob
import os


def parse(description: str, extra=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("recipe", choices=["bytes", "gpt2", "urls"])
    p.add_argument("out", help="the output folder (its spills go to OUT.fastenc-work beside it)")
    p.add_argument("inputs", nargs="+", help="parquet files or globs, in dataset order")
    p.add_argument("--tasks", type=int, default=4, help="map tasks (each encodes every tasks-th input file)")
    p.add_argument("--logs", default="datatrove-logs", help="datatrove's logging folder (completion markers, stats)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the recipe's Python function, e.g. shard_bytes=3000 or num_shards=2048 (repeatable)")
    if extra:
        extra(p)
    args = p.parse_args()
    args.files = [f for pattern in args.inputs for f in (sorted(glob.glob(pattern)) or [pattern])]
    args.options = dict(_option(text) for text in args.option)
    return args


def _option(text: str) -> tuple:
    key, _, value = text.partition("=")
    try:
        return key.replace("-", "_"), int(value)
    except ValueError:
        return key.replace("-", "_"), {"true": True, "false": False}.get(value.lower(), value)


def map_step(args, threads: int):
    """The recipe's map step: the same options as the finalize step, plus this task's threads."""
    from fastenc.datatrove import BytesMap, Gpt2Map, UrlsMap

    step = {"bytes": BytesMap, "gpt2": Gpt2Map, "urls": UrlsMap}[args.recipe]
    return step(args.files, args.out, threads=threads, **args.options)


def finalize_step(args):
    from fastenc.datatrove import Finalize

    return Finalize(args.recipe, args.files, args.out, **args.options)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
