"""Text -> ids: pre-tokenize, then BPE each piece through the piece caches.

Public kernels (callable from other people's ``@njit`` code; all tables are arguments):

* ``encode_text(data, start, end, vocab, classes, caches, out, out_pos) -> out_pos``
* ``encode_with(data, start, end, vocab, classes, caches, scratch, out, out_pos) -> out_pos``
  (the same, with ``scratch = new_scratch()`` reused across documents)
* ``encode_narrow(...)``: ``encode_with`` for GPT-2 / URL vocabularies only (``takes_wide_loop``
  false), which compiles ~30 s faster: it never reaches the cl100k/o200k loop
* ``encode_batch_counts(data, offsets, vocab, classes, task_caches, out, counts)``
  (parallel), then ``compact_runs(out, offsets, counts, n_tasks)`` (plain Python, numpy moves)
* ``gather_batch(scratch, offsets, counts, out, out_offsets)`` (parallel; per-document slots)

``data`` is UTF-8 as ``uint8[::1]``; ``vocab`` a ``fastenc.vocab.Vocab``; ``classes`` the
code-point class table its pre-tokenizer reads (``Encoder.classes``,
``fastenc.unicode_classes.class_table_for(info.pretokenizer)``: GPT-2's for gpt2 and cl100k,
``o200k_class_table()`` for o200k; any uint8 array for the URL pre-tokenizer, which ignores it); ``caches`` one thread's
``fastenc.kernels.piece_cache.new_piece_caches()``; ``out`` any integer array with room for
``end - start`` more ids (an id never covers less than one byte).
"""
from __future__ import annotations

import numpy as np
from typing import NamedTuple

from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from fastenc.kernels import config as cfg
from fastenc.kernels.bpe import grown_work, long_merge_room, merge_long_piece, merge_short_piece
from fastenc.kernels.piece_cache import (
    ELSEWHERE,
    MAX_CACHED_PIECE_BYTES,
    SHORT_WORDS,
    TINY_MAX_BYTES,
    TINY_MAX_IDS,
    PieceCaches,
    cache_lookup,
    cache_store,
    max_piece_bytes,
    max_piece_ids,
    piece_key,
    key_slot,
    second_mask,
    short_cache_lookup,
    tiny_cache_lookup,
    tiny_cache_store,
)
from fastenc.kernels.encode_wide import encode_text_wide
from fastenc.kernels.piece_memo import MEMO_MAX_BYTES, caches_shared, memo_emit, memo_find, memo_hash, memo_maybe, memo_prefetch, memo_store
from fastenc.kernels.jit import NO_REFCOUNTING
from fastenc.kernels.loads import ASCII_MASKS, element_address, load_acquire_at, load_at, load_word, prefetch_at, store_ids8
from fastenc.kernels.pretok_gpt2 import WINDOW, gpt2_piece_end, gpt2_window_starts
from fastenc.kernels.pretok_url import url_piece_end
from fastenc.kernels.readonly import as_readonly
from fastenc.kernels.segments import segment_end
from fastenc.kernels.tables import token_id_of

_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_LEN_SHIFT = np.uint64(56)  # a short-cache key's length byte (piece_cache.py)
# Hot array accesses index with uint64: Numba adds wraparound code (negative index -> from the end:
# a shift, an and with the length, an add) to every signed index, and none to an unsigned one.
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U8 = np.uint64(8)  # byte offsets of a slot's words (piece_slot's addresses)
_U16 = np.uint64(16)
_U24 = np.uint64(24)
_U32 = np.uint64(32)  # a long slot's id words (piece_cache.py: four key words, then four id words)
_U40 = np.uint64(40)
_U48 = np.uint64(48)
_U56 = np.uint64(56)
_LOW56 = np.uint64(0x00FFFFFFFFFFFFFF)  # a short key's second word without its length byte
_TOP8 = np.uint64(0xFF) << np.uint64(56)  # its length byte
_COUNT_SHIFT = np.uint64(48)  # a slot's id count: bits 48..55 of its last word (piece_cache.py)
_BYTE = np.uint64(0xFF)
_HEAD3_HIGH = np.uint64(0x808080)  # the high bits of a word's first three bytes


@njit(cache=True, forceinline=True)
def prefetch_home(tiny, short, data, start, n):
    """Start loading the home slot of the piece ``data[start:start + n]`` (1..15 bytes: the tiny
    cache's for up to 8, the short cache's (``SHORT_WORDS`` layout) beyond; ``piece_slot``, no
    branch on the length); returns ``(address, k0, second)``: the address for the lookup, the key
    (``piece_key``) that a hot ring entry keeps. Needs ``start + 16 <= len(data)``."""
    k0, second, is_short = piece_key(data, start, n)
    at = key_slot(tiny, short, k0, second, is_short)
    prefetch_at(at)
    return at, k0, second


@njit(cache=True)
def remember_piece(caches, data, start, end, ids, ids_start, count):
    """Store a merged piece of 2..31 bytes (``data[start:end]`` -> ``ids[ids_start:ids_start+count]``)
    in the cache its length and id count call for: the tiny one (up to 8 bytes, up to 3 ids),
    else the short one (up to 15 bytes, up to 7 ids), else the long one (up to 15 ids; more are
    not kept). Markers (an entry with no ids) send the next lookup on to the cache that holds
    the ids, so that a piece missing from the first cache it is looked up in is known to be new.
    Ids must be below 65,536."""
    n = end - start
    tiny_bytes = TINY_MAX_BYTES
    short_bytes = max_piece_bytes(caches.short)
    short_ids = max_piece_ids(caches.short)
    shared = caches_shared(caches.memo)  # (then no filled slot is rewritten: piece_cache.py)
    if n <= tiny_bytes and count <= TINY_MAX_IDS:
        tiny_cache_store(caches.tiny, data, start, end, ids, ids_start, count, shared)
    else:
        if n <= short_bytes and count <= short_ids:
            cache_store(caches.short, data, start, end, ids, ids_start, count, shared)
        elif count <= max_piece_ids(caches.long):
            cache_store(caches.long, data, start, end, ids, ids_start, count, shared)
        # (np.int64(0), not 0: a literal would compile both stores a second time.)
        if n <= tiny_bytes:
            tiny_cache_store(caches.tiny, data, start, end, ids, ids_start, np.int64(0), shared)
        elif n <= short_bytes and count > short_ids:
            cache_store(caches.short, data, start, end, ids, ids_start, np.int64(0), shared)
    return count


@njit(cache=True)
def seed_piece_caches(caches, tids, token_bytes, token_offsets):
    """``remember_piece`` for every token of ``tids`` with 1..max_piece_bytes(caches.short) bytes, as
    the piece that encodes to that one id, in the order given: the narrow loop's counterpart of
    ``piece_cache_wide.seed_wide_cache`` (which says when this is exact, and why): a faster GPT-2
    first pass, warm passes level (bench/RESULTS.md, "GPT-2's loop seeded too"). Returns how many
    were stored."""
    most = max_piece_bytes(caches.short)
    one = np.empty(1, dtype=np.uint16)
    stored = 0
    for k in range(tids.shape[0]):
        tid = tids[k]
        start, end = token_offsets[tid], token_offsets[tid + 1]
        if 1 <= end - start <= most and 0 <= tid <= 0xFFFF:
            one[0] = tid
            stored += remember_piece(caches, token_bytes, start, end, one, 0, np.int64(1))
    return stored


_BLOCK = 256  # pieces found (and their cache slots prefetched) before any of them is encoded: the
# fastest of 64..512 for a warm pass (each slot's prefetch is issued longer before its lookup;
# bench/RESULTS.md, "Blocks of 256 pieces"). The ring (_RING words per piece) is then 8 KB, well inside L1.
_RING = 4  # words per ring entry: a piece's end, whole-token id, cut_end, home slot address (0: none)
# A *hot* entry (its fourth word not 0: a piece of 1..15 bytes starting at least 8 bytes before its
# document's end, whose home slot piece_slot found) holds its key (piece_key's k0 and second) in
# words 1 and 2 instead: the finder computed it for the slot's hash anyway, and encode_block no longer
# loads and masks the piece's bytes a second time (faster warm passes). Only the rest hold the words
# below. A memo-pending entry's third word is
# the piece's memo hash (its cut_end is its end). A ring entry's second word: a whole-token id (>= 0),
# -1 (look the piece up and merge on a miss), or one of these, for the long-piece memo (piece_memo.py):
_MEMO_BEGIN = -2  # the first part of a piece the memo does not hold: note where its ids begin
_MEMO_STORE = -3  # no piece: store the ids since _MEMO_BEGIN as those of data[ring[4k + 2]:ring[4k]]
_MEMO_PENDING = -4  # a whole piece the memo's filter says it may hold; ring[4k + 2] its hash


class EncodeScratch(NamedTuple):
    """One thread's working memory for ``encode_with``: ``ranks`` (the short-piece merge),
    ``work`` (the long-piece merge; a longer part gets a bigger one for its call), ``ring``
    (a block's pieces, and a memo store) and ``state`` (``encode_run``'s answer to its caller;
    ``state[4]`` where the ids of a piece to be memoized begin; ``state[5]`` set: memoize the
    piece that the resumed run cuts into parts; ``state[8..10]``: ``runs.encode_docs``' resume
    point)."""

    ranks: np.ndarray
    work: np.ndarray
    ring: np.ndarray
    state: np.ndarray


@njit(cache=True)
def new_scratch():
    """Fresh ``EncodeScratch`` (about 8 KB): allocate it once per thread or run of documents,
    not per document."""
    return EncodeScratch(np.empty(MAX_CACHED_PIECE_BYTES, dtype=np.int64),
                         np.empty(long_merge_room(4 * MAX_CACHED_PIECE_BYTES), dtype=np.int64),
                         np.empty(_RING * (_BLOCK + 1), dtype=np.int64), np.zeros(16, dtype=np.int64))


NARROW_VOCAB = 65536  # vocabularies up to this size have uint16 ids: encode_narrow; larger ones encode_wide.py


@njit(cache=True)
def takes_wide_loop(config):
    """Whether a vocabulary (its ``Vocab.config``) is encoded by ``encode_wide.encode_text_wide``:
    more than ``NARROW_VOCAB`` ids, or a pre-tokenizer other than GPT-2's and the URL one
    (cl100k_base's and o200k_base's patterns are walked by the wide loop whatever the vocabulary's
    size). Else ``encode_narrow``. Callable from Python too (``Encoder`` picks its batch kernel)."""
    pretok = config[cfg.PRETOKENIZER]
    return config[cfg.VOCAB_SIZE] > NARROW_VOCAB or (pretok != cfg.PRETOK_GPT2 and pretok != cfg.PRETOK_URL)


@njit(cache=True)
def encode_text(data, start, end, vocab, classes, caches, out, out_pos):
    """Encode one document ``data[start:end]`` into ``out[out_pos:]``; returns the new out_pos.

    ``out`` needs room for ``end - start`` ids from ``out_pos``; all of that room may be
    written to (the ids end at the returned position; what lies past it is scratch).
    Allocates its scratch: to encode many documents, call ``encode_with`` with one
    ``new_scratch()``.
    """
    return encode_with(data, start, end, vocab, classes, caches, new_scratch(), out, out_pos)


@njit(cache=True)
def encode_with(data, start, end, vocab, classes, caches, scratch, out, out_pos):
    """``encode_text`` with the scratch passed in (``new_scratch()``, reused across calls): any
    vocabulary (``takes_wide_loop`` says which loop encodes it).

    The loops below are called with one type of input, whatever the caller passes (a writable
    ``data``, int32 positions): read-only ``data`` (``as_readonly``) and int64 positions, so a
    user's own ``@njit`` code never compiles them again for its types (~1-2 min on 2 cores)."""
    text = as_readonly(data)
    s, e, at = np.int64(start), np.int64(end), np.int64(out_pos)
    if classes is None:  # the URL pre-tokenizer's own specialisation (encode_narrow)
        return encode_narrow(text, s, e, vocab, classes, caches, scratch, out, at)
    if takes_wide_loop(vocab.config):  # cl100k_base, o200k_base and their patterns
        return encode_text_wide(text, s, e, vocab, classes, caches, out, at)
    return encode_narrow(text, s, e, vocab, classes, caches, scratch, out, at)


@njit(cache=True)
def check_narrow_classes(vocab, classes):
    """The narrow loop's rule for ``classes=None`` (its URL-only specialisation): only a URL
    vocabulary of at most ``NARROW_VOCAB`` ids may pass it (``encode_narrow``, ``runs.encode_docs``)."""
    if classes is None and (vocab.config[cfg.PRETOKENIZER] != cfg.PRETOK_URL or vocab.config[cfg.VOCAB_SIZE] > NARROW_VOCAB):
        raise ValueError("classes=None is for a URL vocabulary of at most 65,536 ids; pass Encoder.classes")


@njit(cache=True)
def encode_narrow(data, start, end, vocab, classes, caches, scratch, out, out_pos):
    """``encode_with`` for a vocabulary that ``takes_wide_loop`` sends here (at most
    ``NARROW_VOCAB`` ids, the GPT-2 or URL pre-tokenizer; the caller checks): what the recipes'
    kernels call. It does not reach ``encode_wide`` or the cl100k/o200k pre-tokenizers, so a GPT-2
    or URL run never compiles them (about half of a cold start; bench/RESULTS.md, "GPT-2 and URL runs
    stop compiling the cl100k/o200k loop").

    Runs ``encode_run``, which cannot allocate; when a long part needs more merge room than
    ``scratch.work`` holds, it stops before that part, and the run resumes there with a work
    array of the size it asked for. (It also stops before a piece whose memo entry failed its
    check, to resume by cutting that piece into parts.)

    ``classes=None`` (``Encoder.kernel_classes`` of a URL vocabulary) compiles a loop of its own
    with the URL pre-tokenizer only: Numba drops the ``classes is not None`` blocks from it, so a
    URL run does not compile the GPT-2 pre-tokenizer (a shorter cold quick start). Any class table
    works for a URL vocabulary too.
    """
    check_narrow_classes(vocab, classes)
    state = scratch.state
    work = scratch.work
    pos = start
    cut_end = start
    while True:
        out_pos = encode_run(data, pos, end, cut_end, vocab, classes, caches, out, out_pos,
                             scratch.ranks, work, scratch.ring, state)
        if state[0] < 0:
            return out_pos
        pos = state[0]
        cut_end = state[1]
        if state[2] > work.shape[0]:  # (0: a memo entry failed its check, the piece is cut instead)
            work = grown_work(work, state[2])


@njit(cache=True, forceinline=True, **NO_REFCOUNTING)
def encode_run(data, start, end, cut_end, vocab, classes, caches, out, out_pos, ranks, work, ring, state):
    """The encode loop: ids of ``data[start:end]`` (``start`` a piece boundary, or a part
    boundary inside a long piece that ends at ``cut_end``) into ``out[out_pos:]``; returns the
    new out_pos. Sets ``state[0] = -1`` when done. When a long part needs a work array of more
    than ``work.shape[0]`` (7 per byte), it stops before that part instead: ``state[0]`` its
    start, ``state[1]`` the ``cut_end`` to resume with, ``state[2]`` the room needed. It does
    the same, with ``state[2] = 0``, before a long piece that the memo (``caches.memo``,
    piece_memo.py) turns out not to hold, or whose entry fails the check against its bytes:
    resumed with that ``cut_end``, the piece is cut into parts (and, with ``state[5]`` set,
    memoized).

    Compiled without reference counting (``jit.NO_REFCOUNTING``), so it allocates nothing: the
    scratch comes from ``encode_narrow``. Ids below 65,536 only (its callers check). Inlined into
    its two callers (``forceinline``; ``encode_narrow`` and ``runs._encode_span``): a call passed
    ~24 arrays exploded on the stack, per document; inlined, URL and GPT-2 passes ran faster, for
    ~1 s more of a cold compile (bench/RESULTS.md, "calls that passed every table on the stack").

    The text is taken in blocks of up to ``_BLOCK`` pieces: first the pre-tokenizer finds a
    block's pieces and prefetches each one's cache slot, then the block is encoded. Two short
    loops instead of one interleaved loop: the slots' memory latency overlaps the finding of
    the rest of the block, and each loop's branches are predicted on their own
    (bench/RESULTS.md, "blocks of pieces, no reference counting, a 64-byte ASCII pre-tokenizer").
    """
    tiny = caches.tiny
    short = caches.short
    memo = caches.memo
    out_limit = out_pos + (end - start)
    size = data.shape[0]
    short_bytes = max_piece_bytes(short)
    hot = short.shape[1] == SHORT_WORDS  # the layout encode_block's hot path reads (piece_slot's addresses)
    gpt2 = vocab.config[cfg.PRETOKENIZER] == cfg.PRETOK_GPT2
    whole_piece_lookup = vocab.config[cfg.WHOLE_PIECE_LOOKUP] != 0
    joinable = vocab.joinable
    follow = hot and short.shape[0] <= tiny.shape[0]  # as in encode_block
    follow_long = follow and caches.long.shape[1] == 8 and caches.long.shape[0] <= short.shape[0]
    tiny_base = element_address(tiny, 0)
    short_base = element_address(short, 0)
    long_base = element_address(caches.long, 0)
    short_index_bytes = np.uint64(SHORT_WORDS * 8 * (short.shape[0] - 1))
    long_index_bytes = np.uint64(64 * (caches.long.shape[0] - 1))
    state[0] = -1
    found = start  # the finder's position; while found < cut_end it walks the parts of a long piece
    memo_from = -1  # the start of the long piece being cut whose ids the memo is to store
    memo_resumed = start if state[5] != 0 else -1  # a piece the memo turned out not to hold: store it
    state[5] = 0
    pos = start
    while pos < end:
        # --- find up to _BLOCK pieces: ring[4k] the end, ring[4k + 1] a whole-token id or -1,
        # ring[4k + 2] the cut_end in effect (to resume there), ring[4k + 3] the address of the
        # cache slot its lookup reads first, prefetched now (0: none; not 0: a hot entry, which
        # needs no words 1 and 2, see _RING) ---
        n_found = 0
        while found < end and n_found < _BLOCK:
            if classes is not None:  # (None: the URL pre-tokenizer's specialisation, which lacks this block)
                if (gpt2 and hot and found >= cut_end and found + WINDOW + 8 <= end and found + WINDOW + 16 <= size
                        and (load_word(data, found) & _HEAD3_HIGH) == 0):
                    # 64 ASCII bytes at a time (pretok_gpt2.gpt2_window_starts): the pieces up to
                    # the first one too long for the short cache, which the path below takes. (The
                    # prefetch reads a piece's key as two 8-byte words: up to 3 bytes past the window.)
                    # Not tried when one of the first three bytes is >= 0x80: then the window decides
                    # no piece (in non-Latin text, at almost every piece).
                    starts = gpt2_window_starts(data, found) if ASCII_MASKS else np.uint64(0)
                    piece_start = found
                    while starts != 0 and n_found < _BLOCK:
                        piece_end = found + trailing_zeros(starts)
                        n = piece_end - piece_start
                        if n > short_bytes:
                            break
                        starts &= starts - np.uint64(1)
                        slot = np.uint64(_RING * n_found)  # unsigned indices: no wraparound code (see _U1)
                        at, k0, second = prefetch_home(tiny, short, data, piece_start, n)
                        ring[slot] = piece_end  # (a hot entry: its key, not a whole id or cut_end, see encode_block)
                        ring[slot + _U1] = np.int64(k0)
                        ring[slot + _U2] = np.int64(second)
                        ring[slot + _U3] = np.int64(at)
                        n_found += 1
                        piece_start = piece_end
                    if piece_start > found:
                        found = piece_start
                        continue
            whole = -1
            h = np.uint64(0)  # a long piece's memo hash
            if found < cut_end:
                piece_end = segment_end(data, found, cut_end, joinable)
                if found == memo_resumed:
                    whole = _MEMO_BEGIN
                    memo_from = found
                    memo_resumed = -1
            else:
                if classes is None:
                    piece_end = url_piece_end(data, found, end)
                elif gpt2:
                    piece_end = gpt2_piece_end(data, found, end, classes)
                else:  # the URL pre-tokenizer: takes_wide_loop sends every other one to the wide loop
                    piece_end = url_piece_end(data, found, end)
                if piece_end - found > short_bytes:
                    if whole_piece_lookup:  # tiktoken's rule, HF's ignore_merges: a token is emitted as is
                        whole = token_id_of(vocab.token_table, vocab.token_bytes, vocab.token_offsets, data, found, piece_end)
                    if whole < 0:
                        # Too long for the short cache: from the memo if seen before
                        # (piece_memo.py), else cut where no merge can cross (segments.py) and
                        # encode the parts one by one, most of them from the caches.
                        cut_end = piece_end
                        memoized = cut_end - found <= MEMO_MAX_BYTES
                        if memoized:
                            h = memo_hash(data, found, cut_end)
                            memo_prefetch(memo, h)  # the filter word and the table slot
                        piece_end = segment_end(data, found, cut_end, joinable)  # (while they load)
                        if memoized:
                            if memo_maybe(memo, h):
                                # Perhaps seen before: one entry for the whole piece, looked up in
                                # the memo's table by encode_block a block from now, when the slot
                                # has arrived (a miss there resumes here, cutting the piece).
                                whole = _MEMO_PENDING
                                piece_end = cut_end
                            else:
                                whole = _MEMO_BEGIN
                                memo_from = found
            n = piece_end - found
            at = np.uint64(0)
            k0 = np.uint64(0)
            second = np.uint64(0)
            if n <= short_bytes and found + 16 <= size:
                at, k0, second = prefetch_home(tiny, short, data, found, n)
                if follow:
                    # Off the window path (mostly non-Latin text) a piece is often a marker (a tiny
                    # one with 4..7 ids, a short one with more than 7): the slot where encode_block
                    # follows it loads as well.
                    if n <= TINY_MAX_BYTES:
                        prefetch_at(short_base + (((at - tiny_base) << _U1) & short_index_bytes))
                    elif follow_long:
                        prefetch_at(long_base + (((at - short_base) << _U1) & long_index_bytes))
            if not hot or whole != -1 or found + 8 > end:  # not a hot entry (encode_block)
                at = np.uint64(0)
            slot = np.uint64(_RING * n_found)
            ring[slot] = piece_end
            if at != 0:  # a hot entry: its key
                ring[slot + _U1] = np.int64(k0)
                ring[slot + _U2] = np.int64(second)
            else:
                ring[slot + _U1] = whole
                ring[slot + _U2] = np.int64(h) if whole == _MEMO_PENDING else cut_end
            ring[slot + _U3] = np.int64(at)
            n_found += 1
            found = piece_end
            if memo_from >= 0 and found == cut_end:  # the last part: then store the whole piece
                slot = np.uint64(_RING * n_found)  # (the ring has room for one entry past _BLOCK)
                ring[slot] = found
                ring[slot + _U1] = _MEMO_STORE
                ring[slot + _U2] = memo_from
                ring[slot + _U3] = 0
                n_found += 1
                memo_from = -1
        # --- encode them: encode_block, inlined (forceinline): a call passed ~190 words of arguments
        # on the stack (every array of vocab and caches, exploded), 3.3% of a warm GPT-2 pass (perf);
        # inlined, GPT-2 and URL passes ran faster ---
        out_pos = encode_block(data, pos, ring, n_found, vocab, caches, out, out_pos, out_limit, ranks, work, state)
        if state[0] >= 0:  # a long part needs more merge room: the caller grows work and resumes
            return out_pos
        pos = ring[_RING * (n_found - 1)]
    return out_pos


@njit(cache=True, forceinline=True, **NO_REFCOUNTING)
def encode_block(data, pos, ring, n_found, vocab, caches, out, out_pos, out_limit, ranks, work, state):
    """The second half of ``encode_run``'s turn: the ids of the ``n_found`` pieces in ``ring``
    (``ring[4k]`` a piece's end, ``ring[4k + 1]`` a whole-token id or -1, ``ring[4k + 2]`` the
    cut_end in effect, ``ring[4k + 3]`` its home slot address or 0; a hot entry, address not 0,
    holds its key in words 1 and 2 instead: see ``_RING``), the first starting at ``pos``,
    into ``out`` from ``out_pos``; returns the
    new out_pos. A long part that needs more merge room than ``work`` holds sets ``state`` as
    ``encode_run`` documents and stops there."""
    byte_ids = vocab.byte_ids
    tiny = caches.tiny
    short = caches.short
    long = caches.long
    tiny_bytes = TINY_MAX_BYTES
    short_bytes = max_piece_bytes(short)
    long_bytes = max_piece_bytes(long)
    short_layout = short.shape[1] == SHORT_WORDS  # then the specialised lookup applies
    size = data.shape[0]
    # A marker's ids are in a later cache's home slot for the same hash (piece_slot's, and
    # key_home's for a long-cache piece of up to 15 bytes), whose index is the marker's own, masked
    # to that cache's size where it is no larger: the hot path follows a marker there itself.
    # (A tiny piece with 4..7 ids: the short slot; with more, or a short piece with more than 7:
    # the long one. Indentation such as "\n" and 7 spaces has 8 ids in GPT-2.)
    follow = short_layout and short.shape[0] <= tiny.shape[0]
    follow_long = follow and long.shape[1] == 8 and long.shape[0] <= short.shape[0]
    tiny_base = element_address(tiny, 0)
    short_base = element_address(short, 0)
    long_base = element_address(long, 0)
    short_index_bytes = np.uint64(SHORT_WORDS * 8 * (short.shape[0] - 1))  # slot index << 5, masked
    long_index_bytes = np.uint64(64 * (long.shape[0] - 1))  # slot index << 6, masked
    shared = caches_shared(caches.memo)  # (caches shared with other threads: stores never rewrite a slot)
    for k in range(n_found):
        slot = np.uint64(_RING * k)
        piece_end = ring[slot]
        at = np.uint64(ring[slot + _U3])
        n = piece_end - pos
        # The hot path: a piece of 1..15 bytes found in its home slot, tiny or short (the address
        # the finder computed for its prefetch, piece_slot), with no branch on its length and its
        # ids written as one 8-place store (the count says how many are real). Everything else
        # takes the general path below. A hot entry starts 8 or more bytes before the end, and ids
        # never outnumber bytes, so the 8 places lie inside out_limit.
        whole = -1
        if at != 0:
            k0 = np.uint64(ring[slot + _U1])
            second = np.uint64(ring[slot + _U2])
            is_short = n > tiny_bytes
            # Word 1 first, with acquire: the publishing word of caches shared between threads
            # (piece_cache.py); once it matches, the words read after it are its writer's.
            published = load_acquire_at(at + _U8)
            same = ((published & second_mask(is_short)) == second) & (load_at(at) == k0)
            low = load_at(at + (_U16 if is_short else _U8))
            high = load_at(at + (_U24 if is_short else _U8))
            count = np.int64((high >> _COUNT_SHIFT) & _BYTE)
            if same & (count != 0):
                store_ids8(out, out_pos, low, high)
                out_pos += count
                pos = piece_end
                continue
            if same & follow:  # a marker (count 0): follow it (above)
                if is_short:
                    offset = (at - short_base) << _U1  # a 32-byte slot's offset -> a 64-byte one's
                else:
                    offset = (at - tiny_base) << _U2  # 16 -> 64 bytes
                    at = short_base + (((at - tiny_base) << _U1) & short_index_bytes)
                    published = load_acquire_at(at + _U8)  # (first, as above)
                    low = load_at(at + _U16)
                    high = load_at(at + _U24)
                    count = np.int64((high >> _COUNT_SHIFT) & _BYTE)
                    if (published == second) & (load_at(at) == k0) & (count != 0):
                        store_ids8(out, out_pos, low, high)
                        out_pos += count
                        pos = piece_end
                        continue
                if follow_long and out_pos + 16 <= out_limit:
                    at = long_base + (offset & long_index_bytes)  # key: k0, k1, 0, the length byte
                    published = load_acquire_at(at + _U24)  # (first: a long slot's publishing word)
                    high = load_at(at + _U56)
                    count = np.int64((high >> _COUNT_SHIFT) & _BYTE)
                    if ((published == (second & _TOP8)) & (load_at(at) == k0) & (load_at(at + _U8) == (second & _LOW56))
                            & (load_at(at + _U16) == 0) & (count != 0)):
                        store_ids8(out, out_pos, load_at(at + _U32), load_at(at + _U40))
                        store_ids8(out, out_pos + 8, load_at(at + _U48), high)
                        out_pos += count
                        pos = piece_end
                        continue
        else:
            whole = ring[slot + _U1]
        if whole < -1:  # the long-piece memo (piece_memo.py)
            if whole == _MEMO_STORE:
                memo_store(caches.memo, data, ring[slot + _U2], pos, out, state[4], out_pos - state[4])
                continue
            if whole == _MEMO_BEGIN:
                state[4] = out_pos
            else:  # _MEMO_PENDING
                hit = memo_find(caches.memo, np.uint64(ring[slot + _U2]))
                new_pos = -1
                if hit >= 0:
                    new_pos = memo_emit(caches.memo, hit, vocab.token_heads, vocab.token_bytes, vocab.token_offsets,
                                        data, pos, piece_end, out, out_pos)
                if new_pos < 0:
                    # Not held after all (the filter's false positive), or a tag collision (ids
                    # of another piece): resume here, cutting the piece into parts; memoized
                    # then, unless its tag is another piece's.
                    state[0] = pos
                    state[1] = piece_end
                    state[2] = 0
                    state[5] = 1 if hit < 0 else 0
                    return out_pos
                out_pos = new_pos
                pos = piece_end
                continue
        if whole >= 0:
            out[np.uint64(out_pos)] = whole
            out_pos += 1
        elif n == 1:
            out[np.uint64(out_pos)] = byte_ids[data[np.uint64(pos)]]
            if pos + 16 <= size:  # then the hot path above looks it up in the tiny cache next time
                tiny_cache_store(tiny, data, pos, piece_end, out, out_pos, np.int64(1), shared)
            out_pos += 1
        elif n <= long_bytes:
            # -1: never seen, merge it; ELSEWHERE: a marker, the ids are in a later cache.
            if n <= tiny_bytes:
                hit = tiny_cache_lookup(tiny, data, pos, piece_end, out, out_pos, out_limit)
                if hit == ELSEWHERE:  # 4..7 ids: the short cache; more: the long one
                    if short_layout:
                        hit = short_cache_lookup(short, data, pos, piece_end, out, out_pos, out_limit)
                    else:
                        hit = cache_lookup(short, data, pos, piece_end, out, out_pos, out_limit)
                    if hit < 0:
                        hit = cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit)
            elif n <= short_bytes:
                if short_layout:
                    hit = short_cache_lookup(short, data, pos, piece_end, out, out_pos, out_limit)
                else:
                    hit = cache_lookup(short, data, pos, piece_end, out, out_pos, out_limit)
                if hit == ELSEWHERE:  # more than 7 ids (CJK, emoji): the long cache
                    hit = cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit)
            else:
                hit = cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit)
            if hit >= 0:
                out_pos = hit
            else:
                new_pos = merge_short_piece(data, pos, piece_end, vocab, ranks, out, out_pos)
                remember_piece(caches, data, pos, piece_end, out, out_pos, new_pos - out_pos)
                out_pos = new_pos
        else:  # a long part: merged every time (the whole-piece lookup, where it applies, is done)
            if work.shape[0] < long_merge_room(n):  # no room: the caller grows work and resumes here (no memo store then)
                state[0] = pos
                state[1] = ring[slot + _U2]
                state[2] = long_merge_room(n)
                return out_pos
            out_pos = merge_long_piece(data, pos, piece_end, vocab, work, out, out_pos)
        pos = piece_end
    return out_pos


@njit(cache=True)
def split_by_bytes(offsets, n_parts):
    """Document boundaries that cut ``offsets`` into ``n_parts`` runs of about equal bytes."""
    n_docs = offsets.shape[0] - 1
    bounds = np.empty(n_parts + 1, dtype=np.int64)
    bounds[0] = 0
    total = offsets[n_docs] - offsets[0]
    doc = 0
    for part in range(1, n_parts):
        target = offsets[0] + (total * part) // n_parts
        while doc < n_docs and offsets[doc + 1] <= target:
            doc += 1
        bounds[part] = doc
    bounds[n_parts] = n_docs
    return bounds


@njit(cache=True, parallel=True)
def encode_batch_counts(data, offsets, vocab, classes, task_caches, out, counts):
    """Encode every document ``data[offsets[i]:offsets[i+1]]``; its id count goes to ``counts[i]``.

    ``task_caches`` is a ``PieceCaches`` of stacked caches, one per parallel task
    (``task_caches.short[t]`` ...); the documents are cut into that many byte-balanced runs
    (``split_by_bytes``). Task t writes the ids of its run back to back into ``out`` from
    ``offsets[bounds[t]] - offsets[0]`` (ids never outnumber bytes, so ``out`` needs
    ``offsets[-1] - offsets[0]`` places); ``compact_runs`` then closes the gaps. With one task
    the ids are already in place. The ids do not depend on the split.
    """
    n_tasks = task_caches.short.shape[0]
    bounds = split_by_bytes(offsets, n_tasks)
    base = offsets[0]
    for task in prange(n_tasks):
        caches = PieceCaches(task_caches.tiny[task], task_caches.short[task], task_caches.long[task],
                             task_caches.memo[task])
        scratch = new_scratch()
        at = offsets[bounds[task]] - base
        for doc in range(bounds[task], bounds[task + 1]):
            end = encode_with(data, offsets[doc], offsets[doc + 1], vocab, classes, caches, scratch, out, at)
            counts[doc] = end - at
            at = end


def compact_runs(out, offsets, counts, n_tasks):
    """Move the runs ``encode_batch_counts`` wrote with ``n_tasks`` tasks together, in order;
    returns the number of ids, which then fill ``out[:total]``. (numpy moves the runs: a
    memmove per task, and a run only ever moves towards the front.)"""
    bounds = split_by_bytes(offsets, n_tasks)
    base = int(offsets[0])
    total = 0
    for task in range(n_tasks):
        src = int(offsets[bounds[task]]) - base
        n = int(counts[bounds[task]:bounds[task + 1]].sum())
        if src != total:
            out[total:total + n] = out[src:src + n]
        total += n
    return total


@njit(cache=True, parallel=True)
def gather_batch(scratch, offsets, counts, out, out_offsets):
    """Pack per-document id slots into ``out`` at ``out_offsets``: document i's ``counts[i]``
    ids are read from ``scratch[offsets[i] - offsets[0]:]`` (the URL kernels' layout)."""
    n_docs = counts.shape[0]
    out_offsets[0] = 0
    for doc in range(n_docs):
        out_offsets[doc + 1] = out_offsets[doc] + counts[doc]
    base = offsets[0]
    for doc in prange(n_docs):
        src = offsets[doc] - base
        dst = out_offsets[doc]
        for j in range(counts[doc]):
            out[dst + j] = scratch[src + j]
