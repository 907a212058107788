"""XXH3-64 (seed 0) as Numba kernels: the hash that orders and shards URL bins.

The URL card orders each shard by ``xxh3_64(url)`` and assigns shards by
``(xxh3_64(url) * 2048) >> 64``, where ``xxh3_64`` is xxHash's ``XXH3_64bits`` with seed 0
and the default 192-byte secret: exactly what ``xxhash.xxh3_64_intdigest(b)`` returns.
This is a scalar port of that algorithm (every length class: 0, 1-3, 4-8, 9-16, 17-128,
129-240 and the striped long path), written from the xxHash specification.

Numba traps handled here:

- Mixed ``uint64``/``int64`` arithmetic silently promotes to ``float64`` (or ``int64``) in
  Numba, so every constant below is an ``np.uint64`` scalar and every length is cast before
  it meets a hash word. Scalar constants are frozen into the compiled code, which is fine:
  they are constants of the algorithm, not tables.
- There is no 128-bit integer: ``_mul128_fold64`` builds the 64x64->128 product from
  32-bit halves.
- The 192-byte secret is a table, so it is an argument (``secret``), never a module global
  captured by a cached kernel. ``XXH3_SECRET`` is the Python-level constant to pass;
  ``xxh3_64`` and ``xxh3_64_batch`` build it locally so that callers need not.

Public kernels (all ``@njit(cache=True)``; ``data`` is ``uint8[:]``, positions are ``int64``):

- ``xxh3_64_secret(data, start, end, secret) -> uint64``: hash of ``data[start:end]``; the
  one to call per item from your own ``@njit`` loop, with ``secret = XXH3_SECRET``.
- ``xxh3_64(data, start, end) -> uint64``: the same with the default secret built on each
  call (one small allocation: convenient, not the fastest for millions of tiny calls).
- ``xxh3_64_batch(data, offsets) -> uint64[n]``: hash of every ``data[offsets[i]:offsets[i+1]]``
  (Arrow string layout), in parallel over items.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from fastenc.kernels.jit import HELPER

SECRET_SIZE = 192  # bytes in XXH3_kSecret, the default secret

_U64 = np.uint64
# Numba 0.68 compiles a separate version of an @njit callee for every distinct integer
# literal passed to it (f(x, 24) and f(x, 32) are two compilations): secret offsets are
# therefore passed as _I(24), which types as a plain int64. This cut the cold compile of
# this module from ~15 s to a few seconds.
_I = np.int64
_PRIME32_1 = _U64(0x9E3779B1)
_PRIME32_2 = _U64(0x85EBCA77)
_PRIME32_3 = _U64(0xC2B2AE3D)
_PRIME64_1 = _U64(0x9E3779B185EBCA87)
_PRIME64_2 = _U64(0xC2B2AE3D27D4EB4F)
_PRIME64_3 = _U64(0x165667B19E3779F9)
_PRIME64_4 = _U64(0x85EBCA77C2B2AE63)
_PRIME64_5 = _U64(0x27D4EB2F165667C5)
_PRIME_MX1 = _U64(0x165667919E3779F9)
_PRIME_MX2 = _U64(0x9FB21C651E98DF25)
_MASK32 = _U64(0xFFFFFFFF)

# Long-input layout (default 192-byte secret): 64-byte stripes, 16 stripes per 1 kB block.
_STRIPE_LEN = 64
_STRIPES_PER_BLOCK = (SECRET_SIZE - _STRIPE_LEN) // 8
_BLOCK_LEN = _STRIPE_LEN * _STRIPES_PER_BLOCK
_SECRET_SIZE_MIN = 136


@njit(**HELPER)
def _r64(a, i):
    """Little-endian uint64 at a[i:i+8]. Unsigned indices skip Numba's negative-index
    wrap-around, which lets LLVM fold the eight byte loads into one 64-bit load."""
    j = _U64(i)
    return (
        _U64(a[j])
        | (_U64(a[j + _U64(1)]) << _U64(8))
        | (_U64(a[j + _U64(2)]) << _U64(16))
        | (_U64(a[j + _U64(3)]) << _U64(24))
        | (_U64(a[j + _U64(4)]) << _U64(32))
        | (_U64(a[j + _U64(5)]) << _U64(40))
        | (_U64(a[j + _U64(6)]) << _U64(48))
        | (_U64(a[j + _U64(7)]) << _U64(56))
    )


@njit(**HELPER)
def _r32(a, i):
    """Little-endian uint32 at a[i:i+4], widened to uint64 (unsigned indices, as in _r64)."""
    j = _U64(i)
    return (
        _U64(a[j])
        | (_U64(a[j + _U64(1)]) << _U64(8))
        | (_U64(a[j + _U64(2)]) << _U64(16))
        | (_U64(a[j + _U64(3)]) << _U64(24))
    )


@njit(cache=True, forceinline=True)
def mul128(a, b):
    """``(upper, lower)`` 64-bit halves of the 128-bit product of two uint64, from 32-bit halves.

    Scalars only, inlined at the Numba level (a plain call measured ~10% slower xxh3). xxh3 folds the halves, and
    the URL recipe's shard rule ``(h * num_shards) >> 64`` is the upper half.
    """
    a_lo = a & _MASK32
    a_hi = a >> _U64(32)
    b_lo = b & _MASK32
    b_hi = b >> _U64(32)
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    # Each partial product fits in 64 bits, and so does `cross`: (2^32-1) + (2^32-1) + (2^32-1)^2 < 2^64.
    cross = (lo_lo >> _U64(32)) + (hi_lo & _MASK32) + lo_hi
    upper = (hi_lo >> _U64(32)) + (cross >> _U64(32)) + hi_hi
    lower = (cross << _U64(32)) | (lo_lo & _MASK32)
    return upper, lower


@njit(**HELPER)
def _mul128_fold64(a, b):
    """Low 64 bits XOR high 64 bits of the 128-bit product a*b."""
    upper, lower = mul128(a, b)
    return lower ^ upper


@njit(**HELPER)
def _xxh64_avalanche(h):
    h ^= h >> _U64(33)
    h *= _PRIME64_2
    h ^= h >> _U64(29)
    h *= _PRIME64_3
    h ^= h >> _U64(32)
    return h


@njit(**HELPER)
def _xxh3_avalanche(h):
    h ^= h >> _U64(37)
    h *= _PRIME_MX1
    h ^= h >> _U64(32)
    return h


@njit(**HELPER)
def _rrmxmx(h, n):
    h ^= ((h << _U64(49)) | (h >> _U64(15))) ^ ((h << _U64(24)) | (h >> _U64(40)))
    h *= _PRIME_MX2
    h ^= (h >> _U64(35)) + n
    h *= _PRIME_MX2
    h ^= h >> _U64(28)
    return h


@njit(**HELPER)
def _mix16(data, i, secret, s):
    return _mul128_fold64(_r64(data, i) ^ _r64(secret, s), _r64(data, i + 8) ^ _r64(secret, s + 8))


@njit(**HELPER)
def _len_0to16(data, start, n, secret):
    un = _U64(n)
    if n > 8:
        lo = _r64(data, start) ^ (_r64(secret, _I(24)) ^ _r64(secret, _I(32)))
        hi = _r64(data, start + n - 8) ^ (_r64(secret, _I(40)) ^ _r64(secret, _I(48)))
        # swap64(lo): byte reversal, written as a rotate-and-mask cascade.
        sw = ((lo & _U64(0x00FF00FF00FF00FF)) << _U64(8)) | ((lo >> _U64(8)) & _U64(0x00FF00FF00FF00FF))
        sw = ((sw & _U64(0x0000FFFF0000FFFF)) << _U64(16)) | ((sw >> _U64(16)) & _U64(0x0000FFFF0000FFFF))
        sw = (sw << _U64(32)) | (sw >> _U64(32))
        return _xxh3_avalanche(un + sw + hi + _mul128_fold64(lo, hi))
    if n >= 4:
        in1 = _r32(data, start)
        in2 = _r32(data, start + n - 4)
        keyed = (in2 + (in1 << _U64(32))) ^ (_r64(secret, _I(8)) ^ _r64(secret, _I(16)))
        return _rrmxmx(keyed, un)
    if n > 0:
        c1 = _U64(data[start])
        c2 = _U64(data[start + (n >> 1)])
        c3 = _U64(data[start + n - 1])
        combined = (c1 << _U64(16)) | (c2 << _U64(24)) | c3 | (un << _U64(8))
        return _xxh64_avalanche(combined ^ (_r32(secret, _I(0)) ^ _r32(secret, _I(4))))
    return _xxh64_avalanche(_r64(secret, _I(56)) ^ _r64(secret, _I(64)))


@njit(**HELPER)
def _len_17to128(data, start, n, secret):
    acc = _U64(n) * _PRIME64_1
    last = start + n
    if n > 32:
        if n > 64:
            if n > 96:
                acc += _mix16(data, start + 48, secret, _I(96))
                acc += _mix16(data, last - 64, secret, _I(112))
            acc += _mix16(data, start + 32, secret, _I(64))
            acc += _mix16(data, last - 48, secret, _I(80))
        acc += _mix16(data, start + 16, secret, _I(32))
        acc += _mix16(data, last - 32, secret, _I(48))
    acc += _mix16(data, start, secret, _I(0))
    acc += _mix16(data, last - 16, secret, _I(16))
    return _xxh3_avalanche(acc)


@njit(**HELPER)
def _len_129to240(data, start, n, secret):
    acc = _U64(n) * _PRIME64_1
    for i in range(8):
        acc += _mix16(data, start + 16 * i, secret, 16 * i)
    acc = _xxh3_avalanche(acc)
    for i in range(8, n // 16):
        acc += _mix16(data, start + 16 * i, secret, 16 * (i - 8) + 3)
    acc += _mix16(data, start + n - 16, secret, _I(_SECRET_SIZE_MIN - 17))
    return _xxh3_avalanche(acc)


@njit(**HELPER)
def _accumulate_512(acc, data, i, secret, s):
    for k in range(8):
        v = _r64(data, i + 8 * k)
        key = v ^ _r64(secret, s + 8 * k)
        acc[k ^ 1] += v
        acc[k] += (key & _MASK32) * (key >> _U64(32))


@njit(**HELPER)
def _hash_long(data, start, n, secret):
    acc = np.empty(8, dtype=np.uint64)
    acc[0] = _PRIME32_3
    acc[1] = _PRIME64_1
    acc[2] = _PRIME64_2
    acc[3] = _PRIME64_3
    acc[4] = _PRIME64_4
    acc[5] = _PRIME32_2
    acc[6] = _PRIME64_5
    acc[7] = _PRIME32_1
    nb_blocks = (n - 1) // _BLOCK_LEN
    for b in range(nb_blocks):
        base = start + b * _BLOCK_LEN
        for s in range(_STRIPES_PER_BLOCK):
            _accumulate_512(acc, data, base + s * _STRIPE_LEN, secret, 8 * s)
        # scramble with the secret's last 64 bytes
        for k in range(8):
            a = acc[k]
            a ^= a >> _U64(47)
            a ^= _r64(secret, SECRET_SIZE - _STRIPE_LEN + 8 * k)
            acc[k] = a * _PRIME32_1
    # last partial block, then the very last stripe (which may overlap what came before)
    base = start + nb_blocks * _BLOCK_LEN
    nb_stripes = ((n - 1) - nb_blocks * _BLOCK_LEN) // _STRIPE_LEN
    for s in range(nb_stripes):
        _accumulate_512(acc, data, base + s * _STRIPE_LEN, secret, 8 * s)
    _accumulate_512(acc, data, start + n - _STRIPE_LEN, secret, _I(SECRET_SIZE - _STRIPE_LEN - 7))
    # merge the 8 lanes
    result = _U64(n) * _PRIME64_1
    for k in range(4):
        result += _mul128_fold64(acc[2 * k] ^ _r64(secret, 11 + 16 * k), acc[2 * k + 1] ^ _r64(secret, 11 + 16 * k + 8))
    return _xxh3_avalanche(result)


@njit(cache=True)
def xxh3_64_secret(data, start, end, secret):
    """XXH3-64 (seed 0) of data[start:end] with ``secret`` (pass ``XXH3_SECRET``: 192 bytes)."""
    n = end - start
    if n <= 16:
        return _len_0to16(data, start, n, secret)
    if n <= 128:
        return _len_17to128(data, start, n, secret)
    if n <= 240:
        return _len_129to240(data, start, n, secret)
    return _hash_long(data, start, n, secret)


@njit(cache=True)
def _default_secret():
    """A fresh copy of the default secret, built inside the kernel from its 24 little-endian
    words (no cached kernel captures a global array; a 192-entry tuple indexed in a loop
    compiled ~10x slower). tests/test_xxh3.py checks it byte for byte against XXH3_SECRET."""
    w = np.empty(24, dtype=np.uint64)
    w[0] = _U64(0xBE4BA423396CFEB8)
    w[1] = _U64(0x1CAD21F72C81017C)
    w[2] = _U64(0xDB979083E96DD4DE)
    w[3] = _U64(0x1F67B3B7A4A44072)
    w[4] = _U64(0x78E5C0CC4EE679CB)
    w[5] = _U64(0x2172FFCC7DD05A82)
    w[6] = _U64(0x8E2443F7744608B8)
    w[7] = _U64(0x4C263A81E69035E0)
    w[8] = _U64(0xCB00C391BB52283C)
    w[9] = _U64(0xA32E531B8B65D088)
    w[10] = _U64(0x4EF90DA297486471)
    w[11] = _U64(0xD8ACDEA946EF1938)
    w[12] = _U64(0x3F349CE33F76FAA8)
    w[13] = _U64(0x1D4F0BC7C7BBDCF9)
    w[14] = _U64(0x3159B4CD4BE0518A)
    w[15] = _U64(0x647378D9C97E9FC8)
    w[16] = _U64(0xC3EBD33483ACC5EA)
    w[17] = _U64(0xEB6313FAFFA081C5)
    w[18] = _U64(0x49DAF0B751DD0D17)
    w[19] = _U64(0x9E68D429265516D3)
    w[20] = _U64(0xFCA1477D58BE162B)
    w[21] = _U64(0xCE31D07AD1B8F88F)
    w[22] = _U64(0x280416958F3ACB45)
    w[23] = _U64(0x7E404BBBCAFBD7AF)
    return w.view(np.uint8)  # little-endian host assumed (x86-64, aarch64), as for _r64


# XXH3_kSecret as bytes, as the xxHash reference spells it: the Python-level constant to pass
# as `secret` to xxh3_64_secret (read-only; kernels never capture it).
XXH3_SECRET = np.array(
    [
        0xB8, 0xFE, 0x6C, 0x39, 0x23, 0xA4, 0x4B, 0xBE, 0x7C, 0x01, 0x81, 0x2C, 0xF7, 0x21, 0xAD, 0x1C,
        0xDE, 0xD4, 0x6D, 0xE9, 0x83, 0x90, 0x97, 0xDB, 0x72, 0x40, 0xA4, 0xA4, 0xB7, 0xB3, 0x67, 0x1F,
        0xCB, 0x79, 0xE6, 0x4E, 0xCC, 0xC0, 0xE5, 0x78, 0x82, 0x5A, 0xD0, 0x7D, 0xCC, 0xFF, 0x72, 0x21,
        0xB8, 0x08, 0x46, 0x74, 0xF7, 0x43, 0x24, 0x8E, 0xE0, 0x35, 0x90, 0xE6, 0x81, 0x3A, 0x26, 0x4C,
        0x3C, 0x28, 0x52, 0xBB, 0x91, 0xC3, 0x00, 0xCB, 0x88, 0xD0, 0x65, 0x8B, 0x1B, 0x53, 0x2E, 0xA3,
        0x71, 0x64, 0x48, 0x97, 0xA2, 0x0D, 0xF9, 0x4E, 0x38, 0x19, 0xEF, 0x46, 0xA9, 0xDE, 0xAC, 0xD8,
        0xA8, 0xFA, 0x76, 0x3F, 0xE3, 0x9C, 0x34, 0x3F, 0xF9, 0xDC, 0xBB, 0xC7, 0xC7, 0x0B, 0x4F, 0x1D,
        0x8A, 0x51, 0xE0, 0x4B, 0xCD, 0xB4, 0x59, 0x31, 0xC8, 0x9F, 0x7E, 0xC9, 0xD9, 0x78, 0x73, 0x64,
        0xEA, 0xC5, 0xAC, 0x83, 0x34, 0xD3, 0xEB, 0xC3, 0xC5, 0x81, 0xA0, 0xFF, 0xFA, 0x13, 0x63, 0xEB,
        0x17, 0x0D, 0xDD, 0x51, 0xB7, 0xF0, 0xDA, 0x49, 0xD3, 0x16, 0x55, 0x26, 0x29, 0xD4, 0x68, 0x9E,
        0x2B, 0x16, 0xBE, 0x58, 0x7D, 0x47, 0xA1, 0xFC, 0x8F, 0xF8, 0xB8, 0xD1, 0x7A, 0xD0, 0x31, 0xCE,
        0x45, 0xCB, 0x3A, 0x8F, 0x95, 0x16, 0x04, 0x28, 0xAF, 0xD7, 0xFB, 0xCA, 0xBB, 0x4B, 0x40, 0x7E,
    ],
    dtype=np.uint8,
)
XXH3_SECRET.setflags(write=False)


@njit(cache=True)
def xxh3_64(data, start, end):
    """XXH3-64 (seed 0, default secret) of data[start:end]; equals xxhash.xxh3_64_intdigest."""
    return xxh3_64_secret(data, start, end, _default_secret())


@njit(cache=True, parallel=True)
def xxh3_64_batch(data, offsets):
    """XXH3-64 of every item data[offsets[i]:offsets[i+1]] (Arrow layout) -> uint64[n]."""
    n = offsets.shape[0] - 1
    out = np.empty(max(n, 0), dtype=np.uint64)
    secret = _default_secret()
    for i in prange(n):
        out[i] = xxh3_64_secret(data, offsets[i], offsets[i + 1], secret)
    return out


@njit(cache=True, nogil=True)
def xxh3_64_run(data, offsets, out, i0, i1):
    """``out[i] = `` XXH3-64 of item i, ``i0 <= i < i1``: one task's share of ``xxh3_64_batch``
    (``fastenc.recipes.urls.threads.hash_batch`` runs the tasks on threads)."""
    secret = _default_secret()
    for i in range(i0, i1):
        out[i] = xxh3_64_secret(data, offsets[i], offsets[i + 1], secret)
