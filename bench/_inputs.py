"""One line instead of a traceback when a bench's default input (in ../shared/data) is absent."""
from __future__ import annotations

import sys
from pathlib import Path


def require(paths, flag: str, example: str = "tests/data/docs_fixture.parquet") -> None:
    """Exit with one line naming the missing input and the flag that chooses another."""
    for p in [paths] if isinstance(paths, (str, Path)) else paths:
        if not Path(p).exists():
            sys.exit(f"{Path(sys.argv[0]).name}: {p} does not exist (the shared corpora are not beside this "
                     f"checkout): pass {flag} PATH, e.g. {flag} {example}")
