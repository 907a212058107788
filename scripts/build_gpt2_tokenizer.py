#!/usr/bin/env python
"""Build vocab/gpt2/tokenizer.json from OpenAI's GPT-2 `encoder.json` + `vocab.bpe`.

The output has the shape of Hugging Face's own `gpt2` tokenizer.json: a BPE model (vocab + merges,
no unk token, no dropout), a ByteLevel pre-tokenizer (GPT-2 regex on, add_prefix_space off,
trim_offsets on), a ByteLevel post-processor (offsets only, adds no tokens), a ByteLevel decoder,
no normalizer, and one added token, `<|endoftext|>` = 50256, special. 50,257 ids.

We build it with the `tokenizers` library itself (so the file is exactly what that library writes and
reads), after checking that the two source files agree the way tiktoken's loader checks them: the
merge list in vocab.bpe, numbered from 256, gives precisely the ids of encoder.json.

The output is deterministic: tokenizers serialises the vocab ordered by id and the merges by rank,
and we write it compactly. Re-running the script on the same sources gives the same bytes.

Also writes vocab/gpt2/SOURCES.sha256 (sha256 of both sources and of the tokenizer.json produced) and
copies the sources' LICENSE.md next to it.

    python scripts/build_gpt2_tokenizer.py [--src ../shared/data/gpt2] [--out vocab/gpt2]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EOT = "<|endoftext|>"
EOT_ID = 50256
N_VOCAB = 50257


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_sources(src: Path) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """encoder.json -> {token: id}; vocab.bpe -> [(left, right)] in rank order (header line skipped)."""
    vocab = json.loads((src / "encoder.json").read_text(encoding="utf-8"))
    lines = (src / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    if not lines[0].startswith("#version"):
        raise SystemExit(f"{src / 'vocab.bpe'}: expected a '#version' header line; is this GPT-2's vocab.bpe?")
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]
    bad = [m for m in merges if len(m) != 2]
    if bad:
        raise SystemExit(f"vocab.bpe: {len(bad)} merge lines are not 'left right', e.g. {bad[0]!r}")
    return vocab, merges  # type: ignore[return-value]


def check_sources(vocab: dict[str, int], merges: list[tuple[str, str]]) -> None:
    """The ids of encoder.json must be: 256 byte tokens, then one id per merge in merge order, then EOT."""
    if len(vocab) != N_VOCAB or vocab.get(EOT) != EOT_ID:
        raise SystemExit(f"encoder.json: expected {N_VOCAB} entries with {EOT}={EOT_ID}, got {len(vocab)}")
    if sorted(vocab.values()) != list(range(N_VOCAB)):
        raise SystemExit("encoder.json: ids are not exactly 0..50256")
    if len(merges) != N_VOCAB - 257:
        raise SystemExit(f"vocab.bpe: expected {N_VOCAB - 257} merges, got {len(merges)}")
    for rank, (a, b) in enumerate(merges):
        if vocab.get(a + b) != 256 + rank:
            raise SystemExit(f"vocab.bpe merge {rank} ({a!r} {b!r}) does not give encoder.json id {256 + rank}")


def build(vocab: dict[str, int], merges: list[tuple[str, str]]) -> str:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None,
                               continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False,
                               byte_fallback=False, ignore_merges=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    # HF's gpt2 file carries this post-processor too; it only adjusts offsets and adds no tokens.
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    # normalized=True as in HF's gpt2 file (no normalizer here, so it has no effect either way).
    tok.add_special_tokens([AddedToken(EOT, single_word=False, lstrip=False, rstrip=False,
                                       normalized=True, special=True)])
    if tok.get_vocab_size(with_added_tokens=True) != N_VOCAB or tok.token_to_id(EOT) != EOT_ID:
        raise SystemExit("built tokenizer does not have 50,257 ids with <|endoftext|> = 50256")
    text = tok.to_str(pretty=False)  # compact, like HF's own gpt2 file (~1.4 MB vs 3.6 MB indented)
    # Round-trip through the loader so we never write a file tokenizers cannot read back.
    if Tokenizer.from_str(text).to_str(pretty=False) != text:
        raise SystemExit("tokenizer.json does not round-trip through tokenizers; refusing to write it")
    return text + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, default=REPO.parent / "shared" / "data" / "gpt2",
                    help="folder with encoder.json, vocab.bpe, LICENSE.md (default: ../shared/data/gpt2)")
    ap.add_argument("--out", type=Path, default=REPO / "vocab" / "gpt2", help="output folder (default: vocab/gpt2)")
    args = ap.parse_args(argv)

    for name in ("encoder.json", "vocab.bpe"):
        if not (args.src / name).is_file():
            print(f"missing {args.src / name}: pass --src pointing at GPT-2's encoder.json and vocab.bpe",
                  file=sys.stderr)
            return 2
    vocab, merges = read_sources(args.src)
    check_sources(vocab, merges)
    text = build(vocab, merges)

    args.out.mkdir(parents=True, exist_ok=True)
    out_json = args.out / "tokenizer.json"
    out_json.write_bytes(text.encode("utf-8"))
    sums = [(sha256_file(args.src / "encoder.json"), "encoder.json"),
            (sha256_file(args.src / "vocab.bpe"), "vocab.bpe"),
            (sha256_file(out_json), "tokenizer.json")]
    (args.out / "SOURCES.sha256").write_text("".join(f"{h}  {n}\n" for h, n in sums), encoding="utf-8")
    if (args.src / "LICENSE.md").is_file():
        shutil.copyfile(args.src / "LICENSE.md", args.out / "LICENSE.md")
    for h, n in sums:
        print(f"{h}  {n}")
    print(f"wrote {out_json} ({out_json.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
