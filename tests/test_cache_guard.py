"""fastenc/kernels/cache_guard.py: the kernels' Numba cache is wiped when any kernel source changes.

Every check runs ``import fastenc.kernels`` in a fresh process with its own ``NUMBA_CACHE_DIR``
and only the ``NUMBA_CACHE_DIR`` locator, so the real cache beside the sources is never touched.
``fastenc.kernels`` imports no kernel module, so nothing compiles.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "fastenc" / "kernels"
STALE = "0" * 64


def _env(cache: Path) -> dict:
    # Only the NUMBA_CACHE_DIR locator: were it unusable, Numba would otherwise fall back to
    # fastenc/kernels/__pycache__, the real cache of this checkout.
    return dict(os.environ, NUMBA_CACHE_DIR=str(cache), NUMBA_CACHE_LOCATOR_CLASSES="UserProvidedCacheLocator")


def _python(code: str, cache: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=_env(cache),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _import_kernels(cache: Path) -> None:
    _python("import fastenc.kernels", cache)


@pytest.fixture
def cache(tmp_path):
    """The kernels' cache folder under a fresh NUMBA_CACHE_DIR (stamped by this first import),
    the current fingerprint, the stamp file and this Python's tag."""
    root = tmp_path / "numba-cache"
    out = _python(
        """
        import json
        from fastenc.kernels import cache_guard as g
        folder = g.cache_dir()
        print(json.dumps([str(folder), g.fingerprint(), str(g.stamp_path(folder)), g.python_tag()]))
        """, root)
    folder, fingerprint, stamp, tag = json.loads(out)
    return SimpleNamespace(root=root, folder=Path(folder), fingerprint=fingerprint, stamp=Path(stamp), tag=tag)


def _kernel_files(c) -> list[Path]:
    return [c.folder / f"encode.encode_text-1.{c.tag}.nbi", c.folder / f"encode.encode_text-1.{c.tag}.1.nbc",
            c.folder / f"piece_cache_wide.lookup-7.{c.tag}.nbi", c.folder / f"bpe.merge.locals.f-3.{c.tag}.2.nbc"]


def _other_files(c) -> list[Path]:
    """Files the guard must never delete: not Numba's, another package's module, another Python's."""
    return [c.folder / "notes.txt", c.folder / f"encoder.encode-1.{c.tag}.nbi",
            c.folder / "encode.encode_text-1.py27.nbi", c.folder / f"encode.encode_text-1.{c.tag}.nbi.bak"]


def _touch(paths) -> None:
    for path in paths:
        path.write_bytes(b"stale")


def test_the_first_import_stamps_the_cache_folder(cache):
    assert cache.folder.parent == cache.root and cache.folder.name.startswith("kernels_")
    assert cache.stamp.read_text().strip() == cache.fingerprint


@pytest.mark.parametrize("stamp", [STALE, None], ids=["stale-stamp", "no-stamp"])
def test_a_stale_or_missing_stamp_deletes_the_kernel_cache_files_only(cache, stamp):
    _touch(_kernel_files(cache) + _other_files(cache))
    if stamp is None:
        cache.stamp.unlink()
    else:
        cache.stamp.write_text(stamp + "\n")
    _import_kernels(cache.root)
    assert [p.name for p in _kernel_files(cache) if p.exists()] == []
    assert [p.name for p in _other_files(cache) if not p.exists()] == []
    assert cache.stamp.read_text().strip() == cache.fingerprint
    assert cache.stamp.stat().st_mode & 0o044 == 0o044  # readable by others sharing the cache
    assert not list(cache.folder.glob("*.tmp"))  # the atomic write left no temporary file


def test_a_current_stamp_deletes_nothing(cache):
    _touch(_kernel_files(cache) + _other_files(cache))
    _import_kernels(cache.root)
    assert all(p.exists() for p in _kernel_files(cache) + _other_files(cache))


def test_the_guard_uses_the_folder_and_file_names_of_numbas_own_kernel_cache(cache):
    # Importing a kernel module creates its dispatchers (and their caches) but compiles nothing.
    out = _python(
        """
        import json
        from fastenc.kernels import cache_guard as g, xxh3
        cache = xxh3.xxh3_64_run._cache
        assert not xxh3.xxh3_64_run.signatures
        print(json.dumps([cache._cache_path, cache._impl.filename_base]))
        """, cache.root)
    numba_folder, filename_base = json.loads(out)
    assert Path(numba_folder) == cache.folder
    _touch([cache.folder / f"{filename_base}.nbi", cache.folder / f"{filename_base}.1.nbc"])
    cache.stamp.write_text(STALE)
    _import_kernels(cache.root)
    assert not list(cache.folder.glob("xxh3.*"))


def test_concurrent_imports_all_succeed(cache):
    _touch(_kernel_files(cache) + _other_files(cache))
    cache.stamp.write_text(STALE)
    procs = [subprocess.Popen([sys.executable, "-c", "import fastenc.kernels"], cwd=ROOT, env=_env(cache.root),
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, errors
    assert not any(p.exists() for p in _kernel_files(cache))
    assert all(p.exists() for p in _other_files(cache))
    assert cache.stamp.read_text().strip() == cache.fingerprint
    assert not list(cache.folder.glob("*.tmp"))


def test_a_read_only_cache_folder_does_not_fail_the_import(cache):
    _touch(_kernel_files(cache))
    cache.stamp.write_text(STALE)
    cache.folder.chmod(0o500)
    try:
        if os.access(cache.folder, os.W_OK):
            pytest.skip("directory permissions do not restrict this user (root)")
        _import_kernels(cache.root)
        assert all(p.exists() for p in _kernel_files(cache))
    finally:
        cache.folder.chmod(0o700)


def test_an_unusable_cache_location_does_not_fail_the_import(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")  # NUMBA_CACHE_DIR is a file: Numba finds no cache folder at all
    _import_kernels(not_a_folder)


def test_an_unexpected_error_in_the_guard_does_not_fail_the_import(cache):
    _touch(_kernel_files(cache))
    cache.stamp.unlink()
    cache.stamp.mkdir()  # reading the stamp raises IsADirectoryError
    _import_kernels(cache.root)
    assert all(p.exists() for p in _kernel_files(cache))


def test_the_fingerprint_follows_every_kernel_source_byte(tmp_path):
    out = _python(
        """
        import shutil, sys
        from pathlib import Path
        from fastenc.kernels import cache_guard as g
        real, copy = g.KERNELS_DIR, Path(sys.argv[1])
        copy.mkdir()
        for path in real.glob("*.py"):
            shutil.copy(path, copy / path.name)
        prints = [g.fingerprint(real), g.fingerprint(copy)]
        source = copy / "piece_cache.py"
        data = bytearray(source.read_bytes())
        data[len(data) // 2] ^= 1  # one bit of one byte, same length
        source.write_bytes(bytes(data))
        prints.append(g.fingerprint(copy))
        (copy / "new_kernel.py").write_text("")
        prints.append(g.fingerprint(copy))
        (copy / "new_kernel.py").rename(copy / "other_name.py")
        prints.append(g.fingerprint(copy))
        (copy / "notes.txt").write_text("not a source file")
        prints.append(g.fingerprint(copy))
        print(*prints)
        """, tmp_path / "cache", str(tmp_path / "kernels"))
    real, copy, edited, added, renamed, unrelated = out.split()
    assert real == copy
    assert len({copy, edited, added, renamed}) == 4
    assert unrelated == renamed


def test_kernel_sources_import_no_fastenc_module_outside_the_kernels():
    # The fingerprint hashes fastenc/kernels/*.py only: a kernel that used code from elsewhere in
    # fastenc would go stale when that file changed. Such a module must be added to the fingerprint.
    outside = re.compile(r"^\s*(?:from|import)\s+fastenc\b(?!\.kernels\b).*", re.MULTILINE)
    offenders = {path.name: outside.findall(path.read_text()) for path in KERNELS.glob("*.py")}
    assert {name: found for name, found in offenders.items() if found} == {}
