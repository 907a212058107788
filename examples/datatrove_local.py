"""A whole dataset on one machine with datatrove's LocalPipelineExecutor.

    python examples/datatrove_local.py bytes OUT 'data/part-*.parquet' --tasks 8 --workers 2

``--tasks`` map tasks (each encodes every tasks-th input file into its spill), ``--workers`` of
them at a time, each on cores/workers Numba threads; then one finalize task checks every spill
and publishes OUT in one step. Kill it and run the same command again: finished tasks are
skipped (datatrove's completion markers) and, inside a task, finished files too (fastenc's own
spill check). The output is byte-identical to ``fastenc RECIPE ... -o OUT``. See docs/scale.md.
"""
from __future__ import annotations

from _datatrove_args import cores, finalize_step, map_step, parse


def main() -> None:
    from datatrove.executor import LocalPipelineExecutor

    args = parse(__doc__.splitlines()[0], lambda p: p.add_argument("--workers", type=int, default=2,
                                                                      help="map tasks running at once"))
    threads = max(1, cores() // args.workers)  # together the tasks never use more threads than cores
    mapping = LocalPipelineExecutor([map_step(args, threads)], tasks=args.tasks, workers=args.workers,
                                    logging_dir=f"{args.logs}/map", start_method="spawn")
    # depends=: the finalize run starts the map run first and waits for all its tasks
    LocalPipelineExecutor([finalize_step(args)], tasks=1, logging_dir=f"{args.logs}/finalize", depends=mapping).run()


if __name__ == "__main__":
    main()
