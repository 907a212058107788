"""The split-pattern dialect: what parses, and what is refused with the construct named."""
from __future__ import annotations

import pytest

from fastenc.pattern import PatternError, Stage, compile_stages, parse, split_of_tiktoken
from fastenc.pattern import CL100K, LLAMA3, O200K, QWEN2, TEKKEN, R50K
from fastenc.kernels.config import PRETOK_CL100K, PRETOK_GPT2, PRETOK_O200K, PRETOK_REGEX


@pytest.mark.parametrize("pattern", [LLAMA3, QWEN2, TEKKEN, O200K, CL100K, R50K,
                                     r"[一-龥぀-ゟ゠-ヿ]+", r"\p{N}{1,3}", r"(?>a+)b|\x{1F600}|\u00e9+|[^\P{L}a-c]{2,}+",
                                     r"(?i)(?P<word>[a-z]+)|(?<n>\d+)|ab|\S", r"[\p{L}&&[^\p{Han}]&&\P{Lu}]+|[a-z&&[^aeiou]]"])
def test_the_models_patterns_parse_and_compile(pattern):
    tree = parse(pattern)
    assert tree[0] in ("alt", "seq", "set", "repeat", "atomic")
    program = compile_stages([Stage(pattern, "tiktoken")])
    assert program.classes.shape == (0x110000,)
    assert program.program[1] == 1


@pytest.mark.parametrize("pattern, named", [
    (r"(a)\1", "backreference"),
    (r"(?<=a)b", "lookbehind"),
    (r"(?<!a)b", "lookbehind"),
    (r"\bword", "word boundary"),
    (r"^a", "line-start anchor"),
    (r"(?m)a$", "(?m"),
    (r"a{,3}", "{,n}"),
    (r"a**", "quantifier on a quantifier"),
    (r"a(?i)b", "inline flag"),
    (r"(?i:é)", "non-ASCII"),
    (r"(?i:\p{Lu})", "property under (?i)"),
    (r"\p{L}*", "empty"),
    (r"a|b?", "empty"),
    (r"(?:a?)*b", "empty"),
    (r"(?!(?:ab)+)c", "lookahead other than"),
    (r"(a", "unclosed"),
    (r"a)", "unmatched"),
])
def test_what_cannot_be_exact_is_refused_naming_it(pattern, named):
    with pytest.raises(PatternError) as info:
        compile_stages([Stage(pattern, "tiktoken")])
    message = str(info.value)
    assert named in message and "\n" not in message


def test_lazy_quantifiers_are_refused_for_tiktoken_only():
    """fancy-regex picks another match than backtracking for [^\\p{N}]+?$|[^\\p{N}]+?\\p{L} on "abc" ("ab",
    not "abc"): lazy repeats are refused for tiktoken patterns (no model's pattern has one)."""
    with pytest.raises(PatternError, match="lazy quantifier"):
        parse(r"a+?$|a+?b", "tiktoken")
    parse(r"a+?$|a+?b", "hf")


@pytest.mark.parametrize("pattern", [r"\p{N}{1,3}+", r"a{2}+"])
def test_oniguruma_counted_modifiers_are_refused_for_hf_only(pattern):
    parse(pattern, "tiktoken")
    with pytest.raises(PatternError, match="counted repeat"):
        parse(pattern, "hf")


def test_tiktoken_own_strings_keep_the_hand_written_scanners():
    assert split_of_tiktoken("cl100k")[0] == PRETOK_CL100K
    assert split_of_tiktoken(O200K)[0] == PRETOK_O200K
    assert split_of_tiktoken("llama4")[0] == PRETOK_O200K  # Llama 4's string is o200k's, character for character
    assert split_of_tiktoken("gpt2")[0] == PRETOK_GPT2
    code, stages = split_of_tiktoken("llama3")
    assert code == PRETOK_REGEX and stages[0].pattern == LLAMA3 and stages[0].engine == "tiktoken"


def test_unknown_pattern_names_are_refused_with_the_known_ones():
    with pytest.raises(PatternError.__mro__[1], match="llama3"):
        split_of_tiktoken("llama5")


def test_classes_are_shared_by_code_points_the_pattern_treats_alike():
    program = compile_stages([Stage(r"\p{Lu}+|\p{Ll}+|\d", "tiktoken")])
    cls = program.classes
    assert cls[ord("A")] == cls[ord("Z")] == cls[ord("É")]
    assert cls[ord("a")] == cls[ord("z")] != cls[ord("A")]
    assert cls[ord("0")] != cls[ord("a")] and cls[ord(" ")] == cls[ord("!")]
