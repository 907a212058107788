"""bench/harness.py's bookkeeping: the order of the rounds, medians and ratios, the Markdown, the shared flags,
--mb and the fresh-process runner. Nothing is timed against a threshold: only what the harness computes."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import harness  # noqa: E402


def test_alternate_reverses_the_order_every_other_round():
    assert list(harness.alternate(["a", "b", "c"], 3)) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (2, "c")]


def test_rounds_medians_first_round_and_per_round_ratios():
    results = {("a", 0): 10.0, ("b", 0): 20.0, ("a", 1): 2.0, ("b", 1): 6.0, ("a", 2): 4.0, ("b", 2): 8.0}
    rounds = harness.run_rounds(["a", "b"], 3, lambda tool, r: {"s": results[(tool, r)]}, log=None)
    assert rounds.median("a", "s") == 4.0  # all three rounds
    assert rounds.per_round_ratios("b", "a", "s") == [2.0, 3.0, 2.0]
    apart = harness.Rounds(runs=rounds.runs, skip_first=True)
    assert apart.median("a", "s") == 3.0 and apart.first("a", "s") == 10.0  # round 0 reported on its own


def test_a_failed_round_is_left_out_not_fatal():
    rounds = harness.run_rounds(["a"], 2, lambda tool, r: {"error": "boom"} if r == 0 else {"s": 1.0}, log=None)
    assert rounds.values("a", "s") == [1.0]


def test_ratio_table_and_md_table():
    rounds = harness.Rounds()
    for r, (a, b) in enumerate([(1.0, 2.0), (1.0, 3.0)]):
        rounds.add("fastenc", r, {"s": a})
        rounds.add("peer", r, {"s": b})
    table = harness.ratio_table(rounds, ["fastenc", "peer"], "fastenc", {"time": "s"})
    lines = table.splitlines()
    assert lines[0] == "| tool | time | time / fastenc |" and lines[1] == "|---|---:|---:|"
    assert lines[3] == "| peer | 2.500 s | **2.50** (2.00, 3.00) |"
    assert harness.ratio(None, 1.0) == "–" and harness.mbps(10.0, 2.0) == "5.0"
    rounds.skip_first = True  # the first round apart: out of the median, in a column of its own
    assert harness.ratio_table(rounds, ["peer"], "fastenc", {"time": "s"}).splitlines()[2] == "| peer | 3.000 s | **3.00** (2.00, 3.00) | 2.000 s |"


def test_common_flags_one_meaning_and_old_names():
    p = argparse.ArgumentParser()
    harness.add_common_flags(p, corpus_aliases=["--docs"], tools=["fastenc", "tiktoken"], passes=3,
                             passes_aliases=["--repeat"], rounds_aliases=["--reps"])
    args = p.parse_args(["--docs", "x.parquet", "--repeat", "2", "--reps", "5", "--mb", "1"])
    assert (args.corpus, args.passes, args.rounds, args.mb) == (Path("x.parquet"), 2, 5, 1.0)
    assert args.tools == "fastenc,tiktoken" and args.threads == "1,2" and args.out_md is None
    assert harness.parse_list("1,2", "--threads", int) == [1, 2]
    with pytest.raises(SystemExit):
        harness.parse_list("1,x", "--threads", int)


def test_corpus_slice_keeps_the_first_documents(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["a" * 600_000, "b" * 600_000, "c" * 600_000], "id": [1, 2, 3]}), src)
    assert harness.corpus_slice(src, None) == src
    cut = pq.read_table(harness.corpus_slice(src, 1.0, tmp_path))
    assert cut.column("id").to_pylist() == [1, 2] and cut.column_names == ["text", "id"]


def test_run_fresh_reports_the_child_and_its_json():
    fresh = harness.run_fresh([sys.executable, "-c", "import json, sys; print('x', file=sys.stderr); print(json.dumps({'a': 1}))"])
    assert fresh.returncode == 0 and fresh.json() == {"a": 1} and fresh.stderr.strip() == "x"
    assert fresh.wall > 0 and fresh.cpu >= 0 and fresh.peak_rss_mb > 0
    failed = harness.run_fresh([sys.executable, "-c", "import sys; sys.exit('no corpus')"])
    assert failed.returncode == 1 and failed.json() == {"error": "no corpus"}


def test_machine_header_names_the_machine():
    header = harness.machine_header("t")
    assert header.startswith("## t") and "**CPU:**" in header and "**Python:**" in header and "**Command:**" in header
