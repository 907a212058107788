"""fastenc's layers point down only: a module imports from its own layer or the ones below it.

    kernels -> library (vocab, unicode_classes, encoder, errors, memory, progress, tasks, arrow_io,
    url_canonical, the package itself) -> run -> recipes, card, verify -> cli, warmup, datatrove

Every import is walked with ``ast``, at module level and inside functions (a function-level import
hides an upward edge from a reader, not from this test), and so is a string constant that names a
fastenc module exactly (what ``importlib.import_module`` is handed, e.g. ``registry.DECLARED``). A
second test refuses a private name (``_x``) of one module used by another, by ``from m import _x``
or by ``m._x`` on an imported module.

The edges that exist today and cannot move yet are listed below, each named; a new one fails the
test. Removing an edge from the code without removing it here fails too, so the lists only shrink.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fastenc"

LIBRARY = {"vocab", "pattern", "unicode_classes", "encoder", "errors", "memory", "progress", "tasks", "arrow_io",
           "url_canonical"}
LAYER_NAMES = ["kernels", "library", "run", "recipes/card/verify", "cli/warmup/datatrove"]

# Upward edges, (importer, imported): none. The run skeleton takes callables from the recipe instead
# (``OutputSpec.card``, ``map_phase(before_workers=...)``), and verify finds every format in the registry.
ALLOWED_UPWARD: set = set()

# Private names used across modules today, (importer, defining module, name). Most are a recipe's
# package and its own helper modules, or one kernel's layout constants shared with its wide twin;
# each wants a public name (or a move into the module that uses it).
ALLOWED_PRIVATE = {
    # The URL card quotes ``canonical``'s source and its helper's, by name: a new name changes the card.
    ("fastenc.recipes.urls.card", "fastenc.url_canonical", "_is_dotted_quad"),
    # The wide piece cache and memo reuse the narrow ones' slot layout.
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_cache", "_LEN_SHIFT"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_cache", "_ONES"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_cache", "_PROBES"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_AT_MASK"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_AT_SHIFT"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_COUNT_MASK"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_ENTRIES"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_FILL"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_PROBES"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_SLOTS"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_TAG_SHIFT"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_filter_bit"),
    ("fastenc.kernels.piece_cache_wide", "fastenc.kernels.piece_memo", "_table"),
    # The cl100k/o200k pre-tokenizers reuse GPT-2's byte classes and UTF-8 step.
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_BYTE_INDEX"),
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_CASE"),
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_GE_A"),
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_GT_Z"),
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_HI"),
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_LOW7"),
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_STARTED"),
    ("fastenc.kernels.pretok_cl100k", "fastenc.kernels.pretok_gpt2", "_utf8_seq"),
    ("fastenc.kernels.pretok_o200k", "fastenc.kernels.pretok_gpt2", "_BYTE_INDEX"),
    ("fastenc.kernels.pretok_o200k", "fastenc.kernels.pretok_gpt2", "_GE_A"),
    ("fastenc.kernels.pretok_o200k", "fastenc.kernels.pretok_gpt2", "_GT_Z"),
    ("fastenc.kernels.pretok_o200k", "fastenc.kernels.pretok_gpt2", "_HI"),
    ("fastenc.kernels.pretok_o200k", "fastenc.kernels.pretok_gpt2", "_LOW7"),
    ("fastenc.kernels.pretok_o200k", "fastenc.kernels.pretok_gpt2", "_utf8_seq"),
    # The one-text lane runs the batch path's compiled span loop and its stop code (one loop, not two).
    ("fastenc.kernels.solo", "fastenc.kernels.runs", "_STOP_OUT"),
    ("fastenc.kernels.solo", "fastenc.kernels.runs", "_encode_span"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer(module: str) -> int:
    """The layer of a fastenc module: its index in LAYER_NAMES."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top == "kernels":
        return 0
    if top == "" or top in LIBRARY:
        return 1
    if top == "run":
        return 2
    if top in ("recipes", "card", "verify"):
        return 3
    if top in ("cli", "warmup", "datatrove", "__main__"):
        return 4
    raise AssertionError(f"{module}: not in any layer; add it to one in tests/test_layers.py")


def imports(module: str, tree: ast.AST | None = None):
    """(imported module, name or None, line) for every fastenc import in ``module``'s source.

    ``from a.b import c`` is an import of ``a.b.c`` when that is a module, else of ``a.b`` (name ``c``).
    """
    if tree is None:
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "fastenc":
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "fastenc":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                yield (sub, None, node.lineno) if sub in MODULES else (source, alias.name, node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            yield node.value, None, node.lineno  # a module named for importlib.import_module


def private_uses(module: str, tree: ast.AST | None = None):
    """(defining module, private name, line) for every private name of another fastenc module used here."""
    if tree is None:
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for target, name, line in imports(module, tree):
        if name and name.startswith("_") and not name.startswith("__") and target != module:
            yield target, name, line
    bound = {}  # local name -> the fastenc module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            for target, name, _ in imports(module, ast.Module(body=[node], type_ignores=[])):
                if name is None and target in MODULES:
                    alias = next(a for a in node.names if target.endswith("." + a.name))
                    bound[alias.asname or alias.name] = target
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and node.attr.startswith("_") and not node.attr.startswith("__") and bound[node.value.id] != module):
            yield bound[node.value.id], node.attr, node.lineno


def upward_edges() -> dict[tuple[str, str], list[int]]:
    edges: dict[tuple[str, str], list[int]] = {}
    for module in MODULES:
        for target, _, line in imports(module):
            if target not in MODULES:
                raise AssertionError(f"{module}:{line} imports {target}, which is not a module of fastenc")
            if layer(target) > layer(module):
                edges.setdefault((module, target), []).append(line)
    return edges


def private_imports() -> dict[tuple[str, str, str], list[int]]:
    found: dict[tuple[str, str, str], list[int]] = {}
    for module in MODULES:
        for target, name, line in private_uses(module):
            found.setdefault((module, target, name), []).append(line)
    return found


def test_every_module_has_a_layer():
    assert len(MODULES) > 50
    for module in MODULES:
        layer(module)


def test_no_new_upward_import():
    edges = upward_edges()
    new = {e: lines for e, lines in edges.items() if e not in ALLOWED_UPWARD}
    assert not new, "imports that point up a layer (" + " -> ".join(LAYER_NAMES) + "): " + "; ".join(
        f"{a} (line {', '.join(map(str, lines))}) imports {b}" for (a, b), lines in sorted(new.items()))
    gone = ALLOWED_UPWARD - set(edges)
    assert not gone, f"edges no longer in the code: remove them from ALLOWED_UPWARD: {sorted(gone)}"


def test_no_new_private_import_across_modules():
    found = private_imports()
    new = {e: lines for e, lines in found.items() if e not in ALLOWED_PRIVATE}
    assert not new, "private names used across modules (give them a public name): " + "; ".join(
        f"{a}:{','.join(map(str, lines))} uses {b}.{n}" for (a, b, n), lines in sorted(new.items()))
    gone = ALLOWED_PRIVATE - set(found)
    assert not gone, f"no longer in the code: remove them from ALLOWED_PRIVATE: {sorted(gone)}"


@pytest.mark.parametrize("source, want", [
    # a function-level upward import, as the run skeleton's
    ("def f():\n    from fastenc.warmup import compile_ahead\n", [("fastenc.warmup", "compile_ahead")]),
    ("import fastenc.cli.encode as e\n", [("fastenc.cli.encode", None)]),
    ("from ..cli import encode\n", [("fastenc.cli.encode", None)]),
    ("FORMATS = {'x': 'fastenc.cli.encode'}\n", [("fastenc.cli.encode", None)]),
])
def test_the_walk_sees_every_kind_of_import(source, want):
    """The walk finds an import however it is written (the checks above rest on it)."""
    got = [(t, n) for t, n, _ in imports("fastenc.run.units", ast.parse(source))]
    assert got == want
    assert all(layer(t) > layer("fastenc.run.units") for t, _ in got)


@pytest.mark.parametrize("source, want", [
    ("from fastenc.run.staging import _rename\n", [("fastenc.run.staging", "_rename")]),
    ("def f():\n    from fastenc.run import staging\n    staging._rename(1)\n", [("fastenc.run.staging", "_rename")]),
    ("import fastenc.kernels.piece_cache as pc\nx = pc._PROBES\n", [("fastenc.kernels.piece_cache", "_PROBES")]),
    ("from fastenc.run.staging import publish\n", []),
])
def test_the_walk_sees_private_names(source, want):
    got = [(t, n) for t, n, _ in private_uses("fastenc.recipes.urls.verify", ast.parse(source))]
    assert got == want
