"""``fastenc gpt2``: documents -> token bins bucketed by token count (uint16 ids, or uint32 where
the vocabulary needs it, e.g. o200k_base)."""
from __future__ import annotations

from fastenc.recipes import options as o

HELP = ("documents -> token bins bucketed by token length (GPT-2 by default; uint16 ids, "
        "uint32 where the vocabulary needs it, e.g. o200k_base)")


def add_arguments(p) -> None:
    from fastenc.recipes.gpt2 import DEFAULT_BATCH_BYTES, DEFAULT_COUNT_COLUMN, DEFAULT_DECODE_EVERY, DEFAULT_PART_TOKENS

    p.add_argument("inputs", nargs="+", metavar="INPUT", help="parquet files, directories of them, or globs; read in the order given")
    o.add_out(p, "output directory (created; must be empty unless --overwrite; appears whole when the run succeeds)")
    o.add_column(p, "'content' when present, else 'text'")
    p.add_argument("--buckets", default=None,
                   help="buckets to write, e.g. b1,b2,b3 (default: all of b0..b6); the others are counted and dropped")
    p.add_argument("--part-tokens", type=o.size_arg, default=DEFAULT_PART_TOKENS,
                   help="part size limit in tokens; parts end at document boundaries (default: 268435456 = 2**28, 512 MiB of bin)")
    o.add_tokenizer(p, "gpt2", "gpt2 (default), cl100k_base, o200k_base, or the path of a tokenizer.json or .tiktoken file; "
                    "ids are uint16 when they all fit, else uint32 (recorded in every sidecar); --encoding is the same flag",
                    aliases=("--encoding",))
    o.add_pattern(p, "-t")
    p.add_argument("--count-column", default=DEFAULT_COUNT_COLUMN,
                   help=f"column of expected token counts, compared for every document when present (default: {DEFAULT_COUNT_COLUMN})")
    p.add_argument("--no-count-check", action="store_true", help="do not compare token counts with a count column")
    p.add_argument("--decode-every", type=o.positive_int, default=DEFAULT_DECODE_EVERY,
                   help="decode every N-th document of each bucket (counted within each input file) back from disk and compare "
                        f"it with the source (default: {DEFAULT_DECODE_EVERY}; 1: every document)")
    o.add_skip_nulls(p)
    o.add_batch_bytes(p, DEFAULT_BATCH_BYTES)
    o.add_threads(p)
    o.add_workers(p)
    o.add_overwrite(p, "a previous output in OUT (files that are not gpt2 output are kept)")
    o.add_quiet_json(p, "print summary.json as JSON on stdout")


def run(args, command: dict | None = None) -> int:
    from fastenc.recipes.gpt2 import encode_gpt2

    summary = encode_gpt2(args.inputs, args.out, column=args.column, buckets=args.buckets, part_tokens=args.part_tokens,
                          count_column=None if args.no_count_check else args.count_column, decode_every=args.decode_every,
                          batch_bytes=args.batch_bytes, skip_nulls=args.skip_nulls, threads=args.threads, workers=args.workers, overwrite=args.overwrite, quiet=args.quiet,
                          encoding=args.tokenizer, pattern=args.pattern, command=command)
    if args.json:
        o.print_json(summary)
    return 0
