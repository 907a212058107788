"""Rebuild fastenc/data/gpt2_classes.txt by probing tiktoken's own r50k regex.

    python scripts/build_gpt2_classes.py [--out PATH]

Every code point U+0000..U+10FFFF (surrogates excepted: they never come out of UTF-8 decoding
and are "other") is probed for all four classes with `tiktoken_class_probe` (tests/reference.py);
the script fails unless each one lands in exactly one class, so the four probes check each other.
Deterministic: the output depends only on the tiktoken build (its Rust regex crate's Unicode
tables). About 30 s on two cores. Prints where the result differs from Python's `unicodedata`
and from the `regex` module, for the record (tests/test_pretok_gpt2.py lists those cases).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # reference.py lives with the tests

from reference import tiktoken_class_probe  # noqa: E402
from fastenc.unicode_classes import GPT2_CLASSES_PATH, N_CODEPOINTS, format_class_ranges, parse_class_ranges  # noqa: E402


def probe_all(block: int = 0x10000) -> np.ndarray:
    table = np.zeros(N_CODEPOINTS, dtype=np.uint8)
    for lo in range(0, N_CODEPOINTS, block):
        cps = np.arange(lo, lo + block)
        hits = np.stack([tiktoken_class_probe(cps, k) for k in range(4)])
        surrogate = (cps >= 0xD800) & (cps < 0xE000)
        bad = np.flatnonzero((hits.sum(axis=0) != 1) & ~surrogate)
        if len(bad):
            raise SystemExit(f"code points in no class or several: {[hex(int(c)) for c in cps[bad][:20]]}")
        table[lo : lo + block] = hits.argmax(axis=0)
    return table


def _ranges(cps: np.ndarray) -> str:
    """'0558, 058B-058C, ...' for sorted code points."""
    if len(cps) == 0:
        return "none"
    cuts = np.flatnonzero(np.diff(cps) != 1) + 1
    parts = []
    for run in np.split(cps, cuts):
        parts.append(f"{run[0]:04X}" if len(run) == 1 else f"{run[0]:04X}-{run[-1]:04X}")
    return ", ".join(parts[:12]) + (f", ... ({len(parts)} ranges)" if len(parts) > 12 else "")


def report_differences(table: np.ndarray) -> None:
    """Where Python's unicodedata and the regex module classify differently (for the record)."""
    import unicodedata

    import regex

    cps = np.array([c for c in range(N_CODEPOINTS) if not 0xD800 <= c < 0xE000])
    text = "".join(map(chr, cps.tolist()))
    theirs = np.zeros(N_CODEPOINTS, np.uint8)
    for k, pattern in ((3, r"\s"), (2, r"\p{N}"), (1, r"\p{L}")):
        theirs[cps[[m.start() for m in regex.finditer(pattern, text)]]] = k
    py = np.zeros(N_CODEPOINTS, np.uint8)
    for c in cps.tolist():
        ch = chr(c)
        cat = unicodedata.category(ch)
        py[c] = 1 if cat[0] == "L" else 2 if cat[0] == "N" else 3 if ch.isspace() else 0
    names = "OLNS"
    for who, other in ((f"regex {regex.__version__}", theirs), (f"unicodedata {unicodedata.unidata_version}", py)):
        diff = np.flatnonzero(other != table)
        print(f"differences from {who}: {len(diff)} code points")
        for a in range(4):
            for b in range(4):
                sel = diff[(table[diff] == a) & (other[diff] == b)]
                if len(sel):
                    print(f"  tiktoken {names[a]}, {who.split()[0]} {names[b]}: {len(sel)}: {_ranges(sel)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=GPT2_CLASSES_PATH)
    args = ap.parse_args()
    import tiktoken

    t0 = time.perf_counter()
    table = probe_all()
    header = (
        "GPT-2 pre-tokenizer code-point classes: L = \\p{L}, N = \\p{N}, S = \\s; every code point not\n"
        "listed (surrogates included) is 'other'. Ranges are inclusive, hex.\n"
        f"Probed from tiktoken {tiktoken.__version__} (r50k_pat_str) by scripts/build_gpt2_classes.py; do not edit."
    )
    text = format_class_ranges(table, header)
    assert (parse_class_ranges(text) == table).all()
    args.out.write_text(text, encoding="ascii")
    report_differences(table)
    counts = np.bincount(table, minlength=4)
    print(f"wrote {args.out} ({len(text)} bytes) in {time.perf_counter() - t0:.1f} s; "
          f"other/letter/number/space = {counts.tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
