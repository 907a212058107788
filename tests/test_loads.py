"""The memory intrinsics of fastenc/kernels/loads.py: an 8-byte load and a prefetch hint."""
import numpy as np
from numba import njit

from fastenc.kernels.loads import load_word, prefetch


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
