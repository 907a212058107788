"""Piece caches shared with forked processes (``Encoder.share_caches_with_forks``, which ``--workers``
calls before it forks its workers): processes encoding at the same time, into one set of tiny, short
and long caches, get tiktoken's ids, and what one of them stores the others and the parent see.

(The recipes' outputs with ``--workers 2`` against one worker, byte for byte, are tests/test_scale.py's.)
"""
from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fastenc
from test_encodings import _from_committed_files  # the offline tiktoken oracle

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fastenc forks its workers on Linux only")

_ENCODER = None  # the Encoder the forked processes inherit (set before the pool forks)


def _encode_share(task):
    """Encode every ``n``-th text from the ``k``-th; in a forked child, with the inherited Encoder."""
    texts, k, n = task
    ids, offsets = _ENCODER.encode_batch(texts[k::n])
    return [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def _filled(cache: np.ndarray) -> int:
    """Slots of one task's cache that hold a piece."""
    return int(np.count_nonzero(cache.reshape(cache.shape[0], -1).any(axis=1)))


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_forked_processes_fill_one_set_of_caches_and_stay_exact(name, docs_fixture, tiktoken_gpt2):
    global _ENCODER
    ref = tiktoken_gpt2 if name == "gpt2" else _from_committed_files(name)
    shared = fastenc.load(name)
    enc = fastenc.Encoder(shared.vocab, shared.info)  # (its own: fastenc.load's is every test's)
    enc.share_caches_with_forks()
    caches = enc._caches
    seeded = _filled(caches.short[0])
    assert seeded > 10_000  # the vocabulary's tokens, stored before the fork
    texts = docs_fixture.column("text").to_pylist()
    _ENCODER = enc
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            children = pool.map_async(_encode_share, [(texts, 0, 3), (texts, 1, 3)])
            here = _encode_share((texts, 2, 3))  # the parent at the same time, into the same caches
            got = children.get(timeout=300) + [here]
    finally:
        _ENCODER = None
    for k in range(3):
        assert got[k] == ref.encode_ordinary_batch(texts[k::3]), k
    # The children's stores are in the parent's memory: more slots filled than the parent's third alone fills.
    alone = fastenc.Encoder(shared.vocab, shared.info)
    alone.share_caches_with_forks()
    _ENCODER = alone
    try:
        _encode_share((texts, 2, 3))
    finally:
        _ENCODER = None
    assert _filled(caches.short[0]) > _filled(alone._caches.short[0]) > seeded
    assert _filled(caches.long[0]) > _filled(alone._caches.long[0])
    # Later calls in the parent read them as shared caches, with its own memo (no slot rewritten).
    assert enc.encode_batch(texts[:5])[0].tolist() == [i for t in texts[:5] for i in ref.encode_ordinary(t)]


_RECIPE = """
import json, sys
import fastenc
recipe, out, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
if recipe == "gpt2":
    import fastenc.recipes.gpt2 as g
    g.encode_gpt2(inputs, out, workers=2, quiet=True)
    (enc, _fmt), = g._ENCODINGS.values()
else:
    from fastenc.recipes.urls import encode_shards
    encode_shards(inputs, out, num_shards=4, workers=2, quiet=True)
    enc = fastenc.load("urls")
print(json.dumps({"shared": enc._fork_shared, "short slots filled": int(enc._caches.short[0].any(axis=1).sum())}))
"""


def _recipe_inputs(recipe: str, tmp_path: Path, docs_fixture) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import xxhash

    inputs = []
    if recipe == "gpt2":
        for k in range(3):
            path = tmp_path / f"part-{k}.parquet"
            pq.write_table(docs_fixture.slice(50 * k, 50), path)
            inputs.append(str(path))
    else:
        urls = pq.read_table(Path(__file__).parent / "data" / "urls_fixture.parquet").column("url").to_pylist()
        for k in range(4):  # shard k of 4: the URLs whose xxh3 names it (the card's rule, which the recipe checks)
            path = tmp_path / f"part-{k:05d}.parquet"
            pq.write_table(pa.table({"url": [u for u in urls if (xxhash.xxh3_64_intdigest(u.encode()) * 4) >> 64 == k]}), path)
            inputs.append(str(path))
    return inputs


def _run_recipe(recipe: str, tmp_path: Path, inputs: list[str], env=None) -> dict:
    out = subprocess.run([sys.executable, "-c", _RECIPE, recipe, str(tmp_path / "out"), *inputs], capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("recipe", ["gpt2", "urls"])
def test_the_recipes_fork_their_workers_onto_shared_caches(recipe, tmp_path, docs_fixture):
    """A command's process forks its workers (fastenc.run.forking): then they fill its caches."""
    inputs = _recipe_inputs(recipe, tmp_path, docs_fixture)
    warm = subprocess.run([sys.executable, "-m", "fastenc", "warmup", "-q", recipe], capture_output=True, text=True,
                          timeout=600)
    assert warm.returncode == 0, warm.stderr
    result = _run_recipe(recipe, tmp_path, inputs)
    assert result["shared"] is True and result["short slots filled"] > 0, result


def test_a_first_run_compiles_in_a_child_and_still_forks(tmp_path, docs_fixture):
    """With an empty kernel cache the run compiles first (fastenc.warmup.compile_ahead): in a process
    of its own, so that the run's process has no thread pools and forks its workers onto shared caches.
    (Compiled in the run's process, the compile's task threads made it spawn: "shared" was False.)"""
    import os

    inputs = _recipe_inputs("gpt2", tmp_path, docs_fixture)
    result = _run_recipe("gpt2", tmp_path, inputs, env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache")))
    assert result["shared"] is True and result["short slots filled"] > 0, result
