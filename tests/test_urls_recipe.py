"""The URL recipe end to end: ``fastenc part-NNNNN.parquet -o OUT``, ``fastenc verify OUT``, ``fastenc decode``.

The written shards are read back the way the dataset card reads them (``np.memmap``, zeros as
delimiters, HF tokenizers' decode, ``canonical()``, ``xxhash``), independently of fastenc's own
kernels, and checked against the card's guarantees: leading zeros delimit URLs, hashes of the
ORIGINAL URLs ascend, every URL belongs to the shard, and the bin holds exactly the source's URLs.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

from fastenc import cli
from fastenc.url_canonical import canonical
from fastenc.errors import InputError, VerificationError
from fastenc.kernels.url_pack import hash_order, shard_of
from fastenc.recipes import urls as recipe
from fastenc.recipes.urls import encode_shard, verify_output
from fastenc.verify import verify_dir

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "part-00042.parquet"  # shard 42 of 64 of the real corpus
FIXTURE = REPO / "tests" / "data" / "urls_fixture.parquet"  # 5,000 real URLs, not a shard
TOKENIZER_JSON = REPO / "vocab" / "urls" / "tokenizer.json"
SIDECAR_KEYS = {"urls", "tokens", "dtype", "byteorder", "eos_token_id", "vocab_size", "tokenizer_sha256", "shard",
                "num_shards", "source", "fastenc_version"}


def xxh(b: bytes) -> int:
    return xxhash.xxh3_64_intdigest(b)


def source_urls(path: Path, column: str = "url") -> list:
    return pq.read_table(path, columns=[column]).column(column).to_pylist()


def write_parquet(path: Path, urls: list, type_=pa.string(), row_group_size: int | None = None, column: str = "url") -> Path:
    pq.write_table(pa.table({column: pa.array(urls, type_)}), path, row_group_size=row_group_size)
    return path


def read_like_the_card(out: Path, shard: int) -> tuple[dict, np.ndarray, list[bytes]]:
    """(sidecar, tokens, original URLs) exactly as the card's "Reading the data" does it."""
    tokenizers = pytest.importorskip("tokenizers")
    meta = json.loads((out / f"tokens-s{shard:05d}.json").read_text())
    tokens = np.memmap(out / f"tokens-s{shard:05d}.bin", dtype=np.uint16, mode="r")
    assert len(tokens) == meta["tokens"]
    starts = np.flatnonzero(tokens == meta["eos_token_id"])
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer" / "tokenizer.json"))
    bounds = list(starts) + [len(tokens)]
    ids = [tokens[bounds[k] + 1 : bounds[k + 1]].tolist() for k in range(len(starts))]
    texts = tok.decode_batch(ids) if ids else []
    return meta, tokens, [canonical(t).encode() for t in texts]


def assert_card_guarantees(out: Path, shard: int, num_shards: int, source: list) -> dict:
    meta, tokens, originals = read_like_the_card(out, shard)
    assert SIDECAR_KEYS <= set(meta)
    assert meta["dtype"] == "uint16" and meta["byteorder"] == "little" and meta["eos_token_id"] == 0
    assert meta["urls"] == len(source) == len(originals)
    if len(tokens):
        assert tokens[0] == 0, "the bin must start with <eos>"
    hashes = [xxh(u) for u in originals]
    assert all(a <= b for a, b in zip(hashes, hashes[1:])), "hashes of the original URLs must ascend"
    assert all((h * num_shards) >> 64 == shard for h in hashes), "every URL must belong to the shard"
    want = sorted((xxh(u.encode()), i, u.encode()) for i, u in enumerate(source))
    assert originals == [u for _, _, u in want], "the bin must hold exactly the source URLs, in (hash, row) order"
    return meta


@pytest.fixture(scope="module")
def example_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("urls") / "out"
    meta = encode_shard(EXAMPLE, out, num_shards=64, quiet=True)
    return out, meta


# ---------------------------------------------------------------------------------------------
# The card's guarantees on real shards
# ---------------------------------------------------------------------------------------------


def test_example_shard_meets_the_card(example_out):
    out, meta = example_out
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "tokenizer", "tokens-s00042.bin", "tokens-s00042.json"]
    assert {"tokenizer.json", "tokenizer_config.json", "training_meta.json"} <= {p.name for p in (out / "tokenizer").iterdir()}
    assert (out / "tokenizer" / "tokenizer.json").read_bytes() == TOKENIZER_JSON.read_bytes()
    on_disk = assert_card_guarantees(out, 42, 64, source_urls(EXAMPLE))
    assert on_disk == json.loads(json.dumps(meta))
    assert meta["tokens"] * 2 == (out / "tokens-s00042.bin").stat().st_size
    assert meta["shard"] == 42 and meta["num_shards"] == 64 and meta["shard_checked"] is True
    assert meta["source"]["file"] == "part-00042.parquet" and meta["source"]["bytes"] == EXAMPLE.stat().st_size
    assert meta["tokenizer_sha256"] == __import__("hashlib").sha256(TOKENIZER_JSON.read_bytes()).hexdigest()
    assert meta["vocab_size"] == 8192 and meta["irreversible_urls"] == 0
    assert meta["verified"]["mismatches"] == 0 and meta["verified"]["urls_checked"] == 3000
    assert "build" not in meta and meta["verified"]["samples_read_back"] >= 0  # no timings: reruns are byte-identical


def test_verify_accepts_the_recipe_output(example_out):
    out, _ = example_out
    report = verify_dir(out)
    assert report["ok"], report["problems"]
    assert report["format"] == "urls" and report["urls"] == 9908 and report["shards"] == 1
    report = verify_dir(out, [EXAMPLE])
    assert report["ok"] and report["checked_source"], report["problems"]


@pytest.mark.parametrize("where", ["first", "late"])
def test_verify_finds_a_changed_token_of_the_bin(tmp_path, example_out, where):
    """One token changed on disk (the size kept): its hash no longer matches the sidecar; a first
    token other than 0 is named too."""
    out = tmp_path / "out"
    shutil.copytree(example_out[0], out)
    tokens = np.fromfile(out / "tokens-s00042.bin", dtype="<u2")
    k = 0 if where == "first" else len(tokens) - 3
    tokens[k] = 7 if tokens[k] != 7 else 8
    tokens.tofile(out / "tokens-s00042.bin")
    report = verify_dir(out)
    assert not report["ok"]
    assert any("differs from the sidecar's" in p for p in report["problems"]), report["problems"]
    assert any("not 0 (<eos>)" in p for p in report["problems"]) == (where == "first"), report["problems"]


def test_two_shards_share_a_directory(tmp_path, example_out):
    """One OUT holds several shards (like the card's data/), sharing tokenizer/."""
    out = tmp_path / "out"
    shutil.copytree(example_out[0], out)
    other = [u for u in source_urls(FIXTURE) if (xxh(u.encode()) * 64 >> 64) == 5]
    assert other
    encode_shard(write_parquet(tmp_path / "part-00005.parquet", other), out, num_shards=64, quiet=True)
    assert_card_guarantees(out, 5, 64, other)
    report = verify_dir(out)
    assert report["ok"] and report["shards"] == 2 and report["urls"] == 9908 + len(other), report["problems"]


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "fastenc", *map(str, args)], capture_output=True, cwd=cwd, env=env, timeout=300)


def test_cli_bare_parquet_verify_and_decode(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "part-00042.parquet")
    r = run_cli("part-00042.parquet", "-o", "OUT", "--num-shards", "64", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stderr == b"" and r.stdout == b""  # --quiet: silent
    r = run_cli("verify", "OUT", cwd=tmp_path)
    assert r.returncode == 0 and b"OK" in r.stderr, r.stderr.decode()
    r = run_cli("decode", "OUT/tokens-s00042.bin", "--limit", "20", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    want = [u for _, _, u in sorted((xxh(u.encode()), i, u) for i, u in enumerate(source_urls(EXAMPLE)))][:20]
    assert r.stdout.decode().split("\n") == want + [""]
    # `fastenc urls ...` is the same command
    r = run_cli("urls", "part-00042.parquet", "-o", "OUT2", "--num-shards", "64", "-q", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "OUT2" / "tokens-s00042.bin").read_bytes() == (tmp_path / "OUT" / "tokens-s00042.bin").read_bytes()


def test_progress_and_summary_on_stderr(tmp_path, capsys):
    encode_shard(EXAMPLE, tmp_path / "o", num_shards=64)
    err = capsys.readouterr().err
    for stage in ("read", "hash", "sort", "encode", "verify"):
        assert stage in err
    last = err.strip().split("\n")[-1]
    assert last.startswith("fastenc urls:") and "9,908 URLs" in last and "tokens" in last and "URLs/s" in last and " s" in last
    encode_shard(EXAMPLE, tmp_path / "q", num_shards=64, quiet=True)
    assert capsys.readouterr().err == ""


def test_decode_cli_options(example_out, capsysbinary):
    out, meta = example_out
    bin_path = str(out / "tokens-s00042.bin")
    _, tokens, originals = read_like_the_card(out, 42)
    assert cli.main(["decode", bin_path, "--limit", "3", "--start", "9906"]) == 0
    assert capsysbinary.readouterr().out.split(b"\n") == originals[9906:] + [b""]
    assert cli.main(["decode", bin_path, "--limit", "2", "--canonical"]) == 0
    assert capsysbinary.readouterr().out.split(b"\n") == [canonical(u.decode()).encode() for u in originals[:2]] + [b""]
    assert cli.main(["decode", bin_path, "--limit", "2", "--ids"]) == 0
    starts = np.flatnonzero(np.asarray(tokens) == 0)
    lines = capsysbinary.readouterr().out.decode().strip().split("\n")
    assert lines == [" ".join(map(str, tokens[starts[k] : starts[k + 1]])) for k in range(2)]
    assert cli.main(["decode", bin_path, "--limit", "2", "--hash", "--json"]) == 0
    lines = capsysbinary.readouterr().out.decode().strip().split("\n")
    assert lines == [f"{xxh(u):016x}\t{json.dumps(u.decode(), ensure_ascii=False)}" for u in originals[:2]]
    assert cli.main(["decode", bin_path]) == 0
    assert capsysbinary.readouterr().out.split(b"\n") == originals + [b""]


# ---------------------------------------------------------------------------------------------
# Shard membership
# ---------------------------------------------------------------------------------------------


def test_shard_violation_fails_with_examples_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "part-00007.parquet"
    shutil.copy(EXAMPLE, src)
    out = tmp_path / "out"
    assert cli.main([str(src), "-o", str(out), "--num-shards", "64", "-q"]) == 1
    err = capsys.readouterr().err
    assert "9,908 of 9,908 URLs do not belong to shard 7 of 64" in err and "is in shard 42" in err
    assert "--no-shard-check" in err
    assert not out.exists() or not any(out.iterdir())


def test_a_few_strangers_are_named(tmp_path):
    good = source_urls(EXAMPLE)[:500]
    strangers = [u for u in source_urls(FIXTURE) if (xxh(u.encode()) * 64 >> 64) != 42][:3]
    src = write_parquet(tmp_path / "part-00042.parquet", good[:100] + strangers[:1] + good[100:] + strangers[1:])
    with pytest.raises(VerificationError) as exc:
        encode_shard(src, tmp_path / "out", num_shards=64, quiet=True)
    msg = str(exc.value)
    assert "3 of 503 URLs" in msg and "row 100:" in msg
    for u in strangers:
        assert repr(u) in msg
    assert not (tmp_path / "out").exists()  # nothing written, and no empty OUT left behind


def test_no_shard_check_for_inputs_that_are_not_shards(tmp_path):
    with pytest.raises(InputError, match="--shard N"):
        encode_shard(FIXTURE, tmp_path / "o", quiet=True)  # urls_fixture.parquet: no part-NNNNN
    with pytest.raises(VerificationError, match="do not belong"):
        encode_shard(FIXTURE, tmp_path / "o", shard=3, quiet=True)
    meta = encode_shard(FIXTURE, tmp_path / "o", shard=3, shard_check=False, quiet=True)
    assert meta["shard"] == 3 and meta["shard_checked"] is False and meta["urls"] == 5000
    meta2, _, originals = read_like_the_card(tmp_path / "o", 3)
    assert originals == [u.encode() for _, _, u in sorted((xxh(u.encode()), i, u) for i, u in enumerate(source_urls(FIXTURE)))]
    assert verify_dir(tmp_path / "o", [FIXTURE])["ok"]
    with pytest.raises(InputError, match="not below --num-shards"):
        encode_shard(EXAMPLE, tmp_path / "o2", quiet=True, num_shards=16)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(1, 2**64 - 1))
def test_shard_of_is_the_128_bit_product(h, num_shards):
    assert int(shard_of(np.uint64(h), np.uint64(num_shards))) == (h * num_shards) >> 64


# ---------------------------------------------------------------------------------------------
# Hash order
# ---------------------------------------------------------------------------------------------


def _lexsort(keys):
    return np.lexsort((np.arange(len(keys)), keys))


@pytest.mark.parametrize("case", ["random", "dups", "equal", "two", "sorted", "reversed", "narrow", "tiny", "empty", "clustered"])
def test_hash_order_is_a_stable_sort(case):
    rng = np.random.default_rng(hash(case) % 2**32)
    n = 200_000
    keys = {
        "random": lambda: rng.integers(0, 2**64, n, dtype=np.uint64),
        "dups": lambda: rng.integers(0, 2**64, 1000, dtype=np.uint64)[rng.integers(0, 1000, n)],
        "equal": lambda: np.full(n, 12345, np.uint64),
        "two": lambda: np.where(rng.random(n) < 0.5, np.uint64(2**63), np.uint64(7)).astype(np.uint64),
        "sorted": lambda: np.sort(rng.integers(0, 2**64, n, dtype=np.uint64)),
        "reversed": lambda: np.sort(rng.integers(0, 2**64, n, dtype=np.uint64))[::-1].copy(),
        "narrow": lambda: (np.uint64(42 << 53) | rng.integers(0, 2**53, n, dtype=np.uint64)).astype(np.uint64),
        "tiny": lambda: rng.integers(0, 5, 7, dtype=np.uint64),
        "empty": lambda: np.zeros(0, np.uint64),
        "clustered": lambda: np.concatenate([rng.integers(0, 50, n // 2, dtype=np.uint64), rng.integers(0, 2**64, n // 2, dtype=np.uint64)]),
    }[case]()
    want = _lexsort(keys)
    for tasks in (1, 2, 3):
        order, sorted_keys = hash_order(keys, tasks)
        assert np.array_equal(order, want), tasks
        assert np.array_equal(sorted_keys, keys[want])


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=300), st.integers(1, 4))
def test_hash_order_fuzz(values, tasks):
    keys = np.array(values, dtype=np.uint64)
    order, _ = hash_order(keys, tasks)
    assert np.array_equal(order, _lexsort(keys))


def test_equal_hashes_keep_source_order(tmp_path):
    """Duplicated URLs (equal hashes) are all kept; the verify stage maps each back to its row."""
    urls = source_urls(EXAMPLE)[:300]
    dup = urls + urls[:50] + urls[10:20]
    src = write_parquet(tmp_path / "part-00042.parquet", dup)
    meta = encode_shard(src, tmp_path / "o", num_shards=64, quiet=True)
    assert meta["urls"] == 360
    assert_card_guarantees(tmp_path / "o", 42, 64, dup)
    assert verify_dir(tmp_path / "o", [src])["ok"]


# ---------------------------------------------------------------------------------------------
# Nulls, empty strings, long URLs, malformed URLs
# ---------------------------------------------------------------------------------------------


def test_nulls_are_an_error_or_skipped_and_counted(tmp_path):
    urls = source_urls(EXAMPLE)[:200]
    with_nulls = urls[:50] + [None] + urls[50:120] + [None, None] + urls[120:]
    src = write_parquet(tmp_path / "part-00042.parquet", with_nulls, row_group_size=64)
    with pytest.raises(InputError, match=r"null at row 50 .*--skip-nulls"):
        encode_shard(src, tmp_path / "o", num_shards=64, quiet=True)
    assert not (tmp_path / "o").exists()  # issue 10, item 3: no empty OUT after a failure either
    meta = encode_shard(src, tmp_path / "o", num_shards=64, skip_nulls=True, quiet=True)
    assert meta["null_urls_skipped"] == 3 and meta["urls"] == 200 and meta["source"]["rows"] == 203
    assert_card_guarantees(tmp_path / "o", 42, 64, urls)
    report = verify_output(tmp_path / "o", [src])
    assert report["ok"] and report["checked_source"], report["problems"]


def test_empty_and_very_long_urls(tmp_path):
    urls = ["", "https://www.example.com/", "", "https://" + "a" * 10_000 + ".com/" + "b/" * 5000,
            "http://x.y/" + "%41" * 400_000, "https://www.example.com/" + "中" * 20_000]
    src = write_parquet(tmp_path / "u.parquet", urls, type_=pa.large_string())
    meta = encode_shard(src, tmp_path / "o", shard=0, shard_check=False, quiet=True, chunk_urls=2)
    assert meta["empty_urls"] == 2 and meta["max_url_bytes"] == 1_200_011
    _, tokens, originals = read_like_the_card(tmp_path / "o", 0)
    assert sorted(originals) == sorted(u.encode() for u in urls)
    starts = np.flatnonzero(np.asarray(tokens) == 0)
    assert len(starts) == 6 and (np.diff(np.append(starts, len(tokens))) == 1).sum() == 2  # "" is a lone [0]
    assert verify_dir(tmp_path / "o", [src])["ok"]


@pytest.mark.parametrize("block", [1, 3, 4096, 1 << 18])
def test_the_verify_stage_counts_every_zero_whatever_its_block(tmp_path, block):
    # zeros on both sides of every block edge, and a file that does not end on one
    tokens = np.random.default_rng(block).integers(0, 5, 3 * 4096 + 7).astype("<u2")
    tokens[[0, 4095, 4096, -1]] = 0
    path = tmp_path / "t.bin"
    tokens.tofile(path)
    assert recipe.count_tokens_equal(path, 0, block=block) == int((tokens == 0).sum())
    assert recipe.count_tokens_equal(path, 4, block=block) == int((tokens == 4).sum())


IRREVERSIBLE = ["https://x:1.y/", "http://host:8080.evil.example/p", "https://a.[b/p", "http://:1.2.3.4"]


def test_urls_that_canonical_cannot_give_back_are_kept_and_listed(tmp_path):
    """SYNTHETIC malformed hosts on which the card's canonical() is not self-inverse (see
    docs/urls.md): kept, stored as canonical(url), listed in the sidecar, and skipped by the
    order/shard checks of ``verify`` (their originals cannot be recovered from the bin)."""
    urls = source_urls(FIXTURE)[:300] + IRREVERSIBLE
    src = write_parquet(tmp_path / "u.parquet", urls)
    meta = encode_shard(src, tmp_path / "o", shard=0, num_shards=1, quiet=True)
    assert meta["irreversible_urls"] == 4 and meta["urls"] == 304
    _, _, originals = read_like_the_card(tmp_path / "o", 0)
    listed = {originals[k] for k in meta["irreversible_url_indices"]}
    assert listed == {canonical(canonical(u)).encode() for u in IRREVERSIBLE}
    assert all(canonical(canonical(u)) != u for u in IRREVERSIBLE)
    report = verify_dir(tmp_path / "o", [src])
    assert report["ok"], report["problems"]
    # without the list, verify sees disorder or shard problems
    meta["irreversible_url_indices"], meta["irreversible_urls"] = [], 0
    (tmp_path / "o" / "tokens-s00000.json").write_text(json.dumps(meta))
    assert not verify_dir(tmp_path / "o")["ok"]


def test_column_types_and_row_groups_do_not_change_the_bin(tmp_path, example_out):
    urls = source_urls(EXAMPLE)
    want = (example_out[0] / "tokens-s00042.bin").read_bytes()
    for i, (type_, rg) in enumerate([(pa.large_string(), 1000), (pa.binary(), 333), (pa.string(), 1)]):
        (tmp_path / f"v{i}").mkdir()
        src = write_parquet(tmp_path / f"v{i}" / "part-00042.parquet", urls, type_, rg, column="link")
        meta = encode_shard(src, tmp_path / f"o{i}", column="link", num_shards=64, quiet=True)
        assert (tmp_path / f"o{i}" / "tokens-s00042.bin").read_bytes() == want, type_
        assert meta["source"]["column"] == "link"
    dict_src = tmp_path / "d" / "part-00042.parquet"
    dict_src.parent.mkdir()
    pq.write_table(pa.table({"url": pa.array(urls).dictionary_encode()}), dict_src)
    encode_shard(dict_src, tmp_path / "od", num_shards=64, quiet=True)
    assert (tmp_path / "od" / "tokens-s00042.bin").read_bytes() == want
    with pytest.raises(InputError, match="no column 'url'.*--column"):
        encode_shard(tmp_path / "v0" / "part-00042.parquet", tmp_path / "x", num_shards=64, quiet=True)


def test_chunking_and_threads_do_not_change_the_bin(tmp_path, example_out):
    want = (example_out[0] / "tokens-s00042.bin").read_bytes()
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        meta = encode_shard(EXAMPLE, tmp_path / "a", num_shards=64, chunk_urls=777, quiet=True)
    finally:
        numba.set_num_threads(before)
    assert (tmp_path / "a" / "tokens-s00042.bin").read_bytes() == want
    drop = ("build", "request")
    assert {k: v for k, v in meta.items() if k not in drop} == {k: v for k, v in example_out[1].items() if k not in drop}


# ---------------------------------------------------------------------------------------------
# Atomicity, reruns, read-back failures
# ---------------------------------------------------------------------------------------------


def _files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


@pytest.mark.parametrize("stage", ["encode", "write"])
def test_interrupt_leaves_no_final_and_no_temporary_file(tmp_path, monkeypatch, stage):
    import fastenc.recipes.urls.threads as urls_threads

    calls = {"n": 0}
    target, name = (recipe, "encode_url_chunk") if stage == "encode" else (urls_threads, "copy_spans")
    real = getattr(target, name)

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    src = write_parquet(tmp_path / "part-00042.parquet", source_urls(EXAMPLE), row_group_size=1000)
    monkeypatch.setattr(target, name, interrupted)
    out = tmp_path / "o"
    with pytest.raises(KeyboardInterrupt):
        encode_shard(src, out, num_shards=64, chunk_urls=1000, quiet=True)
    assert calls["n"] == 3
    assert _files(out) == []


def test_interrupt_during_overwrite_keeps_the_old_output(tmp_path, example_out, monkeypatch):
    out = tmp_path / "o"
    shutil.copytree(example_out[0], out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(recipe, "verify_written", boom)
    with pytest.raises(KeyboardInterrupt):
        encode_shard(EXAMPLE, out, num_shards=64, overwrite=True, quiet=True)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert verify_dir(out)["ok"]


def test_a_bin_that_does_not_decode_back_fails_and_is_not_published(tmp_path, monkeypatch):
    import fastenc.recipes.urls.threads as urls_threads

    real = urls_threads.copy_spans

    def corrupt(tokens, starts, out, out_offsets, n_tasks):
        real(tokens, starts, out, out_offsets, n_tasks)
        out[1] = (int(out[1]) + 1) % 8192 or 1  # the first URL of the chunk: the bin's first is sampled

    monkeypatch.setattr(urls_threads, "copy_spans", corrupt)
    with pytest.raises(VerificationError, match=r"1 of 3000 checked URLs did not decode back"):
        encode_shard(EXAMPLE, tmp_path / "o", num_shards=64, quiet=True)
    assert [n for n in _files(tmp_path / "o") if n.startswith("tokens-")] == []



def test_a_bin_changed_between_its_write_and_its_read_back_fails_and_is_not_published(tmp_path):
    # The bin is read back after its last write, before its fsync (finish_after_check): a change on
    # disk in between (here: by the fault hook, as its write-back starts) is caught by that read-back.
    from fastenc.run import faults

    def scribble(op, path):
        if op == faults.WRITE_BACK and path.name.startswith("tokens-") and path.suffix == ".bin":
            with open(path, "r+b") as f:
                f.write(b"\x01\x00")  # the first URL's leading 0 (<eos>) becomes id 1

    with faults.inject(scribble), pytest.raises(VerificationError, match=r"(?s)read-back check.*zeros \(<eos>\), expected one per URL"):
        encode_shard(EXAMPLE, tmp_path / "o", num_shards=64, quiet=True)
    assert [n for n in _files(tmp_path / "o") if n.startswith("tokens-")] == []

def test_rerun_skips_finished_output_and_refuses_a_different_one(tmp_path, capsys):
    out = tmp_path / "o"
    encode_shard(EXAMPLE, out, num_shards=64, quiet=True)
    mtime = (out / "tokens-s00042.bin").stat().st_mtime_ns
    encode_shard(EXAMPLE, out, num_shards=64)
    assert "nothing to do" in capsys.readouterr().err
    assert (out / "tokens-s00042.bin").stat().st_mtime_ns == mtime
    with pytest.raises(InputError, match="--overwrite"):
        encode_shard(EXAMPLE, out, num_shards=64, skip_nulls=True, quiet=True)
    meta = encode_shard(EXAMPLE, out, num_shards=64, skip_nulls=True, overwrite=True, quiet=True)
    assert meta["request"]["options"]["skip_nulls"] is True and verify_dir(out)["ok"]


def test_another_tokenizer_in_out_is_refused(tmp_path):
    out = tmp_path / "o"
    (out / "tokenizer").mkdir(parents=True)
    (out / "tokenizer" / "tokenizer.json").write_text("{}")
    with pytest.raises(InputError, match="another tokenizer"):
        encode_shard(EXAMPLE, out, num_shards=64, quiet=True)


# ---------------------------------------------------------------------------------------------
# verify OUT finds what is wrong, from the files alone
# ---------------------------------------------------------------------------------------------


def _broken_copy(tmp_path: Path, example_out, name: str) -> tuple[Path, dict, np.ndarray]:
    out = tmp_path / name
    shutil.copytree(example_out[0], out)
    meta = json.loads((out / "tokens-s00042.json").read_text())
    tokens = np.fromfile(out / "tokens-s00042.bin", dtype="<u2")
    return out, meta, tokens


def _save(out: Path, meta: dict, tokens: np.ndarray) -> None:
    tokens.astype("<u2").tofile(out / "tokens-s00042.bin")
    meta["bin_xxh3_64"] = xxhash.xxh3_64(tokens.astype("<u2").tobytes()).hexdigest()  # only the deep checks can tell
    meta["tokens"] = len(tokens)
    (out / "tokens-s00042.json").write_text(json.dumps(meta))


def _problems(out: Path) -> str:
    report = verify_dir(out)
    assert not report["ok"]
    return "\n".join(report["problems"])


def test_verify_finds_a_changed_token(tmp_path, example_out):
    out, meta, tokens = _broken_copy(tmp_path, example_out, "flip")
    tokens[5000] = 1 if tokens[5000] != 1 else 2
    tokens.tofile(out / "tokens-s00042.bin")
    assert "xxh3_64" in _problems(out)


def test_verify_finds_swapped_urls(tmp_path, example_out):
    out, meta, tokens = _broken_copy(tmp_path, example_out, "swap")
    starts = np.flatnonzero(tokens == 0)
    a, b, c = starts[100], starts[101], starts[102]
    swapped = np.concatenate([tokens[:a], tokens[b:c], tokens[a:b], tokens[c:]])
    _save(out, meta, swapped)
    assert "not in hash order" in _problems(out)


def test_verify_finds_the_wrong_shard(tmp_path, example_out):
    out, meta, tokens = _broken_copy(tmp_path, example_out, "shard")
    (out / "tokens-s00042.bin").rename(out / "tokens-s00043.bin")
    (out / "tokens-s00042.json").unlink()
    meta.update(shard=43, file="tokens-s00043.bin")
    (out / "tokens-s00043.json").write_text(json.dumps(meta))
    assert "not in shard 43 of 64" in _problems(out)


def test_verify_finds_missing_leading_zero_and_counts(tmp_path, example_out):
    out, meta, tokens = _broken_copy(tmp_path, example_out, "zero")
    _save(out, meta, tokens[1:])
    assert "not 0" in _problems(out)
    out, meta, tokens = _broken_copy(tmp_path, example_out, "count")
    meta["urls"] += 1
    (out / "tokens-s00042.json").write_text(json.dumps(meta))
    assert "the sidecar says 9909" in _problems(out)


def test_verify_finds_tokenizer_size_and_sidecar_problems(tmp_path, example_out):
    out, meta, tokens = _broken_copy(tmp_path, example_out, "tok")
    (out / "tokenizer" / "tokenizer.json").write_bytes(TOKENIZER_JSON.read_bytes() + b"\n")
    assert "another vocabulary" in _problems(out)
    out, meta, tokens = _broken_copy(tmp_path, example_out, "trunc")
    tokens[:-3].tofile(out / "tokens-s00042.bin")
    assert "bytes on disk" in _problems(out)
    out, meta, tokens = _broken_copy(tmp_path, example_out, "nosidecar")
    (out / "tokens-s00042.json").rename(out / "elsewhere.txt")
    shutil.copy(EXAMPLE, out / "x")  # noise that verify must ignore
    with pytest.raises(InputError):
        verify_dir(out)  # no sidecar at all: not URL output
    (out / "tokens-s00001.json").write_text(json.dumps(dict(meta, shard=1, file="tokens-s00001.bin")))
    assert "tokens-s00042.bin has no sidecar" in _problems(out)


def test_verify_with_source_finds_a_different_source(tmp_path, example_out):
    urls = source_urls(EXAMPLE)
    other = write_parquet(tmp_path / "part-00042.parquet", urls[:-1] + [urls[-1] + "x"])
    report = verify_dir(example_out[0], [other])
    assert not report["ok"] and any("differs from the source" in p or "the source has" in p for p in report["problems"])


def test_iter_decoded_cuts_anywhere(example_out):
    """Decoding a bin in stretches shorter than its URLs (file reads or a memmap) gives the same URLs."""
    out, meta = example_out
    bin_path = out / "tokens-s00042.bin"
    _, tokens, originals = read_like_the_card(out, 42)
    for source, stretch in ((bin_path, 7), (tokens, 50), (bin_path, 1 << 20)):
        urls, positions = [], []
        for pos, data, offs in recipe.iter_decoded(source, recipe.load_tokenizer("urls")[0], stretch=stretch):
            positions.append(pos)
            urls += [canonical(data[offs[j] : offs[j + 1]].tobytes().decode()).encode() for j in range(len(offs) - 1)]
        assert urls == originals and all(tokens[p] == 0 for p in positions), (source, stretch)


def test_samples_outside_the_hash_windows_are_read_back_from_the_file(tmp_path, monkeypatch):
    """The verify stage's source text normally comes from hash windows kept during the pass; if
    a URL it needs is not there (a skewed input), it is read back from the parquet file by row."""
    monkeypatch.setattr(recipe.SampleWindows, "add", lambda self, *args: None)  # keep nothing
    urls = source_urls(EXAMPLE)[:1500]
    with_nulls = urls[:700] + [None] + urls[700:]
    src = write_parquet(tmp_path / "part-00042.parquet", with_nulls, row_group_size=400)
    meta = encode_shard(src, tmp_path / "o", num_shards=64, skip_nulls=True, quiet=True)
    assert meta["verified"]["urls_checked"] == 1500 and meta["verified"]["mismatches"] == 0
    assert_card_guarantees(tmp_path / "o", 42, 64, urls)


@pytest.mark.parametrize("keep_windows", [True, False])
def test_the_pass_in_slices_of_a_row_group_writes_the_same_shard(tmp_path, monkeypatch, keep_windows):
    """The read pass hashes and encodes a row group in slices of PASS_CHUNK_URLS, or a streamed file
    in batches: the bin and the sidecar do not depend on it, nulls (their rows) and read-back samples included."""
    urls = source_urls(EXAMPLE)[:1500]
    with_nulls = urls[:700] + [None] + urls[700:1100] + [None, None] + urls[1100:]
    src = write_parquet(tmp_path / "part-00042.parquet", with_nulls, row_group_size=400)
    if not keep_windows:  # every sample then comes back from the file by its row
        monkeypatch.setattr(recipe.SampleWindows, "add", lambda self, *args: None)
    import fastenc.arrow_io as arrow_io

    runs = []
    # whole row groups; sliced; and streamed in batches (a file with a row group over
    # STREAM_ROW_GROUP_BYTES: here every file, in batches of 53 rows, slices of 37)
    for cap, out, stream in ((recipe.PASS_CHUNK_URLS, "whole", False), (37, "sliced", False), (37, "streamed", True)):
        monkeypatch.setattr(recipe, "PASS_CHUNK_URLS", cap)
        monkeypatch.setattr(arrow_io, "STREAM_ROW_GROUP_BYTES", -1 if stream else arrow_io.STREAM_ROW_GROUP_BYTES)
        monkeypatch.setattr(arrow_io, "STREAM_BATCH_ROWS", 53)
        meta = encode_shard(src, tmp_path / out, num_shards=64, skip_nulls=True, quiet=True)
        runs.append(((tmp_path / out / "tokens-s00042.bin").read_bytes(), meta))
    assert runs[0][0] == runs[1][0] == runs[2][0]
    assert runs[0][1] == runs[1][1] == runs[2][1] and runs[1][1]["null_urls_skipped"] == 3
    assert_card_guarantees(tmp_path / "sliced", 42, 64, urls)
    assert_card_guarantees(tmp_path / "streamed", 42, 64, urls)


def test_sample_windows_hold_the_sampled_urls(tmp_path):
    """On a shard of uniform hashes the windows kept during the pass hold every sampled URL."""
    n = 50_000
    lo, hi = 42 * 2**64 // 64, 43 * 2**64 // 64
    rng = np.random.default_rng(5)
    hashes = (np.uint64(lo) + (rng.random(n) * (hi - lo)).astype(np.uint64)).astype(np.uint64)
    w = recipe.SampleWindows(n, lo, hi)
    data = np.zeros(0, np.uint8)
    w.add(hashes, data, np.zeros(n + 1, np.int64), 0)
    order = np.argsort(hashes, kind="stable")
    assert set(order[recipe.sample_indices(n)].tolist()) <= set(w.text)
    assert len(w.text) < 20 * recipe.VERIFY_SAMPLE  # and not much more


def test_empty_file_and_all_nulls(tmp_path):
    src = write_parquet(tmp_path / "part-00003.parquet", [], row_group_size=10)
    meta = encode_shard(src, tmp_path / "o", num_shards=64, quiet=True)
    assert meta["urls"] == 0 and meta["tokens"] == 0 and (tmp_path / "o" / "tokens-s00003.bin").stat().st_size == 0
    assert verify_dir(tmp_path / "o")["ok"]
    src = write_parquet(tmp_path / "part-00004.parquet", [None, None], type_=pa.string())
    meta = encode_shard(src, tmp_path / "o", num_shards=64, skip_nulls=True, quiet=True)
    assert meta["urls"] == 0 and meta["null_urls_skipped"] == 2
    report = verify_dir(tmp_path / "o", [src])  # two shards here, the source of one given: that one is checked
    assert report["ok"] and report["sources_checked"] == ["part-00004.parquet"], report


def test_binary_column_with_invalid_utf8_round_trips_bytes(tmp_path, capsysbinary):
    """Parquet does not check UTF-8, and a binary column holds any bytes: they are encoded,
    ordered and decoded byte for byte (the byte-level BPE covers all 256 bytes)."""
    urls = [b"http://www.example.com/\xff\xfe", b"https://a.b.c/\xc3(", b"\x80", b"http://\xe4\xb8.\xad/x", b"http://x.y/ok"]
    src = write_parquet(tmp_path / "u.parquet", urls, type_=pa.binary())
    encode_shard(src, tmp_path / "o", shard=0, num_shards=1, quiet=True)
    assert verify_dir(tmp_path / "o", [src])["ok"]
    assert cli.main(["decode", str(tmp_path / "o" / "tokens-s00000.bin")]) == 0
    got = capsysbinary.readouterr().out.split(b"\n")[:-1]
    assert got == [u for _, _, u in sorted((xxh(u), i, u) for i, u in enumerate(urls))]


def test_dictionary_column_smaller_than_its_text_grows_the_token_buffer(tmp_path):
    """A dictionary-encoded column of repeated URLs is much smaller than its text: the token
    buffer sized from the column must grow, and the bin is still right."""
    base = ["https://www.example.com/" + "x" * 3000 + str(i) for i in range(5)]
    urls = [base[i % 5] for i in range(3000)]
    src = tmp_path / "u.parquet"
    pq.write_table(pa.table({"url": pa.array(urls).dictionary_encode()}), src)
    assert recipe.url_column_bytes(pq.ParquetFile(src), "url") < sum(map(len, urls)) // 10
    meta = encode_shard(src, tmp_path / "o", shard=0, num_shards=1, quiet=True)
    assert meta["urls"] == 3000
    assert_card_guarantees(tmp_path / "o", 0, 1, urls)
    report = verify_dir(tmp_path / "o", [tmp_path / "u.parquet"])
    assert report["ok"], report["problems"]
    report = verify_dir(tmp_path / "o", [EXAMPLE])  # one sidecar, one source: compared whatever its name
    assert not report["ok"] and "differs from the source" in report["problems"][0]
    report = verify_dir(tmp_path / "o", [EXAMPLE, FIXTURE])  # several: matched by name, none is u.parquet
    assert not report["ok"] and "none of the --source files" in report["problems"][0] and "u.parquet" in report["problems"][0]


def test_tokenizer_option(tmp_path, example_out):
    from fastenc.errors import VocabError

    meta = encode_shard(EXAMPLE, tmp_path / "o", num_shards=64, tokenizer=str(TOKENIZER_JSON), quiet=True)
    assert _files(tmp_path / "o" / "tokenizer") == ["tokenizer.json"]  # a file given: that file only
    assert (tmp_path / "o" / "tokens-s00042.bin").read_bytes() == (example_out[0] / "tokens-s00042.bin").read_bytes()
    assert meta["tokenizer_sha256"] == example_out[1]["tokenizer_sha256"]
    with pytest.raises(VocabError, match="URL card's pre-split"):
        encode_shard(EXAMPLE, tmp_path / "g", num_shards=64, tokenizer="gpt2", quiet=True)


def test_verify_catches_an_edited_max_url_bytes(tmp_path, example_out):
    """Issue 10, item 7: a sidecar whose max_url_bytes was edited no longer passes."""
    out = tmp_path / "o"
    shutil.copytree(example_out[0], out)
    meta_path = out / "tokens-s00042.json"
    meta = json.loads(meta_path.read_text())
    meta["max_url_bytes"] += 1
    meta_path.write_text(json.dumps(meta))
    report = verify_dir(out)
    assert not report["ok"] and any("max_url_bytes" in p for p in report["problems"])
