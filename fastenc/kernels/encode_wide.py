"""Text -> ids for vocabularies with ids above 65,535 (cl100k_base, o200k_base, large HF files).

``encode_text`` hands such vocabularies to ``encode_text_wide`` at its top: the narrow loop's
structure (blocks of pieces found and prefetched ahead, a branch-free hot path for the pieces of
1..15 bytes) with the piece caches of ``piece_cache_wide``, whose entries carry 18-bit ids. Kept
apart so that the uint16 loop, GPT-2's hot path, is untouched by the wider layout, and so that a
GPT-2 or URL run never compiles this one (``encode.takes_wide_loop``).

Unlike the narrow loop, this one has no tiny cache: every piece of 1..15 bytes lives in the short
cache (``caches.tiny`` is not read), whose slots hold 6 ids (``piece_cache_wide`` says why).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from fastenc.kernels import config as cfg
from fastenc.kernels.bpe import grown_work, long_merge_room, merge_long_piece, merge_short_piece_inlined
from fastenc.kernels.jit import NO_REFCOUNTING
from fastenc.kernels.loads import ASCII_MASKS, element_address, load_acquire_at, load_at, load_word, prefetch_at, store_wide_ids8
from fastenc.kernels.piece_cache import (
    ELSEWHERE,
    LONG_WORDS,
    MAX_CACHED_PIECE_BYTES,
    SHORT_WORDS,
    max_piece_bytes,
    piece_key,
)
from fastenc.kernels.piece_cache_wide import (
    WIDE_COUNT_SHIFT,
    WIDE_MAX_ID,
    long_home,
    wide_cache_lookup,
    wide_cache_store,
    wide_max_piece_ids,
    wide_memo_emit,
    wide_memo_has_room,
    wide_memo_store,
    wide_slot,
)
from fastenc.kernels.piece_memo import MEMO_MAX_BYTES, caches_shared, memo_find, memo_hash, memo_prefetch
from fastenc.kernels.pretok_cl100k import cl100k_piece_end, cl100k_window_starts
from fastenc.kernels.pretok_gpt2 import WINDOW, gpt2_piece_end
from fastenc.kernels.pretok_o200k import o200k_piece_end, o200k_window_starts
from fastenc.kernels.pretok_regex import STATE_WORDS, dfa_match, dfa_window_starts, regex_piece_end, window_end
from fastenc.kernels.pretok_url import url_piece_end
from fastenc.kernels.readonly import as_readonly
from fastenc.kernels.segments import segment_end, span_segment_end
from fastenc.kernels.tables import token_id_of

_BLOCK = 64  # pieces found (and their home slots prefetched) before any of them is encoded
# Pieces of 16..23 bytes are cut into parts (at most two or three, from the caches) rather than
# memoized: the memo's hash, check and store cost more than those lookups, and its 196k entries
# then go to the longer pieces, whose parts are merged anew. A/B on docs.parquet against 16:
# first pass 0.98 -> 1.01 of the loop without a memo, warm cl100k 1.07 -> 1.10, o200k 1.43 -> 1.42.
WIDE_MEMO_MIN_BYTES = 24
_RING = 4  # words per ring entry: a piece's end, whole-token id (or -1), home slot address (0: none), a memo store's piece start
# A ring entry's second word: a whole-token id (>= 0), -1 (look the piece up and merge on a miss),
# or one of these, for the long-piece memo (piece_memo.py, with wide ids: piece_cache_wide.py):
_MEMO_BEGIN = -2  # the first part of a piece the memo does not hold: note where its ids begin
_MEMO_STORE = -3  # no piece: store the ids since _MEMO_BEGIN as those of the piece whose memo hash is ring[4k + 2], from ring[4k + 3]
_MEMO_HIT = -4  # and below: a piece the memo holds, in table slot _MEMO_HIT - entry
_SKIP = 1 << 62  # no piece: bytes a split pattern leaves out (tiktoken encodes only what it matches)
# Hot array accesses index with uint64: Numba adds wraparound code (negative index -> from the
# end) to every signed index, and none to an unsigned one.
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U8 = np.uint64(8)  # byte offsets of a slot's words
_U16 = np.uint64(16)
_U24 = np.uint64(24)
_U64 = np.uint64(64)  # a long slot's bytes
_COUNT_SHIFT = np.uint64(WIDE_COUNT_SHIFT)
_SHORT_COUNT = np.uint64(0xF)  # the count's bits in a short slot's last word
_FIRST3_HIGH = np.uint64(0x808080)  # the high bits of a word's first three bytes


@njit(cache=True)
def encode_text_wide(data, start, end, vocab, classes, caches, out, out_pos):
    """``encode_text`` for vocabularies with ids above 65,535 (it calls this one for them) and
    for the cl100k/o200k patterns: the wide piece caches (``piece_cache_wide``; ids up to
    262,143, fewer ids per entry). A piece whose ids do not fit is merged every time. ``out``
    must hold uint32 (or wider), or uint16 for a vocabulary of at most 65,536 ids.

    ``out`` needs room for ``end - start`` ids from ``out_pos``; all of that room may be
    written to (the ids end at the returned position; what lies past it is scratch).

    The loop (``wide_loop``) is compiled for read-only ``data`` and int64 positions only, whatever
    the caller passes (``encode.encode_with`` says why)."""
    text, s, e = as_readonly(data), np.int64(start), np.int64(end)
    scratch = new_wide_scratch()
    while True:
        new_pos = wide_loop(text, s, e, vocab, classes, caches, out, np.int64(out_pos), scratch)
        if new_pos >= 0:
            return new_pos
        scratch = grown_wide_scratch(scratch, -new_pos)  # (and the document again: wide_loop)


class WideScratch(NamedTuple):
    """``wide_loop``'s working memory, allocated once per run of documents (``new_wide_scratch``):
    ``ranks`` (the short-piece merge), ``work`` (the long-piece merge, 7 places per byte of a
    part: ``grown_wide_scratch`` makes room for a longer one; a split pattern's scanner also
    backtracks on it, between merges), ``ring`` (a block's pieces, with room for a memo store after
    a full block) and ``split`` (the scanner's state, ``pretok_regex.STATE_WORDS``)."""

    ranks: np.ndarray
    work: np.ndarray
    ring: np.ndarray
    split: np.ndarray


@njit(cache=True)
def new_wide_scratch():
    return WideScratch(np.empty(MAX_CACHED_PIECE_BYTES, dtype=np.int64),
                       np.empty(long_merge_room(4 * MAX_CACHED_PIECE_BYTES), dtype=np.int64),
                       np.empty(_RING * (_BLOCK + 1), dtype=np.int64),
                       np.empty(STATE_WORDS, dtype=np.int64))


@njit(cache=True)
def grown_wide_scratch(scratch, need):
    """``scratch`` with a work array of at least ``need`` places (``bpe.grown_work``: at least twice
    the old one, so that a document is encoded again only a few times however its long parts grow)."""
    return WideScratch(scratch.ranks, grown_work(scratch.work, need), scratch.ring, scratch.split)


@njit(cache=True, forceinline=True, **NO_REFCOUNTING)
def wide_loop(data, start, end, vocab, classes, caches, out, out_pos, scratch):
    """``encode_text_wide``'s loop, with ``scratch`` from ``new_wide_scratch``: returns the new
    out_pos, or, when a long part (or a whole piece) needs more merge room than ``scratch.work``
    has, minus the room it needs, having stopped there. Then the caller grows the scratch
    (``grown_wide_scratch``) and encodes the document again from its start: what was written
    is rewritten the same, and the caches only memoize, so nothing else needs undoing. (The
    GPT-2/URL loop resumes where it stopped instead; this loop's memo state would have to be
    carried over, for a case that real text rarely reaches: the work array starts with room for
    parts of 124 bytes and only grows.)

    The text is taken in blocks of up to ``_BLOCK`` pieces, as in ``encode.encode_run``: the
    pre-tokenizer finds a block's pieces and prefetches each short one's home slot (whose address
    it keeps in the ring), then the block is encoded, so the slots' memory latency overlaps the
    finding of the rest of the block.

    Like ``encode.encode_run``: compiled without reference counting (so it allocates nothing: its
    scratch is passed in) and inlined into its callers. Allocating its scratch itself, with
    reference counting, a call per document cost more than the encoding of a short one: 400k lines
    of 72 bytes, cl100k_base, warm: 100 MB/s (NRT_incref/decref half of the time), 330 MB/s on
    long documents (bench/RESULTS.md, "a wide loop that paid reference counting per document").
    """
    byte_ids = vocab.byte_ids
    short = caches.short
    long = caches.long
    memo = caches.memo
    shared = caches_shared(memo)  # short and long shared with other threads: no slot is rewritten
    ranks = scratch.ranks
    work = scratch.work
    ring = scratch.ring
    split_state = scratch.split
    for i in range(split_state.shape[0]):
        split_state[i] = -1
    split_program = vocab.split_program
    out_limit = out_pos + (end - start)
    size = data.shape[0]
    cacheable = vocab.config[cfg.VOCAB_SIZE] <= WIDE_MAX_ID + 1  # else only pieces whose ids fit
    short_bytes = max_piece_bytes(short)
    long_bytes = max_piece_bytes(long)
    short_ids = wide_max_piece_ids(short)
    long_ids = wide_max_piece_ids(long)
    hot_layout = short.shape[1] == SHORT_WORDS  # the hot path's slot layout (wide_slot)
    long_layout = long.shape[1] == LONG_WORDS  # (the finder prefetches a long piece's slot)
    long_base = element_address(long, 0)
    long_mask = long.shape[0] - 1
    pretok = vocab.config[cfg.PRETOKENIZER]
    split_dfa = split_program[2] if pretok == cfg.PRETOK_REGEX else -1  # one split with a DFA: its match is the piece
    split_stride = split_program[3] if pretok == cfg.PRETOK_REGEX else 0
    split_window = pretok == cfg.PRETOK_REGEX and split_program[4] >= 0  # the last split's DFA, 64 ASCII bytes at a time
    window = split_window or (ASCII_MASKS and (pretok == cfg.PRETOK_CL100K or pretok == cfg.PRETOK_O200K))  # 64 ASCII bytes at a time
    whole_piece_lookup = vocab.config[cfg.WHOLE_PIECE_LOOKUP] != 0
    joinable = vocab.joinable
    token_table = vocab.token_table  # (read once here: taken from vocab at each call, each paid an incref and a decref)
    token_bytes = vocab.token_bytes
    token_offsets = vocab.token_offsets
    token_prefixes = vocab.token_prefixes
    span_pairs = vocab.span_pairs
    pos = start
    found = start  # the finder's position; while found < cut_end it walks the parts of a long piece
    cut_end = start
    memo_from = -1  # the start of the long piece being cut whose ids the memo is to store
    memo_h = np.uint64(0)  # its memo hash
    memo_ids = out_pos  # where that piece's ids begin in out
    in_memo = False  # between a _MEMO_BEGIN and its _MEMO_STORE: parts of a piece the memo will hold
    while pos < end:
        # --- find up to _BLOCK pieces: ring[4k] the end, ring[4k + 1] a whole-token id or -1,
        # ring[4k + 2] the address of its home slot, prefetched now (0: none) ---
        n_found = 0
        while found < end and n_found < _BLOCK:
            text_end = window_end(split_program, split_state, end) if split_window else end
            if (window and found >= cut_end and found + WINDOW <= text_end and found + WINDOW + 16 <= size
                    and (load_word(data, found) & _FIRST3_HIGH) == 0):
                # The pieces of 64 ASCII bytes at once (cl100k_window_starts, o200k_window_starts),
                # as encode.encode_run does for GPT-2: up to the first one too long for the short
                # cache, which the path below takes, as it does where the window decided nothing.
                # (The window reads 64 bytes; a piece's key, up to 16 from its start. A byte >= 0x80
                # in the first three leaves it nothing to decide (non-Latin text: most pieces start
                # so): one load skips the call. On docs.parquet that is 46% of the calls; 59%
                # decided nothing. A/B against calling it: warm cl100k +5%.)
                if split_window:
                    starts = dfa_window_starts(data, found, split_program)
                elif pretok == cfg.PRETOK_CL100K:
                    starts = cl100k_window_starts(data, found)
                else:
                    starts = o200k_window_starts(data, found)
                piece_start = found
                while starts != 0 and n_found < _BLOCK:
                    piece_end = found + np.int64(trailing_zeros(starts))
                    n = piece_end - piece_start
                    if n > short_bytes:
                        break
                    starts &= starts - np.uint64(1)
                    at = np.uint64(0)
                    if hot_layout:
                        at = wide_slot(short, data, piece_start, n)
                        prefetch_at(at)
                    slot = np.uint64(_RING * n_found)
                    ring[slot] = piece_end
                    ring[slot + _U1] = -1
                    ring[slot + _U2] = np.int64(at)
                    n_found += 1
                    piece_start = piece_end
                if piece_start > found:
                    found = piece_start
                    continue
            whole = -1
            if found < cut_end:
                piece_end = segment_end(data, found, cut_end, joinable)
                if piece_end - found > long_bytes:  # too long for the caches: where no token spans
                    piece_end = span_segment_end(data, found, piece_end, token_prefixes, span_pairs)
            else:
                if pretok == cfg.PRETOK_CL100K:
                    piece_end = cl100k_piece_end(data, found, end, classes)
                elif pretok == cfg.PRETOK_O200K:
                    piece_end = o200k_piece_end(data, found, end, classes)
                elif pretok == cfg.PRETOK_GPT2:
                    piece_end = gpt2_piece_end(data, found, end, classes)
                elif pretok == cfg.PRETOK_REGEX:
                    piece_end = -1
                    if split_dfa >= 0:
                        piece_end = dfa_match(data, found, end, classes, split_program, split_dfa, split_stride)
                    if piece_end <= found:
                        piece_end = regex_piece_end(data, found, end, classes, split_program, split_state, work)
                    if piece_end == found:  # its backtracking stack is full: grow work, encode again
                        return -2 * work.shape[0]
                    if piece_end < 0:  # bytes in no piece
                        slot = np.uint64(_RING * n_found)
                        ring[slot] = -piece_end - 1
                        ring[slot + _U1] = _SKIP
                        ring[slot + _U2] = 0
                        n_found += 1
                        found = -piece_end - 1
                        continue
                else:
                    piece_end = url_piece_end(data, found, end)
                if piece_end - found > short_bytes:
                    if whole_piece_lookup:  # tiktoken's rule, HF's ignore_merges: a token is emitted as is
                        whole = token_id_of(token_table, token_bytes, token_offsets, data, found, piece_end)
                    if whole < 0:
                        # Too long for the short cache: from the memo if seen before, else cut
                        # where no merge can cross (segments.py) and encode the parts one by one,
                        # most of them from the caches.
                        cut_end = piece_end
                        memoized = WIDE_MEMO_MIN_BYTES <= cut_end - found <= MEMO_MAX_BYTES
                        h = np.uint64(0)
                        if memoized:
                            h = memo_hash(data, found, cut_end)
                            memo_prefetch(memo, h)  # (loading while the first part is found)
                        piece_end = segment_end(data, found, cut_end, joinable)
                        if memoized:
                            hit = memo_find(memo, h)
                            if hit >= 0:
                                whole = _MEMO_HIT - hit
                                piece_end = cut_end
                            elif wide_memo_has_room(memo, cut_end - found):
                                whole = _MEMO_BEGIN
                                memo_from = found
                                memo_h = h
                        if whole >= _MEMO_BEGIN and piece_end - found > long_bytes:
                            # A part the byte pairs leave too long for the caches (CJK runs in
                            # o200k_base): cut it where no token spans (segments.py), ~20 ns a
                            # byte against ~70 of merging it, and most such parts are cached.
                            piece_end = span_segment_end(data, found, piece_end, token_prefixes, span_pairs)
            n = piece_end - found
            at = np.uint64(0)
            if hot_layout and n <= short_bytes and found + 16 <= size:
                at = wide_slot(short, data, found, n)
                prefetch_at(at)
            elif long_layout and n <= long_bytes and (whole | 1) == -1 and found + 32 <= size:  # -1 or _MEMO_BEGIN
                # A piece or part of 16..31 bytes goes to the long cache (general path): its slot
                # too, loading while the block is found. (o200k leaves 259k such pieces in a warm
                # pass over docs.parquet; A/B: warm +3-5%, first pass +3%. Not for a whole token
                # (whole >= 0), which never looks: prefetching those cost o200k's first pass 5%.)
                prefetch_at(long_base + _U64 * np.uint64(long_home(data, found, n, long_mask)))
            slot = np.uint64(_RING * n_found)
            ring[slot] = piece_end
            ring[slot + _U1] = whole
            ring[slot + _U2] = np.int64(at)
            n_found += 1
            found = piece_end
            if memo_from >= 0 and found == cut_end:  # the last part: then store the whole piece
                slot = np.uint64(_RING * n_found)
                ring[slot] = found
                ring[slot + _U1] = _MEMO_STORE
                ring[slot + _U2] = np.int64(memo_h)
                ring[slot + _U3] = memo_from
                n_found += 1
                memo_from = -1
        # --- encode them ---
        for k in range(n_found):
            slot = np.uint64(_RING * k)
            piece_end = ring[slot]
            whole = ring[slot + _U1]
            at = np.uint64(ring[slot + _U2])
            n = piece_end - pos
            memo_ids = out_pos if whole == _MEMO_BEGIN else memo_ids  # (a select: the part may take the hot path)
            in_memo = in_memo | (whole == _MEMO_BEGIN)
            # The hot path: a piece of 1..15 bytes found in its home slot of the short cache (the
            # address the finder prefetched), with no branch on its length and its ids written as
            # one 8-place store (the count says how many are real). Everything else takes the
            # general path below.
            if ((whole | 1) == -1) & (at != 0) & (out_pos + 8 <= out_limit):  # whole is -1 or _MEMO_BEGIN
                k0, second, _ = piece_key(data, pos, n)  # (second: the key's second word and the length)
                # The key's last word first, with acquire: the publishing word of caches shared
                # between threads (piece_cache.py), so once it matches, the words below are its writer's.
                same = (load_acquire_at(at + _U8) == second) & (load_at(at) == k0)
                low = load_at(at + _U16)
                high = load_at(at + _U24)
                count = np.int64((high >> _COUNT_SHIFT) & _SHORT_COUNT)
                if same & (count != 0):
                    store_wide_ids8(out, out_pos, low, high)
                    out_pos += count
                    pos = piece_end
                    continue
            if whole < -1:  # the long-piece memo
                if whole == _MEMO_STORE:
                    wide_memo_store(memo, np.uint64(ring[slot + _U2]), data, ring[slot + _U3], piece_end, out, memo_ids,
                                    out_pos - memo_ids)
                    in_memo = False
                    continue
                if whole != _MEMO_BEGIN:  # (a first part is encoded below)
                    new_pos = wide_memo_emit(memo, _MEMO_HIT - whole, data, pos, piece_end, out, out_pos)
                    if new_pos < 0:  # a tag collision: the whole piece merged (as its parts would be)
                        if long_merge_room(n) > work.shape[0]:
                            return -long_merge_room(n)  # (no room: the caller grows work, docstring)
                        new_pos = merge_long_piece(data, pos, piece_end, vocab, work, out, out_pos)
                    out_pos = new_pos
                    pos = piece_end
                    continue
            if whole == _SKIP:
                pos = piece_end
                continue
            if whole >= 0:
                out[out_pos] = whole
                out_pos += 1
            elif n == 1:
                out[out_pos] = byte_ids[data[pos]]
                if at != 0 and out[out_pos] <= WIDE_MAX_ID:  # then the hot path finds it next time
                    wide_cache_store(short, data, pos, piece_end, out, out_pos, np.int64(1), shared)
                out_pos += 1
            elif n <= long_bytes:
                out_pos = _cached_or_merged(data, pos, piece_end, vocab, short, long, ranks, out, out_pos,
                                            out_limit, cacheable, short_ids, long_ids, not in_memo, shared)
            else:  # a long part: merged every time (the whole-piece lookup, where it applies, is done)
                if long_merge_room(n) > work.shape[0]:
                    return -long_merge_room(n)  # (no room: the caller grows work, docstring)
                out_pos = merge_long_piece(data, pos, piece_end, vocab, work, out, out_pos)
            pos = piece_end
    return out_pos


@njit(no_cpython_wrapper=True, no_cfunc_wrapper=True, cache=True, **NO_REFCOUNTING)
def _cached_or_merged(data, pos, piece_end, vocab, short, long, ranks, out, out_pos, out_limit,
                      cacheable, short_ids, long_ids, keep_long_parts, shared):
    """The general path of a piece of 2..31 bytes: the caches its length calls for, in order
    (a marker in the short cache sends the lookup on to the long one), else merged and
    remembered; returns the new out_pos. A piece of up to 15 bytes found in the short cache away
    from its home slot is moved there (``wide_cache_lookup``'s ``promote``), so that the hot path
    finds it next time, unless ``shared`` (caches that other threads read at the same time: a
    filled slot is never rewritten, ``piece_cache``'s "Shared caches").
    A part of 16..31 bytes is remembered only with ``keep_long_parts``: not when it is a part of a
    piece the memo is about to hold, which is read whole from then on (o200k's long cache was 96%
    full after one pass of docs.parquet, and evicting).
    Without reference counting (it allocates nothing): with it, each call paid an incref and a
    decref of every array it is passed, the vocabulary's nine included (~20% of a warm pass)."""
    n = piece_end - pos
    short_bytes = max_piece_bytes(short)
    # -1: never seen, merge it; ELSEWHERE: a marker, the ids are in a later cache.
    if n <= short_bytes:
        hit = wide_cache_lookup(short, data, pos, piece_end, out, out_pos, out_limit, not shared)
        if hit == ELSEWHERE:  # more than 6 ids: the long cache
            hit = wide_cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit, False)
    else:
        hit = wide_cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit, False)
    if hit < 0:
        new_pos = merge_short_piece_inlined(data, pos, piece_end, vocab, ranks, out, out_pos)
        count = new_pos - out_pos
        if not cacheable:
            for j in range(out_pos, new_pos):
                if out[j] > WIDE_MAX_ID:
                    count = -1  # an id too large for the wide layout: merged every time
        if count >= 0:
            if n <= short_bytes and count <= short_ids:
                wide_cache_store(short, data, pos, piece_end, out, out_pos, count, shared)
            elif count <= long_ids and (keep_long_parts or n <= short_bytes):
                wide_cache_store(long, data, pos, piece_end, out, out_pos, count, shared)
            # A marker, as in encode_text: a lookup that finds one goes on to the long cache.
            # (np.int64(0), not 0: a literal would compile both stores a second time.)
            if n <= short_bytes and count > short_ids:
                wide_cache_store(short, data, pos, piece_end, out, out_pos, np.int64(0), shared)
        hit = new_pos
    # One return, every array used in its block: no reference counting (piece_cache.py).
    if (data.shape[0] | short.shape[0] | long.shape[0] | ranks.shape[0] | out.shape[0]) < 0:
        hit = -1
    return hit
