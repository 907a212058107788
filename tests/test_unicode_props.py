"""fastenc.pattern.props: the shipped Unicode property tables against the live regex engines.

The tables (``fastenc/data/unicode_props.npz``) are probed from tiktoken (fancy-regex over the
Rust regex crate) and HF tokenizers (Oniguruma) by ``scripts/build_unicode_props.py``. Here a
sample of code points (20k random ones plus every range boundary of the property) is asked
again of the installed engines by a different route (``tests/reference.py``: tiktoken's
one-token-per-character vocabulary, tokenizers' Split offsets), so a stale or wrong table fails.

Engine differences these tests pin down (tiktoken 0.14.0 vs tokenizers 0.23.3): every General_Category
value and every script both accept is the same set in both (a bare script name is its Script,
not its Script_Extensions, in both); the differences are:

- ``\\w`` (8 code points): only tiktoken's has U+200C and U+200D (Rust adds Join_Control); only
  Oniguruma's has U+00B2 U+00B3 U+00B9 U+00BC U+00BD U+00BE (its Latin-1 table calls these
  \\p{No} word characters, the other 909 \\p{No} are not).
- ``\\s`` is the same 25 code points in both: U+0085 and U+00A0 are in, U+001C..U+001F are not
  (Python's ``str.isspace`` says they are).
- ``(?i:c)`` is the same for every ASCII c: ``k`` adds U+212A, ``s`` adds U+017F, ``i`` adds nothing.
- ``$``: tiktoken's is end of text only; Oniguruma's (Ruby syntax) also matches before every ``\\n``.
- Spellings: both ignore ASCII case, spaces, ``_`` and ``-`` and take a leading ``^`` as negation;
  only tiktoken accepts ``key=value`` forms (``sc=Han``, ``gc=L``, ``sc!=Han``), a leading ``Is``
  and non-ASCII characters (which it drops: ``L\u00e9u`` is ``Lu``); only tokenizers accepts
  ``Unknown``/``Zzzz`` and ``Surrogate``.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from fastenc.errors import FastencError, VocabError
from fastenc.pattern import props

from reference import hf_set_probe, tiktoken_set_probe

PROBES = {"tiktoken": tiktoken_set_probe, "hf": hf_set_probe}
RANKS = {bytes([b]): b for b in range(256)}


@pytest.fixture
def live():
    """The installed engines (tests that ask them are skipped without them; the rest only read the tables)."""
    pytest.importorskip("tiktoken")
    pytest.importorskip("tokenizers")


def live_accepts(engine: str, pattern: str) -> bool:
    """Does the installed engine compile ``pattern``?"""
    import tiktoken
    import tokenizers

    try:
        if engine == "tiktoken":
            tiktoken.Encoding(name="t", pat_str=pattern, mergeable_ranks=RANKS, special_tokens={})
        else:
            tokenizers.Regex(pattern)
    except Exception:
        return False
    return True


def sample_for(*tables: np.ndarray, n: int = 20_000, seed: int = 0) -> np.ndarray:
    """``n`` random code points plus, for each table, the first and last code point of every run
    and their outside neighbours: where a table built from another Unicode version would differ."""
    rng = np.random.default_rng(seed)
    picks = [rng.integers(0, props.N_CODEPOINTS, n)]
    for table in tables:
        edges = props.table_ranges(table)
        picks += [edges[:, 0], edges[:, 1], edges[:, 0] - 1, edges[:, 1] + 1]
    cps = np.unique(np.concatenate(picks))
    return cps[(cps >= 0) & (cps < props.N_CODEPOINTS)]


def assert_same(engine: str, pattern: str, table: np.ndarray) -> None:
    cps = sample_for(table)
    live = PROBES[engine](pattern, cps)
    bad = cps[live != table[cps]]
    assert not len(bad), f"{engine} {pattern}: table differs from the live engine at {[hex(c) for c in bad[:10]]}"


PROPERTIES = ["L", "Lu", "Ll", "Lm", "Lo", "M", "N", "Nd", "P", "S", "Zs", "Cn", "Cf",
              "Han", "Latin", "Greek", "Cyrillic", "Hiragana", "Katakana", "Hangul", "Arabic", "Common", "Inherited"]


@pytest.mark.parametrize("engine", props.ENGINES)
@pytest.mark.parametrize("name", PROPERTIES)
def test_property_matches_live_engine(name, engine, live):
    assert_same(engine, rf"\p{{{name}}}", props.property_set(name, engine))


@pytest.mark.parametrize("engine", props.ENGINES)
@pytest.mark.parametrize("letter", "sdw")
def test_escape_matches_live_engine(letter, engine, live):
    assert_same(engine, "\\" + letter, props.escape_set(letter, engine))


@pytest.mark.parametrize("engine", props.ENGINES)
def test_casefold_matches_live_engine(engine, live):
    cps = np.arange(0x3000)  # holds the ASCII letters' case partners (U+017F, U+0130, U+0131, U+212A, U+212B)
    for ch in "aiks1 .":
        live = cps[PROBES[engine](f"(?i:{ch})" if ch.isalnum() else f"(?i:\\x{{{ord(ch):X}}})", cps)]
        assert props.casefold_set(ch, engine).tolist() == live.tolist(), (engine, ch)


def test_known_engine_differences():
    """The differences listed in the module docstring, as the shipped tables record them."""
    w_tk, w_hf = props.escape_set("w", "tiktoken"), props.escape_set("w", "hf")
    assert w_tk[0x200C] and w_tk[0x200D] and not w_hf[0x200C] and not w_hf[0x200D]
    assert w_hf[0xB2] and w_hf[0xBD] and not w_tk[0xB2] and not w_tk[0xBD]
    for engine in props.ENGINES:
        s = props.escape_set("s", engine)
        assert s.sum() == 25 and s[0x85] and s[0xA0] and not s[0x1C:0x20].any()
        assert not (props.escape_set("d", engine) ^ props.property_set("Nd", engine)).any()
    assert (props.casefold_set("k", "tiktoken") == [0x4B, 0x6B, 0x212A]).all()
    assert (props.casefold_set("s", "tiktoken") == [0x53, 0x73, 0x17F]).all()
    for engine in props.ENGINES:
        assert (props.casefold_set("i", engine) == [0x49, 0x69]).all()
    diff = np.flatnonzero(w_tk ^ w_hf)
    assert diff.tolist() == [0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE, 0x200C, 0x200D]


def test_every_name_both_accept_is_the_same_set_in_both():
    names = props._tables()[3]["names"]
    tk, hf = names["tiktoken"], names["hf"]
    both = set(tk) & set(hf)
    assert len(both) > 400 and {"lu", "han", "greek", "cn"} <= both
    assert [k for k in sorted(both) if tk[k] != hf[k]] == []


def test_names_only_one_engine_accepts():
    for name in ["Unknown", "Zzzz", "Surrogate"]:
        props.property_set(name, "hf")
        with pytest.raises(VocabError):
            props.property_set(name, "tiktoken")
    assert props.property_set("Unknown", "hf").sum() > 800_000
    assert not props.property_set("Cs", "tiktoken").any()  # surrogates never reach either engine


def test_bare_script_names_mean_script_not_script_extensions():
    """U+0342 COMBINING GREEK PERISPOMENI is Script=Inherited, Script_Extensions=Greek."""
    for engine in props.ENGINES:
        assert not props.property_set("Greek", engine)[0x342] and props.property_set("Inherited", engine)[0x342]
    assert props.property_set("scx=Greek", "tiktoken")[0x342]
    assert (props.property_set("Greek", "tiktoken") == props.property_set("sc=Greek", "tiktoken")).all()


def test_dollar_is_end_of_text_in_tiktoken_and_end_of_line_in_oniguruma(live):
    import tiktoken
    import tokenizers

    text = "a  \n b  "
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"\s+$"), behavior="isolated")
    assert [p for p, _ in split.pre_tokenize_str(text)] == ["a", "  ", "\n b", "  "]
    enc = tiktoken.Encoding(name="t", pat_str=r"\s+$", mergeable_ranks=RANKS, special_tokens={})
    assert bytes(enc.encode_ordinary(text)) == b"  "  # only the final run: the text it matched


SPELLINGS = ["Han", "han", "HAN", "Hani", "Old_Italic", "old italic", "old-italic", "OldItalic", "Ital", "IsHan",
             "isL", "isc", "Script=Han", "sc=Han", "sc:Han", "script = han", "Script_Extensions=Greek",
             "scx=Grek", "sc=IsHan", "gc=L", "General_Category=Letter", "gc=Uppercase_Letter", "Letter", "L", "l",
             "Lu", "LU", "Uppercase_Letter", "uppercase letter", "Cased_Letter", "LC", "L&", "Digit", "punct",
             "Combining_Mark", "Cs", "Surrogate", "Unknown", "Zzzz", "Hrkt", "Katakana_Or_Hiragana", "Nko",
             "Unassigned", "Cn", "Co", "gc=Han", "sc=L", "Greek ", "blk=Greek",
             " IsHan", "I_sHan", "Is_Han", "is-L", "i-sL", "Isc", "is c", "^isc", "sc= IsHan", "sc=Is Han", "sc!=IsHan",
             "^Han", "^ Han", "^IsHan", "^ IsHan", " ^L", "^^L", "^sc=Han", "^sc!=Han",
             "L\u00a0", "L\u00e9u", "Lu\u3000",
             "L\t", "sc=\tHan", "H-a-n", "s c = Han"]


@pytest.mark.parametrize("engine", props.ENGINES)
def test_spellings_accepted_exactly_when_the_engine_accepts_them(engine, live):
    cps = sample_for(n=2000, seed=1)
    for name in SPELLINGS:
        pattern = rf"\p{{{name}}}"
        if not live_accepts(engine, pattern):
            with pytest.raises(VocabError):
                props.property_set(name, engine)
            continue
        table = props.property_set(name, engine)
        live = PROBES[engine](pattern, cps)
        assert (live == table[cps]).all(), (engine, name)


def test_negated_key_value_form():
    han = props.property_set("Han", "tiktoken")
    not_han = props.property_set("sc!=Han", "tiktoken")
    assert not (han & not_han).any() and not not_han[0xD800:0xE000].any() and not_han[0x41]
    with pytest.raises(VocabError):
        props.property_set("sc!=Han", "hf")


@pytest.mark.parametrize("engine", props.ENGINES)
def test_engine_accepts_but_fastenc_did_not_probe(engine, live):
    for name in ["Any", "ASCII", "Alpha", "White_Space"]:
        assert live_accepts(engine, rf"\p{{{name}}}")
        with pytest.raises(VocabError, match=f"{name}.*{engine}"):
            props.property_set(name, engine)


def test_refusals():
    with pytest.raises(VocabError, match="unknown regex engine"):
        props.property_set("L", "pcre")
    with pytest.raises(VocabError) as info:
        props.property_set("NoSuchScript", "hf")
    assert "\n" not in str(info.value) and "NoSuchScript" in str(info.value) and "hf" in str(info.value)
    with pytest.raises(VocabError, match="only ASCII"):
        props.casefold_set("é", "tiktoken")
    with pytest.raises(VocabError):
        props.escape_set("b", "hf")


GENERAL_CATEGORIES = ("L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po "
                      "S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Co Cn").split()


def test_tables_are_read_only_and_every_general_category_is_there():
    for engine in props.ENGINES:
        for name in GENERAL_CATEGORIES:
            table = props.property_set(name, engine)
            assert table.shape == (props.N_CODEPOINTS,) and table.dtype == bool and not table.flags.writeable
    assert set(props.props_versions()) == {"tiktoken", "tokenizers"}


def test_load_is_fast_and_checks_its_sha256(tmp_path, monkeypatch):
    props._tables.cache_clear()
    props._set.cache_clear()
    t0 = time.perf_counter()
    props.property_set("Lu", "hf")
    assert time.perf_counter() - t0 < 0.5
    with np.load(props.PROPS_PATH) as z:
        members = dict(z)
    members["starts"] = members["starts"].copy()
    members["starts"][5] += 1
    damaged = tmp_path / "unicode_props.npz"
    np.savez_compressed(damaged, **members)
    monkeypatch.setattr(props, "PROPS_PATH", damaged)
    props._tables.cache_clear()
    try:
        with pytest.raises(FastencError, match="sha256"):
            props.property_set("Lu", "hf")
    finally:
        monkeypatch.undo()
        props._tables.cache_clear()
        props._set.cache_clear()


def test_agrees_with_the_shipped_gpt2_table():
    """Same engine, same questions, probed by another script: the GPT-2 class table's L, N, S."""
    from fastenc import unicode_classes as uc

    gpt2 = uc.gpt2_class_table()
    assert (props.property_set("L", "tiktoken") == (gpt2 == uc.LETTER)).all()
    assert (props.property_set("N", "tiktoken") == (gpt2 == uc.NUMBER)).all()
    assert (props.escape_set("s", "tiktoken") == (gpt2 == uc.SPACE)).all()
