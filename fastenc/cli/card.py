"""``fastenc card OUT``: (re)write ``OUT/README.md``, the dataset card, from the output's files alone."""
from __future__ import annotations

import sys

HELP = "(re)write OUT/README.md, the dataset card of an output, from its files alone"


def add_arguments(p) -> None:
    p.add_argument("out", metavar="OUT", help="an output directory written by fastenc urls, gpt2 or bytes")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the card on stdout instead of writing OUT/README.md")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if OUT/README.md is missing or differs from the card the files give")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")


def run(args, command: dict | None = None) -> int:  # (command: how it was started; only writers record it)
    from pathlib import Path

    from fastenc import card

    out = Path(args.out)
    if args.print_only or args.check:
        text = card.render(out)
        if args.print_only:
            sys.stdout.write(text)
        if args.check:
            have = (out / card.CARD).read_text(encoding="utf-8") if (out / card.CARD).is_file() else None
            same = have == text
            if not args.quiet:
                print(f"fastenc card: {out / card.CARD} is {'up to date' if same else 'missing' if have is None else 'out of date'}",
                      file=sys.stderr)
            return 0 if same else 1
        return 0
    path = card.write(out)
    if not args.quiet:
        print(f"fastenc card: wrote {path}", file=sys.stderr)
    return 0
