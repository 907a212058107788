"""Command line: ``python -m fastenc`` / ``fastenc``.

The recipes' commands come from the registry (``fastenc.recipes.registry``: each ``Recipe`` has
``add_arguments(parser)`` and ``run(args, command) -> int``); the other commands are the modules
in ``TOOLS``, with the same two functions. Shared flags: ``fastenc.recipes.options``. A bare
``*.parquet`` path (no subcommand) means the first recipe, ``urls``, so ``python -m fastenc
part-00042.parquet -o OUT`` runs the URL recipe.
"""
from __future__ import annotations

import importlib
import sys

# The commands that are no recipe: name -> (module, one-line help). Modules are imported lazily
# so that ``--help`` and the lightweight commands do not pay for importing numba.
TOOLS = {
    "verify": ("fastenc.cli.verify", "re-check a finished output directory from its files alone (and against its source)"),
    "decode": ("fastenc.cli.decode", "print the documents (or URLs) stored in any fastenc output, a directory or one bin"),
    "card": ("fastenc.cli.card", "(re)write OUT/README.md, the dataset card of an output, from its files alone"),
    "encode": ("fastenc.cli.encode", "encode a text file (or stdin) and print the ids, or write them to -o DIR"),
    "warmup": ("fastenc.warmup", "compile every kernel into Numba's cache now (images, CI, cluster workers)"),
}

EPILOG = """\
A bare path ending in .parquet runs the 'urls' recipe: fastenc part-00042.parquet -o OUT

Each command's own flags: fastenc COMMAND --help.
Exit status: 0 ok; 1 bad input or environment (named in one line), or a failed check;
2 usage error; 130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM (nothing partial is
published: every output appears in one step; a rerun of the same command resumes).
"""


def subcommands(command: str | None = None) -> dict:
    """Every command: name -> (what runs it: a ``Recipe``, or a module name of ``TOOLS``; one-line help).
    For a tool's ``command``, the tools only: it then imports no recipe (numpy, pyarrow)."""
    if command in TOOLS:
        return dict(TOOLS)
    from fastenc.recipes.registry import commands

    return {**{name: (r, r.help) for name, r in commands().items()}, **TOOLS}


def _runner(target):
    """What has ``add_arguments`` and ``run``: the recipe itself, or the tool's module (imported now)."""
    return importlib.import_module(target) if isinstance(target, str) else target


def build_parser(command: str | None = None):
    """The CLI parser. Only ``command``'s tool module is imported (to add its arguments): the
    others are listed by name, so one missing optional dependency never breaks the rest."""
    import argparse

    from fastenc import __version__

    parser = argparse.ArgumentParser(
        prog="fastenc",
        description="Exact Numba encoders: parquet shards of web data -> flat token bins.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fastenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (target, help_text) in subcommands(command).items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            _runner(target).add_arguments(p)
        p.set_defaults(_runs=target)
    return parser


def main(argv: list[str] | None = None) -> int:
    import os

    argv = list(sys.argv[1:] if argv is None else argv)
    typed = list(argv)  # as the user typed it (recorded for the dataset card)
    # everything inside: a signal during the imports below (numba, pyarrow) is one line too
    try:
        names = subcommands(argv[0] if argv else None)
        if argv and argv[0] not in names and not argv[0].startswith("-") and argv[0].endswith(".parquet"):
            argv.insert(0, next(iter(names)))  # the first recipe: urls
        parser = build_parser(argv[0] if argv else None)
        args = parser.parse_args(argv)
        if not getattr(args, "_runs", None):
            parser.print_help(sys.stderr)
            return 2
        runner = _runner(args._runs)

        from fastenc.run.process import kernels_only_process

        kernels_only_process()  # this process runs fastenc's kernels only
        if args.command != "warmup":
            # First run on this machine: say so, and compile with a progress bar, before the
            # command's own bars start (fastenc.warmup). Nothing happens when the kernels are cached.
            from fastenc.warmup import prepare

            prepare(args.command, args)
        code = int(runner.run(args, _command(typed)) or 0)
        if stop.received() is not None:  # its KeyboardInterrupt was dropped where Python ignores errors
            _say(f"fastenc: interrupted ({stop.signal_name(stop.received())}) just as the command finished: "
                 "what it wrote is complete (a rerun of the same command finds it done)")
            return stop.exit_code(stop.received())
        return code
    except InterruptedAfterPublish as exc:
        _say(f"fastenc: interrupted ({_signal()}) just after {exc.out} was published: it is complete (a rerun of the "
             "same command finds it done and tidies up)")
        return stop.exit_code(stop.received())
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:  # e.g. `fastenc decode ... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except FastencError as exc:
        if stop.received() is not None:  # e.g. a worker that the same signal ended first: the signal is the news
            return _interrupted()
        # one line, whatever the message holds (an Arrow error may end in a newline)
        _say("fastenc: error: " + "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip()))
        return exc.exit_code


def _signal() -> str:
    return stop.signal_name(stop.received() or stop.signal.SIGINT)


def _interrupted() -> int:
    _say(stop.interrupted_line())
    return stop.exit_code(stop.received())


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def console_main() -> None:
    """The ``fastenc`` script and ``python -m fastenc``: ``main()``, then exit without tearing
    the interpreter down. Freeing Numba's and LLVM's objects one by one at exit took ~0.5 s of
    every warm run. Everything a command writes is closed, verified and published before
    ``main()`` returns; the ``atexit`` handlers (multiprocessing's, tempfile's) still run. Signals are
    handled first of all (``fastenc.cli.stop``)."""
    import atexit
    import os

    try:
        stop.install()
        code = main()
    except KeyboardInterrupt:  # a signal in install() itself, or in main()'s last lines, after its own handlers
        code = _interrupted()
    stop.finishing()  # a signal from here on ends the process at once
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):  # the reader left (`| head`), or it was closed
            pass
    os._exit(code)


def _command(argv: list[str]) -> dict:
    """How this run was started, as the manifest's ``build`` records it for the dataset card
    (``fastenc.run.Run``'s ``command``): the arguments as typed, and the folder they are relative to."""
    import os

    return {"command": ["fastenc", *argv], "cwd": os.getcwd()}


from fastenc.cli import stop  # noqa: E402
from fastenc.errors import FastencError, InterruptedAfterPublish  # noqa: E402  (kept light: no numba)
