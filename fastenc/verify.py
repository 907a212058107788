"""``fastenc verify OUT``: re-check a finished output directory from its files alone.

The format is detected from the directory and the check is done by the recipe that wrote it:
each recipe module exposes ``verify_output(out_dir: Path, source: list[Path] | None) -> dict``
returning at least ``{"format": str, "ok": bool, "problems": list[str], ...counts}``.

Detection (first match wins):

- ``meta.json`` whose ``"format"`` is ``"fastenc-bytes"``  -> ``fastenc.recipes.bytes``
- ``meta.json`` whose ``"format"`` is ``"fastenc-ids"``    -> ``fastenc.cli.encode`` (``encode -o DIR``)
- ``summary.json`` at the top (with bucket subdirectories)  -> ``fastenc.recipes.gpt2``
- ``tokens-s*.json`` sidecars                                -> ``fastenc.recipes.urls``

Recipe modules are imported only when needed (so verifying bytes output never imports the
tokenizers). A failed verification exits 1 and lists the problems on stderr.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Sequence

from fastenc.errors import InputError

FORMAT_MODULES = {
    "fastenc-bytes": "fastenc.recipes.bytes",
    "gpt2": "fastenc.recipes.gpt2",
    "urls": "fastenc.recipes.urls",
    "fastenc-ids": "fastenc.cli.encode",
}


def detect_format(out_dir: Path) -> str:
    """The format name of ``out_dir`` (a key of ``FORMAT_MODULES``), or ``InputError``."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise InputError(f"{out_dir} is not a directory: pass the output directory of a fastenc recipe")
    meta = out_dir / "meta.json"
    if meta.is_file():
        try:
            fmt = json.loads(meta.read_text(encoding="utf-8")).get("format")
        except (OSError, ValueError, AttributeError):
            fmt = None
        if fmt in ("fastenc-bytes", "fastenc-ids"):
            return fmt
    if (out_dir / "summary.json").is_file():
        return "gpt2"
    if any(out_dir.glob("tokens-s*.json")):
        return "urls"
    if meta.is_file():
        raise InputError(f"{meta} is not a fastenc bytes meta.json (no \"format\": \"fastenc-bytes\"): was it written by fastenc?")
    raise InputError(
        f"{out_dir} does not look like fastenc output: expected meta.json (bytes), summary.json (gpt2) or "
        "tokens-s*.json sidecars (urls). Pass the directory given to -o, and check that its run finished"
    )


def verify_dir(out_dir: str | Path, source: Sequence[str | Path] | None = None) -> dict:
    """Detect the format of ``out_dir`` and run its recipe's ``verify_output``; returns its report."""
    out_dir = Path(out_dir)
    fmt = detect_format(out_dir)
    module_name = FORMAT_MODULES[fmt]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise InputError(f"{out_dir} is {fmt} output but {module_name} is not available ({exc}): update fastenc") from exc
    src = [Path(p) for p in source] if source else None
    report = module.verify_output(out_dir, src)
    report.setdefault("format", fmt)
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
