"""Text -> ids for vocabularies with ids above 65,535 (cl100k_base, o200k_base, large HF files).

``encode_text`` hands such vocabularies to ``encode_text_wide`` at its top: the same loop with the
piece caches of ``piece_cache_wide``, whose entries carry 18-bit ids. Kept apart so that the
uint16 loop, GPT-2's hot path, is untouched by the wider layout.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from fastenc.kernels import config as cfg
from fastenc.kernels.bpe import merge_long_piece, merge_short_piece
from fastenc.kernels.piece_cache import ELSEWHERE, MAX_CACHED_PIECE_BYTES, TINY_MAX_BYTES, TINY_MAX_IDS, max_piece_bytes
from fastenc.kernels.piece_cache_wide import (
    WIDE_MAX_ID,
    wide_cache_lookup,
    wide_cache_store,
    wide_max_piece_ids,
    wide_tiny_lookup,
    wide_tiny_store,
)
from fastenc.kernels.pretok_cl100k import cl100k_piece_end
from fastenc.kernels.pretok_gpt2 import gpt2_piece_end
from fastenc.kernels.pretok_o200k import o200k_piece_end
from fastenc.kernels.pretok_url import url_piece_end
from fastenc.kernels.segments import segment_end
from fastenc.kernels.tables import token_id_of


@njit(cache=True)
def encode_text_wide(data, start, end, vocab, classes, caches, out, out_pos):
    """``encode_text`` for vocabularies with ids above 65,535 (it calls this one for them): the
    same loop, with the wide piece caches (``piece_cache_wide``; ids up to 262,143, fewer ids per
    entry). A piece whose ids do not fit is merged every time. ``out`` must hold uint32 (or wider).

    ``out`` needs room for ``end - start`` ids from ``out_pos``; all of that room may be
    written to (the ids end at the returned position; what lies past it is scratch).
    """
    byte_ids = vocab.byte_ids
    tiny = caches.tiny
    short = caches.short
    long = caches.long
    ranks = np.empty(MAX_CACHED_PIECE_BYTES, dtype=np.int64)  # scratch of the short-piece merge
    work = np.empty(7 * 4 * MAX_CACHED_PIECE_BYTES, dtype=np.int64)  # of the long-piece merge (grows)
    out_limit = out_pos + (end - start)
    cacheable = vocab.config[cfg.VOCAB_SIZE] <= WIDE_MAX_ID + 1  # else only pieces whose ids fit
    tiny_bytes = TINY_MAX_BYTES
    short_bytes = max_piece_bytes(short)
    long_bytes = max_piece_bytes(long)
    short_ids = wide_max_piece_ids(short)
    long_ids = wide_max_piece_ids(long)
    pretok = vocab.config[cfg.PRETOKENIZER]
    gpt2 = pretok == cfg.PRETOK_GPT2
    whole_piece_lookup = vocab.config[cfg.WHOLE_PIECE_LOOKUP] != 0
    joinable = vocab.joinable
    pos = start
    cut_end = start  # while pos < cut_end, pos walks through a long piece cut into parts
    # The hot loop: one pre-token piece (or one part of a long piece) per turn. Every function
    # it calls is written so that Numba emits no reference counting for it (see piece_cache.py):
    # a call costs a few ns.
    while pos < end:
        if pos < cut_end:
            piece_end = segment_end(data, pos, cut_end, joinable)
        else:
            if gpt2:
                piece_end = gpt2_piece_end(data, pos, end, classes)
            elif pretok == cfg.PRETOK_CL100K:
                piece_end = cl100k_piece_end(data, pos, end, classes)
            elif pretok == cfg.PRETOK_O200K:
                piece_end = o200k_piece_end(data, pos, end, classes)
            else:
                piece_end = url_piece_end(data, pos, end)
            if piece_end - pos > short_bytes:
                whole = -1
                if whole_piece_lookup:  # tiktoken's rule, HF's ignore_merges: a token is emitted as is
                    whole = token_id_of(vocab.token_table, vocab.token_bytes, vocab.token_offsets, data, pos, piece_end)
                if whole >= 0:
                    out[out_pos] = whole
                    out_pos += 1
                    pos = piece_end
                    continue
                # Too long to cache whole: cut it where no merge can cross (segments.py) and
                # encode the parts one by one, most of them from the caches.
                cut_end = piece_end
                piece_end = segment_end(data, pos, cut_end, joinable)
        n = piece_end - pos
        if n == 1:
            out[out_pos] = byte_ids[data[pos]]
            out_pos += 1
        elif n <= long_bytes:
            # -1: never seen, merge it; ELSEWHERE: a marker, the ids are in a later cache.
            if n <= tiny_bytes:
                hit = wide_tiny_lookup(tiny, data, pos, piece_end, out, out_pos, out_limit)
                if hit == ELSEWHERE:  # 4 or more ids: the short cache; more than 4: the long one
                    hit = wide_cache_lookup(short, data, pos, piece_end, out, out_pos, out_limit)
                    if hit < 0:
                        hit = wide_cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit)
            elif n <= short_bytes:
                hit = wide_cache_lookup(short, data, pos, piece_end, out, out_pos, out_limit)
                if hit == ELSEWHERE:  # more than 4 ids: the long cache
                    hit = wide_cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit)
            else:
                hit = wide_cache_lookup(long, data, pos, piece_end, out, out_pos, out_limit)
            if hit >= 0:
                out_pos = hit
            else:
                new_pos = merge_short_piece(data, pos, piece_end, vocab, ranks, out, out_pos)
                count = new_pos - out_pos
                if not cacheable:
                    for j in range(out_pos, new_pos):
                        if out[j] > WIDE_MAX_ID:
                            count = -1  # an id too large for the wide layout: merged every time
                if count < 0:
                    pass
                elif n <= tiny_bytes and count <= TINY_MAX_IDS:
                    wide_tiny_store(tiny, data, pos, piece_end, out, out_pos, count)
                else:
                    if n <= short_bytes and count <= short_ids:
                        wide_cache_store(short, data, pos, piece_end, out, out_pos, count)
                    elif count <= long_ids:
                        wide_cache_store(long, data, pos, piece_end, out, out_pos, count)
                    # Markers, as in encode_text: a lookup that finds one goes on to the next cache.
                    if n <= tiny_bytes:
                        wide_tiny_store(tiny, data, pos, piece_end, out, out_pos, 0)
                    elif n <= short_bytes and count > short_ids:
                        wide_cache_store(short, data, pos, piece_end, out, out_pos, 0)
                out_pos = new_pos
        else:  # a long part: merged every time (the whole-piece lookup, where it applies, is done)
            if work.shape[0] < 7 * n:
                work = np.empty(max(7 * n, 2 * work.shape[0]), dtype=np.int64)
            out_pos = merge_long_piece(data, pos, piece_end, vocab, work, out, out_pos)
        pos = piece_end
    return out_pos
