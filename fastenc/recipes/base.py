"""The recipe protocol: what a recipe declares, once, for the CLI, verify, decode, card, warmup
and datatrove to read (``fastenc.recipes.registry`` lists the recipes; docs/recipes.md).

A recipe is a ``Recipe`` of plain values and callables, declared in ``fastenc/recipes/<name>/recipe.py``
as ``RECIPE``. Nothing here imports a recipe: the callables are the recipe's own functions.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


def manifest_format(path: Path) -> str | None:
    """The ``"format"`` a JSON manifest at ``path`` records, or None (missing, unreadable, not an object)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass(frozen=True)
class Format:
    """An output format on disk: its ids and manifest name (never renamed: outputs stay readable),
    how a folder is recognised, and the tools that read it."""

    #: the format name ``detect`` returns (``fastenc verify``'s report, ``--json``)
    name: str
    #: the manifest at the output's top: its presence means "complete"
    manifest: str
    #: the ``"format"`` values the manifest may record (the name too, where it is one of them)
    ids: tuple[str, ...]
    #: ``verify(out_dir, source: list[Path] | None) -> report`` (``fastenc verify``)
    verify: Callable
    #: whether the manifest's ``"format"`` field alone identifies it (checked before the others)
    named_in_manifest: bool = False
    #: for the other formats: ``detect(out_dir) -> bool`` from the folder's files
    detect: Callable[[Path], bool] | None = None
    #: ``card(out_dir) -> str``: the dataset card, from the files alone (None: no card)
    card: Callable[[Path], str] | None = None
    #: ``decode_dir(args, out_dir, budget)`` and ``decode_bin(args, path, budget)`` (``fastenc decode``)
    decode_dir: Callable | None = None
    decode_bin: Callable | None = None
    #: ``is_bin(path) -> bool``: whether a single file is one of this format's bins
    is_bin: Callable[[Path], bool] | None = None
    #: the kernel families that reading it back compiles (``fastenc verify``'s first-run notice)
    families: tuple[str, ...] = ()
    #: how ``fastenc verify`` names it when a folder holds none of the formats
    described_as: str = ""

    def found_in(self, out_dir: Path) -> bool:
        if self.named_in_manifest:
            return manifest_format(out_dir / self.manifest) in self.ids
        return self.detect is not None and self.detect(out_dir)


@dataclass(frozen=True)
class KernelFamily:
    """Kernels compiled together by running the real code on tiny inputs (``fastenc warmup``)."""

    name: str
    #: ``warm(work_folder)``: run the code on tiny inputs, so the kernels get the real argument types
    warm: Callable[[Path], None]
    #: ``probes() -> list``: top-level kernels; all cached for this CPU means the family is
    probes: Callable[[], list]
    #: its loop holds the encoder's kernels (a helper process compiles the BPE side meanwhile)
    uses_encoder: bool = False
    #: its loop holds GPT-2's pre-tokenizer
    gpt2_loop: bool = False
    #: ``(name, part(work))``: kernels a helper process compiles while this process warms the rest
    helper_part: tuple[str, Callable[[Path], None]] | None = None
    #: what this process warms while the helper finishes ``helper_part``
    while_helper: Callable[[Path], None] | None = None

    def compile_ahead(self, quiet: bool) -> None:
        """A run's before-workers hook: this family into the cache, compiled in a child process so
        that the run can still fork its workers (``fastenc.run.ahead``); here if the child fails."""
        from fastenc.run.ahead import compile_ahead

        compile_ahead((self.name,), probes_of=lambda name: self.probes(), quiet=quiet, fallback=self._warm_here)

    def _warm_here(self, cold: list) -> None:
        import os
        import tempfile

        with tempfile.TemporaryDirectory(prefix=f"fastenc-warmup-{os.getpid()}-") as tmp:  # (warmup's scratch name)
            self.warm(Path(tmp))


@dataclass(frozen=True)
class Steps:
    """The recipe's run as units for distributed executors (``fastenc.datatrove``)."""

    #: ``map_rank(inputs, output, options, rank, world_size, count)``: encode this rank's units not
    #: yet done; ``count(name)`` tallies "units_mapped" / "units_already_done"
    map_rank: Callable
    #: ``finalize(inputs, output, options)``: check every unit, reduce, publish; returns the manifest(s)
    finalize: Callable


@dataclass(frozen=True)
class Recipe:
    """One recipe: a command, its output format, its kernels, its distributed steps."""

    #: the recipe's name: its command (``fastenc NAME``) and its ``datatrove`` name
    name: str
    format: Format
    #: one line for ``fastenc --help``
    help: str = ""
    #: ``add_arguments(parser)`` and ``run(args, command) -> exit status``; ``command`` is how the
    #: run was started (``{"command": argv, "cwd": ...}``, recorded in the manifest for the card)
    add_arguments: Callable | None = None
    run: Callable | None = None
    #: the kernel families its command needs (``families(args)``; compiled ahead on a first run)
    families: Callable | None = None
    #: kernel families it declares (``fastenc warmup`` compiles them)
    kernel_families: tuple[KernelFamily, ...] = field(default_factory=tuple)
    steps: Steps | None = None
