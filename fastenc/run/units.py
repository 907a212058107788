"""Map/reduce over input units: the work folder of spills, and the map phase on N processes.

A run over many input files is split in two phases (docs/scale.md):

- **map**: each unit (one input file) is encoded on its own, by any process, in any order, into
  a *spill*: a folder ``OUT.fastenc-work/unit-NNNNN/`` beside ``OUT``. The spill is written under
  a temporary name (``unit-NNNNN.tmp-<pid>-<hex>``); its manifest ``unit.json`` (the unit's
  result, and the size and xxh3 of each of its files) is written last, then the folder is renamed
  to ``unit-NNNNN``. A unit is finished when its manifest is there **and every file it lists has
  that size and hash** (re-read): a marker alone never counts.
- **reduce**: one process streams the spills in input order into the final parts (I/O only), on
  a thread that follows the map (``InOrder``: each unit as soon as it and every unit before it
  are finished), and publishes ``OUT`` in one step (``fastenc.run.lifecycle``); the work folder
  is deleted after.

The work folder holds ``request.json``: a rerun with the same request resumes (finished units
are kept, the others redone); a rerun with another request is refused with a line naming what
changed, unless ``--overwrite``, which starts again. The folder is named ``OUT.fastenc-work``,
never ``OUT``, so it can never be taken for a finished output.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Callable, Sequence

from fastenc.errors import FastencError, InputError, UsageError
from fastenc.run import staging
from fastenc.run.lifecycle import request_changes

__all__ = ["WORK_SUFFIX", "UNIT_MANIFEST", "WorkDir", "work_dir_of", "file_xxh3", "map_units", "map_phase", "InOrder", "run_unit",
           "worker_threads", "read_blocks", "missing_units", "MissingUnits"]

WORK_SUFFIX = ".fastenc-work"
UNIT_MANIFEST = "unit.json"
REQUEST = "request.json"


def work_dir_of(out: str | os.PathLike) -> Path:
    """``OUT.fastenc-work``: beside ``OUT``, so that ``OUT`` itself appears only at publication."""
    out = Path(out)
    return out.with_name(out.name + WORK_SUFFIX)


def file_xxh3(path: Path) -> str:
    """xxh3_64 of a file's bytes (hex), hashed from a memory map of it (no copy through a buffer)."""
    import mmap

    import xxhash

    h = xxhash.xxh3_64()
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                h.update(m)
    return h.hexdigest()


class WorkDir:
    """The spills of one request (see the module docstring). ``open()`` creates or checks it."""

    def __init__(self, out: str | os.PathLike, request: dict):
        self.dir = work_dir_of(out)
        self.request = request

    def open(self, overwrite: bool = False, clean: bool = True) -> "WorkDir":
        """Create the folder, or resume it: refuse (or with ``overwrite`` discard) another request's.

        ``clean``: delete the temporaries of processes that are gone; ranks of a cluster job pass
        False (a process of another machine looks gone from here), the final step cleans up."""
        old = self._stored_request()
        if old is not None and old != self.request:
            if not overwrite and self._has_units():  # (with none finished, nothing is lost: start again)
                raise InputError(f"{self.dir} holds the unfinished run of another request ({request_changes(old, self.request)}): "
                                 "rerun the same command to finish it, or pass --overwrite to start again")
            self.remove()
        elif old is None and self.dir.exists():
            self.remove()  # no request.json: a folder whose creation was interrupted
        if not self.dir.exists():
            self._create()
        if clean:
            staging.clean_stale(self.dir)  # spills being written by processes that are gone
        return self

    def _has_units(self) -> bool:
        return any(p.name.startswith("unit-") and "." not in p.name for p in self.dir.iterdir())

    def _stored_request(self) -> dict | None:
        try:
            return json.loads((self.dir / REQUEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _create(self) -> None:
        tmp = self.dir.with_name(staging.temp_name(self.dir.name))
        stage = None
        try:
            stage = staging.Stage(tmp)
            stage.write_json(REQUEST, self.request)
            stage.finish()
        except BaseException:  # (a signal here too, even right after the mkdir: no temporary is left behind)
            if stage is not None:
                stage.discard()
            staging.remove_path(tmp)
            raise
        try:
            os.rename(tmp, self.dir)
        except OSError:  # another rank created it first (the same request, checked next)
            stage.discard()
            if self._stored_request() != self.request:
                raise

    def unit_dir(self, i: int) -> Path:
        return self.dir / f"unit-{i:05d}"

    def finished(self, i: int) -> dict | None:
        """The unit's result if its spill is complete and every file verifies, else None."""
        d = self.unit_dir(i)
        try:
            manifest = json.loads((d / UNIT_MANIFEST).read_text(encoding="utf-8"))
            for rel, (size, digest) in manifest["files"].items():
                p = d / rel
                if p.stat().st_size != size or file_xxh3(p) != digest:
                    return None
            return manifest["result"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def stage(self, i: int) -> staging.Stage:
        """A fresh staging folder for unit ``i`` (a temporary name in the work folder), without fsyncs:
        a spill is trusted only once its files match the sizes and xxh3 digests of its manifest
        (``finished``, and the reduce's reads), so a write that a crash of the machine lost costs a
        redone unit, never a wrong output. Its fsyncs were 11% of a one-worker gpt2 run's map and,
        with two workers, queued on the disk together. The final
        output's stage stays durable."""
        return staging.Stage(self.dir / staging.temp_name(self.unit_dir(i).name), durable=False)

    def commit(self, i: int, stage: staging.Stage, result: dict) -> None:
        """Hash the stage's files, write its manifest last, and rename it to ``unit-NNNNN``."""
        stage.finish()
        files = {}
        for p in sorted(stage.dir.rglob("*")):
            if p.is_file():
                files[p.relative_to(stage.dir).as_posix()] = [p.stat().st_size, file_xxh3(p)]
        stage.write_json(UNIT_MANIFEST, {"unit": i, "files": files, "result": result})
        stage.finish()
        final = self.unit_dir(i)
        if final.exists():  # a spill that did not verify: replaced
            shutil.rmtree(final)
        staging.rename_step(stage.dir, final)

    def remove(self) -> None:
        """Delete the work folder: its unit folders on a thread per core (deleting a spill frees its
        page cache, ~5 ms per 22 MB file here), then the rest."""
        from fastenc.tasks import each_on_threads

        try:
            units = [d for d in self.dir.iterdir() if d.is_dir()]
        except OSError:
            units = []
        each_on_threads(lambda d: shutil.rmtree(d, ignore_errors=True), units)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "WorkDir":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        """A run that fails before any unit finished leaves nothing behind (nothing to resume); one
        that fails later keeps its finished units and deletes the spills its stopped workers left."""
        if exc_type is not None and self.dir.is_dir():
            if not self._has_units():
                self.remove()
            else:
                with contextlib.suppress(OSError):  # (a failed clean-up must not hide why the run stopped)
                    staging.clean_stale(self.dir, ours=True)
        return False

    def remove_if_same(self) -> None:
        """After publication: the spills of this request are no longer needed (a run killed
        between its commit and this cleanup leaves them; the next run finds ``OUT`` done)."""
        if self._stored_request() == self.request:
            self.remove()


# ----------------------------------------------------------------------------------------------
# The map phase on N processes
# ----------------------------------------------------------------------------------------------


def check_workers(workers: int) -> None:
    """``--workers`` of every recipe: one process or more."""
    if workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {workers})")


def worker_threads(workers: int, threads: int | None) -> int:
    """Numba threads per process: ``threads`` (default: every core) for one process; for
    ``workers`` processes at most ``cores // workers`` each, so that together they never use more
    threads than there are cores (``threads`` then caps each worker)."""
    import numba

    cores = numba.config.NUMBA_NUM_THREADS
    if workers == 1:
        return min(threads or cores, cores)
    return max(1, min(threads or cores, cores // workers))


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_PR_SET_PDEATHSIG = 1  # prctl(2)


def _init_worker(threads: int, count=None, workers: int = 1, parent: int | None = None) -> None:
    if parent is not None:
        _die_with_parent(parent)
    # Ctrl-C goes to the whole process group: the parent alone reports it (one line) and stops
    # the workers; a worker printing its own traceback would bury that line. SIGTERM ends a worker
    # at once (its spill stays a temporary, which the parent deletes). Both were blocked by the
    # parent across the fork (``_signals_blocked``): from here on they are handled so.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS | {signal.SIGALRM})  # (as _signals_blocked left them)
    from fastenc.run import elastic, faults

    faults.install_from_env()  # a drill's or a test's fault, in this worker (docs/atomic-output.md)
    from fastenc.run.process import kernels_only_process

    kernels_only_process()  # a worker runs fastenc's kernels only
    import numba
    import pyarrow

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    pyarrow.set_cpu_count(threads)  # parquet decoding too: N workers share the cores, not N x cores
    if count is not None:
        elastic.attach(count, workers, threads)  # idle workers' cores, lent at the map's end


def _die_with_parent(parent: int) -> None:
    """A worker must not outlive the command that started it (``kill -9``, the OOM killer): on
    Linux the kernel sends it SIGKILL when its parent dies (``PR_SET_PDEATHSIG``); elsewhere a
    thread watches the parent's pid. A parent already gone before this point is caught by the pid
    check after it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    else:
        armed = False
    if os.getppid() != parent:
        os._exit(1)
    if not armed:
        import threading

        threading.Thread(target=_watch_parent, args=(parent,), name="fastenc-parent-watch", daemon=True).start()


def _watch_parent(parent: int, interval: float = 0.2) -> None:
    import time

    while os.getppid() == parent:
        time.sleep(interval)
    os._exit(1)


@contextlib.contextmanager
def _signals_blocked():
    """SIGINT and SIGTERM held back (not lost) while this thread starts the workers. A fork runs
    Python's ``os.register_at_fork`` hooks (logging's, for one) in this process, and an exception
    raised inside one is printed as "ignored" and dropped: a Ctrl-C handled there was lost and the
    run went on. Held back, the signal is handled right after, in plain code. The workers start
    with both blocked too, until ``_init_worker`` has set how they handle them.

    The mask alone does not hold it back: the kernel hands a process's signal to any thread that
    does not block it (Numba's, Arrow's), and Python then runs the handler in the main thread
    anyway, inside the pool's start (where an exception leaves the pool unable to shut down). So
    the main thread's handlers only record the signal here, and it is raised again after. SIGALRM
    too, where it has a handler: ``fastenc.cli.stop`` raises a signal that came during an import
    from a timer a moment later."""
    import threading

    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    deferred = _STOP_SIGNALS | ({signal.SIGALRM} if hasattr(signal, "SIGALRM") else set())
    handlers = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in deferred
                if callable(signal.getsignal(s))}  # (SIG_DFL, SIG_IGN, or set outside Python: kept)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS | set(handlers))
    try:
        yield
    finally:
        for s, handler in handlers.items():  # first: one still pending at the unmask reaches the command's handler
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        if held:
            signal.raise_signal(held[0])  # to the handler the command installed, now in plain code


@contextlib.contextmanager
def _env(name: str, value: str):
    """``os.environ[name] = value`` inside (spawned workers inherit it), restored after."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def map_units(task: Callable[[int], object], todo: Sequence[int], *, workers: int, threads: int, bar=None,
              sink: "InOrder | None" = None) -> dict:
    """Run ``task(i)`` for every unit ``i`` in ``todo``: here when ``workers == 1``, else on
    ``workers`` processes of ``threads`` Numba threads each (``task`` must pickle): this one and
    ``workers - 1`` started ones (forked where that is safe, else spawned: ``fastenc.run.forking``).

    This process is one of the workers because it is already started (Python, pyarrow, Numba
    and the vocabulary loaded), where a spawned worker spends ~1-2 CPU-s getting there.
    Every worker takes the next unit from the front of ``todo``
    (each started worker gets its first one before this process starts on any), so units finish
    roughly in input order and a streamed reduce (``sink``) follows close behind.

    ``bar`` (a progress bar over units) is advanced as units finish, in any order; ``sink`` gets
    ``sink.start()`` once the workers exist and ``sink.put(i, result)`` as each unit finishes (an
    error of the sink stops the phase like a worker's). A worker that fails stops the phase with
    its error; one that dies (``kill -9``, out of memory) stops it with one line saying that a
    rerun resumes (this process notices between two of its own units). Finished units stay
    finished either way. Returns ``{i: task(i)}``.
    """
    results = {}
    if workers == 1 or len(todo) <= 1:
        if sink is not None:
            sink.start()
        for i in todo:
            results[i] = task(i)
            if sink is not None:
                sink.put(i, results[i])
            if bar is not None:
                bar.update(1)
        return results
    return _map_on_pool(task, list(todo), workers, threads, bar, sink)


def _map_on_pool(task, todo: list, workers: int, threads: int, bar, sink) -> dict:
    import concurrent.futures as cf
    import multiprocessing

    from fastenc.run import elastic, forking

    # decided here, before the feeder thread (or any other of ours) exists: the pool forks its
    # processes at the first submit, in feeder.start()
    ctx = multiprocessing.get_context(forking.start_method())
    spawned = min(workers, len(todo)) - 1
    units = _Units(todo)
    count = elastic.MapCount(ctx, len(todo))
    results: dict = {}
    with _env("NUMBA_NUM_THREADS", str(threads)):
        pool = cf.ProcessPoolExecutor(max_workers=spawned, mp_context=ctx, initializer=_init_worker,
                                      initargs=(threads, count.shared, spawned + 1, os.getpid()))
        feeder = _Feeder(pool, task, units, bar, sink, count)
        try:
            with _signals_blocked():
                feeder.start(spawned)  # the workers are started (forked) here, before any thread of ours
            if sink is not None:
                sink.start()
            with _threads(threads), elastic.attached(count.shared, spawned + 1, threads):
                while feeder.failure is None and (i := units.next()) is not None:
                    results[i] = task(i)
                    count.finished()
                    feeder.advance(i, results[i])
            feeder.join()
            if feeder.failure is not None:
                raise feeder.failure
            results.update(feeder.results)
            return results
        except cf.process.BrokenProcessPool:
            raise WorkerDied("a worker process died (killed, or out of memory): the units it finished are kept; "
                             "rerun the same command to finish the others") from None
        except BaseException:
            feeder.stopping = True
            _stop(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            feeder.join()


class _Units:
    """The units not started yet, taken in input order by every worker (this process included)."""

    def __init__(self, todo: list):
        import collections
        import threading

        self._left = collections.deque(todo)
        self._lock = threading.Lock()

    def next(self):
        with self._lock:
            return self._left.popleft() if self._left else None


class _Feeder:
    """A thread that keeps one unit in flight per spawned worker (the pool's own queue would hold
    units ahead of a worker that this process could be encoding): when one finishes, the next
    unit from the front is submitted. A worker's error, or its death, is kept in ``failure`` and
    stops the feeding."""

    def __init__(self, pool, task, units: _Units, bar, sink, count):
        import threading

        self.pool, self.task, self.units, self.bar, self.sink = pool, task, units, bar, sink
        self.count = count  # the map's unfinished units (fastenc.run.elastic)
        self.results: dict = {}
        self.failure: BaseException | None = None
        self.stopping = False
        self._index: dict = {}
        self._bar_lock = threading.Lock()  # both threads advance the bar: no update may be lost
        self._thread = threading.Thread(target=self._run, name="fastenc-feeder", daemon=True)

    def advance(self, i: int, result) -> None:
        """Unit ``i`` finished (by either thread): to the sink, and one more on the bar."""
        if self.sink is not None:
            self.sink.put(i, result)
        if self.bar is not None:
            with self._bar_lock:
                self.bar.update(1)

    def start(self, spawned: int) -> None:
        # each spawned worker's first unit is submitted here, before this process takes any
        self._in_flight = {f for f in (self._submit() for _ in range(spawned)) if f is not None}
        self._thread.start()

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join()

    def _submit(self):
        i = None if self.stopping else self.units.next()
        if i is None:
            return None
        f = self.pool.submit(self.task, i)
        self._index[f] = i
        return f

    def _run(self) -> None:
        import concurrent.futures as cf

        in_flight = self._in_flight
        while in_flight:
            done, in_flight = cf.wait(in_flight, return_when=cf.FIRST_COMPLETED)
            for f in done:
                if f.cancelled():
                    continue
                self.count.finished()
                error = f.exception()
                if error is not None:
                    if self.failure is None:
                        self.failure = error
                    self.stopping = True
                    continue
                i = self._index[f]
                self.results[i] = f.result()
                try:
                    self.advance(i, self.results[i])
                except BaseException as exc:  # the sink failed (the streamed reduce): stop like a worker's error
                    self.failure = self.failure or exc
                    self.stopping = True
                    continue
                try:
                    nxt = self._submit()
                except RuntimeError:  # the pool was shut down (this process stopped the phase)
                    nxt = None
                if nxt is not None:
                    in_flight.add(nxt)


@contextlib.contextmanager
def _threads(threads: int):
    """This process's Numba and Arrow threads set to a worker's ``threads`` while it encodes units
    beside the spawned workers (so that together they never use more threads than cores), then
    restored."""
    import numba
    import pyarrow

    old_numba, old_arrow = numba.get_num_threads(), pyarrow.cpu_count()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    pyarrow.set_cpu_count(threads)
    try:
        yield
    finally:
        numba.set_num_threads(old_numba)
        pyarrow.set_cpu_count(old_arrow)


def _stop(pool) -> None:
    """End the workers now (a signal, or another worker failed), with SIGKILL: a worker still
    starting holds SIGTERM blocked (``_signals_blocked``). Their spills stay temporaries, deleted
    once they are gone (``WorkDir.__exit__``)."""
    for p in list(getattr(pool, "_processes", {}).values()):
        with contextlib.suppress(Exception):
            p.kill()


class WorkerDied(FastencError):
    """A map worker exited without a result (signal, out of memory)."""

    exit_code = 1


# ----------------------------------------------------------------------------------------------
# One unit, and the whole map phase of a recipe
# ----------------------------------------------------------------------------------------------


def run_unit(work: WorkDir, i: int, produce: Callable[[staging.Stage], dict]) -> dict:
    """Write unit ``i``'s spill with ``produce(stage) -> result`` and commit it; a failure
    (or Ctrl-C) deletes the stage, so only complete spills ever get the final name."""
    stage = work.stage(i)
    try:
        result = produce(stage)
        work.commit(i, stage, result)
    except BaseException:
        stage.discard()
        raise
    return result


def map_phase(work: WorkDir, task: Callable[[int], object], n_units: int, *, workers: int, threads: int | None,
              before_workers: Callable[[], None] | None, desc: str, quiet: bool,
              reduce_unit: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Run the units whose spill does not verify yet (all of them on a fresh start), then return
    every unit's result, in input order. ``before_workers()``: called once before the workers start
    (the recipe compiles its kernels ahead there; each worker would otherwise compile them on its own).

    ``reduce_unit(i, result)``: the reduce of one unit, called once per unit in input order, on a
    thread of this process while the map runs (``InOrder``); returns when every unit is reduced."""
    from fastenc.progress import progress

    results = {i: work.finished(i) for i in range(n_units)}  # each spill re-read and checked once
    todo = [i for i, r in results.items() if r is None]
    if workers > 1 and len(todo) > 1 and before_workers is not None:
        before_workers()
    sink = None if reduce_unit is None else InOrder(n_units, reduce_unit)
    try:
        if sink is not None:
            for i, r in results.items():
                if r is not None:
                    sink.put(i, r)  # resumed units: reduced first (the thread starts with the map)
        with progress(n_units, unit="file", desc=desc, quiet=quiet, unit_scale=False) as bar:
            bar.update(n_units - len(todo))
            # a new spill's files were hashed by its commit, after they were written: that is its check
            results.update(map_units(task, todo, workers=workers, threads=worker_threads(workers, threads), bar=bar,
                                     sink=sink))
        if sink is not None:
            sink.finish(quiet)
    finally:
        if sink is not None:
            sink.stop()  # (after an error: the reduce stops before its stage is discarded)
    return [results[i] for i in range(n_units)]


class InOrder:
    """The reduce of finished units, streamed in input order while the map runs (docs/scale.md).

    The map finishes units in any order; ``put(i, result)`` hands each one over. A thread of this
    process reduces unit ``next`` as soon as it is there, then ``next + 1``, ...: the in-order
    prefix of finished units is reduced while the later ones are still being encoded, so what is
    left after the map is the tail behind the last unit to finish. The reduce is I/O (copies,
    hashes, fsyncs) that releases the GIL; its output is the same as reducing all units one after
    another afterwards, since it is that very loop, only started earlier.

    The thread starts at ``start()``, which the map calls once its worker processes exist: a fork
    must copy no thread of ours (``fastenc.run.forking``). A reduce error is raised by the next
    ``put`` (stopping the map) or by ``finish``.
    """

    def __init__(self, n_units: int, reduce_unit: Callable[[int, dict], None]):
        import threading

        self._n = n_units
        self._reduce_unit = reduce_unit
        self._ready: dict = {}
        self._cond = threading.Condition()
        self.next = 0  # the next unit to reduce: every unit before it is reduced
        self.error: BaseException | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import threading

        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fastenc-reduce", daemon=True)
            self._thread.start()

    def put(self, i: int, result: dict) -> None:
        if self.error is not None:
            raise self.error
        with self._cond:
            self._ready[i] = result
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and self.next < self._n and self.next not in self._ready:
                    self._cond.wait()
                if self._stopping or self.next >= self._n:
                    return
                i, result = self.next, self._ready.pop(self.next)
            try:
                self._reduce_unit(i, result)
            except BaseException as exc:
                self.error = exc
                return
            with self._cond:
                self.next += 1
                self._cond.notify_all()

    def finish(self, quiet: bool) -> None:
        """After the map: wait until every unit is reduced (a bar over what was left), or raise the reduce's error."""
        from fastenc.progress import progress

        self.start()
        with progress(self._n, unit="file", desc="parts", quiet=quiet, unit_scale=False, initial=self.next) as bar:
            while self._thread.is_alive():
                self._thread.join(0.2)
                bar.update(self.next - bar.n)
        if self.error is not None:
            raise self.error
        if self.next != self._n:
            raise AssertionError(f"the streamed reduce stopped at unit {self.next} of {self._n}")

    def stop(self) -> None:
        """Stop the thread after the unit it is reducing, and wait for it."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join()


def read_blocks(path: Path, csum, itemsize: int, block_items: int = 8 << 20):
    """Stream a spill of items whose document ``j`` is ``csum[j]..csum[j + 1]``: yields
    ``(s, e, data)`` for runs of whole documents of about ``block_items`` items (a longer single
    document is a run of its own); ``data`` is a read-only memoryview of the file.

    The file is memory-mapped, not read into a buffer: the reduce copies every spilled byte
    once, into its part, instead of twice (a buffer per spill also meant fresh memory for each,
    which VMs fill slowly)."""
    import mmap

    import numpy as np

    n = len(csum) - 1
    need = int(csum[n] - csum[0]) * itemsize
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < need:
            raise InputError(f"{path}: the spill is shorter than its manifest says: rerun to redo this unit")
        # (the map outlives the file object; it is unmapped when the last view of it is gone)
        whole = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)) if size else memoryview(b"")
    base = int(csum[0])
    s = 0
    while s < n:
        e = max(s + 1, int(np.searchsorted(csum, csum[s] + block_items, side="right")) - 1)
        e = min(e, n)
        yield s, e, whole[(int(csum[s]) - base) * itemsize : (int(csum[e]) - base) * itemsize]
        s = e


class MissingUnits(FastencError):
    """The final step of a distributed run found units without a verified spill."""


def missing_units(units: Sequence[int], done: Callable[[int], bool], where: str) -> None:
    """Raise ``MissingUnits`` unless ``done(i)`` for every unit: the final step of a distributed
    run must not trust the scheduler's completion markers (a failed Ray task can exit 0)."""
    missing = [i for i in units if not done(i)]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
        raise MissingUnits(f"{len(missing)} of {len(units)} units have no verified output in {where} (units {shown}): "
                           "a map task failed or was cut short; rerun the map step (its finished units are kept)")
