"""A URL shard added to an OUT that holds others is committed in one step (issue 10; docs/atomic-output.md).

On Linux the run rebuilds OUT beside it (hard links plus the new shard and card) and exchanges
the two folders by one ``renameat2(RENAME_EXCHANGE)``: a ``kill -9`` at any step leaves OUT as
before or complete, never a bin without its sidecar. Where that cannot be done (here forced by
``FASTENC_SWAP=0``, or an exchange answering EINVAL) the sidecar's rename is the commit, and
``kill -9`` exactly between the bin's rename and the sidecar's leaves a final-named bin without
its sidecar. That bin must never count as output: verify reports it, decode skips or refuses it,
the dataset card names it as not part of the dataset, another shard's run does not count it, and
the rerun of its shard deletes it and ends byte-identical to a clean run. Every fastenc writer of
OUT holds one lock beside it, so two shards' runs at once both end committed.
"""
from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fastenc import cli
from fastenc.run import faults, staging

REPO = Path(__file__).resolve().parents[1]

KILL_AT_COMMIT = """
import os, signal, sys
from fastenc.run import faults
from fastenc.recipes.urls import encode_shard

def hook(op, path):
    if op == "rename" and path.name == "tokens-s00000.json":   # the commit of shard 0 (sidecar-last)
        os.kill(os.getpid(), signal.SIGKILL)

with faults.inject(hook):
    encode_shard(sys.argv[1], sys.argv[2], shard_check=False, shard=0, quiet=True)
"""

#: kill -9 at the ``n``-th step ``op`` on the path ``where`` (temporary names without their pid and hex)
KILL_AT_STEP = """
import os, re, signal, sys
from fastenc.run import faults
from fastenc.recipes.urls import encode_shard

src, out, op, where, n = sys.argv[1:6]
seen = []

def hook(o, path):
    if o == op and re.sub(r"-[0-9]+-[0-9a-f]+", "-*", str(path)) == where:
        seen.append(path)
        if len(seen) == int(n):
            os.kill(os.getpid(), signal.SIGKILL)

with faults.inject(hook):
    encode_shard(src, out, shard_check=False, shard=0, quiet=True)
"""

ALL_STEPS = faults.OPS + (faults.RENAMED,)


def norm(path: Path) -> str:
    return re.sub(r"-[0-9]+-[0-9a-f]+", "-*", str(path))


def encode(src: Path, out: Path, shard: int) -> None:
    from fastenc.recipes.urls import encode_shard

    encode_shard(src, out, shard_check=False, shard=shard, quiet=True)


def files(out: Path) -> dict[str, bytes]:
    """Every file (sidecars without their timings, which differ from run to run)."""
    import json

    got = {}
    for p in sorted(out.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix == ".json" and p.parent == out:
                obj = json.loads(data)
                obj.pop("build", None)
                data = json.dumps(obj, sort_keys=True).encode()
            got[str(p.relative_to(out))] = data
    return got


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    src = tmp_path_factory.mktemp("src") / "urls.parquet"
    pq.write_table(pq.read_table(REPO / "tests" / "data" / "urls_fixture.parquet").slice(0, 200), src)
    return src


def test_fallback_kill_9_between_the_bins_rename_and_the_commit(source, tmp_path, capfd):
    """Where the folder cannot be swapped (FASTENC_SWAP=0 stands for such a system), the sidecar's
    rename is the commit; kill -9 just before it leaves a bin without its sidecar, never output."""
    clean = tmp_path / "clean"
    encode(source, clean, 1)
    encode(source, clean, 0)

    out = tmp_path / "out"
    encode(source, out, 1)  # another shard, committed: OUT is an output with one complete shard
    env = dict(os.environ, PYTHONPATH=str(REPO), **{staging.SWAP_ENV: "0"})
    proc = subprocess.run([sys.executable, "-c", KILL_AT_COMMIT, str(source), str(out)], capture_output=True, text=True, env=env)
    assert proc.returncode == -9, proc.stderr
    assert (out / "tokens-s00000.bin").is_file() and not (out / "tokens-s00000.json").exists()  # the window

    capfd.readouterr()
    assert cli.main(["verify", str(out), "-q"]) == 1
    assert cli.main(["verify", str(out)]) == 1
    assert "tokens-s00000.bin has no sidecar" in capfd.readouterr().err

    assert cli.main(["decode", str(out)]) == 0
    got = capfd.readouterr()
    assert len(got.out.splitlines()) == 200  # shard 1's URLs only
    assert "skipping tokens-s00000.bin" in got.err
    assert cli.main(["decode", str(out / "tokens-s00000.bin")]) == 1
    err = capfd.readouterr().err.strip()
    assert err.startswith("fastenc: error:") and "no sidecar" in err and "\n" not in err

    assert cli.main(["card", str(out), "-q"]) == 0
    card = (out / "README.md").read_text()
    assert "| Shards | 1 (shard 1 of 2,048) |" in card and "| URLs | 200 |" in card
    assert "**Not part of this dataset:** `tokens-s00000.bin`" in card

    encode(source, out, 0)  # the plain rerun of shard 0 deletes the leftover and commits
    assert files(out) == files(clean)
    assert "Not part of this dataset" not in (out / "README.md").read_text()
    assert not [p for p in out.iterdir() if ".tmp-" in p.name] and temporaries(tmp_path) == []


def temporaries(parent: Path) -> list[str]:
    return sorted(str(p.relative_to(parent)) for p in parent.rglob("*") if re.search(r"\.(tmp|old|swap)-", p.name))


def commit_steps(source: Path, tmp_path: Path) -> list[tuple[str, str, int]]:
    """The steps of adding shard 0 to an OUT holding shard 1, from the swap folder's mkdir on, as
    ``(op, path normalised, occurrence)``: the writes of the card but the first left out."""
    out = tmp_path / "rec" / "out"
    encode(source, out, 1)
    rec = faults.Recorder(ops=ALL_STEPS)
    with faults.inject(rec):
        encode(source, out, 0)
    steps = [(op, norm(path)) for op, path in rec.steps]
    first = next(i for i, (op, path) in enumerate(steps) if op == "mkdir" and ".swap-" in path)
    picked, count = [], {}
    for op, path in steps[first:]:
        count[op, path] = count.get((op, path), 0) + 1
        if op != "write" or count[op, path] == 1:
            picked.append((op, path.replace(str(out), "OUT").replace(str(out.parent), "PARENT"), count[op, path]))
    assert {op for op, _, _ in picked} >= {"mkdir", "link", "write", "fsync", "exchange", faults.RENAMED}
    return picked


@pytest.mark.slow
def test_kill_9_at_every_step_of_the_swap_leaves_out_as_before_or_complete(source, tmp_path):
    """The commit is one exchange of folders: killed at any step of it, OUT holds the old shards
    or every shard, never a bin without its sidecar; a plain rerun ends byte-identical."""
    clean = tmp_path / "clean"
    encode(source, clean, 1)
    encode(source, clean, 0)
    before = tmp_path / "before"
    encode(source, before, 1)
    steps = commit_steps(source, tmp_path)
    links = [s for s in steps if s[0] == "link"]
    keep = [s for s in steps if s[0] != "link" or s in (links[0], links[-1])]  # the links in between are alike
    env = dict(os.environ, PYTHONPATH=str(REPO))
    seen_states = set()
    for k, (op, where, n) in enumerate(keep):
        out = tmp_path / f"k{k}" / "out"
        encode(source, out, 1)
        where = where.replace("OUT", str(out)).replace("PARENT", str(out.parent))
        proc = subprocess.run([sys.executable, "-c", KILL_AT_STEP, str(source), str(out), op, where, str(n)],
                              capture_output=True, text=True, env=env)
        assert proc.returncode == -9, (op, where, proc.stderr)
        have = files(out)
        assert have in (files(before), files(clean)), f"killed at {op} {where}: {sorted(set(have) ^ set(files(clean)))}"
        seen_states.add(have == files(clean))
        encode(source, out, 0)  # the plain rerun
        assert files(out) == files(clean), f"rerun after a kill at {op} {where}"
        assert temporaries(out.parent) == []
    assert seen_states == {False, True}  # killed both before the exchange and after it


def test_a_shard_into_an_existing_out_is_one_exchange_and_the_fallback_is_sidecar_last(source, tmp_path):
    """With the swap, no name of OUT is renamed: the exchange is the commit. An exchange that
    answers EINVAL (a file system without RENAME_EXCHANGE) falls back to the sidecar-last rule,
    which ends in the same files."""
    clean = tmp_path / "clean"
    encode(source, clean, 1)
    encode(source, clean, 0)
    for fail in (False, True):
        out = tmp_path / f"out{fail}"
        encode(source, out, 1)
        (out / "notes.txt").write_text("mine")  # someone else's file in OUT is kept
        rec = faults.Recorder(ops=("rename", "exchange"))

        def hook(op, path):
            rec(op, path)
            if fail and op == "exchange":
                raise OSError(errno.EINVAL, "Invalid argument")

        with faults.inject(hook):
            encode(source, out, 0)
        names = [(op, p.name) for op, p in rec.steps]
        if fail:
            assert names == [("exchange", out.name), ("rename", "tokens-s00000.bin"), ("rename", "tokens-s00000.json")]
        else:
            assert names == [("exchange", out.name)]
        assert (out / "notes.txt").read_text() == "mine"
        (out / "notes.txt").unlink()
        assert files(out) == files(clean)
        assert temporaries(tmp_path) == []


def test_files_another_program_adds_during_the_swap_are_kept(source, tmp_path):
    """A file created in OUT after the links were made, or replaced there by a rename (an editor's
    save), is in the old folder only: after the exchange it is moved into the new OUT."""
    out = tmp_path / "out"
    encode(source, out, 1)
    (out / "notes.txt").write_text("old")
    (out / "tokenizer" / "mine.txt").write_text("x")

    def meanwhile(op, path):
        if op == "exchange":  # the rebuilt folder is complete; OUT is still the old one
            (out / "late.txt").write_text("late")
            (out / "notes.tmp").write_text("new")
            os.replace(out / "notes.tmp", out / "notes.txt")
            (out / "tokenizer" / "late.txt").write_text("y")

    with faults.inject(meanwhile):
        encode(source, out, 0)
    assert (out / "tokens-s00000.json").is_file()
    assert (out / "late.txt").read_text() == "late" and (out / "notes.txt").read_text() == "new"
    assert (out / "tokenizer" / "late.txt").read_text() == "y" and (out / "tokenizer" / "mine.txt").read_text() == "x"
    assert not (out / "notes.tmp").exists() and temporaries(tmp_path) == []


WAIT_FOR_OTHER = """
import os, sys, time
from pathlib import Path
from fastenc.run import faults
from fastenc.recipes.urls import encode_shard

src, out, shard, flags = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])

def hook(op, path):
    if shard == 1 and op == "write" and path.name == "tokens-s00001.json":  # about to publish
        (flags / "b-ready").touch()
    if shard == 0 and op == "exchange":  # A holds the lock, its folder built: let B try to publish now
        deadline = time.time() + 120
        while not (flags / "b-ready").exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(2)

with faults.inject(hook):
    encode_shard(src, out, shard_check=False, shard=shard, quiet=True)
"""


def test_two_shards_published_at_once_both_end_committed(source, tmp_path):
    """Run A (shard 0) stops just before its exchange, its folder rebuilt, until run B (shard 1)
    is about to publish, then 2 s more. Without the writers' lock B would swap in first and A's
    exchange would bring back a folder (and a card) built before B's commit."""
    clean = tmp_path / "clean"
    for shard in (2, 0, 1):
        encode(source, clean, shard)
    out = tmp_path / "out"
    encode(source, out, 2)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-c", WAIT_FOR_OTHER, str(source), str(out)]
    a = subprocess.Popen(args + ["0", str(tmp_path)], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list(tmp_path.glob("out.swap-*")) and a.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    b = subprocess.Popen(args + ["1", str(tmp_path)], env=env, stderr=subprocess.PIPE, text=True)
    (_, err_a), (_, err_b) = a.communicate(timeout=300), b.communicate(timeout=300)
    assert a.returncode == 0 and b.returncode == 0, err_a + err_b
    assert (tmp_path / "b-ready").exists()
    assert files(out) == files(clean)
    assert cli.main(["verify", str(out), "-q"]) == 0
    assert temporaries(tmp_path) == []


def test_a_sidecar_whose_bin_is_gone_is_one_line_in_decode_and_verify(source, tmp_path, capfd):
    out = tmp_path / "out"
    encode(source, out, 0)
    (out / "tokens-s00000.bin").unlink()
    capfd.readouterr()
    assert cli.main(["decode", str(out)]) == 1
    err = capfd.readouterr().err.strip()
    assert err.startswith("fastenc: error:") and "tokens-s00000.bin is missing" in err and "\n" not in err
    assert cli.main(["verify", str(out), "-q"]) == 1


def test_a_new_out_is_one_rename_and_a_run_that_loses_the_race_publishes_into_it(source, tmp_path):
    """A run that finds OUT absent stages the whole folder beside it and renames it onto OUT. If
    another shard's run creates OUT in the meantime, that rename is refused (OUT has entries) and
    this shard is published into OUT like any later shard: both end up as in a sequential run."""
    from fastenc.run import faults

    clean = tmp_path / "clean"
    encode(source, clean, 1)
    encode(source, clean, 0)

    single = tmp_path / "single"
    rec = faults.Recorder(ops=("rename",))
    with faults.inject(rec):
        encode(source, single, 0)
    assert [p.name for _, p in rec.steps] == ["single"]  # the folder itself: one rename, nothing else

    out = tmp_path / "out"
    raced = []

    def other_run_first(op, path):
        if op == "rename" and path == out and not raced:  # just before shard 0's run renames its folder onto OUT
            raced.append(path)
            with faults.inject(lambda op, path: None):
                encode(source, out, 1)

    with faults.inject(other_run_first):
        encode(source, out, 0)
    assert raced and files(out) == files(clean)
    assert temporaries(tmp_path) == []
