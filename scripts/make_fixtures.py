#!/usr/bin/env python
"""Cut the small committed fixtures out of the shared corpora. Deterministic: same inputs, same bytes.

    python scripts/make_fixtures.py [--shared ../shared/data]

Writes
- tests/data/docs_fixture.parquet   ~150 whole documents of docs.parquet (all 5 columns, rows in source
                                    order), chosen by the rules in `select_docs` below; never a row of an
                                    excluded source (web_dragnet is AGPL).
- tests/data/urls_fixture.parquet   ~5,000 URLs of urls.parquet: every URL of the rare shapes (capped),
                                    plus an even hash sample; SURT (source file) order kept.
- examples/part-00042.parquet       shard 42 of 64 of urls.parquet: every URL u with
                                    (xxh3_64(u) * 64) >> 64 == 42, source order, one column `url`.

"Random" choices use a hash of the row's id/url (sha256 / xxh3), never an RNG, so reruns agree.
Documents are copied whole; their gpt2_tokens are re-checked with tiktoken when it is installed.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]

# ---- docs ------------------------------------------------------------------------------------------

# Sources whose licence lets us commit their text (see ../shared/data/text/README.md and
# tests/data/README.md). web_dragnet (AGPLv3 data) is the one source left out.
EXCLUDED_SOURCES = {"web_dragnet"}

# Documents that must be in, whatever the sampling says (each is the only or the smallest of its kind).
REQUIRED_DOCS = [
    "code/tiktoken/tiktoken/core.py",             # contains literal <|endoftext|> (MIT)
    "code/tiktoken/tiktoken/load.py",             # contains literal <|endoftext|> (MIT)
    "code/tiktoken/tiktoken_ext/openai_public.py",  # contains literal <|endoftext|> (MIT)
    "web_readability/wikipedia-2",                # U+FEFF beside spaces: the one JS-vs-Python parity trap
    "gutenberg/9198",                             # CRLF line endings; smallest Gutenberg book, ~72k tokens
]

# One document (the smallest allowed one) containing each of these.
FEATURES = {
    "nbsp": lambda s: "\u00a0" in s,
    "tab": lambda s: "\t" in s,
    "zwj": lambda s: "\u200d" in s,
    "combining": lambda s: any("\u0300" <= c <= "\u036f" for c in s),
    "astral (emoji etc.)": lambda s: any(ord(c) > 0xFFFF for c in s),
    "ideographic space": lambda s: "\u3000" in s,
    "unicode spaces": lambda s: any(c in s for c in "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u200b\u202f\u205f"),
    "U+0085 / U+2028 line breaks": lambda s: "\u0085" in s or "\u2028" in s or "\u2029" in s,
    "vertical tab / form feed": lambda s: "\x0b" in s or "\x0c" in s,
    "lone CR": lambda s: "\r" in s.replace("\r\n", ""),
    # (the last three occur in no allowed document of docs.parquet today; kept for a rebuilt corpus)
}

# One document (the smallest by UTF-8 bytes) in each GPT-2 token-length bucket [lo, hi).
BUCKETS = [(4096, 8192), (8192, 16384), (16384, 32768), (32768, 65536)]

SAMPLE_CAP_BYTES = 12_000   # sampled documents (the bulk) stay small so tests over the fixture stay fast
LANG_CAP_BYTES = 40_000     # ... except one per declared language, which may be up to this size
PER_SOURCE = 5              # sampled documents per source, distinct languages first
UDHR_EXTRA = 30             # extra UDHR documents: the cheapest way to many scripts and languages
# Sources whose `lang` is declared by the source (not guessed): one document per language.
EVERY_LANG_SOURCES = ("books", "wikipedia", "manpages", "debian_reference")
TARGET_DOCS = 150


def _h(key: str) -> str:
    return hashlib.sha256(("fastenc-fixture:" + key).encode()).hexdigest()


def select_docs(rows: list[dict]) -> dict[int, str]:
    """{index into rows: why it was chosen} for the fixture documents."""
    allowed = [i for i, r in enumerate(rows) if r["source"] not in EXCLUDED_SOURCES]
    by_id = {rows[i]["id"]: i for i in allowed}
    size = {i: len(rows[i]["text"].encode("utf-8")) for i in allowed}
    chosen: dict[int, str] = {}  # index -> reason

    def take(i: int, why: str) -> None:
        chosen.setdefault(i, why)

    for doc_id in REQUIRED_DOCS:
        if doc_id in by_id:
            take(by_id[doc_id], "required")
    for name, has in FEATURES.items():
        hits = sorted((size[i], rows[i]["id"], i) for i in allowed if has(rows[i]["text"]))
        if hits and not any(has(rows[i]["text"]) for i in chosen):
            take(hits[0][2], f"feature: {name}")
    for lo, hi in BUCKETS:
        hits = sorted((size[i], rows[i]["id"], i) for i in allowed if lo <= rows[i]["gpt2_tokens"] < hi)
        if hits and not any(lo <= rows[i]["gpt2_tokens"] < hi for i in chosen):
            take(hits[0][2], f"bucket {lo}-{hi}")

    # Hash-ordered sample per source, new languages first, small documents only.
    ranked = sorted((i for i in allowed if size[i] <= SAMPLE_CAP_BYTES), key=lambda i: _h(rows[i]["id"]))
    sources = sorted({rows[i]["source"] for i in allowed})
    for src in sources:
        pool = [i for i in ranked if rows[i]["source"] == src]
        if not pool:  # every document of this source is big (books): take its smallest one
            pool = [min((i for i in allowed if rows[i]["source"] == src), key=lambda i: (size[i], rows[i]["id"]))]
        seen_langs: set[str] = set()
        picks = [i for i in pool if not (rows[i]["lang"] in seen_langs or seen_langs.add(rows[i]["lang"]))]
        picks += [i for i in pool if i not in picks]
        for i in picks[:PER_SOURCE]:
            take(i, f"sample: {src}")
    for src in EVERY_LANG_SOURCES:
        for lang in sorted({rows[i]["lang"] for i in allowed if rows[i]["source"] == src}):
            if any(rows[i]["source"] == src and rows[i]["lang"] == lang for i in chosen):
                continue
            pool = [i for i in ranked if rows[i]["source"] == src and rows[i]["lang"] == lang]
            pool = pool or sorted((i for i in allowed if rows[i]["source"] == src and rows[i]["lang"] == lang
                                   and size[i] <= LANG_CAP_BYTES), key=lambda i: (size[i], rows[i]["id"]))
            if pool:  # languages whose every document is huge (bash(1) in 7 languages) are skipped
                take(pool[0], f"language: {src} {lang}")
    langs = {rows[i]["lang"] for i in chosen}
    udhr_new = [i for i in ranked if rows[i]["source"] == "udhr" and rows[i]["lang"] not in langs]
    for i in udhr_new[:UDHR_EXTRA]:
        take(i, "sample: udhr (new language)")
    # Top up to TARGET_DOCS with the next hash-ranked small documents of any allowed source.
    for i in ranked:
        if len(chosen) >= TARGET_DOCS:
            break
        take(i, "sample: any")
    return chosen


def make_docs(shared: Path, out: Path, verbose: bool = False) -> pa.Table:
    table = pq.read_table(shared / "text" / "docs.parquet")
    rows = table.to_pylist()
    why = select_docs(rows)
    if verbose:
        for i in sorted(why):
            r = rows[i]
            print(f"  {r['id']:<60.60} {r['lang']:<10} {r['gpt2_tokens']:>7} tok  {why[i]}")
    sub = table.take(pa.array(sorted(why), pa.int64()))
    assert not set(sub.column("source").to_pylist()) & EXCLUDED_SOURCES
    _check_gpt2_counts(shared, sub)
    _write(sub, out)
    return sub


def _check_gpt2_counts(shared: Path, sub: pa.Table) -> None:
    """Whole documents are copied, so gpt2_tokens must still hold; confirm it when tiktoken is here."""
    try:
        import tiktoken
        import tiktoken.load
        import tiktoken_ext.openai_public as op
    except ImportError:
        print("tiktoken not installed: gpt2_tokens not re-checked", file=sys.stderr)
        return
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(shared / "gpt2" / "vocab.bpe"), encoder_json_file=str(shared / "gpt2" / "encoder.json"))
    enc = tiktoken.Encoding(name="gpt2", pat_str=op.r50k_pat_str, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)
    for doc_id, text, n in zip(*(sub.column(c).to_pylist() for c in ("id", "text", "gpt2_tokens"))):
        if len(enc.encode_ordinary(text)) != n:
            raise SystemExit(f"{doc_id}: gpt2_tokens {n} does not match tiktoken; corpus and vocab disagree")


# ---- urls ------------------------------------------------------------------------------------------

def _authority(u: str) -> str:
    rest = u.split("://", 1)[1] if "://" in u else u
    for ch in "/?#":
        rest = rest.split(ch, 1)[0]
    return rest


def _is_ipv4_host(u: str) -> bool:
    host = _authority(u).rpartition("@")[2]
    h, colon, port = host.rpartition(":")
    if colon and port.isascii() and port.isdigit():
        host = h
    parts = host.split(".")
    return len(parts) == 4 and all(p.isascii() and p.isdigit() and 0 < len(p) <= 3 and int(p) < 256 for p in parts)


def _has_port(u: str) -> bool:
    hostport = _authority(u).rpartition("@")[2]
    h, colon, port = hostport.rpartition(":")
    return bool(colon) and port.isascii() and port.isdigit()


# Rare URL shapes, each with a cap on how many rows it may contribute (lowest xxh3 first).
URL_CASES = {
    "ipv4 host": (_is_ipv4_host, 150),
    "explicit port": (_has_port, 150),
    "userinfo (@ in authority)": (lambda u: "@" in _authority(u), 100),
    "percent escape": (lambda u: "%" in u, 300),
    "bad percent (not %XX)": (lambda u: any(u[i] == "%" and not all(c in "0123456789abcdefABCDEF" for c in u[i + 1:i + 3].ljust(2, "x")) for i in range(len(u))), 100),
    "non-ascii": (lambda u: not u.isascii(), 100),
    "space": (lambda u: " " in u, 100),
    "quote": (lambda u: '"' in u or "'" in u, 100),
    "comma": (lambda u: "," in u, 60),
    "brackets": (lambda u: "[" in u or "]" in u, 60),
    "braces/pipe/backslash/caret/backtick": (lambda u: any(c in u for c in "{}|\\^`"), 60),
    "punycode": (lambda u: "xn--" in _authority(u).lower(), 60),
    "uppercase scheme": (lambda u: not (u.startswith("http://") or u.startswith("https://")), 60),
    "empty authority": (lambda u: _authority(u) == "", 20),
    "empty label (..)": (lambda u: ".." in _authority(u), 40),
    "trailing dot host": (lambda u: _authority(u).rpartition(":")[0 if _has_port(u) else 2].endswith("."), 40),
    "single-label host": (lambda u: "." not in _authority(u) and _authority(u) != "", 40),
    "fragment": (lambda u: "#" in u, 60),
    "query": (lambda u: "?" in u, 100),
    "many labels (>= 6)": (lambda u: _authority(u).count(".") >= 5, 60),
}
LONGEST_URLS = 60     # plus the 60 longest URLs of the corpus
URL_TARGET = 5000


def select_urls(urls: list[str]) -> tuple[list[int], dict[str, int]]:
    import xxhash

    key = [xxhash.xxh3_64_intdigest(u.encode("utf-8")) for u in urls]
    chosen: set[int] = set()
    counts: dict[str, int] = {}
    for name, (pred, cap) in URL_CASES.items():
        hits = sorted((key[i], i) for i, u in enumerate(urls) if pred(u))
        counts[name] = len(hits)
        chosen.update(i for _, i in hits[:cap])
    longest = sorted(range(len(urls)), key=lambda i: (-len(urls[i].encode()), i))[:LONGEST_URLS]
    chosen.update(longest)
    # Even sample of the rest: the URLs with the smallest xxh3 keys (a pure function of the URL).
    for _, i in sorted((key[i], i) for i in range(len(urls))):
        if len(chosen) >= URL_TARGET:
            break
        chosen.add(i)
    return sorted(chosen), counts


def make_urls(shared: Path, out: Path) -> tuple[pa.Table, dict[str, int]]:
    table = pq.read_table(shared / "urls" / "urls.parquet", columns=["url"])
    idx, counts = select_urls(table.column("url").to_pylist())
    sub = table.take(pa.array(idx, pa.int64()))
    _write(sub, out)
    return sub, counts


NUM_SHARDS = 64
SHARD_INDEX = 42


def shard_of(url: str, num_shards: int = NUM_SHARDS) -> int:
    """The URL card's membership rule: floor(xxh3_64(url) * num_shards / 2**64), over the ORIGINAL url."""
    import xxhash

    return (xxhash.xxh3_64_intdigest(url.encode("utf-8")) * num_shards) >> 64


def make_shard(shared: Path, out: Path) -> pa.Table:
    table = pq.read_table(shared / "urls" / "urls.parquet", columns=["url"])
    idx = [i for i, u in enumerate(table.column("url").to_pylist()) if shard_of(u) == SHARD_INDEX]
    sub = table.take(pa.array(idx, pa.int64()))
    _write(sub, out)
    return sub


def _write(table: pa.Table, path: Path) -> None:
    """zstd-19, one row group, no pandas metadata: same bytes for the same rows and pyarrow version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = table.replace_schema_metadata(None)
    pq.write_table(table, path, compression="zstd", compression_level=19, row_group_size=max(1, table.num_rows),
                   use_dictionary=False, write_statistics=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data",
                    help="the shared data folder (default: ../shared/data)")
    ap.add_argument("--list", action="store_true", help="print every chosen document and why")
    args = ap.parse_args(argv)
    if not (args.shared / "text" / "docs.parquet").is_file():
        print(f"missing {args.shared}/text/docs.parquet: pass --shared", file=sys.stderr)
        return 2

    docs = make_docs(args.shared, REPO / "tests" / "data" / "docs_fixture.parquet", args.list)
    text_bytes = sum(len(s.encode()) for s in docs.column("text").to_pylist())
    print(f"docs_fixture: {docs.num_rows} docs, {text_bytes:,} text bytes, "
          f"{len(set(docs.column('source').to_pylist()))} sources, {len(set(docs.column('lang').to_pylist()))} langs, "
          f"{sum(docs.column('gpt2_tokens').to_pylist()):,} GPT-2 tokens")
    urls, counts = make_urls(args.shared, REPO / "tests" / "data" / "urls_fixture.parquet")
    print(f"urls_fixture: {urls.num_rows} URLs; corpus counts per case: {counts}")
    shard = make_shard(args.shared, REPO / "examples" / f"part-{SHARD_INDEX:05d}.parquet")
    print(f"example shard {SHARD_INDEX}/{NUM_SHARDS}: {shard.num_rows} URLs")
    for p in ("tests/data/docs_fixture.parquet", "tests/data/urls_fixture.parquet", f"examples/part-{SHARD_INDEX:05d}.parquet"):
        print(f"  {p}: {(REPO / p).stat().st_size:,} bytes  sha256 {hashlib.sha256((REPO / p).read_bytes()).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
