"""How a run stops (issue 63): workers die with their parent, SIGTERM stops a run like Ctrl-C,
no signal is lost or printed as a traceback, and two runs into one -o tell the truth.

Each case runs ``python -m fastenc RECIPE ... --workers 2`` in a session of its own, so that every
process of the run (the command and its workers) is found by its session id in /proc. Inputs are
small (tests/data split into a few files). The random moments are seeded: ``FASTENC_STOP_SEED``
repeats a failure; ``FASTENC_STOP_TRIALS`` sets the trials per recipe of the slow loop.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from fastenc import cli

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[1]
NUM_SHARDS = 4
EXTRA = {"gpt2": ["--part-tokens", "20000", "--decode-every", "7"], "bytes": ["--shard-bytes", "3000", "--val-every", "5"],
         "urls": ["--num-shards", str(NUM_SHARDS)],
         "tokens": ["--format", "llmc", "--shard-tokens", "30000", "--val-every", "5", "--shuffle", "1"]}
MANIFEST = {"gpt2": "summary.json", "bytes": "meta.json", "tokens": "tokens.json"}
SEED = int(os.environ.get("FASTENC_STOP_SEED") or random.randrange(1 << 30))
TEMP = re.compile(r"\.(tmp|old|swap)-\d+-[0-9a-f]+$")


def tree(root: Path) -> dict:
    """Every file under ``root``, less the command line's provenance (the ``build`` block, the card)."""
    files = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name == "README.md":
            continue
        data = p.read_bytes()
        if p.suffix == ".json":
            doc = json.loads(data)
            if isinstance(doc, dict):
                doc.pop("build", None)
            data = json.dumps(doc, sort_keys=True).encode()
        files[p.relative_to(root).as_posix()] = data
    return files


def _split(src: Path, folder: Path, n: int) -> list[Path]:
    t = pq.read_table(src)
    folder.mkdir(parents=True)
    bounds = np.linspace(0, t.num_rows, n + 1).astype(int)
    paths = []
    for k in range(n):
        p = folder / f"part-{k:05d}.parquet"
        pq.write_table(t.slice(bounds[k], bounds[k + 1] - bounds[k]), p)
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stop-inputs")
    urls = pq.read_table(DATA / "urls_fixture.parquet").column("url").to_pylist()
    shard_of = [(xxhash.xxh3_64_intdigest(u.encode()) * NUM_SHARDS) >> 64 for u in urls]
    (root / "urls").mkdir()
    url_paths = []
    for k in range(NUM_SHARDS):
        p = root / "urls" / f"part-{k:05d}.parquet"
        pq.write_table(pa.table({"url": [u for u, s in zip(urls, shard_of) if s == k]}), p, row_group_size=400)
        url_paths.append(p)
    return {"urls": url_paths, "gpt2": _split(DATA / "docs_fixture.parquet", root / "gpt2", 4),
            "bytes": _split(DATA / "bytes_docs.parquet", root / "bytes", 4),
            "tokens": _split(DATA / "docs_fixture.parquet", root / "tokens", 4)}


def _args(recipe, inputs, out) -> list[str]:
    return [sys.executable, "-m", "fastenc", recipe, *map(str, inputs[recipe]), "-o", str(out), "--workers", "2",
            *EXTRA[recipe]]


def _start(recipe, inputs, out, *extra) -> subprocess.Popen:
    return subprocess.Popen(_args(recipe, inputs, out) + list(extra), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """Each recipe's output from a clean --workers 2 run, and how long that run took."""
    root = tmp_path_factory.mktemp("stop-ref")
    ref = {}
    for recipe in EXTRA:
        t = time.monotonic()
        proc = _start(recipe, inputs, root / recipe, "-q")
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        ref[recipe] = (tree(root / recipe), time.monotonic() - t)
    return ref


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, session, ..."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _session(sid: int) -> set[int]:
    """The live (not zombie) processes of session ``sid``: the run started by ``_start``."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None and st[3] == str(sid) and st[0] != "Z":
            pids.add(int(entry))
    return pids


def _await(condition, seconds: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def _temporaries(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if TEMP.search(p.name) or p.name.endswith(".fastenc-run.lock"))


def _stop_and_check(proc: subprocess.Popen, sig: int, group: bool, out: Path, recipe: str) -> tuple[int, str]:
    """Send ``sig``; the command ends, and every process of its run within a second of it."""
    finished = (st := _stat(proc.pid)) is None or st[0] == "Z"  # it had exited already: the signal finds nothing to stop
    (os.killpg if group else os.kill)(proc.pid, sig)
    proc.wait(timeout=120)
    gone = _await(lambda: not _session(proc.pid), 1.0)
    left = _session(proc.pid)
    for pid in left:  # (an orphan would hold the stderr pipe open, and outlive the test)
        os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert gone, f"processes of the run outlived it by more than a second: {left}"
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if finished or proc.returncode == 0:
        assert finished and proc.returncode == 0, (proc.returncode, err)
    elif sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        name = signal.Signals(sig).name
        assert proc.returncode == 128 + sig, (proc.returncode, err)
        # one line, naming the signal and the way on; none only when it came as the command returned
        if lines:
            assert len(lines) == 1 and lines[0].startswith(f"fastenc: interrupted ({name})") and "rerun" in lines[0], err
        else:
            assert recipe == "urls" or (out / MANIFEST[recipe]).exists(), err
        assert _temporaries(out.parent) == [], f"a graceful stop deletes this run's temporaries (command pid {proc.pid}): {err}"
    if out.exists():  # nothing under the final name before it is complete (urls: each shard complete)
        assert cli.main(["verify", str(out), "-q"]) == 0
    return proc.returncode, err


def _rerun_is_identical(recipe, inputs, out, reference) -> None:
    proc = _start(recipe, inputs, out, "-q")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and err == "", err
    assert tree(out) == reference[recipe][0]
    assert _temporaries(out.parent) == [] and not Path(str(out) + ".fastenc-work").exists()


def _caught(pid: int) -> int:
    """The signals process ``pid`` has handlers for (a bit mask; 0 once it is gone)."""
    try:
        return int(re.search(r"SigCgt:\s*([0-9a-f]+)", Path(f"/proc/{pid}/status").read_text()).group(1), 16)
    except (OSError, AttributeError):
        return 0


def _handlers_installed(proc: subprocess.Popen) -> None:
    """Until fastenc's handlers are in place (SIGTERM caught: Python's own start-up leaves it alone).
    Before that only the interpreter's start-up runs, under Python's default handling."""
    assert _await(lambda: proc.poll() is not None or _caught(proc.pid) & (1 << (signal.SIGTERM - 1)), 60)


def _trial(recipe, sig, when: float, group: bool, inputs, reference, root: Path) -> None:
    out = root / "out"
    proc = _start(recipe, inputs, out, "-q")
    _handlers_installed(proc)
    time.sleep(when * reference[recipe][1])  # the moment is what is tested: start-up, map, reduce or publication
    _stop_and_check(proc, sig, group, out, recipe)
    _rerun_is_identical(recipe, inputs, out, reference)


# (SIGKILL: test_workers_die_with_a_killed_parent here, and the slow loop at random moments)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("recipe", list(EXTRA))
def test_a_signal_at_a_random_moment_then_a_plain_rerun(recipe, sig, inputs, reference, tmp_path):
    rng = random.Random(f"{SEED}-{recipe}-{sig}")
    when, group = rng.uniform(0.0, 1.1), rng.random() < 0.5
    try:
        _trial(recipe, sig, when, group, inputs, reference, tmp_path)
    except AssertionError as exc:
        raise AssertionError(f"FASTENC_STOP_SEED={SEED}, at {when:.2f} of a run: {exc}") from exc


@pytest.mark.slow
@pytest.mark.parametrize("recipe", list(EXTRA))
def test_signals_at_random_moments_in_a_loop(recipe, inputs, reference, tmp_path):
    rng = random.Random(f"{SEED}-{recipe}-loop")
    for k in range(int(os.environ.get("FASTENC_STOP_TRIALS", "8"))):
        sig = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
        when, group = rng.uniform(0.0, 1.1), rng.random() < 0.5 and sig != signal.SIGKILL
        try:
            _trial(recipe, sig, when, group, inputs, reference, tmp_path / f"t{k}")
        except AssertionError as exc:
            raise AssertionError(f"FASTENC_STOP_SEED={SEED}, trial {k}: {signal.Signals(sig).name} at {when:.2f}: {exc}") from exc


@pytest.mark.parametrize("recipe", list(EXTRA))
def test_workers_die_with_a_killed_parent(recipe, inputs, reference, tmp_path):
    """``kill -9`` of the command once its worker exists: the worker goes too (it was left
    sleeping on a pipe, re-parented to init), and a plain rerun finishes the output."""
    out = tmp_path / "out"
    proc = _start(recipe, inputs, out, "-q")
    if not _await(lambda: len(_session(proc.pid)) >= 2 or proc.poll() is not None, 60):
        proc.kill()
        pytest.fail("no worker started")
    if proc.poll() is not None:
        pytest.skip("the run ended before its worker could be seen")
    _stop_and_check(proc, signal.SIGKILL, False, out, recipe)
    _rerun_is_identical(recipe, inputs, out, reference)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_a_signal_as_soon_as_the_command_handles_it_is_one_line(sig, inputs, tmp_path):
    """The handlers are the first thing ``python -m fastenc`` sets up, before numba or pyarrow is
    imported: a signal at that moment is one line and 128 + its number, never a traceback."""
    proc = _start("bytes", inputs, tmp_path / "out", "-q")  # (no progress bar: on a quick machine it may come first)
    _handlers_installed(proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.strip()] == [ln for ln in err.splitlines() if ln.startswith(f"fastenc: interrupted ({name})")]
    assert err.strip().count("\n") == 0
    assert not (tmp_path / "out").exists() and _temporaries(tmp_path) == []


def test_a_urls_map_stopped_before_a_shard_commits_leaves_no_partial_out(inputs, tmp_path):
    """``OUT`` appears with its first shard: it used to be created holding ``tokenizer/`` alone
    before the workers started, which ``verify`` (rightly) calls no fastenc output."""
    from fastenc.recipes.urls import encode_shards
    from fastenc.run import faults

    out = tmp_path / "out"
    # Ctrl-C just after this process's first rename (its shard's commit; it was the tokenizer's)
    with faults.inject(faults.FailAt(1, KeyboardInterrupt(), ops=(faults.RENAMED,))):
        with pytest.raises(KeyboardInterrupt):
            encode_shards(inputs["urls"], out, workers=2, num_shards=NUM_SHARDS, quiet=True)
    assert not out.exists() or cli.main(["verify", str(out), "-q"]) == 0
    assert _temporaries(tmp_path) == []


# A fork runs Python's os.register_at_fork hooks in the parent (logging registers some); a
# KeyboardInterrupt raised inside one is printed as "Exception ignored" and dropped. That is where a
# Ctrl-C sent as --workers forked was lost: the run went on and published.
AT_FORK = textwrap.dedent("""
    import os, signal, sys, time
    from fastenc.cli import stop
    from fastenc.run import units
    if sys.argv[1] == "handlers":
        stop.install()
    else:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    os.register_at_fork(after_in_parent=lambda: signal.raise_signal(signal.SIGINT))
    os.register_at_fork(after_in_parent=lambda: sum(range(100000)))  # Python code after it: the handler runs in a hook
    try:
        if sys.argv[1] == "blocked":
            with units._signals_blocked():
                pid = os.fork()
        else:
            pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        deadline = time.monotonic() + 1  # (re-raised after 0.01 s; 1 s without it means lost)
        while time.monotonic() < deadline:
            sum(range(1000))
        print("lost")
    except KeyboardInterrupt:
        print("raised")
""")


@pytest.mark.parametrize("how", ["handlers", "blocked"])
def test_a_signal_during_a_fork_is_not_lost(how):
    """``handlers``: fastenc's raise a dropped interrupt again; ``blocked``: the map holds the signals
    back across its fork (``units._signals_blocked``), so none is handled inside a hook."""
    proc = subprocess.run([sys.executable, "-c", AT_FORK, how], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.stdout.strip() == "raised" and "Exception ignored" not in proc.stderr, proc.stdout + proc.stderr


def test_the_unguarded_fork_drops_the_signal():
    """The same script with Python's own handler and no blocking: the hook swallows it (the bug)."""
    proc = subprocess.run([sys.executable, "-c", AT_FORK, "plain"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.stdout.strip() == "lost" and "Exception ignored" in proc.stderr, proc.stdout + proc.stderr


SECOND = textwrap.dedent("""
    import os, signal, sys
    from fastenc.cli import stop
    stop.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        while True:
            pass
    except KeyboardInterrupt as exc:
        print("first", type(exc).__name__, flush=True)
        os.kill(os.getpid(), int(sys.argv[1]))  # during the clean-up of the first one
        while True:
            pass
""")


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_a_second_signal_stops_at_once(second):
    proc = subprocess.run([sys.executable, "-c", SECOND, str(int(second))], capture_output=True, text=True, timeout=60, cwd=REPO)
    name = signal.Signals(second).name
    assert proc.returncode == 128 + second and proc.stdout == "first Interrupted\n", proc
    assert proc.stderr.strip().startswith(f"fastenc: interrupted again ({name}): stopped at once") and "Traceback" not in proc.stderr


def _watch_pair(a: subprocess.Popen, b: subprocess.Popen) -> tuple[set, set]:
    """Both runs to their end; the pids seen in each one's session meanwhile."""
    seen_a, seen_b = set(), set()
    deadline = time.monotonic() + 300
    while (a.poll() is None or b.poll() is None) and time.monotonic() < deadline:
        seen_a |= _session(a.pid)
        seen_b |= _session(b.pid)
        time.sleep(0.01)
    return seen_a | {a.pid}, seen_b | {b.pid}


def _two_runs_into_one_out(recipe, inputs, reference, root: Path) -> None:
    out = root / "out"
    a, b = _start(recipe, inputs, out), _start(recipe, inputs, out)
    seen_a, seen_b = _watch_pair(a, b)
    (_, err_a), (_, err_b) = a.communicate(timeout=60), b.communicate(timeout=60)
    assert a.returncode == 0 and b.returncode == 0, err_a + err_b
    published = 0
    for err, other in ((err_a, seen_b), (err_b, seen_a)):
        assert "error" not in err and "Traceback" not in err, err
        for line in err.splitlines():
            if m := re.match(r"fastenc: another fastenc run \(pid (\d+)\) is writing ", line):
                assert int(m.group(1)) in other, (line, other)  # the pid named is the other run's
        summary = [ln for ln in err.splitlines() if ln.startswith(f"fastenc {recipe}:")]
        if recipe != "urls":  # (a urls run with --workers prints no line per shard)
            assert len(summary) == 1, err
            published += "already holds this output" not in summary[0]
    if recipe != "urls":
        assert published == 1, err_a + err_b  # one run published; the other found it done
    assert cli.main(["verify", str(out), "-q"]) == 0
    assert tree(out) == reference[recipe][0]
    assert _temporaries(root) == [] and not Path(str(out) + ".fastenc-work").exists()


@pytest.mark.parametrize("recipe", list(EXTRA))
def test_two_runs_into_one_out_one_publishes_the_other_says_so(recipe, inputs, reference, tmp_path):
    _two_runs_into_one_out(recipe, inputs, reference, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", list(EXTRA))
def test_two_runs_into_one_out_repeated(recipe, inputs, reference, tmp_path):
    for k in range(int(os.environ.get("FASTENC_STOP_TRIALS", "8")) // 3):
        _two_runs_into_one_out(recipe, inputs, reference, tmp_path / f"t{k}")


def test_the_temporaries_of_an_unreaped_dead_process_are_stale(tmp_path):
    """A killed worker stays a zombie until init reaps it (up to 2 s on some machines); its pid still
    answers ``kill(pid, 0)``, but a rerun must delete its stage all the same."""
    from fastenc.run import staging

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        assert _await(lambda: (_stat(pid) or ["Z"])[0] == "Z", 10)
        stage = tmp_path / f"out.tmp-{pid}-0123abcd"
        stage.mkdir()
        mine = tmp_path / f"out.tmp-{os.getpid()}-0123abcd"
        mine.mkdir()
        assert staging.clean_stale(tmp_path, "out") == [stage] and mine.exists()
        assert staging.clean_stale(tmp_path, "out", ours=True) == [mine]
    finally:
        os.waitpid(pid, 0)


@pytest.mark.parametrize("how", ["SIGTERM", "the import timer"])
def test_a_signal_while_the_workers_start_is_raised_after(how):
    """The pool's start must not receive the interrupt (an exception there left a pool that could not
    shut down, and a traceback): a SIGTERM, or ``stop``'s timer that raises one that came during an
    import, is held until the start is done, then raised."""
    from fastenc.cli import stop
    from fastenc.run import units

    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    hook = sys.unraisablehook
    stop.reset()
    stop.install()
    done = False
    try:
        if how != "SIGTERM":  # armed as stop._later() arms it, to fire inside the start
            stop._received, stop._again = signal.SIGTERM, True
            signal.signal(signal.SIGALRM, stop._handler)
            signal.setitimer(signal.ITIMER_REAL, 0.01)
        with pytest.raises(stop.Interrupted):
            with units._signals_blocked():
                if how == "SIGTERM":
                    os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.1)
                done = True
        assert done
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, h in kept.items():
            signal.signal(s, h)
        sys.unraisablehook = hook
        stop.reset()
