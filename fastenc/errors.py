"""Exceptions whose message tells the user what is wrong and how to fix it."""


class FastencError(Exception):
    """Base class: the CLI prints the message (no traceback) and exits 1."""


class VocabError(FastencError, ValueError):
    """A tokenizer.json that fastenc cannot encode exactly (names the field and what is supported)."""


class InputError(FastencError, ValueError):
    """Bad input data: a missing or non-string column, nulls, a bad path (names file, column, row)."""


class VerificationError(FastencError):
    """Output that failed a check: a parity mismatch, a broken invariant, a shard-membership violation."""


class OutputError(FastencError, OSError):
    """The output side failed (disk full, permissions, read-only file system): nothing was published."""


class UsageError(FastencError, ValueError):
    """A bad command-line value (exit status 2)."""

    exit_code = 2
