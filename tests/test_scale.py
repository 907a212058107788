"""Whole datasets (docs/scale.md): map/reduce over input files, --workers, resume after kill -9,
refusal of a changed request. Outputs are compared byte for byte with the one-process run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from fastenc.errors import InputError
from fastenc.recipes.bytes import encode_bytes
from fastenc.recipes.gpt2 import encode_gpt2
from fastenc.recipes.urls import encode_shards
from fastenc.run.units import WORK_SUFFIX, WorkDir

DATA = Path(__file__).parent / "data"
NUM_SHARDS = 4


def tree(root: Path) -> dict:
    """Every file under ``root`` (relative path -> bytes), less the provenance of the command
    line: the ``build`` block of JSON files (the exact command, which names ``--workers``) and
    the card ``README.md`` that shows it (tests/test_card.py checks the card)."""
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


def split_table(src: Path, folder: Path, n: int, stem: str = "part") -> list[Path]:
    """``src`` cut into ``n`` consecutive slices of rows (two row groups each)."""
    t = pq.read_table(src)
    folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, t.num_rows, n + 1).astype(int)
    paths = []
    for k in range(n):
        p = folder / f"{stem}-{k:05d}.parquet"
        piece = t.slice(bounds[k], bounds[k + 1] - bounds[k])
        pq.write_table(piece, p, row_group_size=max(1, piece.num_rows // 2))
        paths.append(p)
    return paths


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale-inputs")
    urls = pq.read_table(DATA / "urls_fixture.parquet").column("url").to_pylist()
    shard_of = [(xxhash.xxh3_64_intdigest(u.encode()) * NUM_SHARDS) >> 64 for u in urls]
    (root / "urls").mkdir()
    url_paths = []
    for k in range(NUM_SHARDS):  # each shard keeps the source order of its URLs
        p = root / "urls" / f"part-{k:05d}.parquet"
        pq.write_table(pa.table({"url": [u for u, s in zip(urls, shard_of) if s == k]}), p, row_group_size=400)
        url_paths.append(p)
    return {"urls": url_paths, "gpt2": split_table(DATA / "docs_fixture.parquet", root / "gpt2", 3),
            "bytes": split_table(DATA / "bytes_docs.parquet", root / "bytes", 4)}


RUNS = {
    "urls": lambda paths, out, **kw: encode_shards(paths, out, num_shards=NUM_SHARDS, quiet=True, **kw),
    "gpt2": lambda paths, out, **kw: encode_gpt2(paths, out, part_tokens=20_000, decode_every=7, quiet=True, **kw),
    "bytes": lambda paths, out, **kw: encode_bytes(paths, out, shard_bytes=3000, val_every=5, quiet=True, **kw),
}


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
    """Each recipe's one-process output."""
    root = tmp_path_factory.mktemp("scale-ref")
    return {name: tree(_run(name, inputs, root / name)) for name in RUNS}


def _run(name, inputs, out, **kw) -> Path:
    RUNS[name](inputs[name], out, **kw)
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_two_workers_give_the_one_process_bytes(name, inputs, reference, tmp_path):
    out = _run(name, inputs, tmp_path / "out", workers=2)
    assert tree(out) == reference[name]
    assert not Path(str(out) + WORK_SUFFIX).exists()  # the spills are gone after publication


def test_one_file_and_many_files_give_the_same_documents(inputs, tmp_path):
    """The split into files changes nothing but provenance: the bytes shards are the same as from one file."""
    one = tmp_path / "one"
    encode_bytes([DATA / "bytes_docs.parquet"], one, shard_bytes=3000, val_every=5, quiet=True)
    many = _run("bytes", inputs, tmp_path / "many")
    shards = lambda out: {k: v for k, v in tree(out).items() if k.endswith(".bin")}  # noqa: E731
    assert shards(one) == shards(many) and len(shards(one)) > 2


def _cli(args, env=None):
    code = "import sys; from fastenc.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


@pytest.mark.parametrize("method", ["auto", "spawn"])  # auto: the CLI's process forks its worker (fastenc.run.forking)
@pytest.mark.parametrize("name", ["gpt2", "bytes"])
def test_kill_a_worker_then_rerun_finishes_identical(name, method, inputs, reference, tmp_path):
    out = tmp_path / "out"
    extra = {"gpt2": ["--part-tokens", "20000", "--decode-every", "7"], "bytes": ["--shard-bytes", "3000", "--val-every", "5"]}[name]
    args = [name, *map(str, inputs[name]), "-o", str(out), "-q", "--workers", "2", *extra]
    # the spawned worker kills itself (SIGKILL) at its first unit's commit (unit 0: a spawned
    # worker's first unit is always its own); the main process commits units from the back meanwhile
    failed = _cli(args, env={"FASTENC_FAULT": "rename:1:kill", "FASTENC_START_METHOD": method})
    assert failed.returncode == 1 and "rerun the same command" in failed.stderr and "Traceback" not in failed.stderr
    assert not out.exists()
    work = WorkDir(out, json.loads((Path(str(out) + WORK_SUFFIX) / "request.json").read_text()))
    done = [i for i in range(len(inputs[name])) if work.finished(i) is not None]
    assert 1 <= len(done) < len(inputs[name])
    kept = {i: work.unit_dir(i).stat().st_ino for i in done}
    # a spill that does not verify is redone, not trusted: truncate one file of a finished unit
    victim = sorted(p for p in work.unit_dir(done[0]).iterdir() if p.name != "unit.json")[0]
    victim.write_bytes(victim.read_bytes()[:-1])
    seen = []
    from fastenc.run import units

    real = units.map_units
    units.map_units = lambda task, todo, **kw: (seen.extend(todo), real(task, todo, **kw))[1]
    try:
        _run(name, inputs, out)
    finally:
        units.map_units = real
    assert tree(out) == reference[name]
    assert done[0] in seen and not set(done[1:]) & set(seen)  # only unfinished (or broken) units were redone
    assert all(i in seen or i in kept for i in range(len(inputs[name])))


def test_kill_a_url_worker_then_rerun(inputs, reference, tmp_path):
    out = tmp_path / "out"
    args = ["urls", *map(str, inputs["urls"]), "-o", str(out), "-q", "--workers", "2", "--num-shards", str(NUM_SHARDS)]
    # killed just before its first exchange: the first shard to finish creates OUT by one rename (OUT is
    # not made before the workers start), each later one is published by one exchange of folders
    failed = _cli(args, env={"FASTENC_FAULT": "exchange:1:kill"})
    assert failed.returncode == 1 and "rerun the same command" in failed.stderr
    assert _cli(args).returncode == 0
    assert tree(out) == reference["urls"]


@pytest.mark.parametrize("name", ["gpt2", "bytes", "urls"])
def test_a_forked_two_worker_command_gives_the_one_process_bytes(name, inputs, reference, tmp_path):
    # a command's process forks its worker (the in-process runs above spawn: pytest's process has threads)
    out = tmp_path / "out"
    extra = {"gpt2": ["--part-tokens", "20000", "--decode-every", "7"], "bytes": ["--shard-bytes", "3000", "--val-every", "5"],
             "urls": ["--num-shards", str(NUM_SHARDS)]}[name]
    done = _cli([name, *map(str, inputs[name]), "-o", str(out), "-q", "--workers", "2", *extra])
    assert done.returncode == 0, done.stderr
    assert tree(out) == reference[name]


_START_PROBE = """
import sys, threading
sys.path.insert(0, sys.argv[1])
import probe_task
from fastenc.run.units import map_units
if sys.argv[2] == "thread":  # a thread of the parent's own rules fork out
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
import os
print((os.getpid(), sorted(map_units(probe_task.task, list(range(4)), workers=2, threads=1).items())))
"""


@pytest.mark.parametrize("case, expect", [("plain", "fork"), ("thread", "spawn"), ("spawn-env", "spawn")])
def test_workers_fork_only_from_a_process_without_threads(case, expect, tmp_path):
    if not sys.platform.startswith("linux"):
        expect = "spawn"  # fork is used on Linux only
    (tmp_path / "probe_task.py").write_text(
        "import os, sys\n"
        "def task(i):  # a spawned process was started by multiprocessing's spawn_main, a forked one has our argv\n"
        "    return (os.getpid(), 'spawn' if 'spawn_main' in ' '.join(sys.orig_argv) else 'fork')\n")
    env = {**os.environ, "FASTENC_START_METHOD": "spawn" if case == "spawn-env" else ""}
    proc = subprocess.run([sys.executable, "-c", _START_PROBE, str(tmp_path), case], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    main_pid, items = eval(proc.stdout.strip().splitlines()[-1])
    results = dict(items)
    assert sorted(results) == [0, 1, 2, 3]
    worker = results[0]  # unit 0 is the started worker's first unit, always
    # (a forked worker can finish all four tiny units before this process takes one: only unit 0's is sure)
    assert worker[0] != main_pid and worker[1] == expect  # another process; how it began


def test_a_changed_request_is_refused_naming_what_changed(inputs, tmp_path):
    import shutil

    out = tmp_path / "out"
    paths = [Path(shutil.copy(p, tmp_path / p.name)) for p in inputs["bytes"]]  # this test changes one
    args = ["bytes", *map(str, paths), "-o", str(out), "-q", "--shard-bytes", "3000"]
    assert _cli([*args, "--workers", "2"], env={"FASTENC_FAULT": "rename:1:kill"}).returncode == 1
    with pytest.raises(InputError, match=r"option shard_bytes: 3000 -> 4000.*--overwrite"):
        encode_bytes(paths, out, shard_bytes=4000, quiet=True)
    os.utime(paths[1], ns=(1, 1))  # an input changed (its mtime)
    with pytest.raises(InputError, match=r"input part-00001.parquet changed"):
        encode_bytes(paths, out, shard_bytes=3000, quiet=True)
    meta = encode_bytes(paths, out, shard_bytes=4000, overwrite=True, quiet=True)
    assert meta["shard_bytes"] == 4000 and not Path(str(out) + WORK_SUFFIX).exists()


# ----------------------------------------------------------------------------------------------
# datatrove (the [dist] extra; CI installs it with the test extra)
# ----------------------------------------------------------------------------------------------

OPTIONS = {"urls": {"num_shards": NUM_SHARDS}, "gpt2": {"part_tokens": 20_000, "decode_every": 7},
           "bytes": {"shard_bytes": 3000, "val_every": 5}}


def _datatrove():
    if os.environ.get("CI"):  # the test extra has datatrove: never skip there
        import fastenc.datatrove as dt

        return dt
    return pytest.importorskip("fastenc.datatrove")


def _datatrove_steps(name, inputs, out):
    dt = _datatrove()
    maps = {"urls": dt.UrlsMap, "gpt2": dt.Gpt2Map, "bytes": dt.BytesMap}
    return maps[name](inputs[name], out, **OPTIONS[name]), dt.Finalize(name, inputs[name], out, **OPTIONS[name])


@pytest.mark.parametrize("name", list(RUNS))
def test_datatrove_local_executor_gives_the_one_process_bytes(name, inputs, reference, tmp_path):
    map_step, finalize = _datatrove_steps(name, inputs, tmp_path / "out")
    from datatrove.executor import LocalPipelineExecutor

    LocalPipelineExecutor([map_step], tasks=4, workers=2, logging_dir=str(tmp_path / "logs-map")).run()
    LocalPipelineExecutor([finalize], tasks=1, logging_dir=str(tmp_path / "logs-final")).run()
    assert tree(tmp_path / "out") == reference[name]


def test_datatrove_finalize_refuses_a_missing_unit(inputs, tmp_path):
    """A map task that did not finish (a failed Ray task can still exit 0) stops the finalize step."""
    from fastenc.run.units import MissingUnits

    map_step, finalize = _datatrove_steps("bytes", inputs, tmp_path / "out")
    list(map_step.run(None, rank=1, world_size=2))  # rank 0 never ran
    with pytest.raises(MissingUnits, match=r"2 of 4 units have no verified output .*units 0, 2"):
        list(finalize.run(None, rank=0, world_size=1))
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_datatrove_ray_executor_gives_the_one_process_bytes(inputs, reference, tmp_path):
    """The [dist] extra's Ray (not in the test extra: a large install): skipped where ray is absent."""
    ray = pytest.importorskip("ray")
    dt = _datatrove()
    from datatrove.executor import RayPipelineExecutor

    out = tmp_path / "out"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        step = dt.BytesMap(inputs["bytes"], out, threads=1, **OPTIONS["bytes"])
        RayPipelineExecutor([step], tasks=4, cpus_per_task=1, logging_dir=str(tmp_path / "logs")).run()
    finally:
        ray.shutdown()
    dt.Finalize("bytes", inputs["bytes"], out, **OPTIONS["bytes"]).units.finalize()
    assert tree(out) == reference["bytes"]


def _pid_of_unit(i: int) -> int:
    return os.getpid()


def test_the_command_process_encodes_units_beside_the_spawned_workers(monkeypatch):
    # --workers 2: this process and one started worker; the worker's first unit (0) is its own,
    # this process takes the next units from the front too, and its thread count is restored after.
    # (Spawned: a forked worker can finish every tiny unit before this process takes one.)
    import numba

    from fastenc.run.forking import START_METHOD_ENV
    from fastenc.run.units import map_units

    monkeypatch.setenv(START_METHOD_ENV, "spawn")

    before = numba.get_num_threads()
    results = map_units(_pid_of_unit, list(range(6)), workers=2, threads=1)
    assert sorted(results) == list(range(6))
    assert results[0] != os.getpid() and os.getpid() in results.values()
    assert len(set(results.values())) == 2
    assert numba.get_num_threads() == before


def test_request_changes_names_inputs_options_and_tokenizer():
    from fastenc.run.lifecycle import request_changes

    old = {"recipe": "gpt2", "sources": [["/d/a.parquet", 10, 1], ["/d/b.parquet", 20, 2]], "options": {"part_tokens": 5},
           "tokenizer_sha256": "aa", "fastenc_version": "0.1.0"}
    assert request_changes(old, old) == "nothing visible changed"
    new = {**old, "sources": [["/d/a.parquet", 10, 1], ["/d/b.parquet", 21, 3]]}
    assert request_changes(old, new) == "input b.parquet changed (size or mtime)"
    new = {**old, "sources": old["sources"][:1]}
    assert request_changes(old, new) == "input files: 2 -> 1 files or another order"
    new = {**old, "options": {"part_tokens": 6}, "tokenizer_sha256": "bb"}
    assert request_changes(old, new) == "option part_tokens: 5 -> 6; tokenizer (sha256): 'aa' -> 'bb'"


@pytest.mark.parametrize("encode", [encode_bytes, encode_gpt2, encode_shards], ids=["bytes", "gpt2", "urls"])
def test_zero_workers_is_refused_by_every_recipe(encode, tmp_path):
    from fastenc.errors import UsageError

    src = tmp_path / "part-00000.parquet"
    pq.write_table(pa.table({"text": ["a"], "url": ["https://com.example/"]}), src)
    with pytest.raises(UsageError, match="--workers must be at least 1"):
        encode([src], tmp_path / "out", workers=0, quiet=True)
    assert not (tmp_path / "out").exists()


def test_spills_skip_fsync_and_a_spill_that_lost_writes_is_redone(tmp_path, monkeypatch):
    """A spill is not fsynced (WorkDir.stage): after a crash of the machine one of its files can
    keep its size and lose its content. Its manifest's digest must then reject it, so the unit is
    redone; a durable stage (the final output's) still fsyncs every file."""
    from fastenc.run import staging

    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(staging.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    work = WorkDir(tmp_path / "out", {"recipe": "test"}).open()
    synced.clear()  # (the work folder's request.json is written durably)
    stage = work.stage(0)
    spill = stage.open("b1/ids.bin")
    spill.file.write(bytes(range(256)) * 64)
    work.commit(0, stage, {"documents": 3})
    assert synced == []  # no fsync for the spill's files or folders
    assert work.finished(0) == {"documents": 3}
    ids = work.unit_dir(0) / "b1" / "ids.bin"
    ids.write_bytes(bytes(ids.stat().st_size))  # same size, content lost (zeros)
    assert work.finished(0) is None  # not trusted: the map redoes unit 0
    final = staging.Stage(tmp_path / "final.tmp")
    final.write_bytes("part.bin", b"ids")
    final.finish()
    assert len(synced) >= 2  # the file and its folder
