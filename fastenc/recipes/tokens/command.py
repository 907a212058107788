"""``fastenc tokens``: documents -> the files Megatron, datatrove/nanotron or llm.c read, each
document delimited as its model expects."""
from __future__ import annotations

from fastenc.recipes import options as o

HELP = "documents -> trainer token files (Megatron .bin/.idx, datatrove .ds, llm.c shards) with BOS/EOS per model"


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def add_arguments(p) -> None:
    from fastenc.recipes.tokens.delimit import DEFAULT, FORMATS
    from fastenc.recipes.tokens.layout import DEFAULT_BATCH_BYTES

    p.add_argument("inputs", nargs="+", metavar="INPUT", help="parquet files, directories of them, or globs; read in the order given")
    o.add_out(p, "output directory (created; must be empty unless --overwrite; appears whole when the run succeeds)")
    o.add_tokenizer(p, "gpt2", "gpt2 (default), cl100k_base, o200k_base, or the path of a tokenizer.json, tekken.json "
                    "or .tiktoken rank file (with --pattern)")
    o.add_pattern(p, "-t")
    p.add_argument("--format", dest="fmt", required=True, choices=FORMATS,
                   help="megatron: PREFIX.bin/.idx; datatrove: .ds/.ds.index/.ds.metadata; llmc: llm.c's header + ids")
    p.add_argument("--bos", default=DEFAULT, metavar="X",
                   help="token put before each document: a token, an id or none (default: the model's convention)")
    p.add_argument("--eos", default=DEFAULT, metavar="Y",
                   help="token put after each document: a token, an id or none (default: the model's convention)")
    p.add_argument("--shard-tokens", type=o.size_arg, default=None, metavar="N",
                   help="tokens per shard (llmc default: 100M, documents may continue in the next shard; megatron, "
                        "datatrove default: one shard per split, documents whole)")
    p.add_argument("--val-every", type=int, default=None, metavar="K",
                   help="document i (0-based) goes to val iff i %% K == K-1 (llmc default: 1000; others: 0, no val split)")
    p.add_argument("--shuffle", type=_seed, default=None, metavar="SEED",
                   help="write each split's documents in an order drawn from SEED (the same for any --workers)")
    o.add_column(p, "'text' when present, else 'content'")
    o.add_batch_bytes(p, DEFAULT_BATCH_BYTES)
    o.add_threads(p)
    o.add_workers(p)
    o.add_overwrite(p, "a previous output in OUT (files that are not tokens output are kept)")
    o.add_quiet_json(p, "print tokens.json as JSON on stdout")


def run(args, command: dict | None = None) -> int:
    from fastenc.recipes.tokens.build import encode_tokens

    manifest = encode_tokens(args.inputs, args.out, tokenizer=args.tokenizer, fmt=args.fmt, pattern=args.pattern,
                             bos=args.bos, eos=args.eos, shard_tokens=args.shard_tokens, val_every=args.val_every,
                             shuffle=args.shuffle, column=args.column, batch_bytes=args.batch_bytes,
                             threads=args.threads, workers=args.workers, overwrite=args.overwrite, quiet=args.quiet,
                             command=command)
    if args.json:
        o.print_json(manifest)
    return 0
