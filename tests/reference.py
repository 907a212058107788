"""Slow, obvious pure-Python references of fastenc's kernels, for tests.

Nothing here is used on a hot path; each function is written to be easy to check by eye.
"""
from __future__ import annotations

_HTTP_SCHEMES = ("https://", "http://")
_AUTHORITY_ENDS = "/?#"


def _is_dotted_quad(host: str) -> bool:
    labels = host.split(".")
    return len(labels) == 4 and all(
        0 < len(label) <= 3 and label.isascii() and label.isdigit() and int(label) < 256 for label in labels
    )


def canonical_ref(url: str) -> str:
    """The URL card's canonical(): reverse the host labels of an http(s) URL (an involution).

    Other schemes, IPv4 dotted quads and bracketed IPv6 hosts are returned unchanged. The
    scheme match is case-sensitive and the port must be ASCII digits, exactly as the card's
    function behaves.
    """
    scheme = next((s for s in _HTTP_SCHEMES if url.startswith(s)), None)
    if scheme is None:
        return url
    rest = url[len(scheme):]
    cut = min((i for i in (rest.find(c) for c in _AUTHORITY_ENDS) if i != -1), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, hostport = authority.rpartition("@")
    host, colon, port = hostport.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit()):
        host, colon, port = hostport, "", ""
    if not (host.startswith("[") or _is_dotted_quad(host)):
        host = ".".join(reversed(host.split(".")))
    return f"{scheme}{userinfo}{at}{host}{colon}{port}{tail}"


URL_SPLIT_PATTERN = r"""https?://|%[0-9A-Fa-f]{2}|[!#$%&'()*+,\-./:;=?@\[\\\]\^_`{|}~]"""


def url_pieces_ref(text):
    """The URL card's pre-split: HF ``Split(Regex(URL_SPLIT_PATTERN), behavior="isolated")``.

    Every match is a piece, every non-empty run between matches is a piece, in order;
    matches are found left to right with leftmost-first alternation, as the `regex` module
    (and Oniguruma, which HF tokenizers uses) do. ``text`` may be ``str`` or ``bytes``
    (bytes: the same pattern over bytes, for input that is not valid UTF-8).
    """
    import regex

    pattern = URL_SPLIT_PATTERN.encode() if isinstance(text, bytes) else URL_SPLIT_PATTERN
    pieces = []
    pos = 0
    for m in regex.finditer(pattern, text):
        if m.start() > pos:
            pieces.append(text[pos:m.start()])
        pieces.append(m.group())
        pos = m.end()
    if pos < len(text):
        pieces.append(text[pos:])
    return pieces


def bpe_ref(piece: bytes, rank_of_pair, merges: list | None = None) -> list[bytes]:
    """Textbook byte-level BPE: merge the lowest-ranked adjacent pair (leftmost on ties)
    until none is mergeable. ``rank_of_pair(left: bytes, right: bytes) -> int | None``.
    ``merges``, if given, gets each merged ``(left, right)`` in order.

    tiktoken's rule is ``lambda a, b: ranks.get(a + b)``; HF's is a lookup of the pair in the
    ordered merges list.
    """
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            rank = rank_of_pair(parts[i], parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, at = rank, i
        if best is None:
            break
        if merges is not None:
            merges.append((parts[at], parts[at + 1]))
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return parts


def last_merge_ref(token: bytes, ranks: dict) -> tuple[bytes, bytes] | None:
    """The two parts whose merge ends tiktoken's BPE of ``token``'s own bytes (``ranks``: bytes ->
    rank), or None if those bytes do not merge to one part."""
    merges: list = []
    parts = bpe_ref(token, lambda a, b: ranks.get(a + b), merges)
    return merges[-1] if len(parts) == 1 and merges else None


# --- GPT-2 pre-tokenizer (tiktoken's r50k pattern) --------------------------------------------

# For each class, a one-character probe P and a separator X: in the text P + c + X, tiktoken puts
# P and c in one piece exactly when c is in that class (" ?\p{L}++" for "a", " ?\p{N}++" for "1",
# " ?[^\s\p{L}\p{N}]++" for "!", "\s+(?!\S)" over "\t" c "\t" before "!" for whitespace). X makes
# every P start a new piece, so many probes can share one text.
_CLASS_PROBES = {0: ("!", "\n"), 1: ("a", "\n"), 2: ("1", "\n"), 3: ("\t", "\t!")}


def tiktoken_class_probe(codepoints, classes, chunk: int = 1 << 16):
    """For each code point c and class k, does tiktoken's r50k regex put c in class k?

    Builds throwaway tiktoken Encodings whose only multi-byte tokens are the UTF-8 prefixes of the
    probed characters and the probe pairs P+c, ranked so that BPE assembles c and then P+c. A token
    never crosses a piece boundary, so the id of P+c shows up in the output exactly when P and c
    share a piece. Returns a bool array. Needs tiktoken (a test dependency) but no vocabulary file.
    Surrogates (U+D800..U+DFFF) cannot be given to tiktoken; they are reported as class 0 (they
    never come out of a UTF-8 decoder) and as not in any other class.
    """
    import numpy as np
    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    codepoints = np.asarray(codepoints, dtype=np.int64)
    classes = np.broadcast_to(np.asarray(classes, dtype=np.int64), codepoints.shape)
    result = np.zeros(codepoints.shape, dtype=bool)
    surrogate = (codepoints >= 0xD800) & (codepoints < 0xE000)
    result[surrogate] = classes[surrogate] == 0
    todo = np.flatnonzero(~surrogate)
    for lo in range(0, len(todo), chunk):
        sel = todo[lo : lo + chunk]
        chars = [chr(c) for c in codepoints[sel].tolist()]
        utf8 = [ch.encode("utf-8") for ch in chars]
        ranks = {bytes([b]): b for b in range(256)}
        prefixes = {e[:k] for e in utf8 for k in range(2, len(e) + 1)}
        for p in sorted(prefixes, key=lambda p: (len(p), p)):
            ranks[p] = len(ranks)
        pair_id = np.empty(len(sel), dtype=np.int64)
        for j, (k, e) in enumerate(zip(classes[sel].tolist(), utf8)):
            key = _CLASS_PROBES[k][0].encode() + e
            pair_id[j] = ranks.setdefault(key, len(ranks))
        enc = tiktoken.Encoding(
            name="class-probe", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks, special_tokens={}
        )
        for k, (p, x) in _CLASS_PROBES.items():
            mine = np.flatnonzero(classes[sel] == k)
            if len(mine):
                text = "".join(p + chars[j] + x for j in mine.tolist())
                found = np.asarray(enc.encode_ordinary(text), dtype=np.int64)
                result[sel[mine]] = np.isin(pair_id[mine], found)
    return result


def tiktoken_set_probe(pattern: str, codepoints, chunk: int = 1 << 16):
    """For each code point c: does tiktoken's regex engine match c with ``pattern`` (a pattern
    that matches one code point, such as ``[\\p{Lu}\\p{Lt}]``)? tiktoken encodes only the text its
    pattern matches, so with a throwaway vocabulary in which every probed character is one token
    (its UTF-8 prefixes too, so BPE can reach it), the ids in the output name the characters that
    matched. Surrogates cannot be given to tiktoken: reported False. Returns a bool array."""
    import numpy as np
    import tiktoken

    codepoints = np.asarray(codepoints, dtype=np.int64)
    result = np.zeros(codepoints.shape, dtype=bool)
    todo = np.flatnonzero(~((codepoints >= 0xD800) & (codepoints < 0xE000)))
    for lo in range(0, len(todo), chunk):
        sel = todo[lo : lo + chunk]
        chars = [chr(c) for c in codepoints[sel].tolist()]
        utf8 = [ch.encode("utf-8") for ch in chars]
        ranks = {bytes([b]): b for b in range(256)}
        for p in sorted({e[:k] for e in utf8 for k in range(2, len(e) + 1)}, key=lambda p: (len(p), p)):
            ranks[p] = len(ranks)
        ids = np.asarray([ranks[e] for e in utf8], dtype=np.int64)
        enc = tiktoken.Encoding(name="set-probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        found = np.asarray(enc.encode_ordinary("".join(chars)), dtype=np.int64)
        result[sel] = np.isin(ids, found)
    return result


def _class_set(table, k: int) -> str:
    """Body of a `regex` character class listing the code points whose table class is k."""
    import numpy as np

    is_k = np.concatenate(([False], table == k, [False]))
    edges = np.flatnonzero(is_k[1:] != is_k[:-1])
    return "".join(f"\\U{a:08x}-\\U{b - 1:08x}" for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist()))


def gpt2_ref_pattern() -> str:
    r"""tiktoken's r50k pattern for the `regex` module with \p{L}, \p{N} and \s spelled out from
    the shipped class table (so the regex module's own Unicode version cannot leak in) and `$`
    as `\Z` (Python's `$` also matches before a final newline, Rust's does not). Slow (~1 MB/s):
    the independent cross-check of `gpt2_pieces_ref`."""
    from fastenc.unicode_classes import LETTER, NUMBER, SPACE, gpt2_class_table

    table = gpt2_class_table()
    letter, number, space = (_class_set(table, k) for k in (LETTER, NUMBER, SPACE))
    L, N, S = f"[{letter}]", f"[{number}]", f"[{space}]"
    other, not_space = f"[^{space}{letter}{number}]", f"[^{space}]"
    return rf"'(?:[sdmt]|ll|ve|re)| ?{L}++| ?{N}++| ?{other}++|{S}++\Z|{S}+(?!{not_space})|{S}"


_gpt2_compiled = {}


def _compiled(kind: str):
    if kind not in _gpt2_compiled:
        import regex
        import tiktoken_ext.openai_public as openai_public

        pattern = gpt2_ref_pattern() if kind == "classes" else openai_public.r50k_pat_str.replace("$", r"\Z")
        _gpt2_compiled[kind] = regex.compile(pattern)
    return _gpt2_compiled[kind]


# One ASCII stand-in per class. The pattern looks at a code point's identity only for the ASCII
# apostrophe, the ASCII space and the lowercase ASCII contraction letters; everywhere else only
# its class matters. So replacing each non-ASCII code point by a stand-in of its class (per the
# shipped table) gives the same pieces, code point for code point, and the stock pattern never
# sees a character on which its Unicode version could disagree with tiktoken's.
_STAND_IN = {0: "!", 1: "a", 2: "0", 3: "\t"}


def gpt2_pieces_ref(text: str) -> list[str]:
    """GPT-2 pre-tokenizer pieces of `text`, as tiktoken's gpt2 encoding splits it (~10 MB/s).

    Runs tiktoken's own r50k pattern (`regex` module) over `text` with every non-ASCII code point
    replaced by an ASCII stand-in of its class from `gpt2_class_table()`; lone surrogates, which
    the table calls "other", become "!"."""
    from fastenc.unicode_classes import gpt2_class_table

    table = gpt2_class_table()
    subst = {ord(ch): _STAND_IN[int(table[ord(ch)])] for ch in set(text) if ord(ch) >= 0x80}
    pieces, at = [], 0
    for piece in _compiled("stock").findall(text.translate(subst)):
        pieces.append(text[at : at + len(piece)])
        at += len(piece)
    return pieces


def gpt2_pieces_ref_classes(text: str) -> list[str]:
    """Same as `gpt2_pieces_ref`, by the other route: `gpt2_ref_pattern()` (explicit classes)."""
    return _compiled("classes").findall(text)


def gpt2_piece_ends_ref(data: bytes, pieces=gpt2_pieces_ref) -> list[int]:
    """Exclusive byte ends of the GPT-2 pieces of UTF-8 `data`, each invalid byte being one
    code point of class "other" (decoded with surrogateescape: U+DC80..U+DCFF are "other")."""
    ends, n = [], 0
    for piece in pieces(data.decode("utf-8", "surrogateescape")):
        n += len(piece.encode("utf-8", "surrogateescape"))
        ends.append(n)
    return ends


def _probe_chars(codepoints):
    """(codepoints as int64, indices of those that are not surrogates): the two engines take
    Python ``str`` made of the latter; surrogates cannot be encoded and are reported False."""
    import numpy as np

    codepoints = np.asarray(codepoints, dtype=np.int64)
    return codepoints, np.flatnonzero(~((codepoints >= 0xD800) & (codepoints < 0xE000)))


def hf_set_probe(pattern: str, codepoints, chunk: int = 1 << 12):
    """For each code point c: does HF tokenizers' regex engine (Oniguruma) match c with ``pattern``
    (a pattern that matches one code point, such as ``\\p{Han}``)?

    ``Split(Regex(pattern), behavior="removed").pre_tokenize_str(text)`` returns the runs between
    matches with their offsets; every character no run covers was matched. The offsets are
    checked to be in characters (not UTF-8 bytes) on every run. Small chunks: the call's cost
    grows faster than linearly with the text's length. Surrogates cannot be given to tokenizers:
    reported False. Returns a bool array. Needs tokenizers (a test dependency)."""
    import numpy as np
    from tokenizers import Regex, pre_tokenizers

    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    codepoints, todo = _probe_chars(codepoints)
    result = np.zeros(codepoints.shape, dtype=bool)
    for lo in range(0, len(todo), chunk):
        sel = todo[lo : lo + chunk]
        text = "".join(map(chr, codepoints[sel].tolist()))
        matched = np.ones(len(sel), dtype=bool)
        for piece, (a, b) in split.pre_tokenize_str(text):
            if text[a:b] != piece:
                raise AssertionError(f"tokenizers' offsets ({a}, {b}) do not index characters")
            matched[a:b] = False
        result[sel] = matched
    return result
