"""Split patterns: a model's pre-tokenizer (a regex, or HF's Sequence of splits) -> a program for
the one scanner kernel every pattern shares (``fastenc.kernels.pretok_regex``).

``split_of_tiktoken(pattern)`` reads the ``pattern=`` of a tiktoken rank file (a known name or the
regex string the model's code passes to tiktoken); ``split_of_hf(pre_tokenizer)`` reads a
tokenizer.json's ``pre_tokenizer``. Both give ``(pretokenizer code, stages)``: patterns that
fastenc's hand-written scanners implement keep those (``PRETOK_GPT2``, ``PRETOK_CL100K``,
``PRETOK_O200K``, ``PRETOK_URL``); any other is ``PRETOK_REGEX`` with its stages, compiled by
``compile_stages``.
"""
from __future__ import annotations

import re

from fastenc.errors import VocabError
from fastenc.kernels.config import PRETOK_CL100K, PRETOK_GPT2, PRETOK_O200K, PRETOK_REGEX, PRETOK_URL
from fastenc.pattern.parse import PatternError, parse
from fastenc.pattern.program import SplitProgram, Stage, compile_stages

__all__ = ["KNOWN_PATTERNS", "PatternError", "SplitProgram", "Stage", "compile_stages", "parse", "split_of_hf",
           "split_of_tiktoken"]

# tiktoken's own strings (tiktoken_ext/openai_public.py): fastenc's hand-written scanners.
R50K = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
R50K_OLD = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# The models' own strings, as their code passes them to tiktoken.
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

KNOWN_PATTERNS = {
    "gpt2": R50K, "r50k": R50K, "cl100k": CL100K, "o200k": O200K, "llama4": O200K, "gpt-oss": O200K,
    "llama3": LLAMA3, "olmo2": LLAMA3, "qwen2": QWEN2, "tekken": TEKKEN,
}
# tiktoken strings that fastenc's hand-written scanners implement exactly (tests/test_pattern_fastpaths.py).
_FAST_TIKTOKEN = {R50K: PRETOK_GPT2, R50K_OLD: PRETOK_GPT2, CL100K: PRETOK_CL100K, O200K: PRETOK_O200K}
# HF's ByteLevel(use_regex=true) split, for Oniguruma.
HF_BYTELEVEL = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
URL_SPLIT_PATTERN = r"https?://|%[0-9A-Fa-f]{2}|[!#$%&'()*+,\-./:;=?@\[\\\]\^_`{|}~]"


def split_of_tiktoken(pattern: str) -> tuple[int, tuple[Stage, ...]]:
    """The split of a tiktoken rank file: ``pattern`` is a name in ``KNOWN_PATTERNS`` or a regex."""
    if not isinstance(pattern, str) or not pattern:
        raise VocabError(f"pattern={pattern!r}: pass a regex or one of {sorted(KNOWN_PATTERNS)}")
    regex = KNOWN_PATTERNS.get(pattern, pattern)
    if regex in _FAST_TIKTOKEN:
        return _FAST_TIKTOKEN[regex], ()
    if re.fullmatch(r"[A-Za-z0-9_\-]+", regex):
        raise VocabError(f"pattern={pattern!r} is an unknown name; pass the model's regex itself or one of "
                         f"{sorted(KNOWN_PATTERNS)}")
    stages = (Stage(regex, "tiktoken"),)
    parse(regex, "tiktoken")  # refuse what cannot be exact now, with the construct named
    return PRETOK_REGEX, stages


def split_of_hf(spec) -> tuple[int, tuple[Stage, ...]]:
    """The split of a tokenizer.json ``pre_tokenizer``: ByteLevel, Split, Digits and Sequences of
    them, byte-level last. Refuses anything else naming the field."""
    steps = spec.get("pretokenizers") if isinstance(spec, dict) and spec.get("type") == "Sequence" else [spec]
    if not isinstance(steps, list) or not steps:
        raise _refuse(spec)
    last = steps[-1]
    if not (isinstance(last, dict) and last.get("type") == "ByteLevel"):
        raise _refuse(spec, "a byte-level BPE needs ByteLevel as the last pre-tokenizer")
    _check_byte_level(last, spec)
    stages = [_stage(step, spec) for step in steps[:-1]]
    if last.get("use_regex", True):
        stages.append(Stage(HF_BYTELEVEL, "hf", True, True))
    stages = [s for s in stages if s is not None]
    if not stages:
        raise _refuse(spec, "ByteLevel(use_regex=false) alone does not split the text")
    if len(stages) == 1 and stages[0].pattern == HF_BYTELEVEL:
        return PRETOK_GPT2, ()
    if len(stages) == 1 and stages[0] == Stage(URL_SPLIT_PATTERN, "hf", True, True):
        return PRETOK_URL, ()
    for stage in stages:
        parse(stage.pattern, stage.engine)
    return PRETOK_REGEX, tuple(stages)


def _check_byte_level(step: dict, spec) -> None:
    if step.get("add_prefix_space", False):
        raise _refuse(spec, "ByteLevel(add_prefix_space=true) is not supported (fastenc adds no space)")


def _stage(step, spec) -> Stage:
    if not isinstance(step, dict):
        raise _refuse(spec)
    kind = step.get("type")
    if kind == "Split":
        pattern = step.get("pattern") or {}
        if "Regex" in pattern:
            regex = pattern["Regex"]
        elif "String" in pattern:
            regex = re.escape(pattern["String"])
        else:
            raise _refuse(spec, "Split needs a pattern {'Regex': ...} or {'String': ...}")
        behavior = str(step.get("behavior", "Isolated")).lower()
        invert = bool(step.get("invert", False))
        if behavior == "isolated":
            return Stage(regex, "hf", True, True)
        if behavior == "removed":
            return Stage(regex, "hf", invert, not invert)
        raise _refuse(spec, f"Split behavior {step.get('behavior')!r} (supported: Isolated, Removed)")
    if kind == "Digits":
        # Rust's char::is_numeric (\p{N}) decides, not Oniguruma: read with the Rust regex tables.
        return Stage(r"\p{N}" if step.get("individual_digits", False) else r"\p{N}+", "tiktoken", True, True)
    if kind == "ByteLevel":
        raise _refuse(spec, "ByteLevel must be the last pre-tokenizer (what follows it sees mapped bytes)")
    raise _refuse(spec, f"the pre-tokenizer {kind!r} (supported: ByteLevel, Split, Digits, Sequence of them)")


def _refuse(spec, why: str = "") -> VocabError:
    shown = repr(spec)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    return VocabError(f"tokenizer.json field pre_tokenizer = {shown} is not supported by fastenc"
                      f"{': ' + why if why else ''}; supported: ByteLevel, Split (Isolated, Removed), Digits, "
                      "and Sequences of them ending in ByteLevel(add_prefix_space=false)")
