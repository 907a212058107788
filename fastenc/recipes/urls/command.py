"""``fastenc urls``: URL parquet shard(s) -> xxh3-ordered uint16 token bin + sidecar each."""
from __future__ import annotations

from fastenc.recipes import options as o

HELP = "URL parquet shard(s) -> xxh3-ordered uint16 token bin + sidecar"


def add_arguments(p) -> None:
    from fastenc.recipes.urls import DEFAULT_CHUNK_URLS, DEFAULT_NUM_SHARDS

    p.add_argument("inputs", nargs="+", metavar="PARQUET", help="URL shard(s) such as part-00042.parquet (files, directories or globs)")
    o.add_out(p, "output directory (created; may hold other shards' outputs and one shared tokenizer/)")
    p.add_argument("--column", default="url", metavar="NAME", help="URL column (default: url)")
    p.add_argument("--shard", type=int, default=None, help="shard index (default: the NNNNN of part-NNNNN in the file name)")
    p.add_argument("--num-shards", type=o.positive_int, default=DEFAULT_NUM_SHARDS, help=f"shards in the corpus (default: {DEFAULT_NUM_SHARDS})")
    p.add_argument("--no-shard-check", dest="shard_check", action="store_false",
                   help="do not require (xxh3_64(url) * num_shards) >> 64 == shard (for inputs that are not shards; "
                        "a file not named part-NNNNN is then written as shard 0 unless --shard says otherwise)")
    o.add_skip_nulls(p, "URLs")
    o.add_tokenizer(p, "urls", "'urls' (built in) or a URL tokenizer.json / its folder (default: urls)")
    p.add_argument("--chunk-urls", type=o.positive_int, default=DEFAULT_CHUNK_URLS,
                   help="URLs gathered and written per chunk (memory; the output does not depend on it)")
    o.add_threads(p)
    o.add_workers(p, "shards")
    o.add_overwrite(p, "an earlier output of the same shard in OUT")
    o.add_quiet_json(p, "print the sidecar(s) as JSON on stdout")


def run(args, command: dict | None = None) -> int:
    from fastenc.recipes.urls import encode_shards

    metas = encode_shards(args.inputs, args.out, workers=args.workers, threads=args.threads, quiet=args.quiet, shard=args.shard,
                          column=args.column, num_shards=args.num_shards, shard_check=args.shard_check,
                          skip_nulls=args.skip_nulls, tokenizer=args.tokenizer, chunk_urls=args.chunk_urls,
                          overwrite=args.overwrite, command=command)
    if args.json:
        o.print_json(metas[0] if len(metas) == 1 else metas)
    return 0
