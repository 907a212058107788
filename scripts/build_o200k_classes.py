"""Rebuild fastenc/data/o200k_classes.txt by probing tiktoken's own regex engine.

    python scripts/build_o200k_classes.py [--out PATH]

o200k_base's pattern asks five questions of a code point: is it in [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]
(U), in [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}] (W), \\p{L}, \\p{N}, \\s. Each is probed for every code point
with `tests/reference.py` `tiktoken_set_probe` (tiktoken's fancy-regex / Rust regex tables, Unicode
16 in tiktoken 0.14, not Python's unicodedata) and folded into one class per code point:
upper (U only), lower (W only), caseless letter (U and W and L: Lm, Lo), mark (U and W, not L),
number, space, other. The script fails unless the answers are consistent (U only or W only
implies L; no code point is in two of {U or W, N, S}) and unless L/N/S equal the shipped GPT-2
table (same engine, same questions: cl100k's kernel reads that table). Deterministic.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # reference.py lives with the tests

from fastenc import unicode_classes as uc  # noqa: E402
from reference import tiktoken_set_probe  # noqa: E402

SETS = {
    "U": r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",
    "W": r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
    "L": r"\p{L}",
    "N": r"\p{N}",
    "S": r"\s",
}


def probe_o200k_classes() -> np.ndarray:
    cps = np.arange(uc.N_CODEPOINTS)
    got = {name: tiktoken_set_probe(pattern, cps) for name, pattern in SETS.items()}
    U, W, L, N, S = (got[k] for k in "UWLNS")
    if ((U ^ W) & ~L).any() or ((U | W) & (N | S)).any() or (N & S).any() or (L & ~(U | W)).any():
        raise SystemExit("tiktoken's classes are not consistent with the o200k class model")
    table = np.zeros(uc.N_CODEPOINTS, dtype=np.uint8)
    table[U & ~W] = uc.O_UPPER
    table[W & ~U] = uc.O_LOWER
    table[U & W & L] = uc.O_CASELESS
    table[U & W & ~L] = uc.O_MARK
    table[N] = uc.O_NUMBER
    table[S] = uc.O_SPACE
    gpt2 = uc.gpt2_class_table()
    same = (L == (gpt2 == uc.LETTER)) & (N == (gpt2 == uc.NUMBER)) & (S == (gpt2 == uc.SPACE))
    if not same.all():
        raise SystemExit(f"L/N/S differ from gpt2_classes.txt at {np.flatnonzero(~same)[:10]}")
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=uc.O200K_CLASSES_PATH)
    args = ap.parse_args()
    import tiktoken

    t0 = time.perf_counter()
    table = probe_o200k_classes()
    header = (
        "o200k_base pre-tokenizer code-point classes: U = upper only (Lu, Lt), W = lower only (Ll),\n"
        "B = both sides, a letter (Lm, Lo), M = both sides, not a letter (marks), N = \\p{N}, S = \\s;\n"
        "every code point not listed (surrogates included) is 'other'. Ranges are inclusive, hex.\n"
        f"Probed from tiktoken {tiktoken.__version__} by scripts/build_o200k_classes.py; do not edit."
    )
    text = uc.format_class_ranges(table, header, uc.O200K_CODES)
    assert (uc.parse_class_ranges(text, codes=uc.O200K_CODES) == table).all()
    args.out.write_text(text, encoding="ascii")
    print(f"wrote {args.out} ({len(text)} bytes) in {time.perf_counter() - t0:.1f} s; "
          f"counts by class = {np.bincount(table, minlength=7).tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
