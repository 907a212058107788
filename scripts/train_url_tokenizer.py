#!/usr/bin/env python
"""Train the URL card's byte-level BPE (vocab/urls/tokenizer.json) with HF tokenizers' BpeTrainer.

What the card (../shared/seeds/urls-tokenized.md, "How the tokenizer works") fixes, and we follow:
- byte-level BPE, vocabulary 8,192, `max_token_length` 24, initial alphabet = all 256 bytes;
- `<eos>` is id 0 and the only special token;
- no normalizer (it would break byte-exact round trips);
- the structural pre-split: each URL delimiter is its own piece, `http://` / `https://` and
  well-formed `%XX` escapes are kept whole, then ByteLevel maps bytes to the printable alphabet
  (no GPT-2 regex: the split above is the whole pre-tokenisation);
- training text = canonical(url) (host labels TLD-first) for every URL of the corpus.

What the card leaves open, and we chose: min_frequency (MIN_FREQUENCY below), the training corpus
(../shared/data/urls/urls.parquet, 636,445 URLs), and model_max_length in tokenizer_config.json
(HF's "no limit" sentinel; a URL has no natural maximum).

Writes tokenizer.json, tokenizer_config.json, training_meta.json into --out (default vocab/urls), and
checks: 8,192 ids, id 0 = <eos>, all 256 byte symbols in the vocab, and the lossless round trip
canonical(decode(encode(canonical(u)))) == u on every training URL.

    python scripts/train_url_tokenizer.py [--corpus ../shared/data/urls/urls.parquet] [--out vocab/urls]
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "tests"))  # reference.py lives with the tests

from reference import canonical_ref  # noqa: E402

VOCAB_SIZE = 8192
MAX_TOKEN_LENGTH = 24
# 2 drops pairs seen only once (a single phishing subdomain's random label); with 636k URLs the
# 8,192 slots fill long before the count reaches 2, so it only cuts work and noise.
MIN_FREQUENCY = 2
EOS = "<eos>"
# The card's pattern, verbatim. Each match is its own piece (behaviour "isolated").
SPLIT_PATTERN = r"https?://|%[0-9A-Fa-f]{2}|[!#$%&'()*+,\-./:;=?@\[\\\]\^_`{|}~]"
# transformers' VERY_LARGE_INTEGER: what HF writes when a tokenizer has no maximum length.
NO_MAX_LENGTH = int(1e30)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_urls(corpus: Path) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(corpus, columns=["url"]).column("url").to_pylist()


def make_tokenizer():
    """The untrained pipeline: empty BPE model + the card's pre-tokenizer and decoder."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def trainer_params() -> dict:
    """Every BpeTrainer argument we pass (recorded verbatim in training_meta.json)."""
    return {
        "vocab_size": VOCAB_SIZE,
        "min_frequency": MIN_FREQUENCY,
        "show_progress": False,
        "special_tokens": [EOS],
        "limit_alphabet": None,
        "initial_alphabet": "pre_tokenizers.ByteLevel.alphabet() (all 256 byte symbols)",
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "max_token_length": MAX_TOKEN_LENGTH,
    }


def train(canon: list[str]):
    from tokenizers import pre_tokenizers, trainers

    tok = make_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, min_frequency=MIN_FREQUENCY, show_progress=False,
        special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        max_token_length=MAX_TOKEN_LENGTH,
    )
    tok.train_from_iterator(canon, trainer=trainer, length=len(canon))
    return tok


def check(tok, urls: list[str], canon: list[str]) -> None:
    from tokenizers import pre_tokenizers

    vocab = tok.get_vocab(with_added_tokens=True)
    problems = []
    if len(vocab) != VOCAB_SIZE or tok.get_vocab_size(with_added_tokens=True) != VOCAB_SIZE:
        problems.append(f"vocab has {len(vocab)} ids, the card says {VOCAB_SIZE}")
    if tok.token_to_id(EOS) != 0:
        problems.append(f"{EOS} is id {tok.token_to_id(EOS)}, the card says 0")
    missing = set(pre_tokenizers.ByteLevel.alphabet()) - set(vocab)
    if missing:
        problems.append(f"{len(missing)} byte symbols missing from the vocab")
    if sorted(vocab.values()) != list(range(len(vocab))):
        problems.append("ids are not dense 0..n-1")
    # Lossless round trip over the whole corpus. No post-processor, so encode adds no <eos>.
    enc = tok.encode_batch(canon, add_special_tokens=False)
    dec = tok.decode_batch([e.ids for e in enc], skip_special_tokens=False)
    bad = [u for u, d in zip(urls, dec) if canonical_ref(d) != u]
    if bad:
        problems.append(f"{len(bad)} URLs do not round-trip, e.g. {bad[0]!r}")
    if any(0 in e.ids for e in enc):
        problems.append("some URL encodes to a token containing <eos> (id 0)")
    if problems:
        raise SystemExit("trained tokenizer fails the card: " + "; ".join(problems))
    n_tokens = sum(len(e.ids) for e in enc)
    print(f"checks ok: {len(vocab)} ids, <eos>=0, 256-byte alphabet, {len(urls):,} URLs round-trip, "
          f"{n_tokens / len(urls):.2f} tokens/URL")


def tokenizer_config() -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS,
        "bos_token": None,
        "unk_token": None,
        "pad_token": None,
        "model_max_length": NO_MAX_LENGTH,
        # Decoding must give back the exact canonical bytes: never tidy spaces.
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "added_tokens_decoder": {
            "0": {"content": EOS, "lstrip": False, "normalized": False, "rstrip": False,
                  "single_word": False, "special": True},
        },
    }


def main(argv: list[str] | None = None) -> int:
    import tokenizers

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "data" / "urls" / "urls.parquet",
                    help="parquet file with a `url` column (default: ../shared/data/urls/urls.parquet)")
    ap.add_argument("--out", type=Path, default=REPO / "vocab" / "urls", help="output folder (default: vocab/urls)")
    ap.add_argument("--no-check", action="store_true", help="skip the full-corpus round-trip check")
    args = ap.parse_args(argv)
    if not args.corpus.is_file():
        print(f"missing {args.corpus}: pass --corpus pointing at urls.parquet", file=sys.stderr)
        return 2

    urls = load_urls(args.corpus)
    canon = [canonical_ref(u) for u in urls]
    if any("\n" in c for c in canon):
        raise SystemExit("a URL contains a newline; the corpus text hash below would be ambiguous")
    if any(EOS in c for c in canon):
        # HF would split a literal "<eos>" out as the special token; the card's stream has none.
        raise SystemExit(f"a URL contains the literal text {EOS}; pick another corpus or handle it")

    t0 = time.perf_counter()
    tok = train(canon)
    train_s = time.perf_counter() - t0
    print(f"trained in {train_s:.1f} s")
    if not args.no_check:
        check(tok, urls, canon)

    args.out.mkdir(parents=True, exist_ok=True)
    text = tok.to_str(pretty=True) + "\n"
    (args.out / "tokenizer.json").write_bytes(text.encode("utf-8"))
    (args.out / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    try:
        corpus_name = str(args.corpus.resolve().relative_to(REPO.parent))
    except ValueError:
        corpus_name = str(args.corpus)
    meta = {
        "corpus": {
            "path": corpus_name,
            "name": "urls.parquet (real-URL corpus, see ../shared/data/urls/README.md)",
            "urls": len(urls),
            "parquet_sha256": sha256_bytes(args.corpus.read_bytes()),
            "canonical_text_sha256": sha256_bytes("\n".join(canon).encode("utf-8")),
            "canonical_text_note": "sha256 of the canonical() forms, in file order, joined with '\\n' (no trailing newline), UTF-8",
            "training_text": "fastenc.reference.canonical_ref(url) for every url, in file (SURT) order",
        },
        "trainer": "tokenizers.BpeTrainer",
        "tokenizers_version": tokenizers.__version__,
        "trainer_params": trainer_params(),
        "model": {"type": "BPE", "unk_token": None, "byte_fallback": False},
        "normalizer": None,
        "pre_tokenizer": [
            {"type": "Split", "pattern": SPLIT_PATTERN, "behavior": "isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
        ],
        "decoder": {"type": "ByteLevel"},
        "post_processor": None,
        "tokenizer_json_sha256": sha256_bytes(text.encode("utf-8")),
        "train_seconds": round(train_s, 1),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
        "command": "python scripts/train_url_tokenizer.py",
    }
    (args.out / "training_meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{meta['tokenizer_json_sha256']}  tokenizer.json")
    print(f"wrote {args.out}/tokenizer.json ({len(text.encode()):,} bytes), tokenizer_config.json, training_meta.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
