"""The piece caches' slot hash (``loads.hash_words``) on both of its paths: SSE4.2 CRC32C where the CPU
has it, the portable multiply mix elsewhere (``FASTENC_PORTABLE_HASH=1`` forces it, in a process of
its own with its own Numba cache). Each path is checked against a pure-Python reference, and a GPT-2
run on the portable path against tiktoken: the hash only places cache entries, so the ids must not
change with it."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from conftest import DOCS_FIXTURE
from numba import njit

from fastenc.kernels import loads
from fastenc.kernels.loads import hash_words

_M64 = (1 << 64) - 1
WORDS = [(0, 0), (1, 2), (0x20, 0x0100000000000000), (0x6E6F6974616D726F, 0x0D000000000066E9),
         (_M64, _M64), (0x9E3779B97F4A7C15, 0)]


def crc32c_word(crc: int, word: int) -> int:
    """x86's ``crc32 r64, r/m64``: CRC32C (reflected polynomial 0x82F63B78) of the word's 8 bytes,
    little-endian, from ``crc``, with no inversion before or after."""
    for byte in word.to_bytes(8, "little"):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc


def portable_ref(a: int, b: int) -> int:
    h = ((((a * 0x9E3779B97F4A7C15) & _M64) ^ b) * 0xC2B2AE3D27D4EB4F) & _M64
    return h ^ (h >> 31)


@njit(cache=False)
def _hash_of(a, b):
    return hash_words(a, b)


def _hash(a: int, b: int) -> int:
    return int(_hash_of(np.uint64(a), np.uint64(b)))


def test_crc_path_is_taken_on_x86_with_sse42():
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64") or os.environ.get("FASTENC_PORTABLE_HASH") == "1":
        assert not loads.HAS_CRC32C
    else:  # every x86-64 CPU since 2008 has SSE4.2
        assert loads.HAS_CRC32C


@pytest.mark.parametrize("a,b", WORDS)
def test_hash_words_equals_its_reference(a, b):
    expected = crc32c_word(crc32c_word(0, a), b) if loads.HAS_CRC32C else portable_ref(a, b)
    assert _hash(a, b) == expected


_PORTABLE_RUN = r"""
import json, sys
import numpy as np, pyarrow.parquet as pq
from numba import njit
import fastenc
from fastenc.kernels import loads
from fastenc.kernels.loads import hash_words
assert not loads.HAS_CRC32C, "FASTENC_PORTABLE_HASH=1 did not select the portable hash"
hash_of = njit(lambda a, b: hash_words(a, b))
texts = pq.read_table(sys.argv[1], columns=["text"]).column("text").to_pylist()
enc = fastenc.load("gpt2")
def lists(batch):
    ids, offsets = batch
    return [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
first = lists(enc.encode_batch(texts))
again = lists(enc.encode_batch(texts))  # warm caches: the lookups hit
print(json.dumps({"hashes": [int(hash_of(np.uint64(a), np.uint64(b))) for a, b in json.loads(sys.argv[2])], "first": first, "again": again}))
"""


@pytest.mark.slow
def test_portable_path_encodes_exactly(tmp_path, docs_fixture, tiktoken_gpt2):
    env = dict(os.environ, FASTENC_PORTABLE_HASH="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    result = subprocess.run([sys.executable, "-c", _PORTABLE_RUN, str(DOCS_FIXTURE), json.dumps(WORDS)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.splitlines()[-1])
    assert got["hashes"] == [portable_ref(a, b) for a, b in WORDS]
    texts = docs_fixture.column("text").to_pylist()
    expected = [tiktoken_gpt2.encode_ordinary(t) for t in texts]
    assert got["first"] == expected
    assert got["again"] == expected
