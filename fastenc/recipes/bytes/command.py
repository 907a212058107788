"""``fastenc bytes``: documents -> raw UTF-8 uint8 shards with 0xFE separators."""
from __future__ import annotations

from fastenc.recipes import options as o

HELP = "documents -> raw UTF-8 uint8 shards with 0xFE separators"


def add_arguments(p) -> None:
    from fastenc.recipes.bytes import DEFAULT_BATCH_BYTES, DEFAULT_SHARD_BYTES, DEFAULT_VAL_EVERY

    p.add_argument("inputs", nargs="+", metavar="INPUT", help="parquet files, directories of them, or globs; read in the order given")
    o.add_out(p, "output directory (created; must be empty unless --overwrite; appears whole when the run succeeds)")
    o.add_column(p, "'text' when present, else 'content'")
    p.add_argument("--shard-bytes", type=o.size_arg, default=DEFAULT_SHARD_BYTES,
                   help="shard size limit; shards end at document boundaries (default: 500MB)")
    p.add_argument("--val-every", type=int, default=DEFAULT_VAL_EVERY,
                   help="document i (0-based) goes to val iff i %% N == N-1 (default: 1000; 0: no val split)")
    o.add_skip_nulls(p)
    o.add_batch_bytes(p, DEFAULT_BATCH_BYTES)
    o.add_threads(p)
    o.add_workers(p)
    o.add_overwrite(p, "a previous output in OUT (files that are not bytes output are kept)")
    o.add_quiet_json(p, "print meta.json as JSON on stdout")


def run(args, command: dict | None = None) -> int:
    from fastenc.recipes.bytes import encode_bytes

    meta = encode_bytes(args.inputs, args.out, column=args.column, shard_bytes=args.shard_bytes, val_every=args.val_every,
                        batch_bytes=args.batch_bytes, skip_nulls=args.skip_nulls, threads=args.threads, workers=args.workers, overwrite=args.overwrite, quiet=args.quiet, command=command)
    if args.json:
        o.print_json(meta)
    return 0
