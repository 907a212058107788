"""`fastenc warmup` and the first-run compile notice.

No timing assertions: what is checked is that after `fastenc warmup` no command compiles a
single kernel (Numba's own compile events, counted in a fresh process), and that a command on
an empty Numba cache says once that it is compiling and shows a compile step.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "part-00042.parquet"

# Runs fastenc commands in one process and prints the kernels Numba compiled (not loaded from
# its cache) while they ran.
_COUNT_COMPILES = textwrap.dedent(
    """
    import json, sys
    from numba.core import event

    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            f = ev.data["dispatcher"].py_func
            compiled.append(f"{f.__module__}.{f.__qualname__}{tuple(str(a) for a in ev.data['args'])}")

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())
    from fastenc.cli import main

    for argv in json.loads(sys.argv[1]):
        rc = main(argv)
        if rc:
            sys.exit(f"{argv} exited with {rc}")
    print(json.dumps(compiled))
    """
)


def _fastenc(args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "fastenc", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, **kwargs)


def _docs(path: Path) -> Path:
    pq.write_table(pa.table({"text": ["Hello, world!", "Grüße aus Köln, 123.", "", "x" * 200]}), path)
    return path


def test_after_warmup_no_command_compiles(tmp_path):
    # Numba's default cache (as a user's first command would use): warmup fills it, then every
    # command of the README loads its kernels and compiles none.
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    warm = _fastenc(["warmup"], env=env)
    assert warm.returncode == 0, warm.stderr
    assert "fastenc warmup:" in warm.stderr
    again = _fastenc(["warmup"], env=env)
    assert again.returncode == 0 and "already cached" in again.stderr, again.stderr
    docs = _docs(tmp_path / "docs.parquet")
    text = tmp_path / "t.txt"
    text.write_text("Hello, world! Grüße.\n", encoding="utf-8")
    commands = [
        [str(EXAMPLE), "--num-shards", "64", "-o", str(tmp_path / "urls"), "--quiet"],
        ["verify", str(tmp_path / "urls"), "--source", str(EXAMPLE), "--quiet"],
        ["gpt2", str(docs), "-o", str(tmp_path / "gpt2"), "--quiet"],
        ["verify", str(tmp_path / "gpt2"), "--quiet"],
        ["bytes", str(docs), "-o", str(tmp_path / "bytes"), "--quiet"],
        ["verify", str(tmp_path / "bytes"), "--quiet"],
        ["encode", str(text)],
        ["encode", str(text), "-t", "urls"],
        ["encode", str(text), "-t", "cl100k_base"],
        ["encode", str(text), "-t", "o200k_base"],
    ]
    proc = subprocess.run([sys.executable, "-c", _COUNT_COMPILES, json.dumps(commands)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    compiled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert compiled == [], f"compiled after warmup (a type warmup does not cover): {compiled[:5]}"
    assert "compiling kernels" not in proc.stderr


def test_first_run_says_it_compiles_once_and_shows_a_compile_step(tmp_path):
    # An empty cache: the bytes recipe (the cheapest family to compile) must say why it waits.
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    docs = _docs(tmp_path / "docs.parquet")
    first = _fastenc(["bytes", str(docs), "-o", str(tmp_path / "o1")], env=env)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("compiling kernels (first run on this machine") == 1, first.stderr
    assert "compile:" in first.stderr  # the compile step of the progress bar
    second = _fastenc(["bytes", str(docs), "-o", str(tmp_path / "o2")], env=env)
    assert second.returncode == 0, second.stderr
    assert "compiling" not in second.stderr and "compile:" not in second.stderr
    quiet = _fastenc(["bytes", str(docs), "-o", str(tmp_path / "o3"), "--quiet"],
                     env=dict(env, NUMBA_CACHE_DIR=str(tmp_path / "cache2")))
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_cold_families_reads_the_cache_index(tmp_path, monkeypatch):
    from fastenc import warmup
    from fastenc.run import ahead

    assert warmup.families_for("gpt2", None) == ("gpt2",)
    assert warmup.families_for("decode", None) == ()
    # a kernel object that Numba has never cached reads as "not cached"; unknown internals as "unknown"
    assert ahead.cached_for_this_cpu(object()) is None
    monkeypatch.setattr(warmup, "_probe_kernels", lambda family: [object()])
    assert warmup.cold_families(["bytes"]) == []  # unknown counts as cached: no false notice


def test_warmup_refuses_an_unknown_family():
    proc = _fastenc(["warmup", "nope"])
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("fastenc: error: unknown kernel family 'nope'")


@pytest.mark.parametrize("command", ["verify"])
def test_verify_of_a_missing_directory_needs_no_kernels(tmp_path, command):
    from types import SimpleNamespace

    from fastenc import warmup

    assert warmup.families_for(command, SimpleNamespace(out=str(tmp_path / "missing"))) == ()


def test_a_missing_input_fails_at_once_without_compiling(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    proc = _fastenc(["gpt2", str(tmp_path / "missing.parquet"), "-o", str(tmp_path / "o")], env=env)
    assert proc.returncode == 1
    assert "compiling kernels" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("fastenc: error: input")


def test_a_failing_warmup_does_not_stop_the_command(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from fastenc import warmup
    from fastenc.run import ahead

    def broken(*args, **kwargs):
        raise OSError("no space left in the temporary folder")

    monkeypatch.setattr(warmup, "cold_families", lambda families: list(families))
    monkeypatch.setattr(ahead, "cold", lambda families, probes_of: list(families))
    monkeypatch.setattr(ahead, "compile_in_child", lambda families, quiet: False)  # (the child failed too)
    monkeypatch.setattr(warmup, "compile_families", broken)
    warmup.prepare("encode", SimpleNamespace(input="-", quiet=False))  # must not raise
    assert "compiling ahead failed (OSError: no space left" in capsys.readouterr().err


def _reachable(kernel) -> set[str]:
    """Names of the ``@njit`` functions ``kernel`` can call, following the globals its code names
    (what Numba types, and so compiles, with it)."""
    seen: dict[str, object] = {}
    todo = [kernel]
    while todo:
        f = todo.pop()
        py = getattr(f, "py_func", None)
        if py is None:
            continue
        name = f"{py.__module__}.{py.__qualname__}"
        if name in seen:
            continue
        seen[name] = f
        todo += [py.__globals__[n] for n in py.__code__.co_names if n in py.__globals__]
    return set(seen)


def test_narrow_runs_never_compile_the_wide_loop():
    """GPT-2 and URL runs must not compile the cl100k/o200k loop and pre-tokenizers: ~30 s of a
    cold start (issue 13). The wide batch kernel does reach it, and the public kernels reach both."""
    from fastenc.kernels import encode, runs, url_pack

    wide = "fastenc.kernels.encode_wide.wide_loop"
    others = {wide, "fastenc.kernels.pretok_cl100k.cl100k_piece_end", "fastenc.kernels.pretok_o200k.o200k_piece_end"}
    for kernel in (runs.encode_docs, url_pack.pack_url_run, encode.encode_narrow):
        assert not others & _reachable(kernel), kernel
    assert wide in _reachable(runs.encode_docs_wide)
    for kernel in (encode.encode_text, encode.encode_with):
        assert {wide, "fastenc.kernels.encode.encode_narrow"} <= _reachable(kernel)


def test_every_family_has_a_probe():
    from fastenc import warmup

    assert list(warmup.kernel_families()) == ["encoder", "urls", "gpt2", "bytes", "tokens", "wide"]
    for family in warmup.kernel_families():
        assert warmup._probe_kernels(family), family


def _processes_with(needle: str, env_value: str) -> list[int]:
    """Pids of live processes whose command line holds ``needle`` and whose environment holds ``env_value``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if needle in (entry / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ") and \
                    env_value.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return pids


def _first_run_inside_its_compile(tmp_path, cache: str, *extra, **popen):
    """``fastenc gpt2`` over a small file with the empty kernel cache ``cache``, returned once its compile
    child (``fastenc warmup --ahead``) has been compiling for a second."""
    import time

    proc = subprocess.Popen([sys.executable, "-m", "fastenc", "gpt2", str(_docs(tmp_path / "docs.parquet")), "-o",
                             str(tmp_path / "out"), *extra], cwd=ROOT, env=dict(os.environ, NUMBA_CACHE_DIR=cache),
                            **popen)
    deadline = time.monotonic() + 60
    while not _processes_with("fastenc warmup --ahead", cache) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # (inside the compile: the child and its helper)
    if not _processes_with("fastenc warmup --ahead", cache):
        proc.kill()
        raise AssertionError("no compile child started")
    return proc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_while_compiling_ahead_stops_the_compile_at_once(tmp_path, sigint_delivered):
    """The first run compiles in a child ``fastenc warmup --ahead`` (fastenc.warmup.compile_ahead): a
    Ctrl-C of the command stops that child and its helper within a moment, and the command ends with
    its one-line message, nothing published."""
    import signal
    import time

    cache = str(tmp_path / "cache")
    proc = _first_run_inside_its_compile(tmp_path, cache, stderr=subprocess.PIPE, text=True)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("fastenc: interrupted (SIGINT):"), err[-500:]
    assert "Traceback" not in err
    time.sleep(0.2)
    assert _processes_with("fastenc warmup", cache) == [], "a compile process outlived the command"
    assert not (tmp_path / "out").exists()


def test_compile_ahead_falls_back_to_this_process_when_the_child_fails(monkeypatch, capsys):
    """A child that cannot compile (it exits 1, as ``fastenc warmup --ahead`` does after an error) leaves
    the compile to the command's own process, and the notice is said once."""
    from fastenc import warmup
    from fastenc.run import ahead

    cold = {"bytes"}
    compiled_here = []
    monkeypatch.setattr(ahead, "cold", lambda families, probes_of: [f for f in families if f in cold])
    monkeypatch.setattr(ahead, "warmup_process",
                        lambda args, **popen: subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"], **popen))

    def here(families, quiet=False, jobs=None):
        compiled_here.append(list(families))
        cold.clear()

    monkeypatch.setattr(warmup, "compile_families", here)
    warmup.compile_ahead(["bytes"], quiet=False, notice="fastenc: compiling kernels (test)")
    assert compiled_here == [["bytes"]]
    assert capsys.readouterr().err.count("compiling kernels (test)") == 1
    compiled_here.clear()
    warmup.compile_ahead(["bytes"], quiet=False, notice="fastenc: compiling kernels (test)")  # now cached: nothing
    assert compiled_here == [] and capsys.readouterr().err == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_command_takes_its_compile_child_with_it(tmp_path):
    """``kill -9`` of a first run while its compile child (and that child's helper) is compiling: both stop
    within a moment (``warmup._exit_with_parent``) instead of compiling on beside a rerun; the rerun then
    compiles and finishes."""
    import signal
    import time

    cache = str(tmp_path / "cache")
    proc = _first_run_inside_its_compile(tmp_path, cache, "-q", stderr=subprocess.DEVNULL)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _processes_with("fastenc warmup", cache) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with("fastenc warmup", cache) == [], "the compile went on after its command was killed"
    finally:
        proc.kill()
    rerun = _fastenc(["gpt2", str(tmp_path / "docs.parquet"), "-o", str(tmp_path / "out"), "-q"],
                     env=dict(os.environ, NUMBA_CACHE_DIR=cache))
    assert rerun.returncode == 0, rerun.stderr
    assert (tmp_path / "out" / "README.md").is_file()


def _dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_warmup_removes_the_scratch_folders_that_killed_warmups_left(tmp_path, monkeypatch):
    # A warm-up killed with SIGKILL (Ctrl-C during a first run's compile) cannot delete its scratch
    # folder; the next warm-up deletes it: ours, old, and its process gone. Anything else stays.
    import tempfile

    from fastenc import warmup

    old = time.time() - 2 * 3600
    dead = _dead_pid()

    def folder(name: str, age: float | None = old) -> Path:
        p = tmp_path / name
        p.mkdir()
        (p / "part.parquet").write_bytes(b"x")
        if age is not None:
            os.utime(p, (age, age))
        return p

    leftover = folder(f"{warmup.SCRATCH_PREFIX}{dead}-abc_123")
    running = folder(f"{warmup.SCRATCH_PREFIX}{os.getpid()}-def")  # a live warm-up (this process)
    fresh = folder(f"{warmup.SCRATCH_PREFIX}{dead}-ghi", age=None)  # too recent to judge
    other = folder("fastenc-warmupish-1-x")
    unnamed = folder(f"{warmup.SCRATCH_PREFIX}x7tcd")  # no pid in the name
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with warmup.scratch_folder() as tmp:
        assert Path(tmp).parent == tmp_path
        assert Path(tmp).name.startswith(f"{warmup.SCRATCH_PREFIX}{os.getpid()}-")
        assert not leftover.exists()
        assert all(p.is_dir() for p in (running, fresh, other, unnamed))
    assert not Path(tmp).exists()
    assert warmup.remove_stale_scratch(tmp_path, stale_after_s=0) == [fresh]
