"""Staging and publication: an output is written into a temporary folder and appears in one step.

The rule (docs/atomic-output.md):

- A run writes every file of its output into a **staging folder** with a temporary name,
  ``<name>.tmp-<pid>-<hex>``, and fsyncs each file as it finishes.
- **Folder publication** (gpt2, bytes): when everything is written, checked and fsynced, the
  staging folder is renamed onto ``OUT`` -- one ``rename``, the commit. Before it, ``OUT`` is absent
  or still the previous output; after it, ``OUT`` is the complete new output. An ``OUT`` that is
  replaced (``--overwrite``) is first renamed aside to ``OUT.old-<pid>-<hex>``, then deleted (files
  of others in it are moved back into the new ``OUT``).
- **New folder** (urls, when ``OUT`` holds no file yet): the staging folder is renamed onto the
  absent (or empty) ``OUT`` (``publish_new``); the rename refuses a folder that has entries, so
  a run that finds ``OUT`` created meanwhile by another shard's run publishes into it as below.
- **Folder swap** (urls, a shard added to an ``OUT`` shared by many shards; ``publish_swap``):
  every fastenc writer of ``OUT`` holds ``out_lock`` (``flock`` on ``OUT.fastenc-lock`` beside it).
  ``OUT.swap-<pid>-<hex>`` beside ``OUT`` gets hard links to every file of ``OUT`` and to the staged
  entries, and the card; ``renameat2(RENAME_EXCHANGE)`` of it and ``OUT`` is the commit. Before
  it ``OUT`` is the old complete folder, after it the new one; open files keep working, a listing
  sees either. Then files another program added meanwhile move from the old folder (now at the
  swap name) into ``OUT``, and the old folder is deleted. A swap folder left by a dead process is
  deleted, never put back: ``OUT`` is complete on either side of the exchange.
- **Manifest publication**, the fallback where the swap cannot be done (not Linux, no
  ``RENAME_EXCHANGE`` or hard links: ``EINVAL``, ``ENOSYS``, ``EXDEV``, ``EPERM``, ``EOPNOTSUPP``;
  or ``FASTENC_SWAP=0``; ``publish_into``): the staged entries are renamed into ``OUT`` and the
  manifest (the sidecar) is renamed last -- that rename is the commit. A data file whose
  manifest is missing is a leftover that readers refuse and a rerun deletes.
- Cleanup after an exception is decided from where the files are, never from how far a loop got:
  Ctrl-C can arrive just after a rename has happened (``faults.RENAMED`` lets tests stop there).
- A rerun first cleans up: staging and swap folders (and legacy ``*.tmp-<pid>-<hex>`` files) of
  processes that are gone are deleted; an ``OUT.old-*`` of a dead process is put back as ``OUT``
  if the commit never happened, else deleted.

Every mkdir, write, fsync, rename, hard link and exchange here goes through
``fastenc.run.faults.step`` first (a rename and an exchange also just after), so a test can fail
any one of them.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import re
import secrets
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterable

from fastenc.run import faults

__all__ = [
    "Stage",
    "StagedFile",
    "temp_name",
    "clean_stale",
    "publish_folder",
    "publish_new",
    "publish_into",
    "publish_swap",
    "out_lock",
    "RunLock",
    "LOCK_SUFFIX",
    "SWAP_ENV",
    "fsync_dir",
    "has_files",
]

#: ``tmp``: a staging folder or file; ``old``: an output renamed aside; ``swap``: a rebuilt shared
#: folder before its exchange, or the replaced one after it (``publish_swap``)
_TEMP_RE = re.compile(r"\.(tmp|old|swap)-(\d+)-[0-9a-f]+$")


def temp_name(name: str, kind: str = "tmp") -> str:
    """``name.tmp-<pid>-<hex>``: a temporary name that says which process owns it."""
    return f"{name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def fsync_dir(directory: Path) -> None:
    """fsync a directory, so that the renames and creations in it are durable."""
    faults.step("fsync", directory)
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF):  # some file systems cannot fsync a directory
            raise
    finally:
        os.close(fd)


def rename_step(src: Path, dst: Path) -> None:
    faults.step("rename", dst)
    os.replace(src, dst)
    # A signal (Ctrl-C) can arrive just after a rename has happened: the callers' cleanup decides
    # from the files, never from a list updated after this returns. The hook lets tests stop here.
    faults.step(faults.RENAMED, dst)


def remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def has_files(path: Path) -> bool:
    """True if ``path`` (a directory) holds any file, at any depth (empty folders do not count)."""
    return any(not p.is_dir() for p in path.rglob("*"))


class _HookedFile:
    """A file object whose ``write`` first calls the fault hook (everything else is the file's)."""

    def __init__(self, file, path: Path):
        self._file = file
        self._path = path

    def write(self, data):
        faults.step("write", self._path)
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)


class StagedFile:
    """One file being written in a ``Stage``; ``finish()`` flushes, fsyncs (if ``durable``) and
    closes it."""

    def __init__(self, path: Path, mode: str = "wb", durable: bool = True, **open_kwargs):
        if not mode.startswith("w"):
            raise ValueError("a staged file is a new file: mode must start with 'w'")
        self.path = path
        self.durable = durable
        self.file = _HookedFile(open(path, mode, **open_kwargs), path)
        self.state = "open"

    @property
    def temp_path(self) -> Path:
        return self.path

    def finish(self) -> None:
        if self.state != "open":
            return
        self.file.flush()
        faults.step("fsync", self.path)  # (also without the fsync: a fault drill fails a file's finish here)
        if self.durable:
            os.fsync(self.file.fileno())
        self.file.close()
        self.state = "finished"

    def write_back(self, wait: bool = True) -> None:
        """Write what the file holds so far to disk (``fdatasync``), so that ``finish()``'s fsync,
        the durability point, has only the rest to write; a streamed reduce calls it from its
        thread after each unit (``fastenc.run.units.InOrder``). ``wait=False``: only have the disk
        start on it (``finish_after_check``: a re-read of the file then overlaps the disk's
        writing); where the system cannot (not Linux), nothing."""
        if self.state == "open":
            self.file.flush()
            if wait:
                os.fdatasync(self.file.fileno())
            else:
                faults.step(faults.WRITE_BACK, self.path)
                _start_write_back(self.file.fileno())

    def close_quietly(self) -> None:
        with contextlib.suppress(Exception):  # closing a broken file must not hide the original error
            self.file.close()
        self.state = "discarded"


class Stage:
    """A temporary folder that receives one output (or one unit of work) before it is published.

    Files are opened by their path relative to the output (``stage.open("b1/part_00.bin")``);
    folders are created as needed. ``finish()`` fsyncs every file and folder; ``discard()``
    deletes the whole folder. A stage can be published by ``publish_folder`` (its folder becomes
    ``OUT``), ``publish_swap`` (linked into a rebuilt ``OUT`` swapped in) or ``publish_into`` (its
    entries move into an existing ``OUT``, the manifest last);
    a future map/reduce run can also keep finished stages as units and publish them in a reduce step.

    ``durable=False`` leaves out the fsyncs (``finish()`` only flushes and closes): for a stage whose
    files are checked by their content before anything trusts them, a map unit's spill
    (``fastenc.run.units.WorkDir``), where a lost write after a crash costs a redone unit, not a
    wrong output.
    """

    def __init__(self, directory: Path, durable: bool = True):
        self.dir = Path(directory)
        self.durable = durable
        self.files: list[StagedFile] = []
        self._dirs: set[Path] = set()
        self._mkdir(self.dir)

    def _mkdir(self, d: Path) -> None:
        if d in self._dirs:
            return
        if d != self.dir:
            self._mkdir(d.parent)
        faults.step("mkdir", d)
        d.mkdir(exist_ok=d != self.dir)
        self._dirs.add(d)

    def path(self, rel: str | os.PathLike) -> Path:
        """The staged path of ``rel`` (its folder is created)."""
        p = self.dir / rel
        self._mkdir(p.parent)
        return p

    def open(self, rel: str | os.PathLike, mode: str = "wb", **open_kwargs) -> StagedFile:
        sf = StagedFile(self.path(rel), mode, durable=self.durable, **open_kwargs)
        self.files.append(sf)
        return sf

    def write_bytes(self, rel: str | os.PathLike, data: bytes) -> None:
        sf = self.open(rel)
        sf.file.write(data)
        sf.finish()

    def write_text(self, rel: str | os.PathLike, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))

    def write_json(self, rel: str | os.PathLike, obj) -> None:
        """``obj`` as JSON (indent 2, UTF-8, trailing newline)."""
        self.write_text(rel, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")

    def copy_file(self, src: Path, rel: str | os.PathLike) -> None:
        sf = self.open(rel)
        with open(src, "rb") as inp:
            for block in iter(lambda: inp.read(1 << 20), b""):
                sf.file.write(block)
        sf.finish()

    def finish(self) -> None:
        """Every file flushed, fsynced and closed, and every folder fsynced (deepest first); without
        the fsyncs for a stage that is not ``durable``."""
        for sf in self.files:
            sf.finish()
        if self.durable:
            for d in sorted(self._dirs, key=lambda p: len(p.parts), reverse=True):
                fsync_dir(d)

    def discard(self) -> None:
        for sf in self.files:
            if sf.state == "open":
                sf.close_quietly()
        remove_path(self.dir)


# ----------------------------------------------------------------------------------------------
# Publication
# ----------------------------------------------------------------------------------------------


def publish_folder(stage: Stage, out: Path, is_own: Callable[[str], bool]) -> None:
    """Make the stage's folder ``out`` by one rename (the commit).

    ``out`` may be absent, a folder without files, or a previous output (the caller decided that
    it may be replaced). A previous one is renamed aside first and deleted after the commit;
    entries in it that ``is_own`` does not claim (someone else's notes) are moved into the new
    ``out``. Folders without files are simply removed first. An exception after the commit's
    rename (Ctrl-C just then) still finishes the replaced output before it propagates.
    """
    stage.finish()
    old = None
    try:
        if out.exists():
            if has_files(out):
                old = out.with_name(temp_name(out.name, "old"))
                rename_step(out, old)
            else:
                shutil.rmtree(out)
        rename_step(stage.dir, out)  # the commit
    except BaseException:
        if stage.dir.exists():  # not committed: the previous output comes back, nothing changed
            if old is not None and old.exists() and not out.exists():
                os.replace(old, out)
            raise
        _after_commit(out, old, is_own)
        raise
    _after_commit(out, old, is_own)


def publish_new(stage: Stage, out: Path) -> bool:
    """Make the stage's folder ``out`` by one rename, if ``out`` is absent or an empty folder;
    False (and nothing changed) if ``out`` has become a folder with entries meanwhile (another
    process published into it first). The rename itself decides: it never replaces a folder
    that has entries, so two processes cannot both create ``out``."""
    stage.finish()
    try:
        rename_step(stage.dir, out)  # the commit
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY) and stage.dir.exists():
            return False
        raise
    fsync_dir(out.parent)
    return True


def _after_commit(out: Path, old: Path | None, is_own: Callable[[str], bool]) -> None:
    fsync_dir(out.parent)
    if old is not None:
        _finish_old(old, out, is_own)


def _finish_old(old: Path, out: Path, is_own: Callable[[str], bool]) -> None:
    """After the commit: move others' entries of the replaced output into ``out``, delete the rest."""
    for entry in sorted(old.iterdir()):
        if not is_own(entry.name) and not (out / entry.name).exists():
            rename_step(entry, out / entry.name)
    remove_path(old)


def publish_into(stage: Stage, out: Path, manifest: str, shared: Iterable[str] = (), replaced: Iterable[str] = ()) -> None:
    """Move the stage's top-level entries into the existing folder ``out``, ``manifest`` last.

    The manifest's rename is the commit. ``replaced``: entries of an earlier output that this one
    replaces (its manifest first, so that it is un-committed before its data changes); they are
    moved aside into the stage and put back if the commit does not happen. Entries named in
    ``shared`` are left as they are in ``out`` when already there (``tokenizer/``).
    """
    stage.finish()
    aside = stage.dir / ".replaced"
    old = [name for name in [manifest, *replaced] if (out / name).exists()]
    staged = sorted(p.name for p in stage.dir.iterdir() if p.name not in (manifest, aside.name))
    moving = [name for name in staged if not (name in set(shared) and (out / name).exists())]
    try:
        if old:
            aside.mkdir()
        for name in old:
            rename_step(out / name, aside / name)
        for name in moving:
            rename_step(stage.dir / name, out / name)
        rename_step(stage.dir / manifest, out / manifest)  # the commit
    except BaseException:
        if not (stage.dir / manifest).exists():  # committed: the exception came just after the commit
            remove_path(stage.dir)
            raise
        _undo_into(stage, out, moving, old, aside)
        raise
    fsync_dir(out)
    remove_path(stage.dir)


def _undo_into(stage: Stage, out: Path, moving: list[str], old: list[str], aside: Path) -> None:
    """Not committed: what was moved into ``out`` is a temporary again (judged by where each entry
    is, not by how far the loop got), and the earlier output comes back, its manifest last."""
    for name in moving:
        if not (stage.dir / name).exists():
            remove_path(out / name)
    for name in reversed(old):
        if (aside / name).exists():
            os.replace(aside / name, out / name)


# ----------------------------------------------------------------------------------------------
# Publication by a folder swap (Linux): a shard added to a shared OUT in one step
# ----------------------------------------------------------------------------------------------

LOCK_SUFFIX = ".fastenc-lock"
#: ``FASTENC_SWAP=0`` makes ``publish_swap`` decline, so that the sidecar-last rule is used (tests, drills)
SWAP_ENV = "FASTENC_SWAP"
#: what a kernel or file system that cannot hard-link or exchange answers: the sidecar-last rule then
_NO_SWAP = {errno.EINVAL, errno.ENOSYS, errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP}
_SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276}
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _libc():
    """The C library through ctypes (Linux only; loaded at its first use, not at import)."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def out_lock(out: Path):
    """The exclusive lock every fastenc writer of the shared folder ``out`` holds while it changes
    it: ``flock`` on ``OUT.fastenc-lock`` beside ``out``. Not on ``out`` itself: a swap gives ``out``
    another inode, and a lock on the old one would exclude nobody."""
    import fcntl

    fd = os.open(_beside(out, LOCK_SUFFIX), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class RunLock:
    """The lock one run of a request holds from its start to its end: ``flock`` on a file beside
    ``OUT`` (``Run`` names it), so that a second run into the same ``-o`` waits for the first, then
    finds its output published (or resumes its units), instead of writing into its work folder.
    Advisory, and released by the kernel when its holder dies (``kill -9``): a lock is never stale.
    The holder writes its pid into the file (for the other run's line) and deletes the file as it
    releases it; whoever got the lock on the deleted file takes the new one instead."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self, waiting: Callable[[int | None], None] | None = None) -> None:
        """Take the lock; ``waiting(pid)`` once, before waiting, when another live process holds it."""
        try:
            import fcntl
        except ImportError:  # (no flock: no lock, as before)
            return
        told = False
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                if exc.errno in _NO_LOCK:  # e.g. a finished output on a read-only mount: its rerun has nothing to write
                    return
                raise
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if waiting is not None and not told:
                        waiting(_holder(fd))
                        told = True
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError as exc:
                    if exc.errno not in _NO_LOCK:  # a file system without flock (some NFS): no lock, as before
                        raise
                    os.close(fd)
                    return
                if _same_file_fd(fd, self.path):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                    self._fd = fd
                    return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # its holder deleted it as it let go: lock the file at the path now

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if _same_file_fd(fd, self.path):
                os.unlink(self.path)  # while held: a run waiting on this file then takes a new one
        except OSError:
            pass
        finally:
            os.close(fd)  # closing releases the lock


#: where a run goes on without its lock: the folder cannot be written (a rerun of a finished output
#: on a read-only mount must still say "nothing to do"), or the file system has no flock
_NO_LOCK = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


def clean_locks(directory: Path, prefix: str, suffix: str) -> None:
    """Delete the ``RunLock`` files ``<prefix>*<suffix>`` in ``directory`` that no live process
    holds (a worker killed while it held one leaves the file; the lock itself died with it)."""
    for p in sorted(directory.glob(f"{prefix}*{suffix}")):
        lock = RunLock(p)
        try:
            fd = os.open(p, os.O_RDWR)
        except OSError:
            continue
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (ImportError, OSError):  # held: a live run's
            os.close(fd)
            continue
        lock._fd = fd
        lock.release()


def _same_file_fd(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def _holder(fd: int) -> int | None:
    """The pid that the lock's holder wrote into it (None if not written yet)."""
    try:
        return int(os.pread(fd, 32, 0).decode("ascii").strip())
    except (OSError, ValueError):
        return None


def _beside(out: Path, suffix: str) -> Path:
    """``OUT<suffix>`` next to ``out`` (by its absolute path: ``-o .`` has no name of its own)."""
    out = Path(os.path.abspath(out))
    return out.with_name(out.name + suffix)


_SYNC_FILE_RANGE_WRITE = 2


def finish_after_check(files, check):
    """Finish ``files`` (``StagedFile``s: flush, fsync, close) after ``check()``, a re-read of what
    they hold, run while the disk writes them: their write-back is started first and the fsyncs,
    the durability point, wait only for what is left. Both orders read what the system holds;
    this one overlaps the check with the disk. Returns what ``check`` returns."""
    for f in files:
        f.write_back(wait=False)
    result = check()
    for f in files:
        f.finish()
    return result


def _start_write_back(fd: int) -> None:
    """``sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)``: write-back of the file's dirty pages
    started, not waited for (Linux; elsewhere, and where the call fails, nothing: the fsync
    that follows writes everything anyway)."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return
    fn = getattr(_libc(), "sync_file_range", None)
    if fn is not None:
        fn(ctypes.c_int(fd), ctypes.c_longlong(0), ctypes.c_longlong(0), ctypes.c_uint(_SYNC_FILE_RANGE_WRITE))


def _renameat2_exchange(a: Path, b: Path) -> None:
    """``renameat2(a, b, RENAME_EXCHANGE)``: ``a`` and ``b`` trade places in one step."""
    import ctypes
    import platform

    if not sys.platform.startswith("linux"):
        raise OSError(errno.ENOSYS, "renameat2 is Linux-only", str(b))
    libc = _libc()
    args = (ctypes.c_int(_AT_FDCWD), os.fsencode(a), ctypes.c_int(_AT_FDCWD), os.fsencode(b), ctypes.c_uint(_RENAME_EXCHANGE))
    if hasattr(libc, "renameat2"):  # glibc 2.28 and later
        r = libc.renameat2(*args)
    elif platform.machine().lower() in _SYS_RENAMEAT2:
        libc.syscall.restype = ctypes.c_long
        r = libc.syscall(ctypes.c_long(_SYS_RENAMEAT2[platform.machine().lower()]), *args)
    else:
        raise OSError(errno.ENOSYS, "renameat2 is not available", str(b))
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(a), None, str(b))


def _exchange(a: Path, b: Path) -> None:
    faults.step("exchange", b)
    _renameat2_exchange(a, b)
    faults.step(faults.RENAMED, b)  # as after a rename: it happened, the caller's bookkeeping has not


def _link(src: Path, dst: Path) -> None:
    faults.step("link", dst)
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileNotFoundError:
        if os.path.lexists(src):
            raise
        # another program deleted it from OUT just now: the new folder has it not either


def _link_tree(src: Path, swap: Stage, dst: Path, skip: set[str]) -> None:
    """Hard-link every file under ``src`` to the same place under ``dst`` (folders are recreated),
    the top-level names in ``skip`` left out."""
    for entry in sorted(src.iterdir()):
        if entry.name in skip:
            continue
        if entry.is_dir() and not entry.is_symlink():
            swap._mkdir(dst / entry.name)
            _link_tree(entry, swap, dst / entry.name, set())
        else:
            _link(entry, dst / entry.name)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samestat(os.lstat(a), os.lstat(b))
    except OSError:
        return False


def publish_swap(stage: Stage, out: Path, manifest: str, shared: Iterable[str] = (), replaced: Iterable[str] = (),
                 before_commit: Callable[[Stage], None] | None = None) -> bool:
    """Publish the stage's entries into the existing folder ``out`` by one exchange of folders.

    The caller holds ``out_lock(out)``. A folder ``OUT.swap-<pid>-<hex>`` beside ``out`` gets hard
    links to the staged entries and to every other file of ``out`` (``replaced`` and the manifest
    left out; ``shared`` entries already in ``out`` are ``out``'s), then ``before_commit(swap)``
    (the card) and the fsyncs; ``renameat2(RENAME_EXCHANGE)`` of it and ``out`` is the commit.
    After it the old folder (now at the swap name) gives the new ``out`` what another program
    put there meanwhile, and is deleted. False, with nothing changed, where the kernel or the file
    system cannot hard-link or exchange (or ``FASTENC_SWAP=0``): ``publish_into`` then.
    """
    if os.environ.get(SWAP_ENV) == "0":
        return False
    stage.finish()
    out = Path(os.path.abspath(out))  # ``-o .``: after the exchange "." is the old folder
    swap, ours = None, set()
    swap_path = out.with_name(temp_name(out.name, "swap"))  # (known before its mkdir, which a signal can follow)
    try:
        swap = Stage(swap_path)
        ours = _fill_swap(stage, swap, out, manifest, set(shared), {manifest, *replaced})
        if before_commit is not None:
            before_commit(swap)
        ours |= {sf.path.relative_to(swap.dir).parts[0] for sf in swap.files}
        swap.finish()
        _exchange(swap.dir, out)  # the commit
    except BaseException as exc:
        if swap is None or not _same_file(out / manifest, stage.dir / manifest):  # not committed
            remove_path(swap_path)
            if isinstance(exc, OSError) and exc.errno in _NO_SWAP:
                return False
            raise
        _finish_swap(swap.dir, out, ours | {manifest, *replaced}, stage)
        raise
    _finish_swap(swap.dir, out, ours | {manifest, *replaced}, stage)
    return True


def _fill_swap(stage: Stage, swap: Stage, out: Path, manifest: str, shared: set[str], dropped: set[str]) -> set[str]:
    """Link the staged entries into ``swap``, then the rest of ``out``; returns the names taken from the stage."""
    in_out = {p.name for p in out.iterdir()}
    staged = {p.name for p in stage.dir.iterdir()}
    ours = staged - (shared & in_out)
    _link_tree(stage.dir, swap, swap.dir, staged - ours)
    _link_tree(out, swap, swap.dir, ours | dropped | {stage.dir.name})
    return ours


def _finish_swap(old: Path, out: Path, ours: set[str], stage: Stage) -> None:
    """After the exchange: the old folder (at the swap name) is deleted, once what another program
    added to ``out`` (or replaced there) after the links were made is moved into the new ``out``;
    the stage, whose files ``out`` now holds, goes too."""
    try:
        _follow_cwd(old, out)
        fsync_dir(out.parent)
        if _carry(old, out, ours):
            fsync_dir(out)
    finally:
        remove_path(old)
        remove_path(stage.dir)


def _follow_cwd(old: Path, out: Path) -> None:
    """A process working in ``out`` (``-o .``) is now in the old folder: it moves to the new one."""
    with contextlib.suppress(OSError):
        if os.path.samestat(os.stat("."), os.stat(old)):
            os.chdir(out)


def _carry(old: Path, new: Path, skip: set[str] = frozenset()) -> bool:
    """Move into ``new`` every entry of ``old`` that ``new`` lacks or holds as another file (added
    or replaced after the links were made), folders compared entry by entry; True if any moved."""
    moved = False
    for entry in sorted(old.iterdir()):
        dst = new / entry.name
        if entry.name in skip:
            continue
        if entry.is_dir() and not entry.is_symlink() and dst.is_dir() and not dst.is_symlink():
            moved |= _carry(entry, dst)
        elif not os.path.lexists(dst) or not (entry.is_dir() or dst.is_dir() or _same_file(entry, dst)):
            rename_step(entry, dst)
            moved = True
    return moved


# ----------------------------------------------------------------------------------------------
# Stale temporaries
# ----------------------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process that has exited but is not reaped yet: its pid answers, its temporaries are
    orphans (a killed worker waits for init to reap it, which took up to 2 s on some machines)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:  # (no /proc: not Linux, or gone now)
        return False
    return text[text.rindex(b")") + 2:][:1] in (b"Z", b"X")


def clean_stale(directory: Path, prefix: str | None = None, is_own: Callable[[str], bool] = lambda name: True,
                ours: bool = False) -> list[Path]:
    """Delete the temporaries in ``directory`` left by processes that are gone (``kill -9``,
    power loss): ``<prefix>.tmp-<pid>-<hex>`` staging folders and files (any prefix when None).
    ``ours``: this process's own too (a stopped run, once nothing of it writes there any more:
    a signal can land between a stage's mkdir and the line that records it).

    ``<prefix>.old-<pid>-<hex>`` (an output renamed aside by ``publish_folder``) is put back as
    ``<prefix>`` when the commit never happened, else finished as after a commit. Returns the
    paths removed or restored.
    """
    done: list[Path] = []
    if not directory.is_dir():
        return done
    for p in sorted(directory.iterdir()):
        m = _TEMP_RE.search(p.name)
        pid = int(m.group(2)) if m else 0
        if not m or (prefix is not None and p.name[: m.start()] != prefix) or (_pid_alive(pid) and not (ours and pid == os.getpid())):
            continue
        if m.group(1) in ("tmp", "swap"):  # a swap folder is never put back: OUT is complete either way
            remove_path(p)
        else:
            out = directory / p.name[: m.start()]
            if out.exists():
                _finish_old(p, out, is_own)
            else:
                os.replace(p, out)
        done.append(p)
    return done
