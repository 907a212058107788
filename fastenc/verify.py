"""``fastenc verify OUT``: re-check a finished output directory from its files alone.

The format is detected from the directory (``fastenc.recipes.registry.detect``: each recipe's
``Format`` says how its output is recognised) and the check is done by the recipe that wrote it:
its ``Format.verify(out_dir: Path, source: list[Path] | None) -> dict`` returns at least
``{"format": str, "ok": bool, "problems": list[str], ...counts}``. A failed verification exits 1
and lists the problems on stderr.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence


def detect_format(out_dir: Path) -> str:
    """The format name of ``out_dir``, or ``InputError``."""
    from fastenc.recipes.registry import detect

    return detect(out_dir).name


def verify_dir(out_dir: str | Path, source: Sequence[str | Path] | None = None) -> dict:
    """Detect the format of ``out_dir`` and run its recipe's verifier; returns its report."""
    from fastenc.recipes.registry import detect

    out_dir = Path(out_dir)
    fmt = detect(out_dir)
    src = [Path(p) for p in source] if source else None
    report = fmt.verify(out_dir, src)
    report.setdefault("format", fmt.name)
    return report


# ----------------------------------------------------------------------------------------------
# The wrapper every recipe's verify_output shares
# ----------------------------------------------------------------------------------------------


def checked(fmt: str, out_dir: Path, what: str, check, *args) -> dict:
    """Run ``check(out_dir, *args, report)`` and return the report: ``{"format", "ok",
    "problems", "out_dir", ...}``. A manifest with a field of the wrong type or missing is one
    problem (naming ``what``), never a traceback; a ``FastencError`` (bad --source) propagates."""
    from fastenc.errors import FastencError

    out_dir = Path(out_dir)
    report: dict = {"format": fmt, "ok": False, "problems": [], "out_dir": str(out_dir)}
    try:
        check(out_dir, *args, report)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        if isinstance(exc, FastencError):
            raise
        report["problems"].append(f"{what} is malformed ({type(exc).__name__}: {exc}): rerun the recipe with --overwrite")
    report["ok"] = not report["problems"]
    return report


def read_manifest(path: Path, fmt: str, version: int, problems: list) -> dict | None:
    """The manifest at ``path`` if it parses and has this format and version, else None (with a problem)."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"cannot read {path}: {exc}")
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        problems.append(f"{path.name} format is {found!r}, expected {fmt!r}")
        return None
    if manifest.get("format_version") != version:
        problems.append(f"{path.name} format_version {manifest.get('format_version')!r} is not {version}: use the fastenc that wrote it")
        return None
    return manifest
