"""Wipe fastenc's Numba cache files when any kernel source file changes.

Why: Numba keys a function's cached machine code on the content of that function's own source
file only; its docs say so (cache invalidation does not follow changes in other files). Our
kernels call and inline code from other files: ``runs.encode_docs`` calls
``encode.encode_narrow``, which inlines ``piece_cache.tiny_cache_lookup`` (``forceinline``)
and calls the merges in ``bpe.py``. After an edit or a ``git pull`` that changes
``piece_cache.py`` but not ``runs.py``, ``encode_docs`` would keep loading its cached code and
silently run the old ``piece_cache``: wrong ids if, say, a table layout changed.

What: when ``fastenc.kernels`` is imported (before any kernel module), a sha256 over every
``*.py`` of this folder (by name), Numba's version and the Python tag is compared with a stamp
file in the kernels' cache folder. If it differs or is missing, every cache file of a kernel
module for this Python (``<module>.<function>-<line>.py311.nbi`` / ``.nbc``) is deleted and the
stamp rewritten. (Kernel files import no fastenc module outside this folder; a test checks that,
since such a module would have to be hashed too.)

Cost: when nothing changed, reading and hashing ~20 small files plus Numba's own check of the
cache folder (a ``makedirs`` and a temporary file, which the first cached kernel does anyway):
about a millisecond. After any kernel edit, every kernel compiles again once (tens of seconds;
``fastenc warmup``), not only the ones that depend on the edited file: coarse on purpose, stale
machine code is never worth the risk.

Best effort: anything unexpected (no usable cache folder, a read-only one, Numba internals
changed) leaves the cache as it is and never fails the import. Several processes may run this at
once: a file already deleted by another is skipped, and the stamp is replaced atomically.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent


def python_tag() -> str:
    """The tag Numba puts in its cache file names (``py311``). The stamp and the deletion are per
    tag, so Pythons of other versions that share a cache folder do not wipe each other's files."""
    return "py%d%d%s" % (sys.version_info[0], sys.version_info[1], getattr(sys, "abiflags", ""))


def fingerprint(kernels_dir: Path = KERNELS_DIR) -> str:
    """sha256 over the name and bytes of every ``*.py`` in ``kernels_dir``, Numba's version and
    the Python tag (cache files of another Numba are not valid either)."""
    import numba

    digest = hashlib.sha256(f"numba {numba.__version__} {python_tag()}\n".encode())
    for path in sorted(kernels_dir.glob("*.py")):
        data = path.read_bytes()
        digest.update(f"{path.name} {len(data)}\n".encode())  # name and length: unambiguous bounds
        digest.update(data)
    return digest.hexdigest()


def _locator_probe():
    """A function of this folder: Numba locates its cache as for every kernel beside it."""


def cache_dir() -> Path | None:
    """The folder where Numba caches the kernels of this folder, or None if it finds none.

    Decided by Numba's own locator classes, in Numba's order (``NUMBA_CACHE_DIR``, then
    ``__pycache__`` here, then the user-wide cache; ``NUMBA_CACHE_LOCATOR_CLASSES`` honoured):
    all kernel files share this folder because Numba derives it from their directory. The
    locators create the folder and skip it if it is not writable, as Numba does for the first
    cached kernel anyway, so the stamp is in place before any kernel is cached there.
    """
    from numba.core.caching import CompileResultCacheImpl

    try:
        impl = CompileResultCacheImpl(_locator_probe)
    except RuntimeError:  # no locator applies: Numba reports that itself when caching a kernel
        return None
    return Path(impl.locator.get_cache_path())


def kernel_cache_files(folder: Path, kernels_dir: Path = KERNELS_DIR) -> list[Path]:
    """Numba's cache files of this folder's modules for this Python in ``folder``, and nothing
    else (``.pyc`` files, the stamp, other Pythons' files stay)."""
    modules = {path.stem for path in kernels_dir.glob("*.py")}
    tag = f".{python_tag()}."
    return [path for path in folder.iterdir()
            if path.name.endswith((".nbi", ".nbc")) and tag in path.name
            and path.name.split(".", 1)[0] in modules]


def stamp_path(folder: Path) -> Path:
    return folder / f"fastenc-kernels.{python_tag()}.sha256"


def _read_stamp(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def _write_atomically(path: Path, text: str) -> None:
    """Temporary file + rename: a concurrent reader sees the old stamp or the new one, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it 0600: others sharing NUMBA_CACHE_DIR must read it
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def refresh(folder: Path, kernels_dir: Path = KERNELS_DIR) -> bool:
    """Delete the kernels' cache files in ``folder`` unless its stamp matches the sources, then
    stamp it. True when the stamp was stale or missing."""
    want = fingerprint(kernels_dir)
    stamp = stamp_path(folder)
    if _read_stamp(stamp) == want:
        return False
    for path in kernel_cache_files(folder, kernels_dir):
        path.unlink(missing_ok=True)  # another process may have deleted it already
    _write_atomically(stamp, want)
    return True


def check_kernel_cache() -> None:
    """Called once by ``fastenc/kernels/__init__.py``; never raises."""
    try:
        folder = cache_dir()
        if folder is not None and folder.is_dir():
            refresh(folder)
    except Exception:  # noqa: BLE001 - a guard must not break the import; the cache stays as it was
        pass
