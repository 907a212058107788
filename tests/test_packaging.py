"""A regular (non-editable) install carries the vocabularies and the class table."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_non_editable_install_finds_its_data(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(REPO)],
        check=True,
        capture_output=True,
    )
    probe = (
        "import fastenc, sys; "
        f"assert fastenc.__file__.startswith({str(target)!r}), fastenc.__file__; "
        # Decoding and loading (the vocabulary's tables) prove the data is found and is the real
        # data; encoding would add ~60 s of compiling in this fresh cache (tests elsewhere encode).
        "print(repr(fastenc.load('gpt2').decode([15496, 11, 995, 0]))); "
        "print(repr(fastenc.load('urls').decode([264]))); "
        "from fastenc.vocab import builtin_tiktoken_file as f; import hashlib; "
        "print([hashlib.sha256(f(n).read_bytes()).hexdigest()[:12] for n in ('cl100k_base', 'o200k_base')])"
    )
    # Run from an empty folder with only the installed copy first on the path.
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "FASTENC_CACHE_DIR": str(tmp_path / "cache"),
             "NUMBA_CACHE_DIR": str(tmp_path / "numba")},
        check=True,
        capture_output=True,
        text=True,
    )
    lines = out.stdout.splitlines()
    assert lines[0] == repr("Hello, world!")  # tiktoken's ids of it
    assert lines[1] == repr("https://")  # one token of the URL vocabulary
    assert lines[2] == "['223921b76ee9', '446a9538cb6c']"  # tiktoken's rank files ship (the hashes tiktoken pins)
    # The installed ``fastenc`` script (pyproject's entry point, cli.console_main) runs and exits with main's status.
    script = [sys.executable, str(target / "bin" / "fastenc")]
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    version = subprocess.run([*script, "--version"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("fastenc "), version.stderr[-2000:]
    usage = subprocess.run(script, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: fastenc" in usage.stderr, usage.stderr[-2000:]


def test_public_names_are_the_functions_even_after_the_submodules_load():
    """``from fastenc import canonical`` is the function, before and after its module is imported
    (issue 10, item 4), and ``dir(fastenc)`` lists the public names."""
    import subprocess
    import sys

    code = (
        "from fastenc import canonical\n"
        "assert canonical('https://www.example.com/a') == 'https://com.example.www/a'\n"
        "import fastenc.url_canonical, fastenc.encoder\n"
        "import fastenc\n"
        "assert callable(fastenc.canonical) and fastenc.canonical('http://a.b/') == 'http://b.a/'\n"
        "assert {'load', 'Encoder', 'canonical'} <= set(dir(fastenc)) and 'annotations' not in dir(fastenc)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_package_folder_is_listed_for_the_wheel():
    """pyproject lists the packages by hand (the vocabularies are mapped in): a new package folder
    left off the list is missing from a non-editable install. Caught here, in the fast suite."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "fastenc").rglob("__init__.py")}
    assert folders - listed == set()
