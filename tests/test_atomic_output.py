"""Every recipe publishes its output in one step (docs/atomic-output.md).

A fault (a full disk, Ctrl-C, ``kill -9``) injected at any mkdir, write, fsync or rename of a
run, or just after a rename returned -- through the documented hook ``fastenc.run.faults`` --
must leave no file under a final name unless the whole output is complete, and a plain rerun
must finish byte-identical to a run that was never interrupted.

``urls`` writes into a new ``OUT`` (published whole, by one rename, like gpt2 and bytes);
``urls_shared`` adds shard 0 to an ``OUT`` that already holds shard 1 (committed by one exchange
of a rebuilt folder, ``renameat2(RENAME_EXCHANGE)``): there the states allowed are "shard 0
absent" and "shard 0 complete". The sidecar-last fallback is tested in tests/test_urls_commit.py.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastenc.errors import FastencError, InterruptedAfterPublish, OutputError
from fastenc.run import faults, staging

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


def _no_fault(op, path) -> None:
    pass


def run_urls_shared(out: Path) -> dict:
    """Shard 0 into an OUT that holds shard 1 already (made with no fault hook active)."""
    from fastenc.recipes.urls import encode_shard

    if not (out / "tokens-s00001.json").exists():
        with faults.inject(_no_fault):
            encode_shard(DATA / "urls_fixture.parquet", out, shard_check=False, shard=1, chunk_urls=700, quiet=True)
    return run_urls(out)


def run_tokens(out: Path) -> dict:
    """llm.c shards of a val and a train split (several files, documents continued across them)."""
    from fastenc.recipes.tokens.build import encode_tokens

    return encode_tokens([DATA / "docs_fixture.parquet"], out, fmt="llmc", shard_tokens=40_000, val_every=5, quiet=True)


RECIPES = {"bytes": run_bytes, "gpt2": run_gpt2, "urls": run_urls, "urls_shared": run_urls_shared, "tokens": run_tokens}
MANIFEST = {"bytes": "meta.json", "gpt2": "summary.json", "urls": "tokens-s00000.json", "urls_shared": "tokens-s00000.json",
            "tokens": "tokens.json"}


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
    return sorted(str(p.relative_to(parent)) for p in parent.rglob("*") if any(k in p.name for k in (".tmp-", ".old-", ".swap-")))


#: the steps that publish: a rename, or the exchange of a shared folder with its rebuilt copy
COMMITS = ("rename", "exchange")
#: the ops only a shard added to a shared OUT takes
SWAP_OPS = {"link", "exchange"}


def commit_ops(when: str) -> tuple[str, ...]:
    return COMMITS if when == "rename" else (when,)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Per recipe: the files of an uninterrupted run, the fault points that run went through, and
    the files of ``OUT`` before the run (nothing, or shard 1 alone for ``urls_shared``)."""
    refs = {}
    for name, run in RECIPES.items():
        out = tmp_path_factory.mktemp(name) / "out"
        base = {}
        if name == "urls_shared":
            run_urls_shared_base(out)
            base = snapshot(out)
        rec = faults.Recorder()
        with faults.inject(rec):
            run(out)
        refs[name] = (snapshot(out), rec.steps, base)
    return refs


def run_urls_shared_base(out: Path) -> None:
    from fastenc.recipes.urls import encode_shard

    encode_shard(DATA / "urls_fixture.parquet", out, shard_check=False, shard=1, chunk_urls=700, quiet=True)


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
    links = [i for i in picks if steps[i - 1][0] == "link"]
    must = [i for i in picks if steps[i - 1][0] in COMMITS or steps[i - 1][1].is_dir() or i in links[:1] + links[-1:]]
    rest = [i for i in picks if i not in must]
    return sorted(must + rest[:: max(1, len(rest) // 12)])


def assert_complete_or_absent(out: Path, want: dict, base: dict) -> None:
    """No final-named file unless the whole output is there: ``OUT`` is as before the run (absent,
    or shard 1 alone) or complete."""
    have = snapshot(out) if out.exists() else {}
    assert have in (base, want), sorted(set(have) ^ set(want))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RECIPES))
def test_a_fault_at_any_step_publishes_nothing_and_a_rerun_finishes(name, reference, tmp_path):
    want, steps, base = reference[name]
    # a shard added to a shared OUT renames nothing: it links and exchanges
    assert {op for op, _ in steps} == set(faults.OPS) - ({"rename"} if name == "urls_shared" else SWAP_OPS)
    points = fault_points(steps)
    assert len(points) >= 8
    for k in points:
        out = tmp_path / f"f{k}" / "out"
        if base:
            run_urls_shared_base(out)
        hook = faults.FailAt(k, OSError(errno.ENOSPC, "No space left on device"))
        with faults.inject(hook), pytest.raises(OutputError, match="No space left on device"):
            RECIPES[name](out)
        assert hook.fired is not None
        assert_complete_or_absent(out, want, base)
        assert temporaries(out.parent) == [], f"fault at {hook.fired}"
        RECIPES[name](out)
        assert snapshot(out) == want, f"rerun after a fault at {hook.fired}"


def run_gpt2_buckets(out: Path) -> dict:
    """Six buckets of several parts each: the reduce writes and closes them on a thread per core."""
    from fastenc.recipes.gpt2 import encode_gpt2

    return encode_gpt2([DATA / "docs_fixture.parquet"], out, part_tokens=20_000, buckets="b0,b1,b2,b3,b4,b5",
                       decode_every=10**6, quiet=True)


def test_a_fault_in_any_buckets_thread_publishes_nothing_and_a_rerun_finishes(tmp_path):
    """gpt2's buckets are reduced and closed concurrently (``fastenc.tasks.each_on_threads``): a
    full disk met by one bucket's thread, whichever step of whichever bucket comes k-th, fails the
    run with its one-line error while the others finish theirs; nothing is published and nothing is
    left, and a plain rerun finishes identical."""
    ref = tmp_path / "ref" / "out"
    rec = faults.Recorder()
    with faults.inject(rec):
        run_gpt2_buckets(ref)
    want = snapshot(ref)
    assert len({p.parent for op, p in rec.steps if op == "fsync" and p.suffix == ".bin"}) == 6
    points = fault_points(rec.steps)
    for k in points[:: max(1, len(points) // 10)]:
        out = tmp_path / f"f{k}" / "out"
        hook = faults.FailAt(k, OSError(errno.ENOSPC, "No space left on device"))
        with faults.inject(hook), pytest.raises(OutputError, match="No space left on device"):
            run_gpt2_buckets(out)
        assert hook.fired is not None
        assert_complete_or_absent(out, want, {})
        assert temporaries(out.parent) == [], f"fault at {hook.fired}"
        run_gpt2_buckets(out)
        assert snapshot(out) == want, f"rerun after a fault at {hook.fired}"


def renames_of(steps: list) -> int:
    """Renames and exchanges: each is followed by a ``RENAMED`` step."""
    return sum(op in COMMITS for op, _ in steps)


@pytest.mark.parametrize("when", ["rename", faults.RENAMED])
@pytest.mark.parametrize("name", list(RECIPES))
def test_ctrl_c_at_any_rename_publishes_all_or_nothing(name, when, reference, tmp_path):
    """Ctrl-C just before, or just after, each rename of a run (the commit's included: that is
    where a real Ctrl-C lands, as ``strace -e inject=rename:signal=INT`` shows): ``OUT`` is as
    before or complete, nothing is left under a temporary name, the message says which, and a
    plain rerun finishes identical."""
    want, steps, base = reference[name]
    for r in range(1, renames_of(steps) + 1):
        out = tmp_path / f"r{r}" / "out"
        if base:
            run_urls_shared_base(out)
        hook = faults.FailAt(r, KeyboardInterrupt(), ops=commit_ops(when))
        with faults.inject(hook), pytest.raises(KeyboardInterrupt) as exc:
            RECIPES[name](out)
        have = snapshot(out) if out.exists() else {}
        assert have in (base, want), f"interrupted at {hook.fired}: {sorted(set(have) ^ set(want))}"
        assert isinstance(exc.value, InterruptedAfterPublish) == (have == want)  # it says whether it published
        assert temporaries(out.parent) == []
        RECIPES[name](out)
        assert snapshot(out) == want
        assert sorted(p.name for p in out.parent.iterdir() if p.name != "out" + staging.LOCK_SUFFIX) == ["out"]  # no spills either


@pytest.mark.parametrize("when", ["rename", faults.RENAMED])
@pytest.mark.parametrize("name", list(RECIPES))
def test_ctrl_c_at_the_commit_keeps_the_previous_output(name, when, reference, tmp_path):
    """--overwrite of an earlier output, interrupted just before or after every rename: the old
    output or the new one, never a mix; the rerun finishes."""
    want, _, _ = reference[name]
    rec = faults.Recorder(ops=COMMITS)
    for r in range(0, 99):
        out = tmp_path / f"r{r}" / "out"
        RECIPES[name](out)
        manifest = out / MANIFEST[name]
        old = json.loads(manifest.read_text())
        old["request"]["options"]["stale"] = True  # the same files, but another request: must be redone
        manifest.write_text(json.dumps(old))
        before = snapshot(out)
        if r == 0:  # count the renames of a replacement (the old output is moved aside first; a shard: one exchange)
            with faults.inject(rec):
                _overwrite(name, out)
            assert snapshot(out) == want and len(rec.steps) >= (1 if name.startswith("urls") else 2)
            continue
        if r > len(rec.steps):
            break
        hook = faults.FailAt(r, KeyboardInterrupt(), ops=commit_ops(when))
        with faults.inject(hook), pytest.raises(KeyboardInterrupt):
            _overwrite(name, out)
        assert hook.fired is not None
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
    elif name == "tokens":
        from fastenc.recipes.tokens.build import encode_tokens

        encode_tokens([DATA / "docs_fixture.parquet"], out, fmt="llmc", shard_tokens=40_000, val_every=5, overwrite=True,
                      quiet=True)
    else:
        encode_shard(DATA / "urls_fixture.parquet", out, shard_check=False, chunk_urls=700, overwrite=True, quiet=True)


KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from fastenc.run import faults, staging
from test_atomic_output import RECIPES
name, op, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with faults.inject(faults.FailAt(n, lambda: os.kill(os.getpid(), signal.SIGKILL), ops=(op,))):
    RECIPES[name](__import__("pathlib").Path(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RECIPES))
def test_kill_9_anywhere_then_a_plain_rerun_finishes(name, reference, tmp_path):
    """A killed process cannot clean up: its staging folder (and a shared OUT's rebuilt copy, or
    the old folder it replaced) stays. The rerun deletes them (their process is gone). ``OUT`` is
    as before or complete at every kill, the commit's rename or exchange and just after it included
    (a shared OUT's card is part of its swap)."""
    want, steps, base = reference[name]
    count = {op: sum(o == op for o, _ in steps) for op in faults.OPS}
    script = KILL_SCRIPT.format(tests=str(REPO / "tests"))
    kills = [("write", count["write"] // 2), (faults.RENAMED, renames_of(steps))]
    for op in ("rename", "exchange", "link"):
        kills += sorted({(op, n) for n in (count[op], count[op] - 1, 1) if 1 <= n <= count[op]})
    for op, n in kills:
        out = tmp_path / f"{op}{n}" / "out"
        if base:
            run_urls_shared_base(out)
        proc = subprocess.run([sys.executable, "-c", script, name, op, str(n), str(out)], capture_output=True, text=True)
        assert proc.returncode == -9, proc.stderr
        have = {k: v for k, v in (snapshot(out) if out.exists() else {}).items() if ".tmp-" not in k}  # final names only
        assert have in (base, want), f"killed at {op} {n}"
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


@pytest.mark.parametrize("wait", [True, False])
def test_a_staged_files_write_back_hands_over_every_byte_written_so_far(wait, tmp_path):
    # The gpt2 parts are re-read after their write-back, before their fsync: what the writer's own
    # buffer still held must be in the file by then, whether the write-back waits or only starts.
    f = staging.StagedFile(tmp_path / "part.bin", buffering=1 << 20)
    data = os.urandom(300_000)
    f.file.write(data)
    assert (tmp_path / "part.bin").read_bytes() == b""  # still in the 1 MB buffer
    f.write_back(wait)
    assert (tmp_path / "part.bin").read_bytes() == data
    f.file.write(b"tail")
    f.finish()
    assert (tmp_path / "part.bin").read_bytes() == data + b"tail"
    f.write_back(wait=False)  # a finished file: nothing to do, no error
