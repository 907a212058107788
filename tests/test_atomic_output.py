"""Every recipe publishes its output in one step (docs/atomic-output.md).

A fault (a full disk, Ctrl-C, ``kill -9``) injected at any mkdir, write, fsync or rename of a
run -- through the documented hook ``fastenc.run.faults`` -- must leave no file under a final
name unless the whole output is complete, and a plain rerun must finish byte-identical to a run
that was never interrupted.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastenc.errors import FastencError, OutputError
from fastenc.run import faults

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


def run_bytes(out: Path) -> dict:
    from fastenc.recipes.bytes import encode_bytes

    return encode_bytes([DATA / "bytes_docs.parquet"], out, shard_bytes=3000, val_every=10, quiet=True)


def run_gpt2(out: Path) -> dict:
    from fastenc.recipes.gpt2 import encode_gpt2

    return encode_gpt2([DATA / "docs_fixture.parquet"], out, part_tokens=60_000, buckets="b1", decode_every=10**6, quiet=True)


def run_urls(out: Path) -> dict:
    from fastenc.recipes.urls import encode_shard

    return encode_shard(DATA / "urls_fixture.parquet", out, shard_check=False, chunk_urls=700, quiet=True)


RECIPES = {"bytes": run_bytes, "gpt2": run_gpt2, "urls": run_urls}
MANIFEST = {"bytes": "meta.json", "gpt2": "summary.json", "urls": "tokens-s00000.json"}


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` (JSON without the run's timings, which differ from run to run)."""
    files = {}
    for p in sorted(out.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix == ".json":
                obj = json.loads(data)
                obj.pop("build", None) if isinstance(obj, dict) else None
                data = json.dumps(obj, sort_keys=True).encode()
            files[str(p.relative_to(out))] = data
    return files


def temporaries(parent: Path) -> list[str]:
    return sorted(str(p.relative_to(parent)) for p in parent.rglob("*") if ".tmp-" in p.name or ".old-" in p.name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Per recipe: the files of an uninterrupted run, and the fault points that run went through."""
    refs = {}
    for name, run in RECIPES.items():
        out = tmp_path_factory.mktemp(name) / "out"
        rec = faults.Recorder()
        with faults.inject(rec):
            run(out)
        refs[name] = (snapshot(out), rec.steps)
    return refs


def fault_points(steps: list) -> list[int]:
    """1-based indices of the steps to fail: every mkdir, fsync and rename, and the first and last
    write of each file (the writes in between are alike)."""
    picks, writes = [], {}
    for i, (op, path) in enumerate(steps, 1):
        if op == "write":
            writes.setdefault(path, []).append(i)
        else:
            picks.append(i)
    for idx in writes.values():
        picks += sorted({idx[0], idx[-1]})
    picks.sort()
    # keep the test short: every rename and fsync of a directory, and an even sample of the rest
    must = [i for i in picks if steps[i - 1][0] == "rename" or steps[i - 1][1].is_dir()]
    rest = [i for i in picks if i not in must]
    return sorted(must + rest[:: max(1, len(rest) // 12)])


def assert_complete_or_absent(name: str, out: Path, want: dict) -> None:
    """No final-named file unless the whole output is there."""
    if name == "urls":
        have = snapshot(out) if out.exists() else {}
        if MANIFEST[name] in have:
            assert have == want
        else:
            assert [f for f in have if f.startswith("tokens-")] == []
    else:
        assert not out.exists() or snapshot(out) == want


@pytest.mark.parametrize("name", list(RECIPES))
def test_a_fault_at_any_step_publishes_nothing_and_a_rerun_finishes(name, reference, tmp_path):
    want, steps = reference[name]
    assert {op for op, _ in steps} == set(faults.OPS)
    points = fault_points(steps)
    assert len(points) >= 8
    for k in points:
        out = tmp_path / f"f{k}" / "out"
        hook = faults.FailAt(k, OSError(errno.ENOSPC, "No space left on device"))
        with faults.inject(hook), pytest.raises(OutputError, match="No space left on device"):
            RECIPES[name](out)
        assert hook.fired is not None
        assert_complete_or_absent(name, out, want)
        assert temporaries(out.parent) == [], f"fault at {hook.fired}"
        RECIPES[name](out)
        assert snapshot(out) == want, f"rerun after a fault at {hook.fired}"


@pytest.mark.parametrize("name", list(RECIPES))
def test_ctrl_c_at_the_commit_keeps_the_previous_output(name, reference, tmp_path):
    """--overwrite of an earlier output, interrupted at every rename: the old output or the new
    one, never a mix; the rerun finishes."""
    want, steps = reference[name]
    renames = [i for i, (op, _) in enumerate(steps, 1) if op == "rename"]
    for r in range(1, len(renames) + 1):
        out = tmp_path / f"r{r}" / "out"
        RECIPES[name](out)
        manifest = out / MANIFEST[name]
        old = json.loads(manifest.read_text())
        old["request"]["options"]["stale"] = True  # the same files, but another request: must be redone
        manifest.write_text(json.dumps(old))
        before = snapshot(out)
        hook = faults.FailAt(r, KeyboardInterrupt(), ops=("rename",))
        with faults.inject(hook), pytest.raises(KeyboardInterrupt):
            _overwrite(name, out)
        assert snapshot(out) in (before, want), f"interrupted at {hook.fired}"
        assert temporaries(out.parent) == []
        _overwrite(name, out)
        assert snapshot(out) == want


def _overwrite(name: str, out: Path) -> None:
    from fastenc.recipes.bytes import encode_bytes
    from fastenc.recipes.gpt2 import encode_gpt2
    from fastenc.recipes.urls import encode_shard

    if name == "bytes":
        encode_bytes([DATA / "bytes_docs.parquet"], out, shard_bytes=3000, val_every=10, overwrite=True, quiet=True)
    elif name == "gpt2":
        encode_gpt2([DATA / "docs_fixture.parquet"], out, part_tokens=60_000, buckets="b1", decode_every=10**6, overwrite=True, quiet=True)
    else:
        encode_shard(DATA / "urls_fixture.parquet", out, shard_check=False, chunk_urls=700, overwrite=True, quiet=True)


KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from fastenc.run import faults
from test_atomic_output import RECIPES
name, op, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with faults.inject(faults.FailAt(n, lambda: os.kill(os.getpid(), signal.SIGKILL), ops=(op,))):
    RECIPES[name](__import__("pathlib").Path(out))
"""


@pytest.mark.parametrize("name", list(RECIPES))
def test_kill_9_anywhere_then_a_plain_rerun_finishes(name, reference, tmp_path):
    """A killed process cannot clean up: its staging folder stays. The rerun deletes it (its
    process is gone), and a bin moved in without its sidecar (urls) is deleted too."""
    want, steps = reference[name]
    renames = sum(op == "rename" for op, _ in steps)
    writes = sum(op == "write" for op, _ in steps)
    script = KILL_SCRIPT.format(tests=str(REPO / "tests"))
    for op, n in (("write", writes // 2), ("rename", renames)) + ((("rename", renames - 1),) if renames > 1 else ()):
        out = tmp_path / f"{op}{n}" / "out"
        proc = subprocess.run([sys.executable, "-c", script, name, op, str(n), str(out)], capture_output=True, text=True)
        assert proc.returncode == -9, proc.stderr
        assert_complete_or_absent(name, out, want) if name != "urls" else None
        if name == "urls" and not (out / MANIFEST[name]).exists():
            assert not any(p.name.endswith(".json") and p.name.startswith("tokens-") for p in out.iterdir())
        RECIPES[name](out)
        assert snapshot(out) == want
        assert temporaries(out.parent) == []


def test_hook_counts_only_its_ops_and_is_removed_after_the_block(tmp_path):
    hook = faults.FailAt(2, OSError(errno.EIO, "boom"), ops=("fsync",))
    with faults.inject(hook):
        faults.step("write", tmp_path)
        faults.step("fsync", tmp_path)
        with pytest.raises(OSError, match="boom"):
            faults.step("fsync", tmp_path)
    faults.step("fsync", tmp_path)  # no hook any more
    assert hook.seen == 2 and hook.fired == ("fsync", tmp_path)


def test_output_errors_are_one_line_fastenc_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(FastencError, match="not a folder|Not a directory"):
        run_bytes(blocker / "out")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        with pytest.raises(OutputError, match="permission"):
            run_bytes(ro / "out")
    finally:
        ro.chmod(0o700)


def test_invalid_utf8_is_counted_in_every_recipe_meta(tmp_path):
    """A string column holding invalid UTF-8 (parquet does not check) is encoded byte for byte,
    and counted in the meta (issue 10, item 8)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastenc.recipes.bytes import encode_bytes
    from fastenc.recipes.gpt2 import encode_gpt2
    from fastenc.recipes.urls import encode_shard

    values = [b"good text", b"bad \xff byte", b"cut \xe2\x82", b"http://a.b/\xc0\x80"]
    arr = pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(
        __import__("numpy").cumsum([0] + [len(v) for v in values]).astype("int32").tobytes()), pa.py_buffer(b"".join(values))])
    src = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"text": arr, "url": arr}), src)
    assert encode_gpt2([src], tmp_path / "g", quiet=True)["invalid_utf8_documents"] == 3
    assert encode_bytes([src], tmp_path / "b", quiet=True)["invalid_utf8_documents"] == 3
    assert encode_shard(src, tmp_path / "u", shard_check=False, quiet=True)["invalid_utf8_urls"] == 3
