"""Exceptions whose message tells the user what is wrong and how to fix it.

The command line prints a ``FastencError`` as one line, ``fastenc: error: ...``, with no
traceback, and exits with its ``exit_code``:

- 1: bad input or environment (a missing file or column, nulls, a damaged parquet page, a
  tokenizer.json fastenc cannot encode, a full disk, no permission), or a failed check;
- 2: a usage error (a bad option value; argparse's own errors exit 2 too);
- 130: interrupted by SIGINT (Ctrl-C), 143 by SIGTERM; nothing partial is published
  (docs/atomic-output.md, ``fastenc.cli.stop``).

Anything else is a bug in fastenc and prints a traceback.
"""


class FastencError(Exception):
    """Base class: the CLI prints the message (no traceback) and exits ``exit_code``."""

    exit_code = 1


class VocabError(FastencError, ValueError):
    """A tokenizer.json that fastenc cannot encode exactly (names the field and what is supported)."""


class InputError(FastencError, ValueError):
    """Bad input data: a missing or non-string column, nulls, a bad path (names file, column, row)."""


class VerificationError(FastencError):
    """Output that failed a check: a parity mismatch, a broken invariant, a shard-membership violation."""


class OutputError(FastencError, OSError):
    """The output side failed (disk full, permissions, read-only file system): nothing was published."""


class UsageError(InputError):
    """A bad option value, such as ``--batch-bytes 0`` (exit status 2, like argparse's own errors)."""

    exit_code = 2


class InterruptedAfterPublish(KeyboardInterrupt):
    """Ctrl-C arrived just after an output's commit: the output ``out`` is published and complete
    (a ``KeyboardInterrupt``, so that whatever stops on Ctrl-C still stops; exit status 130)."""

    def __init__(self, out):
        super().__init__(str(out))
        self.out = out
