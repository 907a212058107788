"""The dataset card of a ``fastenc urls`` output folder (the shape of ``urls-tokenized.md``).

``OUT`` is shared by many shards, each committed with its own sidecar (docs/atomic-output.md): the
card covers the shards whose sidecar is there, and names any bin without one (an unfinished
run's leftover, which is not part of the dataset).
"""
from __future__ import annotations

import inspect
from pathlib import Path

from fastenc.card.common import (built_section, plural, check_size, code, layout_block, num, ranges, read_json, size_category,
                                 table, yaml_header)
from fastenc.errors import InputError
from fastenc.recipes.urls.format import FORMAT, sidecar_paths



def _sidecars(out: Path) -> list[dict]:
    metas = []
    for p in sidecar_paths(out):
        meta = read_json(p, "a URL shard's sidecar")
        if meta.get("format") != FORMAT:
            raise InputError(f"{p} is not a fastenc URL sidecar (format {meta.get('format')!r})")
        try:
            check_size(out / meta["file"], 2 * int(meta["tokens"]), p.name)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{p} is malformed ({type(exc).__name__}: {exc}): run `fastenc verify`") from None
        metas.append(meta)
    if not metas:
        raise InputError(f"{out} holds no tokens-sNNNNN.json sidecar: no URL shard of it is complete")
    return metas


def _same(metas: list[dict], key: str):
    values = {str(m.get(key)) for m in metas}
    if len(values) != 1:
        raise InputError(f"the sidecars disagree on {key!r} ({', '.join(sorted(values))}): one folder holds one build; "
                         "run `fastenc verify`")
    return metas[0].get(key)


def render(out: Path) -> str:
    from fastenc.recipes.urls.format import uncommitted_bins

    metas = _sidecars(out)
    for key in ("tokenizer_sha256", "vocab_size", "dtype", "eos_token_id"):
        _same(metas, key)
    first = metas[0]
    urls = sum(int(m["urls"]) for m in metas)
    tokens = sum(int(m["tokens"]) for m in metas)
    orphans = uncommitted_bins(out)
    num_shards = sorted({int(m["num_shards"]) for m in metas})
    sections = [
        yaml_header({"pretty_name": "URLs (tokenized)", "license": "other", "language": ["multilingual"],
                     "task_categories": ["text-generation"],
                     "tags": ["urls", "web", "tokenized", "bpe", "memmap"], "size_categories": [size_category(tokens)]}),
        "# URLs (tokenized)",
        "",
        "URLs run through a byte-level BPE built for URLs, stored as flat `uint16` token streams that "
        f"memory-map directly into a training loop; written by `fastenc urls` (fastenc {first.get('fastenc_version', 'unknown')}).",
        "",
        table(["", ""], [
            ("Shards", f"{len(metas)} (shard {ranges([int(m['shard']) for m in metas])} of "
                       f"{' / '.join(num(n) for n in num_shards)})"),
            ("URLs", num(urls)),
            ("Tokens", num(tokens)),
            ("Vocabulary", num(first["vocab_size"])),
            ("Token dtype", f"`{first['dtype']}`, little-endian"),
        ]),
        "These are raw token bins, not parquet; see *Reading the data* below.",
        "",
        _layout(out, metas, orphans),
        _format(first),
        _usage(first),
        _canonical(),
        _verification(metas),
        built_section(first, "urls", "fastenc.recipes.urls.encode_shard")
        + ("\nEvery sidecar records the command and the request that built its shard; shown here: those of "
           f"`{first['file']}`.\n" if len(metas) > 1 else ""),
    ]
    return "\n".join(sections).rstrip() + "\n"


def _layout(out: Path, metas: list[dict], orphans: list[str]) -> str:
    tok_dir = out / "tokenizer"
    entries = [("README.md", "this card"), ("tokenizer/", "the exact vocabulary that produced every bin")]
    if tok_dir.is_dir():
        entries += [(f"  {p.name}", "") for p in sorted(tok_dir.iterdir()) if p.is_file()]
    for m in metas:
        entries += [(m["file"], f"flat little-endian uint16, {num(m['urls'])} URLs, {num(m['tokens'])} tokens"),
                    (m["file"].replace(".bin", ".json"), "sidecar: counts, dtype, eos id, tokenizer sha256, shard, source")]
    text = "## Layout\n\n" + layout_block(entries, keep_head=8) + "\n"
    text += (f"One `.bin` per source shard. Every sidecar records the sha256 of `tokenizer/tokenizer.json` "
             f"(`{metas[0]['tokenizer_sha256']}`): check it before mixing bins from different builds.\n")
    if orphans:
        text += ("\n**Not part of this dataset:** " + ", ".join(f"`{o}`" for o in orphans)
                 + " (a bin without its sidecar: an unfinished run's leftover, which the next run of that shard deletes).\n")
    return text


def _format(meta: dict) -> str:
    return "\n".join([
        "## Format",
        "",
        f"Each URL is stored as `[{meta['eos_token']}] ++ ids`: a leading end-of-sequence token, then the "
        f"tokens of `canonical(url)`. `{meta['eos_token']}` is id **{meta['eos_token_id']}** and is the only special "
        "token; it delimits the URLs, so boundaries are found by scanning for it, without an index.",
        "",
        f"- Order: {meta['order']}.",
        f"- Shard membership: {meta['shard_rule']} (checked for every URL before writing: "
        f"{'yes' if meta.get('shard_checked') else 'no, this input was not a shard'}).",
        f"- Hash: {meta['hash']}.",
        f"- Layout: {meta['layout']}.",
        "",
    ])


def _usage(meta: dict) -> str:
    bin_name, sidecar = meta["file"], meta["file"].replace(".bin", ".json")
    snippet = f'''import json
import numpy as np

meta = json.load(open("{sidecar}"))
tokens = np.memmap("{bin_name}", dtype=np.uint16, mode="r")   # zero-copy
assert len(tokens) == meta["tokens"]

# A fixed-size training block, nanoGPT style
block = tokens[:512].astype(np.int64)

# Or split back into individual URLs: each one starts with <eos>
starts = np.flatnonzero(tokens == meta["eos_token_id"])
ends = np.append(starts[1:], len(tokens))
first_url_ids = tokens[starts[0] + 1 : ends[0]]'''
    return "\n".join(["## Reading the data", "", "Run from this folder (or prefix the paths with it):", "",
                      code(snippet, "python")])


def _canonical() -> str:
    """The text of ``canonical()`` (fastenc's, the card's function), so that the card needs no fastenc."""
    from fastenc import url_canonical

    source = inspect.getsource(url_canonical._is_dotted_quad) + "\n\n" + inspect.getsource(url_canonical.canonical)
    decode = '''from tokenizers import Tokenizer

tok = Tokenizer.from_file("tokenizer/tokenizer.json")
url = canonical(tok.decode(first_url_ids.tolist()))   # the original URL
print(url)'''
    return "\n".join([
        "## Recovering the original URL",
        "",
        "Decoding gives **canonical** text (host labels TLD-first: `https://www.example.com/a` is stored as "
        "`https://com.example.www/a`); apply `canonical()` once more to get the original URL back (it is an "
        "involution). The hashes of the order and of the shard rule are over the original. The function "
        "(also `fastenc.canonical`):",
        "",
        code(source, "python"),
        "Then, with the arrays of *Reading the data*:",
        "",
        code(decode, "python"),
    ])


def _verification(metas: list[dict]) -> str:
    checked = sum(int(m["verified"]["urls_checked"]) for m in metas)
    mismatches = sum(int(m["verified"]["mismatches"]) for m in metas)
    irreversible = sum(int(m.get("irreversible_urls", 0)) for m in metas)
    shard_checked = sum(bool(m.get("shard_checked")) for m in metas)
    return "\n".join([
        "## Verification",
        "",
        f"- Shard membership asserted for every URL before writing, on {shard_checked} of {len(metas)} shard(s).",
        f"- Every shard's bin was re-read after writing: its length and its count of `<eos>` equal the sidecar's, and "
        f"URLs from its head, middle and tail (up to {num(metas[0]['verified']['head'])} each) plus every URL "
        f"flagged irreversible were decoded, put through `canonical()` and compared byte for byte with the source, "
        f"and their xxh3_64 with the order and the shard: **{num(mismatches)} mismatches in {num(checked)} URLs checked**.",
        f"- URLs on which `canonical()` is not self-inverse (malformed hosts; stored as `canonical(url)` like every URL, "
        f"listed by position in each sidecar's `irreversible_url_indices`): {num(irreversible)}.",
        f"- Nulls skipped: {num(sum(int(m.get('null_urls_skipped', 0)) for m in metas))}; empty URLs (a lone `<eos>`): "
        f"{num(sum(int(m.get('empty_urls', 0)) for m in metas))}; URLs that are not valid UTF-8 (kept byte for byte): "
        f"{num(sum(int(m.get('invalid_utf8_urls', 0)) for m in metas))}.",
        f"- Each bin's size matches its sidecar (checked again when this card was written); each sidecar records the "
        "bin's xxh3_64.",
        "- `fastenc verify OUT [--source part-NNNNN.parquet]` re-checks every URL of every bin from the files alone "
        "(and against the source).",
        "",
    ])
