"""The command line a new user meets (issue 10): one-line errors with documented exit codes
(1 input/environment, 2 usage, 130 interrupted, 143 stopped by SIGTERM), one flag vocabulary, decode
for every format."""
from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastenc import cli
from fastenc.run import faults

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
BYTES_FIXTURE = DATA / "bytes_docs.parquet"
DOCS_FIXTURE = DATA / "docs_fixture.parquet"
URLS_FIXTURE = DATA / "urls_fixture.parquet"


def one_line_error(capsys, rc: int, want_rc: int = 1) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == want_rc, err
    assert len(lines) == 1 and lines[0].startswith("fastenc: error: ") and "Traceback" not in err, err
    return lines[0]


def test_encode_to_an_existing_folder_is_one_line_and_leaves_nothing(tmp_path, capsys):
    """Failure 5: ``fastenc encode README.md -o EXISTING_DIR`` printed a traceback and left a temporary."""
    out = tmp_path / "existing"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    line = one_line_error(capsys, cli.main(["encode", str(REPO / "README.md"), "-o", str(out), "-q"]))
    assert "not empty" in line and "--overwrite" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing"]
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_encode_to_a_folder_then_decode_it(tmp_path, capsys):
    out = tmp_path / "ids"
    text = "Hello, world! Grüße aus Köln.\nSecond line."
    src = tmp_path / "t.txt"
    src.write_text(text, encoding="utf-8")
    assert cli.main(["encode", str(src), "-o", str(out), "--threads", "1", "-q"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ids"] == (out / "ids.bin").stat().st_size // 2 and meta["dtype"] == "uint16"
    assert cli.main(["encode", str(src), "-o", str(out), "-q"]) == 0  # the same request: nothing to do
    capsys.readouterr()
    assert cli.main(["decode", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == text


def test_usage_errors_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["bytes", str(BYTES_FIXTURE), "-o", str(tmp_path / "o"), "--batch-bytes", "0"])
    assert exc.value.code == 2 and "--batch-bytes" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["gpt2", str(DOCS_FIXTURE), "-o", str(tmp_path / "o"), "--threads", "0"])
    assert exc.value.code == 2 and "--threads" in capsys.readouterr().err
    line = one_line_error(capsys, cli.main(["gpt2", str(DOCS_FIXTURE), "-o", str(tmp_path / "o"), "--buckets", "b9", "-q"]), 2)
    assert "unknown bucket 'b9'" in line
    assert not (tmp_path / "o").exists()


def test_output_under_a_file_and_a_full_disk_are_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = one_line_error(capsys, cli.main(["bytes", str(BYTES_FIXTURE), "-o", str(blocker / "out"), "-q"]))
    assert "is a file, not a folder" in line
    with faults.inject(faults.FailAt(3, OSError(errno.ENOSPC, "No space left on device"), ops=("write",))):
        line = one_line_error(capsys, cli.main(["bytes", str(BYTES_FIXTURE), "-o", str(tmp_path / "o"), "-q"]))
    assert "No space left on device" in line and "nothing was published" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_interrupted_exits_130_and_publishes_nothing(tmp_path, capsys):
    with faults.inject(faults.FailAt(1, KeyboardInterrupt(), ops=("rename",))):
        rc = cli.main(["bytes", str(BYTES_FIXTURE), "-o", str(tmp_path / "o"), "-q"])
    assert rc == 130 and "interrupted (SIGINT): no partial output was published" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_interrupted_just_after_the_commit_says_the_output_is_complete(tmp_path, capsys):
    """Issue 10, item 2: Ctrl-C landing just after the commit's rename (``strace -e
    inject=rename:signal=INT``) must not say "nothing was published" over a published output."""
    out = tmp_path / "u"
    with faults.inject(faults.FailAt(1, KeyboardInterrupt(), ops=(faults.RENAMED,))):  # a new OUT: one rename
        rc = cli.main(["urls", str(URLS_FIXTURE), "-o", str(out), "--no-shard-check", "-q"])
    err = capsys.readouterr().err.strip()
    assert rc == 130 and err == (f"fastenc: interrupted (SIGINT) just after {out} was published: it is complete "
                                 "(a rerun of the same command finds it done and tidies up)")
    assert cli.main(["verify", str(out), "-q"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u"]


def test_a_damaged_parquet_page_is_one_line(tmp_path, capsys):
    """A page that fails to decompress (the footer is intact, so the file opens): one line."""
    src = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": [f"document {i} " * 300 for i in range(200)]}), src, compression="zstd", row_group_size=200)
    chunk = pq.ParquetFile(src).metadata.row_group(0).column(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    raw = bytearray(src.read_bytes())
    frame = raw.index(b"\x28\xb5\x2f\xfd", start)  # the first zstd frame of the column's pages
    raw[frame : frame + 4] = b"\x00\x00\x00\x00"  # its magic number: the page no longer decompresses
    src.write_bytes(bytes(raw))
    pq.ParquetFile(src)  # the footer still reads
    line = one_line_error(capsys, cli.main(["bytes", str(src), "-o", str(tmp_path / "o"), "-q"]))
    assert str(src) in line and "damaged" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("edit", ["model_string", "added_tokens_dict", "deep_pre_tokenizer"])
def test_malformed_tokenizer_json_is_one_line(tmp_path, capsys, edit):
    from fastenc.vocab import builtin_tokenizer_dir

    spec = json.loads((builtin_tokenizer_dir("urls") / "tokenizer.json").read_text(encoding="utf-8"))
    if edit == "model_string":
        spec["model"] = "BPE"
    elif edit == "added_tokens_dict":
        spec["added_tokens"] = {"<eos>": 0}
    text = json.dumps(spec)
    if edit == "deep_pre_tokenizer":
        text = text.replace('"pre_tokenizer":', '"pre_tokenizer": ' + '{"type": "Sequence", "pretokenizers": [' * 5000
                            + "null" + "]}" * 5000 + ', "was":', 1)
    bad = tmp_path / "tokenizer.json"
    bad.write_text(text, encoding="utf-8")
    src = tmp_path / "t.txt"
    src.write_text("http://a.b/")
    line = one_line_error(capsys, cli.main(["encode", str(src), "-t", str(bad)]))
    named = {"model_string": "'model' is a string, not an object", "added_tokens_dict": "'added_tokens' is an object, not a list",
             "deep_pre_tokenizer": "nested too deeply"}
    assert str(bad) in line and named[edit] in line  # the field (or the problem) itself, not a Python exception


def test_an_unsupported_deep_pre_tokenizer_is_one_short_line(tmp_path, capsys):
    from fastenc.vocab import builtin_tokenizer_dir

    spec = json.loads((builtin_tokenizer_dir("urls") / "tokenizer.json").read_text(encoding="utf-8"))
    for _ in range(200):  # deep, but not too deep for Python's JSON reader: refused as unsupported
        spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [spec["pre_tokenizer"]]}
    bad = tmp_path / "tokenizer.json"
    bad.write_text(json.dumps(spec), encoding="utf-8")
    src = tmp_path / "t.txt"
    src.write_text("http://a.b/")
    line = one_line_error(capsys, cli.main(["encode", str(src), "-t", str(bad)]))
    assert "field pre_tokenizer" in line and "is not supported" in line and len(line) < 1000


def test_verify_source_flag_before_out_and_threads(tmp_path, capsys):
    out = tmp_path / "o"
    assert cli.main(["bytes", str(BYTES_FIXTURE), "-o", str(out), "--threads", "1", "-q"]) == 0
    assert cli.main(["verify", "--source", str(BYTES_FIXTURE), str(out), "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "OK" in err and "all 44 documents byte for byte" in err


def test_urls_no_shard_check_needs_no_shard_index(tmp_path, capsys):
    """A file not named part-NNNNN with --no-shard-check is written as shard 0 (no --shard needed)."""
    assert cli.main(["urls", str(DATA / "urls_fixture.parquet"), "-o", str(tmp_path / "u"), "--no-shard-check", "-q", "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["shard"] == 0 and (tmp_path / "u" / "tokens-s00000.bin").is_file()


def test_decode_reads_every_format(tmp_path, capsys):
    bytes_out, gpt2_out = tmp_path / "b", tmp_path / "g"
    assert cli.main(["bytes", str(BYTES_FIXTURE), "-o", str(bytes_out), "-q"]) == 0
    assert cli.main(["gpt2", str(DOCS_FIXTURE), "-o", str(gpt2_out), "--buckets", "b1", "-q"]) == 0
    texts = pq.read_table(BYTES_FIXTURE).column("text").to_pylist()
    capsys.readouterr()
    assert cli.main(["decode", str(bytes_out / "train_00000.bin"), "--json", "--limit", "3"]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert got == [t.replace("\ufffe", "") for t in texts[:3]] or len(got) == 3
    docs = pq.read_table(DOCS_FIXTURE)
    b1 = [t for t, n in zip(docs.column("text").to_pylist(), docs.column("gpt2_tokens").to_pylist()) if 4096 <= n < 8192]
    assert cli.main(["decode", str(gpt2_out), "--json", "--start", "1", "--limit", "2"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == b1[1:3]


def test_help_names_the_shared_flags_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "Exit status" in out and "130" in out
    for command in ("urls", "gpt2", "bytes", "encode"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = capsys.readouterr().out
        for flag in ("--threads", "-q, --quiet", "--json", "-o DIR, --out DIR"):
            assert flag in text, (command, flag)
        if command != "bytes":  # every command that takes a tokenizer spells it -t/--tokenizer
            assert "-t TOKENIZER, --tokenizer TOKENIZER" in text, command
    for command in ("urls", "gpt2", "bytes"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = capsys.readouterr().out
        for flag in ("--column NAME", "--skip-nulls", "--workers", "--overwrite"):
            assert flag in text, (command, flag)
        assert ("--tokenizer" in text) == (command != "bytes"), command  # as README.md says


def test_help_and_messages_say_what_is_true(tmp_path, capsys, monkeypatch):
    """Issue 63, item 7: no shared-flag list that the parsers contradict, gpt2 may write uint32
    (o200k_base), the bytes summary line counts invalid UTF-8, the compile notice promises no time."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert "Shared flags" not in text and "143" in text and "SIGTERM" in text
    with pytest.raises(SystemExit):
        cli.main(["gpt2", "--help"])
    assert "uint32" in capsys.readouterr().out
    assert "uint32" in cli.subcommands()["gpt2"][1]
    assert cli.main(["bytes", str(BYTES_FIXTURE), "-o", str(tmp_path / "b")]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(r"\b0 documents not valid UTF-8$", last), last
    from fastenc import warmup

    notices = []
    monkeypatch.setattr(warmup, "cold_families", lambda families: list(families))
    monkeypatch.setattr(warmup, "compile_ahead", lambda cold, quiet, notice=None: notices.append(notice))
    warmup.prepare("bytes", cli.build_parser("bytes").parse_args(["bytes", str(BYTES_FIXTURE), "-o", str(tmp_path / "c")]))
    assert len(notices) == 1 and "compiling kernels" in notices[0] and not re.search(r"\d\s*s\b", notices[0]), notices


def test_gpt2_takes_the_tokenizer_as_t_and_as_its_old_encoding_flag():
    parser = cli.build_parser("gpt2")
    for spelling in (["-t", "o200k_base"], ["--tokenizer", "o200k_base"], ["--encoding", "o200k_base"]):
        assert parser.parse_args(["gpt2", "x.parquet", "-o", "o", *spelling]).tokenizer == "o200k_base"


def test_skip_nulls_in_every_recipe(tmp_path, capsys):
    """Issue 10, item 9: --skip-nulls is not only the URL recipe's: gpt2 and bytes leave null
    texts out, count them, and verify --source still compares every document."""
    texts = ["first document", None, "second one", None, None, "third"]
    src = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": texts, "url": texts}), src, row_group_size=4)
    for command in ("gpt2", "bytes"):
        out = tmp_path / command
        line = one_line_error(capsys, cli.main([command, str(src), "-o", str(out), "-q"]))
        assert "null at row 1" in line and "--skip-nulls" in line and not out.exists()  # the fix it names exists
        assert cli.main([command, str(src), "-o", str(out), "--skip-nulls", "-q", "--json"]) == 0
        meta = json.loads(capsys.readouterr().out)
        assert meta["null_documents_skipped"] == 3
        assert cli.main(["verify", str(out), "--source", str(src), "-q"]) == 0
        assert cli.main(["decode", str(out), "--json"]) == 0
        assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [t for t in texts if t]
    assert cli.main(["urls", str(src), "-o", str(tmp_path / "u"), "--no-shard-check", "--skip-nulls", "-q", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["null_urls_skipped"] == 3


BAR = re.compile(r"^(?P<desc>[\w+ ]+): +(?P<pct>\d+)%\|[^|]*\| *(?P<done>[^/ ]+)/(?P<total>[^ ]+) \[")


def final_bar_states(err: str) -> dict[str, tuple[str, str, str]]:
    """desc -> (percent, done, total) of each progress bar's last state in ``err``."""
    states = {}
    for line in re.split(r"[\r\n]", err):
        m = BAR.match(line.strip())
        if m:
            states[m["desc"]] = (m["pct"], m["done"], m["total"])
    return states


def test_progress_bars_end_at_their_total_in_whole_counts(tmp_path, capsys):
    """Issue 10, item 9: bars ended at 99% or past their total, and URL counts showed as floats."""
    runs = [
        ["gpt2", str(DOCS_FIXTURE), "-o", str(tmp_path / "g")],
        ["bytes", str(BYTES_FIXTURE), "-o", str(tmp_path / "b"), "--shard-bytes", "3000"],
        ["urls", str(URLS_FIXTURE), "-o", str(tmp_path / "u"), "--no-shard-check"],
    ]
    for argv in runs:
        assert cli.main(argv) == 0
        states = final_bar_states(capsys.readouterr().err)
        assert states, argv
        for desc, (pct, done, total) in states.items():
            assert pct == "100" and done == total and "." not in done, (argv[0], desc, pct, done, total)


def test_the_summary_line_names_the_text_column_each_recipe_chose(tmp_path, capsys):
    """Issue 10, item 9: --column defaults to 'content' in gpt2 and 'text' in bytes (each the
    dataset card's), so the summary line must say which one a run read."""
    src = tmp_path / "both.parquet"
    pq.write_table(pa.table({"text": ["from text"], "content": ["from content"]}), src)
    for command, chosen in (("gpt2", "content"), ("bytes", "text")):
        assert cli.main([command, str(src), "-o", str(tmp_path / command)]) == 0
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith(f"fastenc {command}:") and f"(column {chosen!r})" in last, last


def _fake_numba_extension(root: Path) -> tuple[Path, Path]:
    """A package on its own path that declares a ``numba_extensions`` entry point (as awkward
    does); its ``init`` writes a marker file when Numba loads it."""
    root.mkdir()
    marker = root / "loaded"
    (root / "fake_ext.py").write_text(f"def init():\n    open({str(marker)!r}, 'w').close()\n")
    info = root / "fake_ext-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-ext\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[numba_extensions]\ninit = fake_ext:init\n")
    return root, marker


def test_the_cli_skips_numba_extensions_and_library_users_keep_theirs(tmp_path):
    # The CLI (and a map worker) runs fastenc's kernels only: Numba's loading of every installed
    # extension at the first kernel (awkward: ~0.3 s) is skipped there, never in a user's process.
    import os
    import subprocess
    import sys

    text = tmp_path / "t.txt"
    text.write_text("Hello, world!\n")
    for user, code in [(False, "import sys; from fastenc.cli import main; sys.exit(main(sys.argv[1:]))"),
                       (True, "import sys, fastenc; print(fastenc.load('gpt2').encode(open(sys.argv[2]).read()))")]:
        root, marker = _fake_numba_extension(tmp_path / f"ext-{user}")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(REPO)]))
        proc = subprocess.run([sys.executable, "-c", code, "encode", str(text)], capture_output=True, text=True, env=env,
                              cwd=REPO, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.split() and marker.exists() == user, (user, proc.stderr[-2000:])


def test_the_cli_loads_cached_kernels_without_numba_registries_and_library_users_keep_them(tmp_path, tiktoken_gpt2):
    # run/process.lean_cache_loads: a CLI process rebuilds cached kernels with Numba's runtime
    # only, without importing and registering every typing/lowering registry first (~0.55 s of a
    # warm run); a user's process (import fastenc) keeps Numba's full refresh. Both print ids.
    import os
    import subprocess
    import sys

    text = tmp_path / "t.txt"
    text.write_text("Hello, world! 123 Grüße\n")
    probe = "; print('registries', 'numba.np.linalg' in sys.modules, file=sys.stderr)"
    codes = {"cli": "import sys; from fastenc.cli import main; rc = main(sys.argv[1:])" + probe,
             "user": "import sys, fastenc; print(fastenc.load('gpt2').encode(open(sys.argv[2]).read()))" + probe}
    ids = {}
    for _ in range(2):  # the first pass fills Numba's cache where it was empty, the second loads from it
        for who, code in codes.items():
            proc = subprocess.run([sys.executable, "-c", code, "encode", str(text)], capture_output=True, text=True,
                                  env=dict(os.environ), cwd=REPO, timeout=600)
            assert proc.returncode == 0, proc.stderr[-2000:]
            ids[who] = [int(t) for t in proc.stdout.replace("[", " ").replace("]", " ").replace(",", " ").split()]
            loaded = proc.stderr.strip().splitlines()[-1]
    assert ids["cli"] == ids["user"] == tiktoken_gpt2.encode_ordinary(text.read_text())
    assert loaded == "registries True"  # the user's process: Numba's own loads, unchanged
    proc = subprocess.run([sys.executable, "-c", codes["cli"], "encode", str(text)], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert proc.stderr.strip().splitlines()[-1] == "registries False", proc.stderr[-2000:]


def test_the_cli_puts_arrow_on_the_system_allocator_and_library_users_keep_theirs(tmp_path):
    # run/process.system_arrow_pool: a CLI process (and its workers) takes Arrow's buffers from the C
    # library's malloc, not the bundled mimalloc, whose arenas sit on huge pages that cost a new
    # process more to touch first; a user's own process, and a user's ARROW_DEFAULT_MEMORY_POOL, keep
    # their pool. The output does not depend on it.
    import os
    import subprocess
    import sys

    shard = REPO / "examples" / "part-00042.parquet"
    probe = "import pyarrow as pa; print('pool', pa.default_memory_pool().backend_name)"
    cli_run = ("import sys; from fastenc.cli import main; rc = main(['urls', sys.argv[1], '-o', sys.argv[2], "
               "'--num-shards', '64', '-q']); assert rc == 0; " + probe)
    user_run = ("import sys; from fastenc.recipes.urls import encode_shard; "
                "encode_shard(sys.argv[1], sys.argv[2], num_shards=64, quiet=True); " + probe)
    late_import = "from fastenc.run.process import kernels_only_process; kernels_only_process(); " + probe

    def pool(code, out, **env):
        proc = subprocess.run([sys.executable, "-c", code, str(shard), str(out)], capture_output=True, text=True,
                              env={k: v for k, v in {**os.environ, **env}.items() if v is not None}, cwd=REPO,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.split()[-1]

    bare = pool(probe, tmp_path / "none", ARROW_DEFAULT_MEMORY_POOL=None)  # pyarrow's own default here
    assert pool(cli_run, tmp_path / "cli", ARROW_DEFAULT_MEMORY_POOL=None) == "system"
    assert pool(late_import, tmp_path / "late", ARROW_DEFAULT_MEMORY_POOL=None) == "system"
    assert pool(user_run, tmp_path / "user", ARROW_DEFAULT_MEMORY_POOL=None) == bare
    chosen = next(b for b in ("mimalloc", "jemalloc") if b in pa.supported_memory_backends())  # (wheels ship both)
    assert pool(cli_run, tmp_path / "chosen", ARROW_DEFAULT_MEMORY_POOL=chosen) == chosen
    bins = [(tmp_path / d / "tokens-s00042.bin").read_bytes() for d in ("cli", "user", "chosen")]
    assert bins[0] and bins[0] == bins[1] == bins[2]


def test_the_cli_keeps_freed_memory_for_its_next_unit_and_library_users_keep_the_defaults(tmp_path):
    # run/process.keep_freed_memory: in a CLI process (and its workers) a large block that is freed
    # stays in the heap, and the next one of that size is carved from it: no page faults the second
    # time; and NumPy no longer advises huge pages for its arrays. A user's own process, and a
    # user's MALLOC_/GLIBC_TUNABLES/NUMPY_MADVISE_HUGEPAGE settings, keep the defaults (glibc gives a
    # 64 MB block a mapping of its own, unmapped when freed: faulted in again).
    import ctypes
    import os
    import subprocess
    import sys

    try:
        ctypes.CDLL(None).gnu_get_libc_version
    except AttributeError:
        pytest.skip("not glibc: keep_freed_memory leaves the allocator alone there")
    text = tmp_path / "t.txt"
    text.write_text("Hello, world!\n")
    probe = ("; import ctypes, resource; libc = ctypes.CDLL(None); libc.malloc.restype = ctypes.c_void_p; "
             "libc.free.argtypes = [ctypes.c_void_p]; n = 64 << 20; faults = []\n"
             "for _ in range(2):\n"
             "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt; p = libc.malloc(n); ctypes.memset(p, 1, n)\n"
             "    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before); libc.free(p)\n"
             "from fastenc.run.process import _numpy_madvise_setter as setter\n"
             "print('faults', faults[1], 'numpy-huge', setter()(False), file=sys.stderr)")
    codes = {"cli": "import sys; from fastenc.cli import main; rc = main(sys.argv[1:])" + probe,
             "user": "import sys, fastenc; print(fastenc.load('gpt2').encode(open(sys.argv[2]).read()))" + probe}

    def after(who, **env):
        proc = subprocess.run([sys.executable, "-c", codes[who], "encode", str(text)], capture_output=True, text=True,
                              env={**os.environ, **env}, cwd=REPO, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        _, faults, _, huge = proc.stderr.strip().splitlines()[-1].split()
        return int(faults), huge == "True"

    cli_faults, cli_huge = after("cli")
    assert cli_faults < 16 and not cli_huge  # the freed 64 MB again: no new pages (16,384 of 4 kB, or 32 huge ones)
    user_faults, user_huge = after("user")
    assert user_faults >= 32 and user_huge  # the defaults: a new mapping, faulted in again; NumPy's advice on
    own_faults, own_huge = after("cli", MALLOC_MMAP_MAX_="65536", NUMPY_MADVISE_HUGEPAGE="1")
    assert own_faults >= 32 and own_huge  # the user's own settings are kept


def test_python_m_fastenc_exits_with_main_s_status_and_flushes_its_output(tmp_path, tiktoken_gpt2):
    # console_main ends the process with os._exit (no interpreter teardown): the exit status,
    # and everything printed, must be what main() returned and wrote.
    import subprocess
    import sys

    text = tmp_path / "t.txt"
    text.write_text("x" * 50_000 + "\n")  # far more ids than one pipe buffer's worth of lines
    ok = subprocess.run([sys.executable, "-m", "fastenc", "encode", str(text)], capture_output=True, text=True,
                        cwd=REPO, timeout=600)
    assert ok.returncode == 0 and [int(t) for t in ok.stdout.split()] == tiktoken_gpt2.encode_ordinary(text.read_text())
    bad = subprocess.run([sys.executable, "-m", "fastenc", "decode", str(tmp_path / "missing")], capture_output=True,
                         text=True, cwd=REPO, timeout=600)
    assert bad.returncode == 1 and bad.stderr.startswith("fastenc: error:") and "Traceback" not in bad.stderr
    usage = subprocess.run([sys.executable, "-m", "fastenc"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    closed = subprocess.run(f"{sys.executable} -m fastenc encode {text} | head -c 10", shell=True, capture_output=True,
                            text=True, cwd=REPO, timeout=600)
    assert closed.returncode == 0 and "Traceback" not in closed.stderr and len(closed.stdout) == 10
