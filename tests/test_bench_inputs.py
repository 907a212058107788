"""Every bench that reads a corpus stops with one line, not a traceback, when that corpus is
absent (issue 10, item 9: ``../shared`` is not beside every checkout). Nothing is measured: each
script is given a missing path and must exit before its first timed step."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MISSING = "/nonexistent/fastenc-bench-input.parquet"
LIBRARIES = {"harness.py", "peers.py"}  # imported by the scripts, never run

# script -> the arguments that point every corpus it reads at a missing path
CASES = {
    "bench_bytes.py": ["--corpus", MISSING],
    "bench_encodings.py": ["--corpus", MISSING],
    "bench_gpt2.py": ["--shared", "/nonexistent", "--tools", "fastenc"],
    "bench_gpt2_recipe.py": ["--input", MISSING],
    "bench_languages.py": ["--docs", MISSING],
    "bench_patterns.py": ["--shared", "/nonexistent", "--docs", MISSING],
    "bench_scale.py": ["--urls", MISSING, "--docs", MISSING],
    "bench_tokens.py": ["--input", MISSING],
    "bench_urls.py": ["--corpus", MISSING],
    "probes/ab_encode.py": ["HEAD", "--docs", MISSING],
    "probes/ab_percall.py": ["HEAD", "--docs", MISSING],
    "probes/merge_tables.py": ["--docs", MISSING],
    "probes/task_threads.py": ["--docs", MISSING, "--urls", MISSING],
    "probes/scale_timeline.py": ["urls", "--work", "/nonexistent/work", "--urls", MISSING],
}


def test_every_bench_that_reads_a_corpus_is_listed():
    # a script reads the shared corpora when it names them (the harness's paths, or "shared" as a path part) or
    # takes the common --corpus flag, whose default is docs.parquet there (bench/harness.py, add_common_flags)
    scripts = [p for p in (REPO / "bench").rglob("*.py") if p.name not in LIBRARIES]
    readers = {p.relative_to(REPO / "bench").as_posix() for p in scripts
               if re.search(r'"shared"|\b(DOCS|URLS|SHARED|SHARED_DATA)\b|add_common_flags\((?![^)]*corpus=None)',
                            p.read_text())}
    assert readers == set(CASES)


@pytest.mark.parametrize("script", sorted(CASES))
def test_a_missing_corpus_is_one_line(script):
    proc = subprocess.run([sys.executable, str(REPO / "bench" / script), *CASES[script]], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(lines) == 1 and "nonexistent" in lines[0], proc.stderr
