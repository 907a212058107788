"""The one harness every bench uses: the machine header, fresh processes, rounds that alternate the tools,
medians, ratios and Markdown tables, and the shared flag vocabulary (``add_common_flags``).

A bench imports it as ``from harness import ...`` (a script's own folder is on ``sys.path``; probes in
``bench/probes/`` add ``bench/`` themselves). Nothing here measures by itself: it only times what it is given.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"  # the corpora live beside the checkout, never in it
SHARED_DATA = SHARED / "data"
DOCS = SHARED_DATA / "text" / "docs.parquet"
URLS = SHARED_DATA / "urls" / "urls.parquet"
FIXTURE = REPO / "tests" / "data" / "docs_fixture.parquet"


class Missing(Exception):
    """Something a bench needs is not there: reported as one line, never a traceback."""


def require(paths, flag: str, example: str = "tests/data/docs_fixture.parquet") -> None:
    """Exit with one line naming the missing input and the flag that chooses another."""
    for p in [paths] if isinstance(paths, (str, Path)) else paths:
        if not Path(p).exists():
            sys.exit(f"{Path(sys.argv[0]).name}: {p} does not exist (the shared corpora are not beside this "
                     f"checkout): pass {flag} PATH, e.g. {flag} {example}")


# --- the machine ------------------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo first (no subprocess), then lscpu (other Unixes, odd kernels)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def cpu_flags(wanted: Iterable[str] = ("avx2", "avx512f", "avx512bw", "sse4_2", "bmi2")) -> str:
    try:
        flags = next(l for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("flags")).split()
    except (OSError, StopIteration):
        return "?"
    return ", ".join(f for f in wanted if f in flags)


def versions(packages: Iterable[str] = ("numba", "gigatoken", "tiktoken", "tokenizers")) -> str:
    """fastenc's commit (and whether fastenc/ is modified), then each installed package's version."""
    import importlib.metadata as md

    parts = []
    try:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "fastenc"], capture_output=True,
                               text=True).stdout.strip()
        parts.append(f"fastenc {sha or '?'}{' (fastenc/ modified)' if dirty else ''}")
    except OSError:
        parts.append("fastenc ?")
    for pkg in packages:
        try:
            parts.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            pass
    return ", ".join(parts)


def machine_header(title: str, packages: Iterable[str] = ("numba", "gigatoken", "tiktoken", "tokenizers")) -> str:
    """The lines every report starts with: what ran, when, on what (paste-ready for bench/RESULTS.md)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()
    script = Path(sys.argv[0])
    try:
        shown = script.resolve().relative_to(REPO)
    except ValueError:
        shown = script
    return "\n".join([
        f"## {title}\n",
        f"- **Command:** `{shlex.join(['python', str(shown), *sys.argv[1:]])}` (repo root)",
        f"- **Date:** {now:%Y-%m-%d %H:%M} UTC; load average at start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}",
        f"- **CPU:** {cpu_model()}; {os.cpu_count()} CPUs; flags: {cpu_flags()}",
        f"- **Python:** {platform.python_version()}; **versions:** {versions(packages)}",
    ])


def footer() -> str:
    return f"\nFinished {datetime.datetime.now(datetime.timezone.utc):%H:%M} UTC; load average at the end {os.getloadavg()[0]:.2f}."


# --- memory and CPU time ----------------------------------------------------------------------------------


def rss(field: str = "VmHWM") -> int:
    """Bytes of this process's resident memory: ``VmHWM`` its peak, ``VmRSS`` now.

    Not ``ru_maxrss``: Linux carries the high-water mark across exec, so a worker would report its parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # no /proc: the best there is (kB on Linux)


def reset_peak_rss() -> None:
    """Restart VmHWM from the current resident size (Linux >= 4.0); elsewhere the peak counts from the start."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_rss_mb() -> float:
    """This process's own peak in MB (VmHWM: ru_maxrss would start from the parent's size at fork)."""
    return rss("VmHWM") / 2**20


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable, *a):
    """(fn's result, wall seconds, this process's CPU seconds over all threads)."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - wall, time.process_time() - cpu


# --- fresh processes --------------------------------------------------------------------------------------


@dataclass
class Fresh:
    """What one fresh process cost and said."""
    wall: float
    cpu: float  # user + system seconds of the process and the children it waited for
    peak_rss_mb: float  # its own peak resident set (see run_fresh: not the bench's size)
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        """The child's last stdout line as JSON, or {"error": its last stderr line}."""
        if self.returncode:
            tail = self.stderr.strip().splitlines()
            return {"error": tail[-1] if tail else f"exit {self.returncode}"}
        lines = self.stdout.strip().splitlines()
        try:
            return json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            return {"error": f"no JSON on the last stdout line: {lines[-1] if lines else '(empty)'}"}


# A small process between the bench and the command: Linux carries a process's peak RSS across fork and exec, so
# a command started straight from a bench holding a corpus would report the bench's size; started from this one
# it starts from ~10 MB. It times the command, reaps it with wait4 and writes the figures to the fd it is given.
_LAUNCHER = """
import json, os, subprocess, sys, time
fd, cmd = int(sys.argv[1]), sys.argv[2:]
t = time.perf_counter()
p = subprocess.Popen(cmd)
_, status, ru = os.wait4(p.pid, 0)
wall = time.perf_counter() - t
rc = os.waitstatus_to_exitcode(status)
os.write(fd, json.dumps([wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, rc]).encode())
sys.exit(rc if rc >= 0 else 128 - rc)
"""


def run_fresh(cmd: list[str], env: dict | None = None, cwd: Path | str | None = None, timeout: float | None = None) -> Fresh:
    """Run ``cmd`` in a new process: its wall clock, CPU time (user + system, its threads and the children it
    waited for) and peak RSS, from wait4 in a small launcher (so the peak is the command's, not this process's)."""
    import threading

    rfd, wfd = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(wfd), *cmd], env=env, cwd=cwd, pass_fds=(wfd,),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    os.close(wfd)
    killer = threading.Timer(timeout, lambda: os.killpg(proc.pid, 9)) if timeout else None
    if killer:
        killer.start()
    try:
        out, err = proc.communicate()
    finally:
        if killer:
            killer.cancel()
    with os.fdopen(rfd, "rb") as f:
        got = f.read()
    if not got:  # the launcher itself died (killed at the timeout): no figures
        return Fresh(float("nan"), float("nan"), float("nan"), proc.returncode or -9, out, err)
    wall, cpu, peak, rc = json.loads(got)
    return Fresh(wall, cpu, peak, rc, out, err)


def spawn_json(cmd: list[str], env: dict | None = None, cwd: Path | str | None = None) -> dict:
    """A worker in a fresh process that prints one JSON line; adds the process's wall, cpu and peak RSS."""
    fresh = run_fresh(cmd, env=env, cwd=cwd)
    result = fresh.json()
    result.setdefault("process_wall_s", fresh.wall)
    result.setdefault("process_cpu_s", fresh.cpu)
    return result


def thread_env(threads: int, numba_threads: int | None = None) -> dict:
    """The environment that sizes every tool's thread pool once per process (Rust peers: rayon; fastenc: Numba)."""
    return dict(os.environ, RAYON_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(numba_threads or threads))


# --- rounds -----------------------------------------------------------------------------------------------


def alternate(tools: list, rounds: int) -> Iterator[tuple[int, object]]:
    """(round, tool) in the order to run them: ABAB in even rounds, BABA in odd ones, so neither tool always
    runs first on a machine whose speed drifts."""
    for r in range(rounds):
        for tool in tools if r % 2 == 0 else tools[::-1]:
            yield r, tool


@dataclass
class Rounds:
    """Results per tool per round. With ``skip_first`` round 0 (cold disk and page cache, CPU clocks rising)
    is left out of the medians when there are later rounds, and read apart with ``first()``. Benches whose
    every round is a fresh process keep it: their cold cost is the in-process first pass, timed on its own."""
    runs: dict = field(default_factory=dict)  # tool -> {round: result dict}
    skip_first: bool = False

    def add(self, tool, round_: int, result: dict) -> None:
        self.runs.setdefault(tool, {})[round_] = result

    def values(self, tool, key: str, include_first: bool = False) -> list:
        by_round = self.runs.get(tool, {})
        keep = [r for r in sorted(by_round) if include_first or not self.skip_first or r > 0 or len(by_round) == 1]
        return [by_round[r][key] for r in keep if by_round[r].get(key) is not None]

    def first(self, tool, key: str):
        return self.runs.get(tool, {}).get(0, {}).get(key)

    def median(self, tool, key: str, include_first: bool = False):
        vals = self.values(tool, key, include_first)
        return statistics.median(vals) if vals else None

    def per_round_ratios(self, tool, baseline, key: str) -> list[float]:
        """tool's value / the baseline's, round by round (the two ran next to each other in each round)."""
        a, b = self.runs.get(tool, {}), self.runs.get(baseline, {})
        return [a[r][key] / b[r][key] for r in sorted(set(a) & set(b)) if a[r].get(key) and b[r].get(key)]


def run_rounds(tools: list, rounds: int, one: Callable[[object, int], dict], log: Callable[[str], None] | None = print,
               skip_first: bool = False) -> Rounds:
    """Run ``one(tool, round)`` for every tool in every round, alternating; failures are logged, not fatal."""
    out = Rounds(skip_first=skip_first)
    for r, tool in alternate(tools, rounds):
        result = one(tool, r)
        if "error" in result:
            if log:
                log(f"<!-- FAILED {tool} round {r + 1}: {result['error']} -->")
            continue
        out.add(tool, r, result)
        if log:
            log(f"<!-- round {r + 1} {tool}: " + ", ".join(f"{k}={v:.3f}" for k, v in result.items() if isinstance(v, float)) + " -->")
    return out


def doc_digests(flat, counts):
    """Per document: (token count, xxh3 of its ids as uint32): what the exactness checks compare."""
    import numpy as np
    import xxhash

    ends = np.cumsum(counts)
    starts = ends - counts
    hashes = np.fromiter((xxhash.xxh3_64_intdigest(flat[s:e].tobytes()) for s, e in zip(starts.tolist(), ends.tolist())),
                         dtype=np.uint64, count=len(counts))
    return np.asarray(counts, dtype=np.int64), hashes


def median(runs: list[dict], key: str):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def ratio(a, b) -> str:
    """a / b to two places, or a dash where either is missing."""
    return f"{a / b:.2f}" if a and b else "–"


def mbps(mb: float, seconds: float | None) -> str:
    return f"{mb / seconds:.1f}" if seconds else "–"


# --- Markdown ---------------------------------------------------------------------------------------------


def md_table(headers: list[str], rows: Iterable[list], align: str | None = None) -> str:
    """A Markdown table; ``align`` one character per column, "l" or "r" (default: first left, others right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def ratio_table(rounds: Rounds, tools: list, baseline, keys: dict[str, str], unit: Callable[[float], str] | None = None) -> str:
    """One row per tool: each key's median (through ``unit``), and each tool's time over the baseline's
    (above 1: the baseline is faster) with the per-round ratios in brackets. ``keys``: column name -> result
    key holding a time. With ``rounds.skip_first`` the first round, left out of the medians, has its own column."""
    unit = unit or (lambda s: f"{s:.3f} s")
    headers = ["tool"]
    for name in keys:
        headers += [name, f"{name} / {baseline}"] + ([f"{name}, first round"] if rounds.skip_first else [])
    rows = []
    for tool in tools:
        if tool not in rounds.runs:
            continue
        row = [tool]
        for key in keys.values():
            m, b = rounds.median(tool, key), rounds.median(baseline, key)
            row.append(unit(m) if m else "–")
            if tool == baseline:
                row.append("1")
            else:
                per = ", ".join(f"{x:.2f}" for x in rounds.per_round_ratios(tool, baseline, key))
                row.append(f"**{ratio(m, b)}**" + (f" ({per})" if per else ""))
            if rounds.skip_first:
                first = rounds.first(tool, key)
                row.append(unit(first) if first else "–")
        rows.append(row)
    return md_table(headers, rows)


@contextlib.contextmanager
def out_md(path: Path | None):
    """Print to stdout and, with --out-md, to that file too (the Markdown pastes into bench/RESULTS.md)."""
    if path is None:
        yield
        return

    class Tee:
        def __init__(self, *streams):
            self.streams = streams

        def write(self, s):
            for st in self.streams:
                st.write(s)
            return len(s)

        def flush(self):
            for st in self.streams:
                st.flush()

    with open(path, "w") as f:
        old, sys.stdout = sys.stdout, Tee(sys.stdout, f)
        try:
            yield
        finally:
            sys.stdout = old


# --- the flag vocabulary ----------------------------------------------------------------------------------


def add_common_flags(parser: argparse.ArgumentParser, *, corpus: Path | None = DOCS, corpus_aliases: Iterable[str] = (),
                     corpus_nargs: str | None = None, rounds: int | None = 3, rounds_aliases: Iterable[str] = (),
                     threads: str | None = "1,2", tools: list[str] | None = None, mb: float | None = None,
                     passes: int | None = None, passes_aliases: Iterable[str] = ()) -> argparse.ArgumentParser:
    """The flags every bench shares, with one meaning each (bench/README.md):

    --corpus PATH   the parquet file read (old names, e.g. --docs or --input, stay as aliases)
    --mb N          only the first documents up to N MB of text (0 or absent: all of it)
    --rounds N      fresh processes per tool, alternating; the first round is reported apart
    --passes N      warm passes within one process (median); some scripts still accept --repeat for it
    --threads LIST  comma-separated thread counts
    --tools LIST    comma-separated tools (fastenc and the peers in bench/peers.py)
    --out-md PATH   also write the Markdown report there

    A script passes None for a flag it does not take.
    """
    if corpus is not None or corpus_aliases:
        kw = {"nargs": corpus_nargs} if corpus_nargs else {}
        default = corpus if corpus_nargs is None or corpus is None else [corpus]
        parser.add_argument("--corpus", *corpus_aliases, dest="corpus", type=Path, default=default,
                            help=f"the parquet file to read (default: {corpus})", **kw)
    if corpus is not None or corpus_aliases:  # --mb cuts the corpus: only where there is one
        parser.add_argument("--mb", type=float, default=mb, help="only the first documents up to this many MB of text")
    if rounds is not None:
        parser.add_argument("--rounds", *rounds_aliases, dest="rounds", type=int, default=rounds,
                            help="fresh processes per tool, alternating; medians over rounds")
    if passes is not None:
        parser.add_argument("--passes", *passes_aliases, dest="passes", type=int, default=passes,
                            help="warm passes within one process (median)")
    if threads is not None:
        parser.add_argument("--threads", default=threads, help="thread counts, comma-separated")
    if tools is not None:
        parser.add_argument("--tools", default=",".join(tools), help=f"comma-separated, from {', '.join(tools)}")
    parser.add_argument("--out-md", type=Path, default=None, help="also write the Markdown report to this file")
    return parser


def parse_list(value: str | list, flag: str, cast=str) -> list:
    """A comma-separated flag value as a list (an int list for --threads), or one line naming the flag."""
    if isinstance(value, list):
        return value
    try:
        return [cast(v) for v in str(value).split(",") if v]
    except ValueError:
        raise SystemExit(f"{Path(sys.argv[0]).name}: {flag} takes comma-separated values, got {value!r}") from None


def corpus_slice(path: Path, mb: float | None, tmp: Path | None = None, column: str = "text") -> Path:
    """``path`` itself, or with --mb a copy holding only its first documents up to ``mb`` MB of text (at least
    one), written in ``tmp`` (default: a folder removed at exit). The file keeps every column."""
    if not mb:
        return Path(path)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    sizes = pc.binary_length(table.column(column).combine_chunks().cast("large_binary")).to_numpy(zero_copy_only=False)
    total, n = 0, 0
    for n, s in enumerate(sizes, 1):
        total += int(s or 0)
        if total >= mb * 1e6:
            break
    if tmp is None:
        tmp = Path(tempfile.mkdtemp(prefix="fastenc-bench-"))
        import atexit
        import shutil

        atexit.register(shutil.rmtree, tmp, True)
    out = Path(tmp) / f"{Path(path).stem}-{mb:g}mb.parquet"
    pq.write_table(table.slice(0, max(n, 1)), out)
    return out
