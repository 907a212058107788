"""Unicode property tables for the split-regex compiler, exactly as each reference engine sees them.

A compiled scanner must classify every code point as the tokenizer's own regex engine does, and
there are two of them: tiktoken (fancy-regex over the Rust ``regex`` crate's tables) for tiktoken
rank files, and HF tokenizers (Oniguruma) for tokenizer.json ``Split`` pre-tokenizers. Their
Unicode versions, their ``\\s``/``\\d``/``\\w``, their case folding and the property spellings
they accept differ, and Python's ``unicodedata`` agrees with neither. So
``scripts/build_unicode_props.py`` probes both engines for every code point and every spelling
it knows, and ships the answers as ``fastenc/data/unicode_props.npz``:

- ``starts``/``ends`` (int32, inclusive code-point ranges) and ``offsets`` (int32): distinct
  sets, set ``i`` being ranges ``offsets[i]:offsets[i+1]`` (a set both engines agree on is
  stored once);
- ``meta``: UTF-8 JSON: the engines' versions and, per engine, which set each probed spelling
  (normalized: see :func:`_normalize`), escape (``s d w``) and ``(?i:c)`` (printable ASCII c)
  names;
- ``sha256``: of the four arrays above, re-checked on load.
"""
from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import numpy as np

from fastenc.errors import FastencError, VocabError

ENGINES = ("tiktoken", "hf")
N_CODEPOINTS = 0x110000
PROPS_PATH = Path(__file__).resolve().parents[1] / "data" / "unicode_props.npz"
BUILD_SCRIPT = "scripts/build_unicode_props.py"

# \p{key=value} keys (normalized) that the Rust regex crate accepts, and the short key the
# table stores them under. Oniguruma accepts no key=value form at all.
_KEYS = {"gc": "gc", "generalcategory": "gc", "sc": "sc", "script": "sc",
         "scx": "scx", "scriptextensions": "scx"}


def table_ranges(table: np.ndarray) -> np.ndarray:
    """int32[k, 2]: the inclusive (first, last) code points of every run of True in ``table``."""
    padded = np.concatenate(([False], np.asarray(table, dtype=bool), [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return np.stack((edges[0::2], edges[1::2] - 1), axis=1).astype(np.int32)


def payload_sha256(starts, ends, offsets, meta: bytes) -> str:
    """sha256 over the shipped arrays (little-endian int32) and the JSON bytes."""
    h = hashlib.sha256()
    for a in (starts, ends, offsets):
        h.update(np.ascontiguousarray(a, dtype="<i4").tobytes())
    h.update(meta)
    return h.hexdigest()


def pack_tables(sets: list, meta: dict) -> dict:
    """The npz members for ``sets`` (a list of int32[k, 2] range arrays) and ``meta``."""
    offsets = np.cumsum([0] + [len(r) for r in sets]).astype(np.int32)
    both = np.concatenate(sets) if sets else np.zeros((0, 2), np.int32)
    starts, ends = both[:, 0].astype(np.int32), both[:, 1].astype(np.int32)
    meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    sha = payload_sha256(starts, ends, offsets, meta_bytes)
    return {"starts": starts, "ends": ends, "offsets": offsets,
            "meta": np.frombuffer(meta_bytes, dtype=np.uint8), "sha256": np.frombuffer(sha.encode(), np.uint8)}


def _damaged(why: str) -> FastencError:
    return FastencError(f"{PROPS_PATH}: {why}; regenerate it with `python {BUILD_SCRIPT}` or reinstall fastenc")


@functools.lru_cache(maxsize=None)
def _tables():
    """(starts, ends, offsets, meta) from the shipped file, checked against its sha256; cached."""
    try:
        with np.load(PROPS_PATH, allow_pickle=False) as z:
            starts, ends, offsets = z["starts"], z["ends"], z["offsets"]
            meta_bytes, sha = z["meta"].tobytes(), z["sha256"].tobytes().decode("ascii")
    except (OSError, KeyError, ValueError) as exc:
        raise _damaged(f"cannot read the Unicode property tables ({exc})") from None
    if payload_sha256(starts, ends, offsets, meta_bytes) != sha:
        raise _damaged("Unicode property tables do not match their recorded sha256 (file damaged or edited)")
    return starts, ends, offsets, json.loads(meta_bytes)


@functools.lru_cache(maxsize=None)
def _set(index: int) -> np.ndarray:
    """bool[0x110000] of stored set ``index``; read-only because it is shared by every caller."""
    starts, ends, offsets, _ = _tables()
    lo, hi = int(offsets[index]), int(offsets[index + 1])
    delta = np.zeros(N_CODEPOINTS + 1, dtype=np.int8)
    np.add.at(delta, starts[lo:hi], 1)
    np.add.at(delta, ends[lo:hi] + 1, -1)
    table = np.cumsum(delta[:-1], dtype=np.int8).astype(bool)
    table.flags.writeable = False
    return table


def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise VocabError(f"unknown regex engine {engine!r}; use one of {', '.join(ENGINES)}")


def _loose(part: str, engine: str) -> str:
    """One name part as the engine compares it. Both ignore ASCII case, spaces, underscores and
    hyphens; the Rust regex crate also drops non-ASCII characters and a leading "is" (only when the
    part starts with it: " is" keeps it; a remainder of "c" becomes "isc", which it rejects)."""
    prefixed = engine == "tiktoken" and part[:2].lower() == "is"
    if prefixed:
        part = part[2:]
    out = "".join(ch for ch in part.lower() if ch not in " _-" and (engine == "hf" or ch.isascii()))
    return "isc" if prefixed and out == "c" else out


def _normalize(name: str, engine: str) -> tuple[str, bool]:
    """(the stored key for ``\\p{name}``, negated?): ``han``, ``lu``; for tiktoken also ``gc=lu``,
    ``sc=han``, ``scx=han``. A leading ``^`` negates (both engines); for tiktoken ``=`` or ``:``
    separate key and value and ``!=`` negates (Oniguruma has no key=value form)."""
    negated = name.startswith("^")
    name = name[1:] if negated else name
    if engine == "hf" or not any(sep in name for sep in "=:"):
        return _loose(name, engine), negated
    if "!=" in name:
        negated = not negated
    key, _, value = name.replace("!=", "=", 1).replace(":", "=", 1).partition("=")
    short = _KEYS.get(_loose(key, engine))
    if short is None:
        return "?" + name, negated
    return f"{short}={_loose(value, engine)}", negated


def _unknown(shown: str, engine: str, supported: str) -> VocabError:
    return VocabError(f"{shown} is not supported for the {engine} regex engine (fastenc probes {supported}); "
                      "rewrite the pattern without it")


def property_set(name: str, engine: str) -> np.ndarray:
    """Read-only bool[0x110000]: the code points ``\\p{name}`` matches in ``engine``'s regex
    (``name`` as written inside the braces). Raises VocabError for a spelling the engine rejects or
    one fastenc did not probe (binary properties, blocks, ...)."""
    _check_engine(engine)
    key, negated = _normalize(name, engine)
    index = _tables()[3]["names"][engine].get(key)
    if index is None:
        raise _unknown(f"\\p{{{name}}}", engine, "General_Category values and script names, and for tiktoken "
                       "gc=, sc=, scx=")
    table = _set(index)
    return _negated(index) if negated else table


@functools.lru_cache(maxsize=None)
def _negated(index: int) -> np.ndarray:
    table = ~_set(index)
    table[0xD800:0xE000] = False  # surrogates are in no set: they never come out of a UTF-8 decoder
    table.flags.writeable = False
    return table


def escape_set(letter: str, engine: str) -> np.ndarray:
    """Read-only bool[0x110000]: what ``\\s``, ``\\d`` or ``\\w`` (``letter``) matches in ``engine``'s
    regex; the negations ``\\S \\D \\W`` are the complements (surrogates aside)."""
    _check_engine(engine)
    index = _tables()[3]["escapes"][engine].get(letter)
    if index is None:
        raise _unknown(f"\\{letter}", engine, "the escapes \\s \\d \\w")
    return _set(index)


def casefold_set(ch: str, engine: str) -> np.ndarray:
    """Sorted int64 array of the code points ``(?i:ch)`` matches in ``engine``'s regex, for one ASCII
    character ``ch`` (tiktoken's ``(?i:k)`` also matches U+212A KELVIN SIGN). Non-ASCII ``ch`` raises:
    case-insensitive matching of non-ASCII text is refused (the engines' foldings differ)."""
    _check_engine(engine)
    if len(ch) != 1 or not ch.isascii():
        raise VocabError(f"case-insensitive matching of {ch!r} is not supported (only ASCII); "
                         "rewrite the pattern without (?i) around non-ASCII text")
    return np.flatnonzero(_set(_tables()[3]["casefold"][engine][ch]))


def props_versions() -> dict:
    """The engine versions the shipped tables were probed from, e.g. {"tiktoken": "0.14.0", ...}."""
    return dict(_tables()[3]["versions"])
