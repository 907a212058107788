"""Memos of piece bytes -> ids (one set for all the threads of a batch), one slot (one or two cache lines) per entry.

Most pre-token pieces are short and repeat endlessly (" the", ",", "\\n    "), so remembering
their ids skips the merge loop almost always. A cache is ``uint64[slots, W]``:

    words 0 .. W/2-1    the key: piece bytes, little-endian, zero padded; the top byte of
                        the last key word holds the piece's length
    words W/2 .. W-1    the ids, four uint16 per word; the top uint16 of the last word holds
                        the id count

so a ``W = 4`` cache (32-byte slots) holds pieces of 2..15 bytes with up to 7 ids, and a
``W = 8`` cache (64-byte slots) pieces of up to 31 bytes with up to 15 ids (a short piece with
more than 7 ids, such as a run of CJK characters, is kept in the long cache). In front of them
a *tiny* cache (``uint64[slots, 2]``, its own layout, see ``tiny_cache_lookup``) holds the
pieces of 1..8 bytes with up to 3 ids (single bytes too: then the encode loop's hot path, which
finds a piece's home slot with ``piece_slot``, need not branch on the length): most lookups in most text, in a quarter of the memory
per entry, so that the table they hit stays small enough for the CPU caches. Ids must be below
65,536 (the caller checks the vocabulary size). A slot whose last key word is 0 is empty (a
stored piece has a non-zero length). On a collision after a short probe the home slot is
overwritten: a cache only memoizes a pure function, so eviction never changes an output.

An entry with an id count of 0 is a *marker*: the piece is known, but it has too many ids for
this cache, so they are in a later one (tiny, then short, then long). A lookup that finds one
returns ``ELSEWHERE`` (-2); one that finds nothing returns -1, and then the piece has never been
seen (or was evicted), so ``encode_text`` merges it at once instead of probing the later caches
too: a miss costs one table's probe, not three.

Shared caches. The threads of one batch share one set of caches (``fastenc.encoder``): each
piece is merged once, not once per thread, and its pages are zeroed once. A slot is then
written by one thread while another may read it, so every slot has a *publishing word* (the
last key word: word 1 of a short slot, word 3 of a long one; a tiny slot's ids-and-length word,
word 1): a store claims an empty slot by one compare-and-swap of it (0 ->
``CLAIMED``, a word no key has), writes the other words, and stores it last, with release; a
lookup loads it first, with acquire, so a match means the words after it are its writer's
(``loads.claim_at``). And while shared (``piece_memo.caches_shared``) no filled slot is ever
rewritten (no eviction: a full probe run keeps what it has). One thread's own caches evict as
before.

The lookup is the hottest code in fastenc (one call per piece that is not a single byte), so it
is written for Numba's code generator: no calls, a single return, every array used in the exit
block (then Numba's pruner removes all reference counting of the array arguments: 60 -> ~10 ns
per lookup), keys read 8 bytes at a time (``loads.load_word``: one unaligned load), and ids
copied out without a data-dependent loop. The tiny and short caches have lookups specialised
to their layouts; ``cache_lookup`` serves any ``W``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from fastenc.kernels.jit import NO_REFCOUNTING
from fastenc.kernels.loads import claim_at, element_address, hash_words, load_acquire_at, load_flat, load_word, store_release_at
from fastenc.kernels.piece_memo import DEFAULT_MEMO_IDS, DEFAULT_MEMO_SLOTS, new_piece_memo

TINY_WORDS = 2  # 16-byte slots: pieces up to 8 bytes with up to 3 ids (a layout of their own)
TINY_MAX_BYTES = 8
TINY_MAX_IDS = 3
SHORT_WORDS = 4  # 32-byte slots: pieces up to 15 bytes
LONG_WORDS = 8  # 64-byte slots: pieces up to 31 bytes
MAX_CACHED_PIECE_BYTES = 8 * (LONG_WORDS // 2) - 1  # longer pieces are merged every time
DEFAULT_SHORT_SLOTS = 1 << 20  # 32 MB: the ~650k distinct short pieces of 97 MB of multilingual text
DEFAULT_LONG_SLOTS = 1 << 17  # 8 MB
DEFAULT_TINY_SLOTS = 1 << 20  # 16 MB: ~323k distinct pieces of 2..8 bytes in the same text, at a
# load of 31%: at 1 << 19 (62%) the probes ran longer and a warm pass took more time
_PROBES = 8
ELSEWHERE = -2  # a lookup's answer for a marker: the piece is known, its ids are in a later cache
_MUL = np.uint64(0x9E3779B97F4A7C15)
_MUL2 = np.uint64(0xC2B2AE3D27D4EB4F)
_U16 = np.uint64(0xFFFF)
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_COUNT_SHIFT = np.uint64(48)  # the id count's place in the last id word
_LEN_SHIFT = np.uint64(56)  # the piece length's place in the last key word
# A slot being filled (shared caches, above): its publishing word while a writer holds it. A real
# one has the piece's length (>= 1) at _LEN_SHIFT; this one has 0 there, so no lookup matches it,
# and it is not 0 (empty), so a probe goes on past it.
CLAIMED = np.uint64(1)


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _home(h, mask):
    return np.int64((h ^ (h >> np.uint64(31))) & np.uint64(mask))


@njit(cache=True, forceinline=True)
def short_home(k0, k1, mask):
    """Home slot of a two-word key (a short-cache key: ``k1`` holds the length in its top byte):
    ``loads.hash_words`` (CRC32C where the CPU has it), masked. ``tiny_home`` and
    ``key_home`` (any cache with two key words) are this too, so ``piece_slot`` finds all of them."""
    return np.int64(hash_words(k0, k1) & np.uint64(mask))


@njit(cache=True, forceinline=True)
def tiny_home(k0, n, mask):
    """Home slot of a tiny-cache key: the piece's bytes ``k0`` (zero padded) and its length ``n``;
    ``short_home`` of the key a short cache would give the piece (``k1`` = 0 with the length in its top byte)."""
    return short_home(k0, np.uint64(n) << _LEN_SHIFT, mask)


@njit(cache=True, forceinline=True)
def key_home(k0, k1, k2, k3, key_words, mask):
    """Home slot of a ``cache_lookup`` key of ``key_words`` words (2: ``short_home``; 4: the long
    cache's: ``short_home`` of the short key for a piece of up to 15 bytes, else a multiply hash of
    all four words)."""
    if key_words == 2:
        return short_home(k0, k1, mask)
    if (k3 >> _LEN_SHIFT) <= np.uint64(15):
        # A piece of up to 15 bytes (k2 is 0, k3 only its length byte) gets the hash of its short key:
        # its long slot has the index of its tiny or short home slot, masked, where encode_block
        # follows a marker without hashing again.
        return short_home(k0, k1 | k3, mask)
    return _home((((k0 * _MUL) ^ k1) * _MUL ^ k2 ^ (k3 * _MUL2)) * _MUL, mask)


_U8 = np.uint64(8)
_U64 = np.uint64(64)
_U128 = np.uint64(128)
_SHIFT_BITS = np.uint64(63)


@njit(cache=True, forceinline=True)
def piece_key(data, start, n):
    """``(k0, second, is_short)`` of a piece of 1..15 bytes ``data[start:start + n]``: ``k0`` the
    key's first word (its first bytes, zero padded), ``second`` what its home slot's second word
    holds in the bits of ``second_mask(is_short)`` (the key's second word with the length in its
    top byte for a short-cache piece, 9..15 bytes; only the length byte for a tiny one, 1..8).
    Masks from the length, no branch on it. Needs ``start + 16 <= len(data)``."""
    nn = np.uint64(n)
    head = nn if nn < _U8 else _U8
    k0 = load_word(data, start) & (_ONES >> (_U64 - _U8 * head))  # head 1..8: a shift of 0..56
    k1 = load_word(data, start + 8) & (_ONES >> ((_U128 - _U8 * nn) & _SHIFT_BITS))
    is_short = nn > _U8
    k1 = k1 if is_short else np.uint64(0)
    return k0, k1 | (nn << _LEN_SHIFT), is_short


@njit(cache=True, forceinline=True)
def piece_slot(tiny, short, data, start, n):
    """The address of the home slot of a piece of 1..15 bytes ``data[start:start + n]``: the tiny
    cache's for 1..8 bytes, else the short cache's (a ``SHORT_WORDS`` one), picked by a register
    select, not a branch: piece lengths follow no pattern a branch predictor can learn, and the
    encode loop's per-piece length branches were its costliest mispredictions. The keys are those
    of ``tiny_cache_lookup`` / ``short_cache_lookup`` (``piece_key``; equal hashes), so every store
    and lookup agrees with it. Needs ``start + 16 <= len(data)``."""
    k0, second, is_short = piece_key(data, start, n)
    return key_slot(tiny, short, k0, second, is_short)


@njit(cache=True, forceinline=True)
def key_slot(tiny, short, k0, second, is_short):
    """``piece_slot`` from the piece's key (``piece_key``), for a caller that keeps the key."""
    # One hash for both: a tiny piece's ``second`` is its length byte alone, its tiny_home key.
    h = hash_words(k0, second)
    tiny_at = element_address(tiny, TINY_WORDS * np.int64(h & np.uint64(tiny.shape[0] - 1)))
    short_at = element_address(short, SHORT_WORDS * np.int64(h & np.uint64(short.shape[0] - 1)))
    return short_at if is_short else tiny_at


@njit(cache=True, forceinline=True)
def second_mask(is_short):
    """The bits of a slot's second word that ``piece_slot``'s ``second`` must match: all of them in a
    short slot (key word and length), the length byte in a tiny one (the rest are its ids)."""
    return _ONES if is_short else np.uint64(0xFF) << _LEN_SHIFT


def new_piece_cache(slots: int = DEFAULT_SHORT_SLOTS, words: int = SHORT_WORDS) -> np.ndarray:
    """An empty cache: ``uint64[slots, words]``; ``slots`` a power of two, ``words`` 4 or 8."""
    if slots < 1 or slots & (slots - 1):
        raise ValueError(f"piece cache slots must be a power of two, got {slots}")
    if words not in (SHORT_WORDS, LONG_WORDS):
        raise ValueError(f"piece cache words must be {SHORT_WORDS} or {LONG_WORDS}, got {words}")
    return np.zeros((slots, words), dtype=np.uint64)


@njit(cache=True)
def max_piece_bytes(cache):
    return 8 * (cache.shape[1] // 2) - 1


@njit(cache=True)
def max_piece_ids(cache):
    return 4 * (cache.shape[1] // 2) - 1


@njit(cache=True)
def cache_lookup(cache, data, start, end, out, out_pos, out_limit):
    """Write the cached ids of ``data[start:end]`` to ``out[out_pos:]``; return the new
    position, or -1 if the piece is not cached. Needs ``2 <= end - start <= max_piece_bytes``.
    ``out[out_pos:out_limit]`` may be overwritten beyond the ids written (up to 4 * W/2 slots,
    never past ``out_limit``); everything past the returned position is scratch anyway.
    """
    key_words = cache.shape[1] >> 1
    mask = cache.shape[0] - 1
    n = end - start
    size = data.shape[0]
    # --- the key: bytes as little-endian words, the length in the last word's top byte ---
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    k3 = np.uint64(0)
    if start + 8 * key_words <= size:
        k0 = load_word(data, start)
        k1 = load_word(data, start + 8)
        if key_words == 4:
            k2 = load_word(data, start + 16)
            k3 = load_word(data, start + 24)
        # Keep only the piece's n bytes (shifts of 64 or more are avoided explicitly).
        m = np.int64(n)
        k0 = k0 if m >= 8 else k0 & ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1))
        m -= 8
        k1 = k1 & (_ONES if m >= 8 else ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
        m -= 8
        k2 = k2 & (_ONES if m >= 8 else ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
        m -= 8
        k3 = k3 & (((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
    else:  # near the end of the buffer: byte by byte, never reading past it
        for i in range(start, end):
            j = i - start
            byte = np.uint64(data[i]) << np.uint64(8 * (j & 7))
            if j < 8:
                k0 |= byte
            elif j < 16:
                k1 |= byte
            elif j < 24:
                k2 |= byte
            else:
                k3 |= byte
    length = np.uint64(n) << _LEN_SHIFT
    if key_words == 2:
        k1 |= length
        last = k1
    else:
        k3 |= length
        last = k3
    slot = key_home(k0, k1, k2, k3, key_words, mask)
    # --- probe ---
    result = -1
    for _ in range(_PROBES):
        stored_last = load_acquire_at(element_address(cache, 2 * key_words * slot + key_words - 1))  # (first)
        if stored_last == 0:
            break
        if (
            stored_last == last
            and cache[slot, 0] == k0
            and (key_words == 2 or (cache[slot, 1] == k1 and cache[slot, 2] == k2))
        ):
            count = np.int64(cache[slot, 2 * key_words - 1] >> _COUNT_SHIFT)
            if out_pos + 4 * key_words <= out_limit:
                # Copy every id slot: no branch on the count.
                for w in range(key_words):
                    word = cache[slot, key_words + w]
                    o = out_pos + 4 * w
                    out[o] = word & _U16
                    out[o + 1] = (word >> np.uint64(16)) & _U16
                    out[o + 2] = (word >> np.uint64(32)) & _U16
                    out[o + 3] = word >> np.uint64(48)
            else:
                for j in range(count):
                    out[out_pos + j] = (cache[slot, key_words + (j >> 2)] >> np.uint64(16 * (j & 3))) & _U16
            result = out_pos + count if count > 0 else ELSEWHERE
            break
        slot = (slot + 1) & mask
    # Touch every array in the single exit block, so each one's last use (where Numba puts its
    # decref) post-dominates the entry and Numba's pruner removes the refcounting entirely.
    if (cache.shape[0] | data.shape[0] | out.shape[0]) < 0:
        result = -1
    return result


@njit(cache=True, forceinline=True)
def short_cache_lookup(cache, data, start, end, out, out_pos, out_limit):
    """``cache_lookup`` for a ``SHORT_WORDS`` cache (2 key words, 2 id words), specialised:
    the layout is fixed at compile time, so the key is two masked 8-byte loads, the hit on the
    home slot (the common case) is tested first, and the ids are copied without a loop. This
    is fastenc's hottest code: one call per piece of 2..15 bytes. Same contract as
    ``cache_lookup``; ``cache.shape[1]`` must be ``SHORT_WORDS``."""
    mask = cache.shape[0] - 1
    n = end - start
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    if start + 16 <= data.shape[0]:
        k0 = load_word(data, start)
        k1 = load_word(data, start + 8)
        # Keep the piece's n bytes: n is 2..15, so every shift below is in 8..56.
        k0 = k0 if n >= 8 else k0 & (_ONES >> np.uint64(64 - 8 * n))
        k1 = k1 & (_ONES >> np.uint64(128 - 8 * n)) if n > 8 else np.uint64(0)
    else:  # near the end of the buffer: byte by byte, never reading past it
        for i in range(start, end):
            j = i - start
            byte = np.uint64(data[i]) << np.uint64(8 * (j & 7))
            if j < 8:
                k0 |= byte
            else:
                k1 |= byte
    k1 |= np.uint64(n) << _LEN_SHIFT
    slot = short_home(k0, k1, mask)
    result = -1
    for _ in range(_PROBES):
        row = SHORT_WORDS * slot  # cache[slot, j] is load_flat(cache, row + j): no multiply by the row width
        stored_last = load_acquire_at(element_address(cache, row + 1))  # (first: the publishing word)
        if stored_last == k1 and load_flat(cache, row) == k0:
            w0 = load_flat(cache, row + 2)
            w1 = load_flat(cache, row + 3)
            count = np.int64(w1 >> _COUNT_SHIFT)
            if out_pos + 8 <= out_limit:  # copy all eight id places: no branch on the count
                o = np.uint64(out_pos)
                out[o] = w0 & _U16
                out[o + np.uint64(1)] = (w0 >> np.uint64(16)) & _U16
                out[o + np.uint64(2)] = (w0 >> np.uint64(32)) & _U16
                out[o + np.uint64(3)] = w0 >> np.uint64(48)
                out[o + np.uint64(4)] = w1 & _U16
                out[o + np.uint64(5)] = (w1 >> np.uint64(16)) & _U16
                out[o + np.uint64(6)] = (w1 >> np.uint64(32)) & _U16
                out[o + np.uint64(7)] = w1 >> np.uint64(48)
            else:
                for j in range(count):
                    out[out_pos + j] = (cache[slot, 2 + (j >> 2)] >> np.uint64(16 * (j & 3))) & _U16
            result = out_pos + count if count > 0 else ELSEWHERE
            break
        if stored_last == 0:
            break
        slot = (slot + 1) & mask
    # Every array used in the single exit block: no reference counting (module docstring).
    if (cache.shape[0] | data.shape[0] | out.shape[0]) < 0:
        result = -1
    return result


def new_tiny_cache(slots: int = DEFAULT_TINY_SLOTS) -> np.ndarray:
    """An empty tiny cache: ``uint64[slots, 2]``; ``slots`` a power of two."""
    if slots < 1 or slots & (slots - 1):
        raise ValueError(f"piece cache slots must be a power of two, got {slots}")
    return np.zeros((slots, TINY_WORDS), dtype=np.uint64)


@njit(cache=True, forceinline=True)
def tiny_cache_lookup(cache, data, start, end, out, out_pos, out_limit):
    """The ids of a piece of 2..8 bytes from a tiny cache, as ``cache_lookup`` (same contract;
    up to 3 places past ``out_pos`` may be written, never past ``out_limit``).

    A tiny slot is two words: the piece's bytes (little-endian, zero padded), then
    ``id0 | id1 << 16 | id2 << 32 | count << 48 | length << 56`` (0 = empty slot). Most pieces
    in most text are this short, so half-size slots keep the table that answers most lookups
    at half the size of a short cache of as many slots: fewer of its lines miss the CPU's caches.
    Its layout is fixed: ``cache.shape[1]`` must be ``TINY_WORDS``.
    """
    mask = cache.shape[0] - 1
    n = end - start
    k0 = np.uint64(0)
    if start + 8 <= data.shape[0]:
        k0 = load_word(data, start)
        k0 = k0 & (_ONES >> np.uint64(64 - 8 * n))  # n is 2..8: a shift of 0..48
    else:  # near the end of the buffer: byte by byte, never reading past it
        for i in range(start, end):
            k0 |= np.uint64(data[i]) << np.uint64(8 * (i - start))
    length = np.uint64(n)
    slot = tiny_home(k0, n, mask)
    result = -1
    for _ in range(_PROBES):
        w1 = load_acquire_at(element_address(cache, TINY_WORDS * slot + 1))  # cache[slot, 1], the publishing word, first
        if load_flat(cache, TINY_WORDS * slot) == k0 and (w1 >> _LEN_SHIFT) == length:
            count = np.int64((w1 >> _COUNT_SHIFT) & np.uint64(0xFF))
            if out_pos + TINY_MAX_IDS <= out_limit:  # copy all three id places: no branch on the count
                o = np.uint64(out_pos)  # unsigned indices: no wraparound code
                out[o] = w1 & _U16
                out[o + np.uint64(1)] = (w1 >> np.uint64(16)) & _U16
                out[o + np.uint64(2)] = (w1 >> np.uint64(32)) & _U16
            else:
                for j in range(count):
                    out[out_pos + j] = (w1 >> np.uint64(16 * j)) & _U16
            result = out_pos + count if count > 0 else ELSEWHERE
            break
        if w1 == 0:
            break
        slot = (slot + 1) & mask
    if (cache.shape[0] | data.shape[0] | out.shape[0]) < 0:
        result = -1
    return result


@njit(cache=True, forceinline=True)
def claim_slot(cache, home, words, publish, shared):
    """The slot a store fills: the first empty one of the probe run from ``home`` (claimed with one
    compare-and-swap of its publishing word, word ``publish``, where ``shared``), else ``home``
    (its entry evicted) for one thread's own cache, else -1 (a shared cache keeps what it has)."""
    mask = cache.shape[0] - 1
    slot = -1
    for probe in range(_PROBES):
        candidate = (home + probe) & mask
        at = element_address(cache, words * candidate + publish)
        if load_acquire_at(at) == 0 and (not shared or claim_at(at, np.uint64(0), CLAIMED)):
            slot = candidate
            break
    return home if slot < 0 and not shared else slot


@njit(cache=True, **NO_REFCOUNTING)
def tiny_cache_store(cache, data, start, end, ids, ids_start, count, shared):
    """Remember a piece of 2..8 bytes with 1..3 ids (each < 65,536) in a tiny cache; like
    ``cache_store``, the home slot is overwritten when the probed slots are all taken (unless
    ``shared``), and without reference counting."""
    mask = cache.shape[0] - 1
    n = end - start
    k0 = np.uint64(0)
    for i in range(start, end):
        k0 |= np.uint64(data[i]) << np.uint64(8 * (i - start))
    length = np.uint64(n)
    slot = claim_slot(cache, tiny_home(k0, n, mask), TINY_WORDS, 1, shared)
    w1 = (length << _LEN_SHIFT) | (np.uint64(count) << _COUNT_SHIFT)
    for j in range(count):
        w1 |= np.uint64(ids[ids_start + j]) << np.uint64(16 * j)
    if slot >= 0:
        cache[slot, 0] = k0
        store_release_at(element_address(cache, TINY_WORDS * slot + 1), w1)  # published last
    if (cache.shape[0] | data.shape[0] | ids.shape[0]) < 0:
        count = 0
    return count


@njit(cache=True, forceinline=True)
def _stored_key(data, start, end, key_words):
    """The key words of ``data[start:end]`` as a short or long slot holds them (bytes little-endian,
    zero padded, the length in the last word's top byte): ``(k0, k1, k2, k3, last)``."""
    k0 = np.uint64(0)
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    k3 = np.uint64(0)
    for i in range(start, end):
        j = i - start
        byte = np.uint64(data[i]) << np.uint64(8 * (j & 7))
        if j < 8:
            k0 |= byte
        elif j < 16:
            k1 |= byte
        elif j < 24:
            k2 |= byte
        else:
            k3 |= byte
    length = np.uint64(end - start) << _LEN_SHIFT
    if key_words == 2:
        k1 |= length
        last = k1
    else:
        k3 |= length
        last = k3
    return k0, k1, k2, k3, last


@njit(cache=True, forceinline=True)
def claim_key_slot(cache, data, start, end, shared):
    """For a store of ``data[start:end]`` into a short or long cache (narrow or wide ids): ``(slot,
    last)``, the slot (``claim_slot``; -1: not kept) with every key word written but the last, the
    publishing word, which ``publish_key`` stores once the ids are in."""
    key_words = cache.shape[1] >> 1
    k0, k1, k2, k3, last = _stored_key(data, start, end, key_words)
    slot = claim_slot(cache, key_home(k0, k1, k2, k3, key_words, cache.shape[0] - 1), 2 * key_words, key_words - 1, shared)
    if slot >= 0:
        cache[slot, 0] = k0
        if key_words == 4:
            cache[slot, 1] = k1
            cache[slot, 2] = k2
    return slot, last


@njit(cache=True, forceinline=True)
def publish_key(cache, slot, last):
    """The last step of a store: the slot's last key word, with release (module docstring), once
    every other word is written."""
    key_words = cache.shape[1] >> 1
    store_release_at(element_address(cache, 2 * key_words * slot + key_words - 1), last)


@njit(cache=True, **NO_REFCOUNTING)
def cache_store(cache, data, start, end, ids, ids_start, count, shared):
    """Remember that ``data[start:end]`` encodes to ``ids[ids_start:ids_start+count]``
    (2 <= end - start <= max_piece_bytes, count <= max_piece_ids, each id < 65,536), in the first
    empty slot of its probe run, else in its home slot (evicting), unless ``shared`` (then not at
    all: module docstring).
    Like the lookup: no calls, one return, every array used in the exit block. Compiled without
    reference counting (``jit.NO_REFCOUNTING``; it allocates nothing): the atomic increments and
    decrements it still paid per store were 1.3% of a GPT-2 first pass (perf; none since)."""
    key_words = cache.shape[1] >> 1
    slot, last = claim_key_slot(cache, data, start, end, shared)
    if slot >= 0:
        for w in range(key_words):
            word = np.uint64(0)
            for k in range(4):
                i = 4 * w + k
                if i < count:
                    word |= np.uint64(ids[ids_start + i]) << np.uint64(16 * k)
            if w == key_words - 1:
                word |= np.uint64(count) << _COUNT_SHIFT
            cache[slot, key_words + w] = word
        publish_key(cache, slot, last)
    if (cache.shape[0] | data.shape[0] | ids.shape[0]) < 0:
        count = 0
    return count


class PieceCaches(NamedTuple):
    """The memos one task uses: pieces of 2..8 bytes with up to 3 ids (``tiny``; the cl100k/o200k
    loop reads none), of up to 15 bytes with up to 7 ids (``short``), of up to 31 bytes with up to
    15 ids (``long``), and whole pieces of 16..4,096 bytes (``memo``, piece_memo.py, always the
    task's own; its header says whether the other three are shared with other threads, module
    docstring). Stacked (one more leading axis, one entry per parallel task) for the batch kernels:
    ``one_task`` takes a task's; ``Encoder`` gives its threads task 0's tiny, short and long."""

    tiny: np.ndarray
    short: np.ndarray
    long: np.ndarray
    memo: np.ndarray


def one_task(stacked: PieceCaches, task: int) -> PieceCaches:
    """Task ``task``'s caches out of stacked ones."""
    return PieceCaches(*(tables[task] for tables in stacked))


def new_piece_caches(short_slots: int = DEFAULT_SHORT_SLOTS, long_slots: int = DEFAULT_LONG_SLOTS,
                     tiny_slots: int = DEFAULT_TINY_SLOTS, memo_slots: int = DEFAULT_MEMO_SLOTS,
                     memo_ids: int = DEFAULT_MEMO_IDS) -> PieceCaches:
    """Fresh caches for one thread (64 MB by default). Keep them between calls: a warm
    cache is what makes encoding fast, and it never changes the ids."""
    return PieceCaches(new_tiny_cache(tiny_slots), new_piece_cache(short_slots, SHORT_WORDS),
                       new_piece_cache(long_slots, LONG_WORDS), new_piece_memo(memo_slots, memo_ids))
