"""A URL shard is committed by its sidecar's rename (issue 10; docs/atomic-output.md).

Two names cannot appear in one step, and the format has two files per shard in one shared
folder, so ``kill -9`` exactly between the bin's rename and the sidecar's leaves a final-named
bin without its sidecar. That bin must never count as output: verify reports it, decode skips or
refuses it, the dataset card names it as not part of the dataset, another shard's run does not
count it, and the rerun of its shard deletes it and ends byte-identical to a clean run.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fastenc import cli

REPO = Path(__file__).resolve().parents[1]

KILL_AT_COMMIT = """
import os, signal, sys
from fastenc.run import faults
from fastenc.recipes.urls import encode_shard

def hook(op, path):
    if op == "rename" and path.name == "tokens-s00000.json":   # the commit of shard 0
        os.kill(os.getpid(), signal.SIGKILL)

with faults.inject(hook):
    encode_shard(sys.argv[1], sys.argv[2], shard_check=False, shard=0, quiet=True)
"""


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


def test_kill_9_between_the_bins_rename_and_the_commit(source, tmp_path, capfd):
    clean = tmp_path / "clean"
    encode(source, clean, 1)
    encode(source, clean, 0)

    out = tmp_path / "out"
    encode(source, out, 1)  # another shard, committed: OUT is an output with one complete shard
    env = dict(os.environ, PYTHONPATH=str(REPO))
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
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]


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
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name] and not [p for p in out.iterdir() if ".tmp-" in p.name]
