"""``fastenc verify OUT``: re-check a finished output directory from its files alone."""
from __future__ import annotations

import sys

from fastenc.recipes import options as o

HELP = "re-check a finished output directory from its files alone (and against its source)"


def add_arguments(p) -> None:
    p.add_argument("out", metavar="OUT", help="an output directory written by a fastenc recipe")
    p.add_argument("--source", action="append", metavar="INPUT",
                   help="also re-read this input (a file, directory or glob; repeat the flag for several, in order) "
                        "and compare the output with it")
    o.add_threads(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing; the exit status tells (0 ok, 1 failed)")
    p.add_argument("--json", action="store_true", help="print the full report as JSON on stdout")


def run(args, command: dict | None = None) -> int:  # (command: how it was started; only writers record it)
    from fastenc.run.lifecycle import thread_count
    from fastenc.verify import verify_dir

    with thread_count(args.threads):
        report = verify_dir(args.out, args.source)
    if args.json:
        o.print_json(report)
    if not args.quiet:
        _print_report(args.out, report)
    return 0 if report["ok"] else 1


def _print_report(out, report: dict) -> None:
    if report["ok"]:
        counts = ", ".join(f"{k} {v:,}" for k, v in report.items() if isinstance(v, int) and not isinstance(v, bool))
        src = f"; compared with the source: {report.get('source_compared', 'yes')}" if report.get("checked_source") else ""
        print(f"fastenc verify: OK: {out} is consistent {report['format']} output ({counts}){src}", file=sys.stderr)
    else:
        print(f"fastenc verify: FAILED: {out} ({report['format']}): {len(report['problems'])} problem(s)", file=sys.stderr)
        for problem in report["problems"]:
            print(f"  - {problem}", file=sys.stderr)
