"""Per-thread memo of whole long pieces (16 to 4,096 bytes) -> ids, filled once.

The piece caches (piece_cache.py) hold pieces of up to 15 bytes whole; a longer piece is cut
where no merge can cross (segments.py) and encoded part by part. That is exact, but a piece
that recurs pays for every part again: a CJK clause of 40 bytes is ~13 parts (a cache probe
each), a run of 24 spaces of indentation one long merge. Such pieces recur often: of the
379,061 pieces over 15 bytes in docs.parquet, 220,160 are occurrences of a piece seen more than
once. The memo keeps the ids of each whole piece, so a repeat is
one hash, one probe and one copy.

The memo is one ``uint64`` array (``new_piece_memo``):

    word 0          ids stored so far (the arena's fill, in ids)
    word 1          table slots T (a power of two)
    word 2          entries stored
    word 3          filter words F (a power of two)
    word 4          not the memo's: 1 when the task's piece caches (tiny, short, long) are shared with
                    other threads encoding at the same time (``caches_shared``; the memo is the one
                    table every task has of its own, so it carries the task's setting)
    words 5..5+F    the filter: one bit per hash value (modulo 64 F), set for every stored piece
    then T words    the table: an entry is tag << 40 | first id's arena index << 14 | id count
                    (0: empty; a stored piece has at least one id)
    then the rest   the arena: the ids of the stored pieces, back to back, four uint16 per word

Most long pieces are new (they are long), and a probe of the table for one is a cache miss
(2 MB, read once per long piece): the filter (128 KB, which stays in the CPU's caches) answers
most of those probes instead. Both encode loops prefetch the filter word and the table slot
(``memo_prefetch``) before they find the piece's first part. Then the wide loop probes
(``memo_find``); the GPT-2/URL loop reads only the filter (``memo_maybe``) and, where it says
"perhaps", probes the table a block of pieces later (in ``encode.encode_block``), by when the
slot has arrived: the probe's cache miss was ~5% of a warm pass on docs.parquet
(bench/RESULTS.md, "Issue 9: the memo's table probe a block later").

It is filled once: entries are added while the arena and the table (to 3/4) have room, and
never evicted, so a full memo keeps the long pieces that came first (no pass ever runs slower
for the memo than without it but for the failed probe) and a repeated scan of a corpus larger
than the memo still hits on its first part.

The table keeps only a 24-bit tag of a piece's 64-bit hash, not its bytes: a hit is checked
while its ids are copied out, by comparing each id's bytes (``vocab.token_bytes``) with the
piece. Stored ids are the encoding of some piece, and ids decode to the bytes they were
encoded from, so ids that decode to exactly this piece's bytes are this piece's encoding: a
check that makes a tag collision harmless (``memo_emit`` answers -1, and the caller encodes the
piece part by part) and keeps the memo at 2 bytes per id. Ids must be below 65,536. (The wide
loop's memo, ``piece_cache_wide``, keeps each piece's bytes beside its ids and compares those:
for ids scattered over a 200k vocabulary the per-id reads cost more than the room.)

All three functions are compiled without reference counting (``jit.NO_REFCOUNTING``), like the
encode loop that calls them: they allocate nothing.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels.jit import NO_REFCOUNTING
from fastenc.kernels.loads import load_word, prefetch
from fastenc.kernels.tables import HEAD_MAX_BYTES

MEMO_MIN_BYTES = 16  # shorter pieces are the piece caches' (piece_cache.py)
MEMO_MAX_BYTES = 4096  # longer ones are rare and seldom repeat: not worth their arena room
DEFAULT_MEMO_SLOTS = 1 << 18  # 2 MB of table: ~196k pieces at a load of 3/4
DEFAULT_MEMO_IDS = (3 << 20) - (1 << 16)  # 5.9 MB of arena: 3.08M ids (docs.parquet's distinct long pieces have 3.4M)
DEFAULT_MEMO_FILTER = 1 << 14  # words: 128 KB, 2^20 bits
_HEADER = 5
_FILL = 0
_SLOTS = 1
_ENTRIES = 2
_FILTER = 3
_SHARED = 4
_PROBES = 8
_TAG_SHIFT = np.uint64(40)
_AT_SHIFT = np.uint64(14)
_AT_MASK = np.uint64((1 << 26) - 1)
_COUNT_MASK = np.uint64((1 << 14) - 1)
MAX_MEMO_ARENA_IDS = 1 << 26  # the entry's 26-bit arena index
_MUL = np.uint64(0x9E3779B97F4A7C15)
_MUL2 = np.uint64(0xC2B2AE3D27D4EB4F)
_U16 = np.uint64(0xFFFF)
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def new_piece_memo(slots: int = DEFAULT_MEMO_SLOTS, ids: int = DEFAULT_MEMO_IDS,
                   filter_words: int = DEFAULT_MEMO_FILTER) -> np.ndarray:
    """An empty memo: ``uint64[5 + filter_words + slots + ids / 4]`` (8 MB by default)."""
    memo = np.zeros(memo_words(slots, ids, filter_words), dtype=np.uint64)
    init_piece_memo(memo, slots, filter_words)
    return memo


def memo_words(slots: int = DEFAULT_MEMO_SLOTS, ids: int = DEFAULT_MEMO_IDS,
               filter_words: int = DEFAULT_MEMO_FILTER) -> int:
    """The length of a memo with ``slots`` table slots, room for ``ids`` ids and a filter of
    ``filter_words`` words (``slots`` and ``filter_words`` powers of two)."""
    for name, value in (("slots", slots), ("filter words", filter_words)):
        if value < 1 or value & (value - 1):
            raise ValueError(f"piece memo {name} must be a power of two, got {value}")
    if not 0 <= ids <= MAX_MEMO_ARENA_IDS:
        raise ValueError(f"piece memo ids must be 0..{MAX_MEMO_ARENA_IDS}, got {ids}")
    return _HEADER + filter_words + slots + (ids + 3) // 4


def init_piece_memo(memo: np.ndarray, slots: int = DEFAULT_MEMO_SLOTS,
                    filter_words: int = DEFAULT_MEMO_FILTER) -> None:
    """Make a zeroed ``uint64`` array of ``memo_words(slots, ids, filter_words)`` an empty memo
    (e.g. one row of stacked, lazily backed memory)."""
    memo[_SLOTS] = slots
    memo[_FILTER] = filter_words


def set_caches_shared(memo: np.ndarray, shared: bool) -> None:
    """Say in a task's memo whether its tiny, short and long piece caches are shared with other
    threads that encode at the same time (``caches_shared``)."""
    memo[_SHARED] = 1 if shared else 0


@njit(cache=True, forceinline=True)
def caches_shared(memo):
    """Whether the task whose memo this is shares its piece caches with other threads: then its
    stores claim slots and never rewrite a filled one (``piece_cache``'s "Shared caches")."""
    return memo[_SHARED] != 0


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _filter_bit(memo, h):
    # (the bit index uses the hash's bits 20..39: the table slot uses the low ones, the tag the top)
    bit = (h >> np.uint64(20)) & (np.uint64(64) * memo[_FILTER] - np.uint64(1))
    return np.uint64(_HEADER) + (bit >> np.uint64(6)), np.uint64(1) << (bit & np.uint64(63))


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _table(memo):
    return np.uint64(_HEADER) + memo[_FILTER]


@njit(cache=True, forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _piece_hash(data, start, end):
    # 8 bytes at a time; the last word overlaps the one before (a piece has >= 16 bytes), so no
    # byte past the piece is read and no tail loop is needed.
    h = np.uint64(end - start) * _MUL2
    i = start
    while i + 8 < end:
        h = (h ^ load_word(data, i)) * _MUL
        h ^= h >> np.uint64(29)
        i += 8
    h = (h ^ load_word(data, end - 8)) * _MUL
    return h ^ (h >> np.uint64(32))


@njit(cache=True, forceinline=True)
def memo_hash(data, start, end):
    """The memo's 64-bit hash of ``data[start:end]`` (16..4,096 bytes)."""
    return _piece_hash(data, start, end)


@njit(cache=True, forceinline=True)
def memo_prefetch(memo, h):
    """Start loading what ``memo_find(memo, h)`` will read: the filter word and the home slot."""
    word, _ = _filter_bit(memo, h)
    prefetch(memo, np.int64(word))
    prefetch(memo, np.int64(_table(memo) + (h & (memo[_SLOTS] - np.uint64(1)))))


@njit(cache=True, forceinline=True)
def memo_maybe(memo, h):
    """Whether the filter says a piece with hash ``h`` may be stored (False: it is not). The
    filter is small enough to stay in the CPU's caches, unlike the table."""
    word, bit = _filter_bit(memo, h)
    return memo[word] & bit != 0


@njit(cache=True, **NO_REFCOUNTING)
def memo_find(memo, h):
    """The table slot of the entry whose tag matches a piece's hash ``h`` (``memo_hash``), or -1.
    A match is checked by ``memo_emit``."""
    tag = h >> _TAG_SHIFT
    mask = memo[_SLOTS] - np.uint64(1)
    slot = h & mask
    table = _table(memo)
    found = -1
    word, bit = _filter_bit(memo, h)
    if memo[word] & bit != 0:  # else new (most long pieces): no probe of the table
        for _ in range(_PROBES):
            entry = memo[table + slot]
            if entry == 0:
                break
            if entry >> _TAG_SHIFT == tag:
                found = np.int64(slot)
                break
            slot = (slot + np.uint64(1)) & mask
    return found


@njit(cache=True, forceinline=True)
def token_differs(token_heads, token_bytes, token_offsets, tid, data, p, end):
    """``(differ, length)``: ``differ`` non-zero unless token ``tid``'s bytes are ``data[p:p + length]``
    within ``end``, ``length`` its byte count. The check of a memo hit here (the wide loop's memo,
    piece_cache_wide.py, keeps the piece's bytes and compares those): ids that decode to the piece's
    own bytes are its encoding.

    A token of up to 7 bytes (nearly every id of a long piece) is checked against its head
    (``Vocab.token_heads``: its bytes and length in one word), one load and one masked compare;
    a longer one byte by byte. (A token that runs past ``end`` is caught by the caller, whose
    lengths then do not add up to the piece's.)"""
    tid = min(tid, np.uint64(token_heads.shape[0] - 1))  # (reads stay in bounds; a memo belongs to one vocabulary)
    head = token_heads[tid]
    length = np.int64(head >> np.uint64(56))
    differ = np.uint64(0)
    if length <= HEAD_MAX_BYTES and p + 8 <= data.shape[0]:
        differ = (head ^ load_word(data, p)) & (_ONES >> np.uint64(64 - 8 * length))
    else:
        a = token_offsets[tid]
        length = token_offsets[tid + np.uint64(1)] - a
        for q in range(length):
            if p + q >= end or token_bytes[a + q] != data[p + q]:
                differ = np.uint64(1)
        if length == 0:
            differ = np.uint64(1)
    return differ, length


@njit(cache=True, **NO_REFCOUNTING)
def memo_emit(memo, slot, token_heads, token_bytes, token_offsets, data, start, end, out, out_pos):
    """Copy the ids of the entry in table slot ``slot`` (from ``memo_find``) to ``out[out_pos:]``,
    checking that their bytes are ``data[start:end]``; returns the new position, or -1 when they
    are not (a tag collision: then ``out`` past ``out_pos`` holds scratch). Writes at most
    ``end - start`` ids."""
    entry = memo[_table(memo) + np.uint64(slot)]
    at = (entry >> _AT_SHIFT) & _AT_MASK
    count = np.int64(entry & _COUNT_MASK)
    arena = _table(memo) + memo[_SLOTS]
    p = start
    differ = np.uint64(0) if count <= end - start else np.uint64(1)  # (each id has >= 1 byte)
    for j in range(count if differ == 0 else 0):
        k = at + np.uint64(j)
        tid = (memo[arena + (k >> np.uint64(2))] >> ((k & np.uint64(3)) << np.uint64(4))) & _U16
        out[np.uint64(out_pos + j)] = tid
        other, length = token_differs(token_heads, token_bytes, token_offsets, tid, data, p, end)
        differ |= other
        p += length
    return out_pos + count if differ == 0 and p == end else -1


@njit(cache=True, **NO_REFCOUNTING)
def memo_store(memo, data, start, end, ids, ids_start, count):
    """Remember that ``data[start:end]`` (16..4,096 bytes) encodes to
    ``ids[ids_start:ids_start + count]``, if the memo has room (it is filled once, never
    evicted); a piece whose tag is already there is left as it is. Returns whether it was stored."""
    slots = memo[_SLOTS]
    fill = memo[_FILL]
    table = _table(memo)
    room = np.uint64(4) * (np.uint64(memo.shape[0]) - table - slots)
    stored = False
    if (count >= 1 and np.uint64(count) <= _COUNT_MASK and fill + np.uint64(count) <= room
            and np.uint64(4) * memo[_ENTRIES] < np.uint64(3) * slots):
        h = _piece_hash(data, start, end)
        tag = h >> _TAG_SHIFT
        mask = slots - np.uint64(1)
        slot = h & mask
        for _ in range(_PROBES):
            entry = memo[table + slot]
            if entry >> _TAG_SHIFT == tag and entry != 0:
                break
            if entry == 0:
                # Four ids to a word, each word written once (the arena past the fill is zero).
                at = table + slots + (fill >> np.uint64(2))
                k = fill & np.uint64(3)
                word = memo[at]
                for j in range(count):
                    word |= (np.uint64(ids[ids_start + j]) & _U16) << (k << np.uint64(4))
                    k += np.uint64(1)
                    if k == 4:
                        memo[at] = word
                        at += np.uint64(1)
                        k = np.uint64(0)
                        word = np.uint64(0)
                if k != 0:
                    memo[at] = word
                memo[table + slot] = (tag << _TAG_SHIFT) | (fill << _AT_SHIFT) | np.uint64(count)
                word, bit = _filter_bit(memo, h)
                memo[word] |= bit
                memo[_FILL] = fill + np.uint64(count)
                memo[_ENTRIES] += np.uint64(1)
                stored = True
                break
            slot = (slot + np.uint64(1)) & mask
    return stored
