"""Every snippet in README.md, docs/*.md and examples/README.md runs as written (issue 10).

Fences: ```bash and ```python blocks are run, in order, one sandbox folder per file (with
``tests/`` and ``examples/`` of the checkout beside them, and ``python``/``fastenc`` on PATH
meaning this interpreter); ```text blocks are synopses and layouts, not run. A block preceded by
``<!-- snippet: not run ... -->`` is skipped (the test suite itself), and one preceded by
``<!-- snippet: setup ... -->`` runs only its fastenc command (the venv already exists).
"""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FILES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")), "examples/README.md"]
FENCE = re.compile(r"(<!-- snippet: (\w+)[^>]*-->\n)?```(\w*)\n(.*?)```", re.S)


def snippets(text: str) -> list[tuple[str, str, str]]:
    """``(language, marker, code)`` of every fenced block, in order."""
    return [(m.group(3), m.group(2) or "", m.group(4)) for m in FENCE.finditer(text)]


def _shim(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _sandbox(tmp_path: Path) -> tuple[Path, dict]:
    box = tmp_path / "box"
    box.mkdir()
    for name in ("tests", "examples"):
        (box / name).symlink_to(REPO / name)
    bin_dir = tmp_path / "bin"
    _shim(bin_dir / "python", f'exec "{sys.executable}" "$@"')
    _shim(bin_dir / "fastenc", f'exec "{sys.executable}" -m fastenc "$@"')
    _shim(box / ".venv" / "bin" / "python", f'exec "{sys.executable}" "$@"')
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(REPO))
    env.pop("PYTHONSTARTUP", None)
    return box, env


def test_every_file_has_runnable_snippets_and_only_known_fences():
    for name in FILES:
        blocks = snippets((REPO / name).read_text(encoding="utf-8"))
        assert {lang for lang, _, _ in blocks} <= {"bash", "python", "text"}, name
    assert sum(lang != "text" for name in FILES for lang, _, _ in snippets((REPO / name).read_text(encoding="utf-8"))) >= 8


# docs/kernels.md's example compiles an encode loop of its own (a minute or more on 2 cores): slow.
COMPILES_ITS_OWN_LOOP = {"docs/kernels.md"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in COMPILES_ITS_OWN_LOOP else n for n in FILES])
def test_snippets_run_as_written(name, tmp_path):
    box, env = _sandbox(tmp_path)
    for lang, marker, code in snippets((REPO / name).read_text(encoding="utf-8")):
        if lang == "text" or marker == "not":
            continue
        if marker == "setup":  # the venv exists: run the fastenc command that follows its set-up
            code = code[code.index(".venv/bin/python -m fastenc"):]
        if lang == "bash":
            cmd = ["bash", "-euo", "pipefail", "-c", code]
        else:
            cmd = [sys.executable, "-c", code]
        r = subprocess.run(cmd, cwd=box, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{name}: this {lang} snippet failed:\n{code}\n--- stderr:\n{r.stderr[-3000:]}"


def _help(command: str) -> str:
    import contextlib
    import io

    from fastenc import cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return buf.getvalue()


def test_every_flag_the_docs_show_is_in_the_commands_help():
    """README's and docs/'s synopses name only flags that the command's --help lists."""
    seen = 0
    for name in FILES:
        for lang, _, code in snippets((REPO / name).read_text(encoding="utf-8")):
            command = None
            for line in code.splitlines():
                words = line.split("#")[0].split()
                if words[:3] == ["python", "-m", "fastenc"]:
                    words = words[2:]
                if words and words[0] == "fastenc" and len(words) >= 2:
                    command = "urls" if words[1].endswith(".parquet") else words[1]
                    words = words[2:]
                elif not (line.startswith(" ") and command):  # a continuation line of the synopsis above
                    command = None
                    continue
                text = _help(command)
                for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", " ".join(words)):
                    assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", text), f"{name}: {flag} is not in 'fastenc {command} --help'"
                    seen += 1
    assert seen >= 30
