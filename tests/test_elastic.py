"""``--workers``: the cores of workers that ran out of units go to the workers still encoding
(``fastenc.run.elastic``). (That the outputs stay byte-identical is tests/test_scale.py's.)"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import threading

import numba
import pytest

from fastenc.run import elastic

POOL = numba.config.NUMBA_NUM_THREADS


def _in_a_fresh_thread(fn):
    """``fn()`` on a thread of its own: Numba's thread count is per thread, so none leaks into other tests."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised below, in the test's thread
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("workers, threads", [(2, 1), (4, 1), (3, 2)])
def test_a_worker_grows_as_units_finish_and_never_past_the_budget(workers, threads):
    def probe():
        unfinished = ctypes.c_int(workers + 3)
        seen = []
        with elastic.attached(unfinished, workers, threads):
            numba.set_num_threads(min(threads, POOL))
            for left in range(workers + 3, -1, -1):
                unfinished.value = left
                elastic.adjust()
                seen.append((left, numba.get_num_threads()))
        elastic.adjust()  # detached: leaves the count alone
        return seen, numba.get_num_threads()

    seen, after = _in_a_fresh_thread(probe)
    for left, n in seen:
        busy = min(workers, max(1, left))
        assert n == min(POOL, max(threads, workers * threads // busy))  # its share of the idle cores
        assert busy * n <= max(workers * threads, busy * min(POOL, threads))  # together: never more than given
    assert [n for left, n in seen if left >= workers] == [min(POOL, threads)] * 4  # all busy: its own threads
    if POOL >= 2 * threads:
        assert seen[-1][1] > threads  # the last worker took the others' cores
    assert after == seen[-1][1]


def test_one_of_many_only_while_attached_to_a_map_of_several_workers():
    count = ctypes.c_int(3)
    assert not elastic.one_of_many()
    with elastic.attached(count, 2, 1):
        assert elastic.one_of_many()
    with elastic.attached(count, 1, 2):
        assert not elastic.one_of_many()  # one worker: the cores are all its own
    assert not elastic.one_of_many()


def test_adjust_outside_a_map_phase_does_nothing():
    def probe():
        numba.set_num_threads(1)
        elastic.adjust()
        return numba.get_num_threads()

    assert _in_a_fresh_thread(probe) == 1


_PROBE = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
import grow_task
from fastenc.run.units import map_units
results = map_units(grow_task.task, [0, 1], workers=2, threads=1)
print((os.getpid(), results))
"""

_TASK = """
import os, sys, time

import numba

from fastenc.run.elastic import adjust

WAITS = int(sys.argv[2])  # the unit that waits, batch by batch, for the other unit's worker to finish


def task(i):
    if i != WAITS:
        return (os.getpid(), numba.get_num_threads())
    deadline = time.monotonic() + 60
    while numba.get_num_threads() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
        adjust()
    return (os.getpid(), numba.get_num_threads())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fastenc forks its workers on Linux only")
@pytest.mark.skipif(POOL < 2, reason="one CPU: there are no cores to lend")
@pytest.mark.parametrize("waits", [0, 1])
def test_the_last_busy_worker_gets_the_finished_workers_core(waits, tmp_path):
    # unit 0 is the forked worker's (its first unit is always its own), unit 1 most often this
    # process's (the worker takes it when it is done with unit 0 before this process starts on
    # one); the unit that waits must see its thread count grow once the other unit is finished
    (tmp_path / "grow_task.py").write_text(_TASK)
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path), str(waits)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    main_pid, results = eval(proc.stdout.strip().splitlines()[-1])
    assert results[0][0] != main_pid
    assert results[waits][1] == 2  # grown: the other worker's core
    assert results[1 - waits][1] == 1  # the one that finished first never had more than its own
