"""Shared pytest fixtures: where the shared corpora are, the tiktoken GPT-2 oracle, the docs fixture.

Tests over ../shared/data must run whenever that folder exists and may skip (with a reason) only when
it does not (a fresh clone). The tiktoken oracle works either way: from ../shared/data/gpt2 when
present, otherwise rebuilt from the committed vocab/gpt2/tokenizer.json.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

# Hypothesis profiles. "default": each property test runs a bounded share of its examples
# (tests/budget.py), so that README's test command stays short. "ci": every example, for the slow
# run of .ci/run (`--hypothesis-profile=ci`). Registered here, before any test module is imported.
settings.register_profile("ci", settings.get_profile("default"))
# FASTENC_SHARED_DATA points elsewhere (a worktree whose parent has no shared/ folder).
SHARED_DATA = Path(os.environ.get("FASTENC_SHARED_DATA") or REPO.parent / "shared" / "data")
GPT2_TOKENIZER_JSON = REPO / "vocab" / "gpt2" / "tokenizer.json"
DOCS_FIXTURE = REPO / "tests" / "data" / "docs_fixture.parquet"
EOT = "<|endoftext|>"


def gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's bytes_to_unicode(), inverted: the printable stand-in character -> the byte it stands for."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def mergeable_ranks_from_tokenizer_json(path: Path) -> dict[bytes, int]:
    """{token bytes: id} for every non-added token of a byte-level BPE tokenizer.json.

    For GPT-2 this is exactly tiktoken's mergeable_ranks (tiktoken's loader asserts that encoder.json's
    ids are the merge ranks), so an Encoding built from it is the same oracle as one built from
    encoder.json + vocab.bpe.
    """
    spec = json.loads(path.read_text(encoding="utf-8"))
    added = {t["content"] for t in spec["added_tokens"]}  # <|endoftext|> is in the model vocab too
    dec = gpt2_byte_decoder()
    return {bytes(dec[c] for c in token): i for token, i in spec["model"]["vocab"].items() if token not in added}


def build_tiktoken_gpt2(shared_data: Path | None):
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.load
    import tiktoken_ext.openai_public as op

    gpt2 = shared_data / "gpt2" if shared_data is not None else None
    if gpt2 is not None and (gpt2 / "vocab.bpe").is_file() and (gpt2 / "encoder.json").is_file():
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(gpt2 / "vocab.bpe"), encoder_json_file=str(gpt2 / "encoder.json"))
    else:
        ranks = mergeable_ranks_from_tokenizer_json(GPT2_TOKENIZER_JSON)
    return tiktoken.Encoding(name="gpt2", pat_str=op.r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={EOT: 50256}, explicit_n_vocab=50257)


@pytest.fixture(scope="session")
def shared_data() -> Path | None:
    """../shared/data beside the checkout, or None in a fresh clone without it."""
    return SHARED_DATA if SHARED_DATA.is_dir() else None


@pytest.fixture(scope="session")
def tiktoken_gpt2(shared_data):
    """tiktoken's `gpt2` Encoding, built offline (from shared data if present, else from vocab/gpt2)."""
    return build_tiktoken_gpt2(shared_data)


@pytest.fixture(scope="session")
def docs_fixture():
    """tests/data/docs_fixture.parquet as a pyarrow Table (id, text, source, lang, gpt2_tokens)."""
    import pyarrow.parquet as pq

    return pq.read_table(DOCS_FIXTURE)


@pytest.fixture
def sigint_delivered():
    """Ctrl-C tests: SIGINT raises KeyboardInterrupt here, and children started meanwhile get it too,
    as in a terminal. A shell that starts the tests in the background without job control (a script's
    `pytest &`) leaves SIGINT ignored, and every child inherits that: those tests would then test
    nothing."""
    import signal

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def pytest_sessionstart(session):
    """In CI the shared corpora must be there: a parity test is never skipped in CI.

    Tests over ../shared/data skip (with a reason) in a fresh clone without it; under CI=true
    a missing folder is an error instead, so a broken checkout cannot pass by skipping.
    """
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") and not SHARED_DATA.is_dir():
        raise pytest.UsageError(
            f"CI is set but the shared corpora are missing at {SHARED_DATA}: the parity tests would be "
            "skipped. Lay ../shared beside the checkout (or unset CI for a local run without it)."
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every property test (hypothesis ``@given``) is also marked ``fuzz``, before ``-m`` selects: the
    slow run (``-m "slow or fuzz" --hypothesis-profile=ci``) runs them again with five times the examples (tests/budget.py)."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.fuzz)


def pytest_configure(config):
    """With several pytest-xdist workers (pyproject's addopts): compile the kernels once, here,
    before the workers start (``fastenc warmup``: two processes, ~50 s on an empty cache, 0.3 s on a
    full one), so that they do not all compile the same kernels at once; each then compiles only
    the specialisations its own tests make. A failed warmup only means the workers compile."""
    if hasattr(config, "workerinput") or (getattr(config.option, "numprocesses", None) or 0) < 2:
        return
    subprocess.run([sys.executable, "-m", "fastenc", "warmup", "--quiet"], cwd=REPO, check=False)
