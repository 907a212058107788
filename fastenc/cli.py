"""Command line: ``python -m fastenc`` / ``fastenc``.

Subcommands are provided by small modules; each exposes ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status). A bare ``*.parquet`` path (no subcommand) means
``urls``, so ``python -m fastenc part-00042.parquet -o OUT`` runs the URL recipe.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Modules are imported lazily so that ``--help`` and
# the lightweight commands do not pay for importing numba.
SUBCOMMANDS = {
    "urls": ("fastenc.recipes.urls", "URL parquet shard -> xxh3-ordered uint16 token bin + sidecar"),
    "gpt2": ("fastenc.recipes.gpt2", "documents -> GPT-2 uint16 bins bucketed by token length"),
    "bytes": ("fastenc.recipes.bytes", "documents -> raw UTF-8 uint8 shards with 0xFE separators"),
    "verify": ("fastenc.verify", "re-check a finished output directory from its files alone"),
    "decode": ("fastenc.decode_cli", "print the texts stored in a token bin"),
    "encode": ("fastenc.encode_cli", "encode a text file (or stdin) and print or save the ids"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser. Only ``command``'s module is imported (to add its arguments): the
    others are listed by name, so one missing optional dependency never breaks the rest."""
    from fastenc import __version__

    parser = argparse.ArgumentParser(
        prog="fastenc",
        description="Exact Numba encoders: parquet shards of web data -> flat token bins.",
        epilog="A bare path ending in .parquet runs the 'urls' recipe: fastenc part-00042.parquet -o OUT",
    )
    parser.add_argument("--version", action="version", version=f"fastenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module_name).add_arguments(p)
        p.set_defaults(_module=module_name)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-") and argv[0].endswith(".parquet"):
        argv.insert(0, "urls")
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help(sys.stderr)
        return 2
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print("fastenc: interrupted; nothing was published (a rerun starts over)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `fastenc decode ... | head`: the reader left, not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except FastencError as exc:
        print(f"fastenc: error: {exc}", file=sys.stderr)
        return exc.exit_code


from fastenc.errors import FastencError  # noqa: E402  (kept light: no numba)
