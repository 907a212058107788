"""The short-piece merge alone: ``merge_short_piece`` over every distinct piece of 2..31 bytes of a
corpus, one call per piece, with the pair table fastenc builds (each token's last merge) against
one of every split of every token (what it built before 2026-12-04; the same ids).

    python bench/probes/merge_tables.py [--encoding o200k_base] [--corpus ../shared/data/text/docs.parquet] [--rounds 6]

A first pass merges each distinct piece once (840k of them in docs.parquet with o200k_base), so
this is the part of a first pass that the tables decide. The pieces come from fastenc's own
pre-tokenizer; the two tables alternate, one call over all pieces per round, and the ns per piece
of every round are printed (min and median compare; these VMs swing by 10-20%). The ids of the two
are compared.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness and the benches
from harness import DOCS as DEFAULT_DOCS, require  # noqa: E402


def every_split_table(vocab):
    """The pair tables of every split of every token into two tokens (tiktoken's rule, as built
    before: ``fastenc.vocab`` still lists those splits, then keeps each token's last merge)."""
    from fastenc.kernels import tables
    from fastenc.vocab import _tiktoken_merge_arrays

    tb, to = vocab.token_bytes, vocab.token_offsets
    id_to_bytes = {t: bytes(tb[to[t]:to[t + 1]]) for t in range(len(to) - 1)}
    mergeable = set(vocab.token_table[vocab.token_table >= 0].tolist())
    lefts, rights, ranks, _ = _tiktoken_merge_arrays(id_to_bytes, mergeable, len(to) - 1)
    pt = tables.build_pair_table(np.array(lefts), np.array(rights), ranks, tables.table_capacity(len(lefts)))
    return vocab._replace(pair_table=pt, pair_filter=tables.build_pair_filter(pt),
                          byte_pair_ranks=tables.build_byte_pair_ranks(pt, vocab.byte_ids))


def distinct_pieces(enc, docs: Path):
    """(data, starts, ends) of the distinct pieces of 2..31 bytes, in first-seen order."""
    import pyarrow.parquet as pq
    from numba import njit

    from fastenc.arrow_io import arrow_to_flat
    from fastenc.kernels.pretok_cl100k import cl100k_piece_end
    from fastenc.kernels.pretok_gpt2 import gpt2_piece_end
    from fastenc.kernels.pretok_o200k import o200k_piece_end

    piece_end = {"gpt2": gpt2_piece_end, "cl100k": cl100k_piece_end, "o200k": o200k_piece_end}[enc.info.pretokenizer]

    @njit
    def ends(data, offsets, classes, out):
        k = 0
        for d in range(offsets.shape[0] - 1):
            p, e = offsets[d], offsets[d + 1]
            while p < e:
                p = piece_end(data, p, e, classes)
                out[k] = p
                k += 1
        return k

    data, offsets = arrow_to_flat(pq.read_table(docs, columns=["text"]).column("text").combine_chunks())
    out = np.empty(len(data), np.int64)
    e = out[:ends(data, offsets, enc.classes, out)]
    s = np.concatenate([[0], e[:-1]])  # the pieces tile each document, and the documents tile data
    keep = (e - s >= 2) & (e - s <= 31)
    seen, starts, stops = set(), [], []
    raw = data.tobytes()
    for a, b in zip(s[keep].tolist(), e[keep].tolist()):
        if raw[a:b] not in seen:
            seen.add(raw[a:b])
            starts.append(a), stops.append(b)
    return data, np.array(starts, np.int64), np.array(stops, np.int64)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encoding", default="o200k_base")
    p.add_argument("--corpus", "--docs", dest="docs", type=Path, default=DEFAULT_DOCS)
    p.add_argument("--rounds", type=int, default=6)
    args = p.parse_args()
    require([args.docs], "--corpus")
    from numba import njit

    import fastenc
    from fastenc.kernels import tables
    from fastenc.kernels.bpe import merge_short_piece

    enc = fastenc.load(args.encoding)
    if enc.info.merge_rule != "tiktoken":
        raise SystemExit(f"{args.encoding} follows the {enc.info.merge_rule!r} merge rule; this compares tiktoken's tables")
    variants = {"last merges": enc.vocab, "every split": every_split_table(enc.vocab)}
    data, starts, stops = distinct_pieces(enc, args.docs)
    for name, v in variants.items():
        print(f"{name}: {int((v.pair_table != tables.EMPTY_PAIR_SLOT).sum()):,} pairs, table {v.pair_table.nbytes >> 20} MB, "
              f"filter {v.pair_filter.nbytes >> 10} KB")
    print(f"{len(starts):,} distinct pieces of 2..31 bytes, {np.mean(stops - starts):.1f} bytes on average")

    @njit
    def merge_all(data, starts, stops, vocab, scratch, out):
        at = 0
        for i in range(starts.shape[0]):
            at = merge_short_piece(data, starts[i], stops[i], vocab, scratch, out, at)
        return at

    scratch = np.empty(64, np.int64)
    outs = {name: np.empty(int((stops - starts).sum()), enc.dtype) for name in variants}
    times = {name: [] for name in variants}
    count = {}
    for name, v in variants.items():
        merge_all(data, starts[:10], stops[:10], v, scratch, outs[name])  # compile, out of the timing
    for r in range(args.rounds):
        for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            t = time.perf_counter()
            count[name] = merge_all(data, starts, stops, variants[name], scratch, outs[name])
            times[name].append((time.perf_counter() - t) / len(starts) * 1e9)
    for name, ts in times.items():
        print(f"{name:>12}: ns per piece, min {min(ts):.0f}  median {statistics.median(ts):.0f}  rounds {[round(t) for t in ts]}")
    a, b = variants
    same = count[a] == count[b] and np.array_equal(outs[a][:count[a]], outs[b][:count[b]])
    print(f"every split / last merges time: min {min(times[b]) / min(times[a]):.2f}  median "
          f"{statistics.median(times[b]) / statistics.median(times[a]):.2f}; ids {'identical' if same else 'DIFFER'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
