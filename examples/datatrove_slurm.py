"""A whole dataset on a Slurm cluster with datatrove's SlurmPipelineExecutor.

    python examples/datatrove_slurm.py urls /shared/OUT '/shared/urls/part-*.parquet' --option num_shards=2048 \
        --tasks 512 --partition cpu --cpus 64 --venv /shared/venv

One array job of ``--tasks`` map tasks (each encodes every tasks-th input file on ``--cpus``
threads), then one finalize job that starts only when every map task succeeded (``depends=``,
``afterok``), checks every spill itself and publishes OUT. OUT, the inputs and ``--logs`` must
be on a file system every node sees. Compile the kernels once into a shared cache first
(``NUMBA_CACHE_DIR=/shared/numba-cache fastenc warmup``, the same variable in ``--env``), or each
node compiles them on its first task. Rerunning the script after a failure resubmits only the
tasks without a completion marker; tasks redo only the files whose spill does not verify.
"""
from __future__ import annotations

from _datatrove_args import finalize_step, map_step, parse


def _extra(p) -> None:
    p.add_argument("--partition", required=True)
    p.add_argument("--cpus", type=int, default=16, help="CPUs (and Numba threads) per task")
    p.add_argument("--time", default="04:00:00", help="time limit per task")
    p.add_argument("--venv", default=None, help="virtual environment with fastenc[dist] on the nodes")
    p.add_argument("--env", default=None, help="a shell command run before each task (e.g. export NUMBA_CACHE_DIR=...)")


def main() -> None:
    from datatrove.executor import SlurmPipelineExecutor

    args = parse(__doc__.splitlines()[0], _extra)
    common = dict(partition=args.partition, time=args.time, venv_path=args.venv, env_command=args.env, mem_per_cpu_gb=2)
    mapping = SlurmPipelineExecutor([map_step(args, args.cpus)], tasks=args.tasks, cpus_per_task=args.cpus,
                                    job_name="fastenc-map", logging_dir=f"{args.logs}/map", **common)
    SlurmPipelineExecutor([finalize_step(args)], tasks=1, cpus_per_task=args.cpus, job_name="fastenc-finalize",
                          logging_dir=f"{args.logs}/finalize", depends=mapping, **common).run()


if __name__ == "__main__":
    main()
