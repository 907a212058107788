"""The run lifecycle every recipe shares: request, "already finished" check, overwrite policy,
cleanup of stale temporaries, thread count, stats, staging and the one-step publication.

A recipe describes its output once (``OutputSpec``) and runs as::

    request = make_request("bytes", paths, {"column": column, ...})
    with Run(spec, out_dir, request, overwrite=overwrite, threads=threads) as run:
        if run.done is not None:          # OUT already holds this very output: nothing to do
            return run.done
        f = run.stage.open("train_00000.bin")   # every file goes into the staging folder
        ...
        run.publish(manifest)             # manifest written into the stage, then the commit

Leaving the block by an exception (KeyboardInterrupt included) deletes the stage, restores the
thread count, and turns an OSError of the output side (disk full, permission, read-only file
system) into one ``OutputError`` line. An exception that arrives after the commit (Ctrl-C just
after the rename) leaves the published output as it is and says so (``InterruptedAfterPublish``).

One run of an output at a time: ``Run`` holds a lock beside ``OUT`` (``staging.RunLock``; one per
shard of a shared ``OUT``) from its checks to its end, so a second run into the same ``-o`` waits,
then finds the output done, resumes the units, or is refused as another request.

``OUT`` shared by many units (``mode="into"``, urls) but holding no file yet is created by this
run: it is staged whole beside ``OUT`` and appears by one rename, like a folder output. Once it
exists, each later unit is staged beside it too and, under the writers' lock
(``staging.out_lock``), published by one exchange of a rebuilt folder, its card included
(``staging.publish_swap``, Linux), or where that cannot be done by moving its files in, its
manifest last (``staging.publish_into``) (docs/atomic-output.md).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from fastenc.errors import InputError, InterruptedAfterPublish, OutputError, UsageError
from fastenc.run import card_file, staging

__all__ = ["OutputSpec", "Run", "Stats", "make_request", "request_changes", "finished_same", "output_error"]

#: errno values that mean "the output side failed" (disk, permissions, file system)
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EFBIG,
                  errno.ENOTDIR, errno.EISDIR, errno.EXDEV, errno.EBUSY, errno.ENAMETOOLONG, errno.EMLINK}


@dataclass(frozen=True)
class OutputSpec:
    """What the lifecycle needs to know about one recipe's output.

    ``manifest``: the file (relative to ``OUT``) whose presence means "complete"; its JSON has
    ``"format": format`` and ``"request"``. ``files_of(manifest)``: the ``(relative path,
    size or None)`` of every file it lists. ``is_own(name)``: whether a top-level entry of
    ``OUT`` belongs to this kind of output (others' files are never deleted). ``mode``:
    ``"folder"`` (``OUT`` is the output, published by renaming the staging folder) or
    ``"into"`` (``OUT`` is shared; the stage's entries move in, the manifest last; an ``OUT`` with
    no file yet is published whole, by one rename).
    ``leftovers``: for ``"into"``, the entries of ``OUT`` that a missing manifest makes leftovers.
    """

    recipe: str
    format: str
    manifest: str
    files_of: Callable[[dict], list]
    is_own: Callable[[str], bool]
    mode: str = "folder"
    leftovers: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()
    #: an extra check of a found output (``check(out, manifest) -> bool``), e.g. its data's hash:
    #: a finished output is one whose files verify, not one whose manifest exists
    check: Callable[[Path, dict], bool] | None = None
    #: ``card(folder) -> str``: the output's dataset card, rendered from its files alone (None: no card)
    card: Callable[[Path], str] | None = None


def make_request(recipe: str, sources: Sequence[os.PathLike | str], options: dict, tokenizer_sha256: str | None = None) -> dict:
    """What a run was asked to do, as stored in its manifest: two runs with equal requests
    produce byte-identical outputs (inputs are identified by path, size and mtime)."""
    from fastenc import __version__

    srcs = []
    for s in sources:
        st = os.stat(s)
        srcs.append([os.path.abspath(s), st.st_size, st.st_mtime_ns])
    request = {"recipe": recipe, "sources": srcs, "options": options, "tokenizer_sha256": tokenizer_sha256,
               "fastenc_version": __version__}
    return json.loads(json.dumps(request))  # the form it has once read back from the manifest


def request_changes(old: dict, new: dict) -> str:
    """What differs between two requests, in a few words: ``"option shard_bytes: 3000 -> 4000"``."""
    changes = []
    old_src = {s[0]: s[1:] for s in old.get("sources", [])}
    new_src = {s[0]: s[1:] for s in new.get("sources", [])}
    if list(old_src) != list(new_src):
        changes.append(f"input files: {len(old_src)} -> {len(new_src)} files or another order")
    for path in new_src:
        if path in old_src and old_src[path] != new_src[path]:
            changes.append(f"input {os.path.basename(path)} changed (size or mtime)")
    opts_old, opts_new = old.get("options", {}), new.get("options", {})
    for key in sorted(set(opts_old) | set(opts_new)):
        if opts_old.get(key) != opts_new.get(key):
            changes.append(f"option {key}: {opts_old.get(key)!r} -> {opts_new.get(key)!r}")
    for key in sorted((set(old) | set(new)) - {"sources", "options"}):
        if old.get(key) != new.get(key):
            changes.append(f"{key}: {old.get(key)!r} -> {new.get(key)!r}".replace("tokenizer_sha256", "tokenizer (sha256)"))
    return "; ".join(changes[:3]) + ("; ..." if len(changes) > 3 else "") if changes else "nothing visible changed"


def finished_same(out: Path, spec: OutputSpec, request: dict) -> dict | None:
    """The manifest if ``out`` already holds the complete output of this very request."""
    try:
        manifest = json.loads((out / spec.manifest).read_text(encoding="utf-8"))
        if manifest.get("format") != spec.format or manifest.get("request") != request:
            return None
        for rel, size in spec.files_of(manifest):
            p = out / rel
            if not p.is_file() or (size is not None and p.stat().st_size != size):
                return None
        if spec.check is not None and not spec.check(out, manifest):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return manifest


def output_error(exc: OSError, out: Path) -> OutputError:
    """One line for an OSError on the output side, naming the path and the fix."""
    where = exc.filename or out
    fixes = {
        errno.ENOSPC: "free some space or choose another -o", errno.EDQUOT: "free some quota or choose another -o",
        errno.EACCES: "check the permissions or choose another -o", errno.EPERM: "check the permissions or choose another -o",
        errno.EROFS: "the file system is read-only: choose another -o",
        errno.ENOTDIR: "a part of the path is a file, not a folder: choose another -o",
    }
    fix = fixes.get(exc.errno, "check the disk and the path, or choose another -o")
    return OutputError(f"cannot write the output {out}: {exc.strerror or exc} ({where}); nothing was published: {fix}")


def set_threads(n: int) -> int:
    """Set Numba's thread count (checked); returns the previous one."""
    import numba

    if not 1 <= n <= numba.config.NUMBA_NUM_THREADS:
        raise UsageError(f"--threads must be between 1 and {numba.config.NUMBA_NUM_THREADS} (got {n})")
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    return old


@contextlib.contextmanager
def thread_count(n: int | None) -> Iterator[None]:
    """``with thread_count(n):`` Numba runs on ``n`` threads inside, the previous count after."""
    if n is None:
        yield
        return
    old = set_threads(n)
    try:
        yield
    finally:
        import numba

        numba.set_num_threads(old)


#: the lock file beside ``OUT`` that a run holds (``staging.RunLock``; ``Run._lock_path``)
RUN_LOCK_SUFFIX = ".fastenc-run.lock"


def _holds(path: Path, manifest: dict) -> bool:
    """Whether ``path`` is this very manifest (its commit happened)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) == manifest
    except (OSError, ValueError):
        return False


def _refresh_shared_card(out: Path, spec: OutputSpec) -> None:
    """After the commit into a shared ``OUT`` (urls): rewrite ``OUT/README.md`` from every shard
    committed so far. The card is not part of the shard's commit (it describes all shards); a
    failure here is one warning line, the shard itself is published (``fastenc card OUT`` redoes it)."""
    from fastenc.errors import FastencError

    if spec.card is None:
        return
    try:
        card_file.write(out, spec.card)
    except (OSError, FastencError) as exc:
        _card_warning(out, exc)


def _card_warning(out: Path, exc: BaseException) -> None:
    import sys

    print(f"fastenc: warning: the shard is published but {out / card_file.CARD} could not be rewritten ({exc}); "
          f"run `fastenc card {out}`", file=sys.stderr)


def _after_commit_error(exc: BaseException, out: Path) -> None:
    """An exception that arrived after the commit (Ctrl-C just then, or a failed step after it,
    such as the folder's fsync): the output is complete, and the message must say so."""
    if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, InterruptedAfterPublish):
        raise InterruptedAfterPublish(out) from exc
    if isinstance(exc, OSError) and not isinstance(exc, OutputError):
        raise OutputError(f"the output {out} is published and complete, but a step after its commit failed: "
                          f"{exc.strerror or exc} ({exc.filename or out}): rerun the same command to tidy up") from exc


class Stats:
    """One run's timings and counters: ``with stats.time("encode"): ...``, ``stats.add("docs", n)``."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    @contextlib.contextmanager
    def time(self, stage: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t

    def add(self, name: str, n: int) -> None:
        self.counts[name] = self.counts.get(name, 0) + int(n)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


class Run:
    """One recipe run into ``out`` (see the module docstring). ``done`` is the existing manifest
    when ``out`` already holds this very output, else None."""

    def __init__(self, spec: OutputSpec, out: str | os.PathLike, request: dict, *, overwrite: bool = False,
                 threads: int | None = None, command: dict | None = None):
        self.spec = spec
        #: how this run was started (``{"command": argv, "cwd": ...}``, from the CLI): ``publish``
        #: records it in the manifest's ``build`` for the dataset card, never in the request (two
        #: spellings of one request give the same output; the finished-output check compares requests)
        self.command = command
        self.out = Path(out)
        self.request = request
        self.overwrite = overwrite
        self.threads = threads
        self.done: dict | None = None
        self.stats = Stats()
        self._stage: staging.Stage | None = None
        #: the stage's path, known before it is made: a signal can land between its mkdir and ``_stage``
        self._stage_path: Path | None = None
        self._old_threads: int | None = None
        #: "into" mode, and ``out`` holds no file yet: this run creates it, so the whole folder
        #: is staged beside it and appears by one rename (``staging.publish_new``)
        self._fresh = False
        self._committed = False
        self._lock: staging.RunLock | None = None

    # -- entering: check OUT, clean up, decide ------------------------------------------------

    def __enter__(self) -> "Run":
        try:
            try:
                self.done = self._prepare()
            except OSError as exc:
                raise output_error(exc, self.out) from exc
            if self.done is not None and self.spec.mode == "into":  # a run killed after its commit had no card yet
                _refresh_shared_card(self.out, self.spec)
            self._set_threads()
        except BaseException:
            self._unlock()
            raise
        return self

    def _lock_path(self) -> Path:
        """Beside ``OUT``: one lock per output, one per shard of a shared ``OUT`` (its runs may add other shards at once)."""
        out = Path(os.path.abspath(self.out))
        part = "" if self.spec.mode == "folder" else "." + Path(self.spec.manifest).stem
        return out.with_name(f"{out.name}{part}{RUN_LOCK_SUFFIX}")

    def _waiting(self, pid: int | None) -> None:
        import sys

        who = f"another fastenc run (pid {pid})" if pid else "another fastenc run"
        what = self.out if self.spec.mode == "folder" else self.out / self.spec.manifest
        print(f"fastenc: {who} is writing {what}; this run waits for it to end", file=sys.stderr, flush=True)

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _prepare(self) -> dict | None:
        out, spec = self.out, self.spec
        if out.exists() and not out.is_dir():
            raise InputError(f"output {out} exists and is not a directory: choose a directory path with -o")
        for parent in out.absolute().parents:
            if parent.exists():
                if not parent.is_dir():
                    raise InputError(f"cannot create the output {out}: {parent} is a file, not a folder; choose another -o")
                break
        out.parent.mkdir(parents=True, exist_ok=True)
        # one run of this output at a time, from here to the end of the run: a second one waits
        self._lock = staging.RunLock(self._lock_path())
        try:
            self._lock.acquire(self._waiting)
        except BaseException:  # a signal in the middle of taking it: no lock file is left behind unheld
            self._lock = None
            staging.clean_locks(self._lock_path().parent, self._lock_path().name, "")
            raise
        staging.clean_stale(out.parent, out.name, spec.is_own)  # stages (a new OUT's too) of processes that are gone
        if spec.mode == "into":
            if out.is_dir():
                staging.clean_stale(out, None, spec.is_own)
            self._fresh = not out.is_dir() or not staging.has_files(out)
        done = finished_same(out, spec, self.request)
        if done is not None and not self.overwrite:
            return done
        if spec.mode == "folder":
            self._check_folder_free(out)
        else:
            self._check_unit_free(out)
        return None

    def _check_folder_free(self, out: Path) -> None:
        if not out.is_dir() or not staging.has_files(out) or self.overwrite:
            return
        existing = sorted(p.name for p in out.iterdir())
        shown = ", ".join(existing[:5]) + (", ..." if len(existing) > 5 else "")
        raise InputError(
            f"output directory {out} is not empty ({shown}): pass --overwrite to replace a previous fastenc "
            f"{self.spec.recipe} output there, or choose an empty or new directory"
        )

    def _check_unit_free(self, out: Path) -> None:
        manifest = out / self.spec.manifest
        if not manifest.exists():
            for name in self.spec.leftovers:  # data moved in by a run that never committed
                staging.remove_path(out / name)
            return
        if not self.overwrite:
            names = " / ".join(self.spec.leftovers + (self.spec.manifest,))
            raise InputError(f"{out} already holds another output of {names} ({self._changes(manifest)}): "
                             "pass --overwrite to replace it, or choose another directory")

    def _changes(self, manifest: Path) -> str:
        try:
            return "another request: " + request_changes(json.loads(manifest.read_text(encoding="utf-8"))["request"], self.request)
        except (OSError, ValueError, KeyError, TypeError):
            return "from another request"

    def _set_threads(self) -> None:
        if self.threads is not None:
            self._old_threads = set_threads(self.threads)

    # -- the stage and the commit ---------------------------------------------------------------

    @property
    def stage(self) -> staging.Stage:
        """The staging folder (created on first use)."""
        if self._stage is None:
            # beside OUT, never in it: a shared OUT is replaced by a rebuilt folder (publish_swap)
            out = Path(os.path.abspath(self.out)) if self.spec.mode == "into" else self.out
            self._stage_path = out.with_name(staging.temp_name(out.name))
            self._stage = staging.Stage(self._stage_path)
        return self._stage

    def publish(self, manifest: dict) -> None:
        """Write ``manifest`` into the stage and publish the whole output in one step, with its
        dataset card ``README.md`` (``spec.card``, made from the output's files alone)."""
        stage = self.stage
        if self.command is not None:  # how it was built, for the card; not in the request
            manifest.setdefault("build", {}).update(self.command)
        stage.write_json(self.spec.manifest, manifest)
        try:
            if self.spec.mode == "folder":
                self._stage_card(stage)  # part of the output: it appears with the commit
                staging.publish_folder(stage, self.out, self.spec.is_own)
            elif not (self._fresh and self._publish_new(stage)):
                self._publish_into(stage, manifest)
        except BaseException:
            self._committed = _holds(self.out / self.spec.manifest, manifest)  # e.g. Ctrl-C just after the commit
            raise
        self._committed = True
        self._stage = None

    def _publish_new(self, stage: staging.Stage) -> bool:
        """An ``OUT`` this run creates: the folder, its card included, appears by one rename.
        False if another run (another shard) created ``OUT`` meanwhile: then it is published
        into that one like any later shard."""
        self._stage_card(stage)
        if staging.publish_new(stage, self.out):
            return True
        with contextlib.suppress(FileNotFoundError):
            (stage.dir / card_file.CARD).unlink()  # the shared folder's card covers every shard: made anew below
        return False

    def _stage_card(self, stage: staging.Stage) -> None:
        """The card, written into the stage (which holds the whole output and its manifest) like every file of it."""
        if self.spec.card is not None:
            stage.write_text(card_file.CARD, self.spec.card(stage.dir))

    def _publish_into(self, stage: staging.Stage, manifest: dict) -> None:
        """A unit into an ``OUT`` that holds others, under the lock of its writers: by one exchange
        of a rebuilt folder, the card in it, where the system can; else its manifest renamed in
        last and the card rewritten after that commit (after the lock, which ``card_file.write`` takes)."""
        spec, swapped = self.spec, False
        try:
            with staging.out_lock(self.out):
                if self._fresh:  # OUT was created meanwhile by another unit's run
                    self._check_unit_free(self.out)
                swapped = staging.publish_swap(stage, self.out, spec.manifest, spec.shared, spec.leftovers, self._card_into)
                if not swapped:
                    staging.publish_into(stage, self.out, spec.manifest, spec.shared, spec.leftovers)
        finally:  # also when a step after the commit (the folder's fsync) failed
            if not swapped and _holds(self.out / spec.manifest, manifest):
                _refresh_shared_card(self.out, spec)

    def _card_into(self, swap: staging.Stage) -> None:
        """The card of the rebuilt folder (every committed unit and this one) replaces the linked
        old one, so that it appears with the commit. If it cannot be made, the old card stays."""
        from fastenc.errors import FastencError

        if self.spec.card is None:
            return
        try:
            text = self.spec.card(swap.dir)
        except FastencError as exc:
            _card_warning(self.out, exc)
            return
        with contextlib.suppress(FileNotFoundError):
            (swap.dir / card_file.CARD).unlink()
        swap.write_text(card_file.CARD, text)

    # -- leaving ------------------------------------------------------------------------------

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            return self._leave(exc_type, exc)
        finally:
            self._unlock()

    def _leave(self, exc_type, exc) -> bool:
        if self._old_threads is not None:
            import numba

            numba.set_num_threads(self._old_threads)
        if exc_type is None:
            return False
        if self._stage is not None:
            self._stage.discard()
            self._stage = None
        elif self._stage_path is not None and not self._committed:
            staging.remove_path(self._stage_path)
        if self.spec.mode == "folder" and not self._committed:
            # every temporary of this process beside OUT is this run's (the lock keeps any other
            # run of OUT out, in this process too): none outlives a stopped run
            out = Path(os.path.abspath(self.out))
            with contextlib.suppress(OSError):
                staging.clean_stale(out.parent, out.name, self.spec.is_own, ours=True)
        if self._committed:
            _after_commit_error(exc, self.out)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError) and self._is_output_side(exc):
            raise output_error(exc, self.out) from exc
        return False

    def _is_output_side(self, exc: OSError) -> bool:
        if exc.filename:
            # the output folder, or its staging folder beside it (``OUT.tmp-...``)
            return os.path.abspath(exc.filename).startswith(os.path.abspath(self.out))
        return exc.errno in _OUTPUT_ERRNOS
