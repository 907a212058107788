"""A command's ``--workers`` are forked from its process (``fastenc.run.forking``), also on a first
run, whose compile runs in a process of its own (``fastenc.warmup.compile_ahead``).

(The recipes' outputs with ``--workers 2`` against one worker, byte for byte, are tests/test_scale.py's.)
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fastenc forks its workers on Linux only")

_RECIPE = """
import json, sys
from fastenc.run import forking
recipe, out, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
methods, real = [], forking.start_method
forking.start_method = lambda: methods.append(real()) or methods[-1]  # how the map started its workers
if recipe == "gpt2":
    import fastenc.recipes.gpt2 as g
    g.encode_gpt2(inputs, out, workers=2, quiet=True)
else:
    from fastenc.recipes.urls import encode_shards
    encode_shards(inputs, out, num_shards=4, workers=2, quiet=True)
print(json.dumps({"methods": methods}))
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
def test_the_recipes_fork_their_workers(recipe, tmp_path, docs_fixture):
    """A command's process forks its workers (fastenc.run.forking): they start with its imports,
    vocabulary and kernels loaded."""
    inputs = _recipe_inputs(recipe, tmp_path, docs_fixture)
    warm = subprocess.run([sys.executable, "-m", "fastenc", "warmup", "-q", recipe], capture_output=True, text=True,
                          timeout=600)
    assert warm.returncode == 0, warm.stderr
    result = _run_recipe(recipe, tmp_path, inputs)
    assert result["methods"] == ["fork"], result


@pytest.mark.slow
def test_a_first_run_compiles_in_a_child_and_still_forks(tmp_path, docs_fixture):
    """With an empty kernel cache the run compiles first (fastenc.warmup.compile_ahead): in a process
    of its own, so that the run's process has no thread pools and forks its workers.
    (Compiled in the run's process, the compile's task threads made it spawn.)"""
    import os

    inputs = _recipe_inputs("gpt2", tmp_path, docs_fixture)
    result = _run_recipe("gpt2", tmp_path, inputs, env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache")))
    assert result["methods"] == ["fork"], result
