"""The memory intrinsics of fastenc/kernels/loads.py: an 8-byte load, a prefetch hint and the 64-byte class masks."""
import numpy as np
from numba import njit

from fastenc.kernels.loads import (ascii_masks64, element_address, load_at, load_flat, load_word, prefetch, prefetch_at, store_ids8,
                                   store_wide_ids8)


@njit(cache=True)
def _sum_with_prefetch(table, ahead):
    # Prefetch rows far outside the table (a hint never faults) while summing it.
    total = 0
    for row in range(table.shape[0]):
        prefetch(table, (row + ahead) * table.shape[1])
        total += table[row, 0] + table[row, table.shape[1] - 1]
    return total


def test_prefetch_is_only_a_hint_even_out_of_bounds():
    table = np.arange(64 * 4, dtype=np.uint64).reshape(64, 4)
    expected = int(table[:, 0].sum() + table[:, 3].sum())
    for ahead in (0, 3, 1 << 20, -(1 << 20)):
        assert _sum_with_prefetch(table, ahead) == expected


@njit(cache=True)
def _word(data, i):
    return load_word(data, i)


def test_load_word_is_little_endian():
    data = np.frombuffer(bytes(range(1, 17)), dtype=np.uint8)
    for i in range(9):
        assert _word(data, i) == int.from_bytes(bytes(data[i:i + 8]), "little")


@njit(cache=True)
def _flat(table, i):
    return load_flat(table, i)


def test_load_flat_reads_a_c_contiguous_table_row_by_row():
    rng = np.random.default_rng(7)
    for shape in ((16, 2), (8, 4), (5, 8), (33,)):
        table = rng.integers(0, 1 << 63, size=shape, dtype=np.uint64)
        flat = table.ravel()
        for i in range(flat.size):
            assert _flat(table, i) == flat[i]


def test_load_flat_refuses_a_strided_table():
    # Its element order would not be the flat order the caller computes: Numba must refuse to type it.
    import numba
    import pytest

    table = np.arange(32, dtype=np.uint64).reshape(16, 2)
    with pytest.raises(numba.core.errors.TypingError):
        _flat(table[::2], 1)


@njit(cache=True)
def _masks(data, i):
    return ascii_masks64(data, i)


def test_ascii_masks64_against_numpy():
    """Every byte value at every one of the 64 places (and unaligned starts): each mask's bit k
    is its class test on byte i + k."""
    rng = np.random.default_rng(7)
    data = np.concatenate([np.arange(256, dtype=np.uint8), rng.integers(0, 256, 4096, dtype=np.uint8),
                           np.frombuffer(b"Hello, world's 123\t\n\x0b\x0c\r \x1c\x7f" * 8, np.uint8)])
    as_bits = lambda flags: int(np.packbits(flags, bitorder="little").view("<u8")[0])  # noqa: E731
    for i in range(len(data) - 64):
        w = data[i:i + 64]
        lower = w | 0x20
        want = [(lower >= 0x61) & (lower <= 0x7A), (w >= 0x30) & (w <= 0x39), (w == 0x20) | ((w >= 9) & (w <= 13)),
                w == 0x20, w == 0x27, w >= 0x80]
        assert [int(m) for m in _masks(data, i)] == [as_bits(f) for f in want], i


@njit(cache=True)
def _store8(out, pos, low, high):
    store_ids8(out, pos, low, high)


def test_store_ids8_writes_eight_ids_into_any_integer_array():
    ids = [1, 2, 3, 0xFFFF, 50256, 0, 7, 0x8000]
    low = sum(v << (16 * k) for k, v in enumerate(ids[:4]))
    high = sum(v << (16 * k) for k, v in enumerate(ids[4:]))
    for dtype in (np.uint16, np.uint32, np.int64):
        for pos in (0, 1, 3):  # unaligned places too
            out = np.full(12, 9, dtype=dtype)
            _store8(out, pos, np.uint64(low), np.uint64(high))
            assert out[:pos].tolist() == [9] * pos and out[pos + 8:].tolist() == [9] * (12 - pos - 8)
            assert out[pos:pos + 8].tolist() == ids, (dtype, pos)


@njit(cache=True)
def _read_rows(table, rows):
    # Read table[row, 1] through raw addresses (and prefetch them first).
    total = np.uint64(0)
    for row in rows:
        at = element_address(table, row * table.shape[1] + 1)
        prefetch_at(at)
        total += load_at(at)
    return total


def test_element_address_and_load_at_read_the_element():
    table = np.arange(40, dtype=np.uint64).reshape(10, 4) * np.uint64(3)
    rows = np.array([0, 9, 4, 4], dtype=np.int64)
    assert _read_rows(table, rows) == int(table[rows, 1].sum())


@njit(cache=True)
def _store_wide8(out, pos, low, high):
    store_wide_ids8(out, pos, low, high)


def test_store_wide_ids8_writes_six_18_bit_ids_and_two_places_of_scratch():
    ids = [1, 0x3FFFF, 199997, 100255, 0, 65536]
    low = sum(v << (18 * k) for k, v in enumerate(ids[:3])) | (0x3FF << 54)  # the bits above 54 are not ids
    high = sum(v << (18 * k) for k, v in enumerate(ids[3:])) | (0x3FF << 54)
    for dtype in (np.uint32, np.int32, np.uint16, np.int64, np.uint64):
        for pos in (0, 1, 3):  # unaligned places too
            out = np.full(12, 9, dtype=dtype)
            _store_wide8(out, pos, np.uint64(low), np.uint64(high))
            assert out[:pos].tolist() == [9] * pos and out[pos + 8:].tolist() == [9] * (12 - pos - 8)
            want = [v & np.iinfo(dtype).max for v in ids + ids[3:5]]  # (a uint16 out keeps the low bits)
            assert out[pos:pos + 8].tolist() == want, (dtype, pos)
