"""Piece caches for vocabularies with ids above 65,535 (cl100k_base, o200k_base): 18-bit ids.

Same tables, keys, hashing, probing, markers and refcount-free style as ``piece_cache`` (read
its docstring first); only the id words differ, and there is no tiny cache. An id word holds
three 18-bit ids (id k of the word in bits ``18k .. 18k + 17``), so ids up to 262,143 fit: a
short or long slot (``W`` words, ``W/2`` id words) has ids ``3j .. 3j + 2`` in id word ``j`` and
``count << 54`` in the last one. A short slot holds up to 6 ids (the narrow one 7) and a long one
up to 12 (15); a piece with more ids is merged every time.

Why no tiny cache (the narrow loop keeps one, for pieces of 1..8 bytes): a tiny slot's one id
word holds 3 wide ids, not 4, so in docs.parquet's languages other than English, code, Chinese,
Japanese and five Latin-script ones, 5% of cl100k's pieces were markers there, and each went on to
an unprefetched short slot.
Every piece of 1..15 bytes now has its home in the short cache (``wide_slot``), twice as many
slots (``WIDE_SHORT_SLOTS``), and a piece found away from its home is moved there
(``wide_cache_lookup``'s ``promote``): warm passes gain, first passes stay level (bench/RESULTS.md,
"one short cache for the wide loop, promotion, long-slot prefetch").

The caller checks that every id is below ``WIDE_MAX_ID + 1`` before storing.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels.jit import NO_REFCOUNTING
from fastenc.kernels.loads import element_address, hash_words, load_acquire_at, load_word
from fastenc.kernels.piece_cache import (
    _LEN_SHIFT,
    _ONES,
    _PROBES,
    ELSEWHERE,
    SHORT_WORDS,
    claim_key_slot,
    key_home,
    max_piece_bytes,
    piece_key,
    publish_key,
)
from fastenc.kernels.piece_memo import _AT_MASK as _MEMO_AT_MASK
from fastenc.kernels.piece_memo import _AT_SHIFT as _MEMO_AT_SHIFT
from fastenc.kernels.piece_memo import _COUNT_MASK as _MEMO_COUNT_MASK
from fastenc.kernels.piece_memo import _ENTRIES as _MEMO_ENTRIES
from fastenc.kernels.piece_memo import _FILL as _MEMO_FILL
from fastenc.kernels.piece_memo import _PROBES as _MEMO_PROBES
from fastenc.kernels.piece_memo import _SLOTS as _MEMO_SLOTS
from fastenc.kernels.piece_memo import _TAG_SHIFT as _MEMO_TAG_SHIFT
from fastenc.kernels.piece_memo import _filter_bit as _memo_filter_bit
from fastenc.kernels.piece_memo import _table as _memo_table

WIDE_ID_BITS = 18
WIDE_MAX_ID = (1 << WIDE_ID_BITS) - 1
WIDE_COUNT_SHIFT = 54  # the id count's place in a slot's last id word
# The wide loop's long cache: 32 MB a thread, not piece_cache's 8 MB. o200k_base leaves many pieces and
# parts of 16..31 bytes (158k distinct in docs.parquet); 131k slots kept evicting them, and a warm
# 1-thread pass merged 14.7k of them again every time (5.7% of it). Four times the slots made o200k
# faster, cl100k and GPT-2 no faster, so the narrow loop keeps 8 MB (bench/RESULTS.md, "rank is the id,
# a denser pair table, a bigger wide long cache").
WIDE_LONG_SLOTS = 1 << 19
# The wide loop's short cache: every piece of 1..15 bytes, 64 MB a thread. docs.parquet leaves ~836k
# distinct ones (cl100k): a load of 40% here; at 1 << 20 slots (80%) more pieces sat away from their
# home slot, past the hot path, and a warm pass (before ``promote``) ran 12% slower than with a tiny cache.
WIDE_SHORT_SLOTS = 1 << 21
_ID_MASK = np.uint64(WIDE_MAX_ID)
_COUNT_SHIFT = np.uint64(WIDE_COUNT_SHIFT)
_COUNT = np.uint64(0xF)  # a short or long count: up to 12, the word's top bits are free
_S1 = np.uint64(WIDE_ID_BITS)
_S2 = np.uint64(2 * WIDE_ID_BITS)


@njit(cache=True)
def wide_max_piece_ids(cache):
    """Ids per entry of a short (4 words: 6 ids) or long (8 words: 12 ids) wide cache."""
    return 3 * (cache.shape[1] // 2)


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _pack3(ids, at, count):
    """Ids ``at .. at + 2`` of ``ids`` as an id word; places at or past ``count`` are 0."""
    word = np.uint64(0)
    for k in range(3):
        if at + k < count:
            word |= np.uint64(ids[at + k]) << np.uint64(WIDE_ID_BITS * k)
    return word


@njit(cache=True, forceinline=True)
def wide_slot(short, data, start, n):
    """The address of the home slot of the piece ``data[start:start + n]`` (1..15 bytes) in a
    wide short cache: where ``wide_cache_store`` puts it first and ``wide_cache_lookup`` looks
    first (same key, ``piece_key``; same hash, ``short_home``). Needs ``start + 16 <= len(data)``."""
    k0, second, _ = piece_key(data, start, n)
    h = hash_words(k0, second)
    return element_address(short, SHORT_WORDS * np.int64(h & np.uint64(short.shape[0] - 1)))


@njit(cache=True, forceinline=True)
def long_home(data, start, n, mask):
    """The home slot of the piece ``data[start:start + n]`` (16..31 bytes) in a long cache of
    ``mask + 1`` slots (``key_home`` of ``wide_cache_lookup``'s key). Scalars and ``data`` only,
    so that the encode loop can prefetch the slot without touching the cache array in its loop
    (an array used there cost reference counting). Needs ``start + 32 <= len(data)``."""
    nn = np.uint64(n)
    k0 = load_word(data, start)
    k1 = load_word(data, start + 8)
    k2 = load_word(data, start + 16)
    k3 = load_word(data, start + 24)
    # Bytes 16..n-1 are in k2 and k3: keep them (a shift of 0..56 each), the length on top.
    k2 = k2 if nn >= np.uint64(24) else k2 & ((np.uint64(1) << ((np.uint64(8) * nn - np.uint64(128)) & np.uint64(63))) - np.uint64(1))
    k3 = (k3 & ((np.uint64(1) << ((np.uint64(8) * nn - np.uint64(192)) & np.uint64(63))) - np.uint64(1)) if nn > np.uint64(24)
          else np.uint64(0)) | (nn << _LEN_SHIFT)
    return key_home(k0, k1, k2, k3, 4, mask)


@njit(cache=True)
def wide_cache_lookup(cache, data, start, end, out, out_pos, out_limit, promote):
    """``cache_lookup`` for the wide layout (any ``W``; same contract: up to ``3 * W/2``
    places past ``out_pos`` may be written, never past ``out_limit``).

    With ``promote``, a piece found past its home slot swaps places with the home slot's entry,
    so that the encode loop's hot path (which reads only the home slot) finds it next time: in
    a warm pass over docs.parquet (cl100k) that halved the pieces sent down the general path
    for it (585k -> 250k of 18.9M). The entry moved out stays on its probe run (every slot
    between its home and the home slot is taken, else it would not have been placed there), or
    is lost past the probe limit: a cache forgets, it never answers wrongly."""
    key_words = cache.shape[1] >> 1
    mask = cache.shape[0] - 1
    n = end - start
    size = data.shape[0]
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
        m = np.int64(n)
        k0 = k0 if m >= 8 else k0 & ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1))
        m -= 8
        k1 = k1 & (_ONES if m >= 8 else ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
        m -= 8
        k2 = k2 & (_ONES if m >= 8 else ((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
        m -= 8
        k3 = k3 & (((np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)) if m > 0 else np.uint64(0))
    else:
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
    home = key_home(k0, k1, k2, k3, key_words, mask)
    slot = home
    result = -1
    for _ in range(_PROBES):
        # The last key word first, with acquire (the publishing word of shared caches, piece_cache.py).
        stored_last = load_acquire_at(element_address(cache, 2 * key_words * slot + key_words - 1))
        if stored_last == 0:
            break
        if (
            stored_last == last
            and cache[slot, 0] == k0
            and (key_words == 2 or (cache[slot, 1] == k1 and cache[slot, 2] == k2))
        ):
            if promote and slot != home:
                for w in range(2 * key_words):
                    x = cache[home, w]
                    cache[home, w] = cache[slot, w]
                    cache[slot, w] = x
                slot = home
            count = np.int64((cache[slot, 2 * key_words - 1] >> _COUNT_SHIFT) & _COUNT)
            if out_pos + 3 * key_words <= out_limit:
                for w in range(key_words):  # every place: no branch on the count
                    word = cache[slot, key_words + w]
                    o = out_pos + 3 * w
                    out[o] = word & _ID_MASK
                    out[o + 1] = (word >> _S1) & _ID_MASK
                    out[o + 2] = (word >> _S2) & _ID_MASK
            else:
                for j in range(count):
                    word = cache[slot, key_words + j // 3]
                    out[out_pos + j] = (word >> np.uint64(WIDE_ID_BITS * (j % 3))) & _ID_MASK
            result = out_pos + count if count > 0 else ELSEWHERE
            break
        slot = (slot + 1) & mask
    if (cache.shape[0] | data.shape[0] | out.shape[0]) < 0:
        result = -1
    return result


@njit(cache=True, **NO_REFCOUNTING)
def wide_cache_store(cache, data, start, end, ids, ids_start, count, shared):
    """``cache_store`` for the wide layout: 0..wide_max_piece_ids(cache) ids, each <= WIDE_MAX_ID;
    the same slots, claims, publication and eviction rule (``shared``: none). Without reference
    counting, as ``cache_store``: its atomic reference-count updates per store, with those the wide
    loop paid per piece off its hot path, were a few percent of a first pass (bench/RESULTS.md,
    "Reference counting on the miss path")."""
    key_words = cache.shape[1] >> 1
    slot, last = claim_key_slot(cache, data, start, end, shared)
    if slot >= 0:
        for w in range(key_words):
            cache[slot, key_words + w] = _pack3(ids, ids_start + 3 * w, ids_start + count)
        cache[slot, 2 * key_words - 1] |= np.uint64(count) << _COUNT_SHIFT
        publish_key(cache, slot, last)
    if (cache.shape[0] | data.shape[0] | ids.shape[0]) < 0:
        count = 0
    return count


@njit(cache=True)
def seed_wide_cache(cache, tids, token_bytes, token_offsets):
    """Store every token of ``tids`` with 1..max_piece_bytes(cache) bytes and an id up to
    ``WIDE_MAX_ID`` as a piece that encodes to that one id, in the order given (ascending ids: in a
    tiktoken vocabulary the commoner tokens, which then take the home slots). Only for a
    vocabulary where a piece that is a token encodes to it (tiktoken's rule, HF's
    ``ignore_merges``: ``Encoder`` decides), with ``tids`` its token table's ids (no special
    tokens: ``encode_ordinary`` reads their text as text). Returns how many were stored.

    Why (the caches are empty otherwise until a piece is merged once): 11.5% of the distinct
    pieces of 2..31 bytes in docs.parquet are whole tokens (o200k_base), and each was looked up,
    found missing, merged and stored on a first pass. Seeded, a first pass finds them on the hot
    path, and warm passes stay level (bench/RESULTS.md, "Kept: seeding the wide loop's short cache
    with the vocabulary"). ``encode.seed_piece_caches`` does the same for
    the narrow loop's caches (GPT-2)."""
    most = max_piece_bytes(cache)
    one = np.empty(1, dtype=np.uint32)
    stored = 0
    for k in range(tids.shape[0]):
        tid = tids[k]
        start, end = token_offsets[tid], token_offsets[tid + 1]
        if 1 <= end - start <= most and 0 <= tid <= WIDE_MAX_ID:
            one[0] = tid
            stored += wide_cache_store(cache, token_bytes, start, end, one, 0, np.int64(1), False)
    return stored


# --- The long-piece memo (piece_memo.py), with wide ids and the piece's own bytes ---
# Same memo array, header, filter, table and hashing as piece_memo (its memo_hash, memo_prefetch and
# memo_find serve both); only the arena differs. An entry's arena index and the fill count words, and
# an entry's words are the piece's length, its bytes (eight to a word, the last zero padded) and its
# ids (three 21-bit ids to a word, id k of a word in bits 21k..21k+20). A hit is checked against the
# piece's bytes, word by word, where piece_memo's is checked id by id against each token's bytes:
# those token reads are scattered over the vocabulary's 1.6 MB of token heads, and in a warm o200k
# pass over docs.parquet the check was ~6% of the pass (bench/RESULTS.md, "Kept: the wide memo stores
# each piece's bytes and compares them"). The bytes
# cost arena room (~3.4 bytes an id, against ~2.7 for the id). A memo is filled by one of the two
# loops only (it belongs to one vocabulary, like every piece cache).
WIDE_MEMO_ID_BITS = 21
# The wide loop's memo arena, in piece_memo's unit (``memo_words`` counts uint16 ids, four to a word):
# 2M words, 16 MB a thread (only the pages filled are ever backed). At piece_memo's default 0.77M
# words the bytes filled it after 68k of o200k's long pieces in docs.parquet, where the ids alone
# had held all 122k seen twice (1.4M ids), and a warm pass ran 8% slower than before the bytes.
WIDE_MEMO_IDS = 4 * (1 << 21)
WIDE_MEMO_MAX_ID = (1 << WIDE_MEMO_ID_BITS) - 1
_MEMO_ID_MASK = np.uint64(WIDE_MEMO_MAX_ID)
_U3 = np.uint64(3)
_U7 = np.uint64(7)


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _memo_entry_words(n_bytes, count):
    """Arena words of a wide memo entry: the length, the bytes, the ids."""
    return np.uint64(1) + ((np.uint64(n_bytes) + _U7) >> _U3) + (np.uint64(count) + np.uint64(2)) // _U3


@njit(cache=True, **NO_REFCOUNTING)
def wide_memo_emit(memo, slot, data, start, end, out, out_pos):
    """``piece_memo.memo_emit`` for a memo filled by ``wide_memo_store`` (same contract: the ids
    of table slot ``slot`` to ``out[out_pos:]``, or -1 when the entry is not that of
    ``data[start:end]``, a tag collision), the entry's stored bytes compared with the piece's.
    The piece has at least 8 bytes (the encode loop memoizes pieces of ``WIDE_MEMO_MIN_BYTES``)."""
    entry = memo[_memo_table(memo) + np.uint64(slot)]
    base = _memo_table(memo) + memo[_MEMO_SLOTS] + ((entry >> _MEMO_AT_SHIFT) & _MEMO_AT_MASK)
    count = np.int64(entry & _MEMO_COUNT_MASK)
    n = np.uint64(end - start)
    differ = memo[base] ^ n
    full = n >> _U3
    for w in range(full if differ == 0 else 0):
        differ |= load_word(data, start + 8 * w) ^ memo[base + np.uint64(1 + w)]
    if differ == 0 and n & _U7 != 0:  # the last bytes: the piece's last word, shifted down to them
        differ = (load_word(data, end - 8) >> (np.uint64(8) * (np.uint64(8) - (n & _U7)))) ^ memo[base + np.uint64(1) + full]
    ids = base + np.uint64(1) + ((n + _U7) >> _U3)
    for j in range(count if differ == 0 else 0):
        k = np.uint64(j)
        out[np.uint64(out_pos + j)] = (memo[ids + k // _U3] >> (np.uint64(WIDE_MEMO_ID_BITS) * (k % _U3))) & _MEMO_ID_MASK
    return out_pos + count if differ == 0 else -1


@njit(cache=True, **NO_REFCOUNTING)
def wide_memo_store(memo, h, data, start, end, ids, ids_start, count):
    """``piece_memo.memo_store`` with wide ids (each <= WIDE_MEMO_MAX_ID, else nothing is stored):
    remember that the piece ``data[start:end]`` (16..4,096 bytes) whose ``memo_hash`` is ``h``
    (computed once, by the finder that looked it up) encodes to ``ids[ids_start:ids_start + count]``,
    if the memo has room. Returns whether it was stored."""
    slots = memo[_MEMO_SLOTS]
    fill = memo[_MEMO_FILL]
    table = _memo_table(memo)
    room = np.uint64(memo.shape[0]) - table - slots
    n = end - start
    need = _memo_entry_words(n, count)
    fits = count >= 1 and np.uint64(count) <= _MEMO_COUNT_MASK and fill + need <= room
    for j in range(count if fits else 0):
        if np.uint64(ids[ids_start + j]) > _MEMO_ID_MASK:
            fits = False
    stored = False
    if fits and np.uint64(4) * memo[_MEMO_ENTRIES] < _U3 * slots:
        tag = h >> _MEMO_TAG_SHIFT
        mask = slots - np.uint64(1)
        slot = h & mask
        for _ in range(_MEMO_PROBES):
            entry = memo[table + slot]
            if entry >> _MEMO_TAG_SHIFT == tag and entry != 0:
                break
            if entry == 0:
                # The arena past the fill is zero: or-ing the bytes and ids in is enough.
                base = table + slots + fill
                memo[base] = np.uint64(n)
                full = n >> 3
                for w in range(full):
                    memo[base + np.uint64(1 + w)] = load_word(data, start + 8 * w)
                for i in range(8 * full, n):
                    memo[base + np.uint64(1 + full)] |= np.uint64(data[start + i]) << np.uint64(8 * (i & 7))
                at = base + np.uint64(1) + ((np.uint64(n) + _U7) >> _U3)
                for j in range(count):
                    k = np.uint64(j)
                    memo[at + k // _U3] |= np.uint64(ids[ids_start + j]) << (np.uint64(WIDE_MEMO_ID_BITS) * (k % _U3))
                memo[table + slot] = (tag << _MEMO_TAG_SHIFT) | (fill << _MEMO_AT_SHIFT) | np.uint64(count)
                word, bit = _memo_filter_bit(memo, h)
                memo[word] |= bit
                memo[_MEMO_FILL] = fill + need
                memo[_MEMO_ENTRIES] += np.uint64(1)
                stored = True
                break
            slot = (slot + np.uint64(1)) & mask
    return stored


@njit(cache=True, **NO_REFCOUNTING)
def wide_memo_has_room(memo, n_bytes):
    """Whether ``wide_memo_store`` has room for a piece of ``n_bytes`` (a table slot, and arena room
    for its bytes and ``n_bytes`` ids: a piece has at most one id per byte)."""
    slots = memo[_MEMO_SLOTS]
    table = _memo_table(memo)
    room = np.uint64(memo.shape[0]) - table - slots
    return (np.uint64(4) * memo[_MEMO_ENTRIES] < _U3 * slots) and memo[_MEMO_FILL] + _memo_entry_words(n_bytes, n_bytes) <= room
