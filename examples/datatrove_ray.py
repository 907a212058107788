"""A whole dataset on a Ray cluster with datatrove's RayPipelineExecutor.

    python examples/datatrove_ray.py gpt2 /shared/OUT '/shared/docs/*.parquet' --tasks 64 --cpus 8
    python examples/datatrove_ray.py bytes OUT 'data/*.parquet' --local 2     # a local Ray of 2 CPUs

The map tasks run on the cluster (``ray.init(address="auto")``, or a local Ray with
``--local N``); then the finalize step runs here, after them. It does not rely on Ray's report:
a Ray task that fails can still let the run end with exit status 0 and only a warning, so the
finalize step checks every unit's spill itself and stops with one line naming the missing
units (rerun the script: finished units are kept). OUT and the inputs must be on a shared file
system. Needs ``pip install 'fastenc[dist]'`` (datatrove and ray).
"""
from __future__ import annotations

from _datatrove_args import finalize_step, map_step, parse


def _extra(p) -> None:
    p.add_argument("--cpus", type=int, default=4, help="CPUs (and Numba threads) per map task")
    p.add_argument("--local", type=int, default=None, metavar="N", help="start a local Ray with N CPUs instead of joining a cluster")


def main() -> None:
    import ray
    from datatrove.executor import RayPipelineExecutor

    args = parse(__doc__.splitlines()[0], _extra)
    ray.init(num_cpus=args.local) if args.local else ray.init(address="auto")
    cpus = min(args.cpus, args.local) if args.local else args.cpus
    RayPipelineExecutor([map_step(args, cpus)], tasks=args.tasks, cpus_per_task=cpus, logging_dir=f"{args.logs}/map").run()
    finalize_step(args).units.finalize()  # here, after every map task: checks every unit, then publishes


if __name__ == "__main__":
    main()
