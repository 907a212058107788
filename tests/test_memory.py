"""fastenc.memory.OutputPool: output buffers reused only once no result refers to them."""
import numpy as np

from fastenc.memory import OutputPool


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
