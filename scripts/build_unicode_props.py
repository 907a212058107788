"""Rebuild fastenc/data/unicode_props.npz by probing tiktoken's and HF tokenizers' regex engines.

    python scripts/build_unicode_props.py [--out PATH]

For every spelling of a General_Category value or a script that Python's ``regex`` module knows
(its alias lists: ``Lu``, ``Uppercase_Letter``, ``Han``, ``Hani``, ...), and in tiktoken also
``gc=``, ``sc=``, ``scx=`` forms: does the engine accept ``\\p{name}``, and if so which of the
0x110000 code points does it match? Also ``\\s \\d \\w`` and ``(?i:c)`` for every ASCII c. Each
answer comes from the engine itself (tiktoken: a byte-level throwaway Encoding whose output bytes
are the matched text; tokenizers: ``Split(..., "removed")`` whose offsets are the gaps), never
from Python's tables. Distinct sets are stored once, as inclusive ranges (see
``fastenc/pattern/props.py``). Prints every set the two engines disagree on. Deterministic.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastenc.pattern import props  # noqa: E402

CODEPOINTS = np.concatenate((np.arange(0xD800), np.arange(0xE000, props.N_CODEPOINTS)))
HF_CHUNK = 1 << 12  # tokenizers' pre_tokenize_str grows faster than linearly with the text
TK_CHUNK = 1 << 18


def _texts(chunk: int) -> list[tuple[int, str]]:
    return [(lo, "".join(map(chr, CODEPOINTS[lo : lo + chunk].tolist()))) for lo in range(0, len(CODEPOINTS), chunk)]


class TiktokenProbe:
    """tiktoken's answers: with the 256 single bytes as the whole vocabulary, the output ids are
    the bytes of the matched text; every code point occurs once in the text, so decoding them
    names the matched code points."""

    def __init__(self):
        import tiktoken

        self.tiktoken, self.texts = tiktoken, _texts(TK_CHUNK)
        self.ranks = {bytes([b]): b for b in range(256)}

    def encoding(self, pattern: str):
        """The throwaway Encoding, or None if the engine rejects ``pattern``."""
        try:
            return self.tiktoken.Encoding(name="props-probe", pat_str=pattern, mergeable_ranks=self.ranks,
                                          special_tokens={})
        except ValueError:
            return None

    def accepts(self, pattern: str) -> bool:
        return self.encoding(pattern) is not None

    def probe(self, pattern: str) -> np.ndarray:
        enc = self.encoding(pattern)
        table = np.zeros(props.N_CODEPOINTS, dtype=bool)
        for _, text in self.texts:
            out = np.asarray(enc.encode_ordinary(text), dtype=np.uint8).tobytes().decode("utf-8")
            table[np.frombuffer(out.encode("utf-32-le"), dtype=np.uint32)] = True
        return table


class HfProbe:
    """tokenizers' answers (Oniguruma): ``Split(Regex(p), "removed")`` returns the runs between
    matches with character offsets; every character no run covers matched."""

    def __init__(self):
        import tokenizers
        from tokenizers import pre_tokenizers

        self.tokenizers, self.split, self.texts = tokenizers, pre_tokenizers.Split, _texts(HF_CHUNK)

    def accepts(self, pattern: str) -> bool:
        try:
            self.tokenizers.Regex(pattern)
        except Exception:  # tokenizers raises a bare Exception for a bad pattern
            return False
        return True

    def probe(self, pattern: str) -> np.ndarray:
        split = self.split(self.tokenizers.Regex(pattern), behavior="removed")
        table = np.zeros(props.N_CODEPOINTS, dtype=bool)
        for lo, text in self.texts:
            matched = np.ones(len(text), dtype=bool)
            for piece, (a, b) in split.pre_tokenize_str(text):
                assert text[a:b] == piece, "tokenizers' offsets do not index characters"
                matched[a:b] = False
            table[CODEPOINTS[lo : lo + len(text)][matched]] = True
        return table


def regex_module_names() -> tuple[list[str], list[str]]:
    """(General_Category spellings, script spellings) from the `regex` module's alias lists,
    lowercased; only the spellings come from there, never a code point's answer."""
    from regex import _regex

    found = _regex.get_properties()
    gc = sorted({n.lower() for n in found["GC"][1] if n.isalnum()} | {"lc", "casedletter"})
    sc = sorted({n.lower() for n in found["SC"][1] if n.isalnum()})
    return gc, sc


def escape_char(c: int) -> str:
    """``c`` as a pattern atom both engines read the same way: itself if alphanumeric, else \\x{..}."""
    return chr(c) if chr(c).isalnum() else f"\\x{{{c:X}}}"


def probe_plan(gc: list[str], sc: list[str]) -> dict:
    """{(kind, engine, key): pattern}: every question the data file answers."""
    plan = {}
    for engine in props.ENGINES:
        for name in gc + sc:
            plan[("names", engine, name)] = f"\\p{{{name}}}"
        for letter in "sdw":
            plan[("escapes", engine, letter)] = f"\\{letter}"
        for c in range(128):
            plan[("casefold", engine, chr(c))] = f"(?i:{escape_char(c)})"
    for key, names in (("gc", gc), ("sc", sc), ("scx", sc)):
        for name in names:
            plan[("names", "tiktoken", f"{key}={name}")] = f"\\p{{{key}={name}}}"
    return plan


def run_plan(plan: dict, probes: dict) -> tuple[list, dict]:
    """Probe every accepted pattern; returns (distinct range arrays, meta name maps)."""
    sets, index_of, maps = [], {}, {k: {e: {} for e in props.ENGINES} for k in ("names", "escapes", "casefold")}
    for (kind, engine, key), pattern in plan.items():
        probe = probes[engine]
        if not probe.accepts(pattern):
            if kind != "names":
                raise SystemExit(f"{engine} rejects {pattern!r}")
            continue
        ranges = props.table_ranges(probe.probe(pattern))
        blob = ranges.tobytes()
        if blob not in index_of:
            index_of[blob] = len(sets)
            sets.append(ranges)
        maps[kind][engine][key] = index_of[blob]
    return sets, maps


def check_partition(sets: list, maps: dict) -> None:
    """Each engine's two-letter General_Category sets must partition the non-surrogate code points."""
    two = ["lu", "ll", "lt", "lm", "lo", "mn", "mc", "me", "nd", "nl", "no", "pc", "pd", "ps", "pe", "pi", "pf",
           "po", "sm", "sc", "sk", "so", "zs", "zl", "zp", "cc", "cf", "co", "cn"]
    for engine in props.ENGINES:
        count = np.zeros(props.N_CODEPOINTS + 1, dtype=np.int32)
        for name in two:
            for a, b in sets[maps["names"][engine][name]]:
                count[a] += 1
                count[b + 1] -= 1
        count = np.cumsum(count[:-1])
        count[0xD800:0xE000] = 1
        if not (count == 1).all():
            raise SystemExit(f"{engine}: General_Category sets do not partition the code points at "
                             f"{[hex(c) for c in np.flatnonzero(count != 1)[:10]]}")


def expand(ranges: np.ndarray) -> np.ndarray:
    table = np.zeros(props.N_CODEPOINTS, dtype=bool)
    for a, b in ranges:
        table[a : b + 1] = True
    return table


def report(sets: list, maps: dict) -> None:
    """Print how the engines differ: spellings only one accepts, sets they disagree on, and what
    a bare script name means (tiktoken's sc= and scx= sets are the yardsticks)."""
    for kind in ("names", "escapes", "casefold"):
        tk, hf = maps[kind]["tiktoken"], maps[kind]["hf"]
        bare_tk = {k for k in tk if kind != "names" or "=" not in k}
        print(f"{kind}: {len(bare_tk & set(hf))} in both; tiktoken only: {sorted(bare_tk - set(hf))}; "
              f"hf only: {sorted(set(hf) - bare_tk)}")
        for key in sorted(bare_tk & set(hf)):
            if tk[key] != hf[key]:
                diff = np.flatnonzero(expand(sets[tk[key]]) ^ expand(sets[hf[key]]))
                print(f"  {key!r}: {len(diff)} code points differ: {[hex(c) for c in diff[:12]]}")
    tk = maps["names"]["tiktoken"]
    distinct = [k for k in tk if f"sc={k}" in tk and f"scx={k}" in tk and tk[f"sc={k}"] != tk[f"scx={k}"]]
    for engine in props.ENGINES:
        bare = maps["names"][engine]
        as_sc = sum(bare.get(k) == tk[f"sc={k}"] for k in distinct)
        as_scx = sum(bare.get(k) == tk[f"scx={k}"] for k in distinct)
        print(f"{engine}: of {len(distinct)} script spellings whose sc= and scx= sets differ, the bare name is "
              f"the sc= set for {as_sc}, the scx= set for {as_scx}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=props.PROPS_PATH)
    args = ap.parse_args()
    t0 = time.perf_counter()
    probes = {"tiktoken": TiktokenProbe(), "hf": HfProbe()}
    sets, maps = run_plan(probe_plan(*regex_module_names()), probes)
    check_partition(sets, maps)
    versions = {"tiktoken": probes["tiktoken"].tiktoken.__version__, "tokenizers": probes["hf"].tokenizers.__version__}
    members = props.pack_tables(sets, dict(maps, versions=versions))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as f:
        np.savez_compressed(f, **members)
    report(sets, maps)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {len(sets)} distinct sets, "
          f"{len(members['starts'])} ranges) in {time.perf_counter() - t0:.0f} s; versions {versions}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
