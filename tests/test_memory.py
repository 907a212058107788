"""fastenc.memory: output buffers reused only once no result refers to them, and the pages each kind of
memory asks for."""
import sys

import numpy as np
import pytest

from fastenc.memory import OutputPool, huge_array, small_page_empty


def _result(pool, n, fill):
    with pool.buffer(n, np.uint16) as (out, trim):
        out[:n] = fill
        return trim(n)


def test_a_buffer_is_reused_only_after_every_view_of_its_result_is_gone():
    pool = OutputPool(keep=2, min_bytes=1)
    first = _result(pool, 50, 1)
    part = first[5:9]
    del first
    second = _result(pool, 50, 2)  # `part` still holds the first buffer
    assert part.tolist() == [1] * 4 and second.tolist() == [2] * 50
    del part
    third = _result(pool, 50, 3)  # the first buffer is free again: reused, not a third one
    assert third.base is pool._buffers[0] and len(pool._buffers) == 2
    view = memoryview(second)  # a buffer export keeps it busy too
    del second
    fourth = _result(pool, 50, 4)
    assert view.tolist() == [2] * 50 and fourth.tolist() == [4] * 50
    assert not any(fourth.base is b for b in pool._buffers)  # a fresh, unpooled buffer: the pool is full


def test_small_and_giant_outputs_are_not_pooled():
    pool = OutputPool(keep=2, min_bytes=1000, max_bytes=4000)
    small = _result(pool, 10, 7)
    assert small.flags.owndata and small.tolist() == [7] * 10
    big = _result(pool, 3000, 8)  # 6,000 bytes: over max_bytes
    assert pool._buffers == [] and big.tolist() == [8] * 3000


def test_a_smaller_request_takes_a_larger_free_buffer_and_trims_the_result():
    pool = OutputPool(keep=1, min_bytes=1)
    del_me = _result(pool, 100, 5)
    del del_me
    with pool.buffer(40, np.uint16) as (out, trim):
        assert out.base is pool._buffers[0] and len(out) >= 40
        result = trim(30)
    assert len(result) == 30


def test_a_slightly_larger_next_batch_still_finds_the_buffer():
    # The next batch is seldom the same size: buffers are made a quarter larger than asked.
    pool = OutputPool(keep=1, min_bytes=1)
    first = _result(pool, 100, 1)
    del first
    second = _result(pool, 120, 2)
    assert second.base is pool._buffers[0] and len(pool._buffers) == 1


def _vm_flags(array) -> set:
    """The kernel's VmFlags of the mapping that holds ``array``'s middle element (Linux; the advice
    covers an array's whole pages, not the partial page at each end)."""
    addr = array.ctypes.data + array.nbytes // 2
    lines = open("/proc/self/smaps").read().splitlines()
    for i, line in enumerate(lines):
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if lo <= addr < hi:
                flags = next(l for l in lines[i + 1:] if l.startswith("VmFlags:"))
                return set(flags.split()[1:])
    raise AssertionError("no mapping holds the array")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise advice and /proc/self/smaps are Linux's")
def test_output_buffers_are_advised_off_huge_pages_and_cache_memory_onto_them():
    # Output ids are written once in order: huge pages gain nothing there and their first touch is
    # slow on VMs (bench/RESULTS.md, "What landed: the id output buffers on 4 kB pages"). The random-access caches keep them.
    pool = OutputPool(keep=1, min_bytes=1)
    with pool.buffer(8 << 20, np.uint32) as (out, trim):  # 32 MB: NumPy alone would advise huge pages
        assert "nh" in _vm_flags(out) and "hg" not in _vm_flags(out)
        out[:10] = 7
        assert trim(10).tolist() == [7] * 10
    small = small_page_empty(1 << 20, np.uint8)  # under NumPy's 4 MB threshold: left as it is
    assert small.shape == (1 << 20,)
    cache = huge_array((1 << 20, 4), np.uint64)
    assert "hg" in _vm_flags(cache) and not cache.any()
