"""tokenizer.json -> ``Vocab``: flat numpy tables for the ``@njit`` kernels.

Only what fastenc can encode *exactly* is accepted: a byte-level BPE model with no normalizer,
and one of two pre-tokenizers (GPT-2's ByteLevel regex, or the URL card's Split + ByteLevel).
Anything else is refused with a ``VocabError`` that names the field and says what is
supported; fastenc never silently encodes differently from the reference.

Two merge rules are supported:

* ``"hf"``: HF tokenizers' BPE. Only the listed merges apply, the rank of a pair is its
  index in ``model.merges`` (a duplicated pair takes its last index, like HF's HashMap), and a
  whole piece is looked up in the vocabulary first only when ``model.ignore_merges`` is set.
* ``"tiktoken"``: tiktoken's ``CoreBPE``. Two adjacent parts merge whenever their
  concatenation is a token, with that token's id as the rank, and a piece that is itself a
  token is emitted directly. ``fastenc.load("gpt2")`` uses this rule: tiktoken's
  ``encode_ordinary`` is the reference for GPT-2, and it differs from HF on rare inputs.
"""
from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from fastenc.errors import VocabError
from fastenc.kernels import segments, tables

from fastenc.kernels import config as cfg
from fastenc.kernels.config import PRETOK_CL100K, PRETOK_GPT2, PRETOK_O200K, PRETOK_REGEX, PRETOK_URL
from fastenc.pattern import KNOWN_PATTERNS, Stage, compile_stages, split_of_hf, split_of_tiktoken

PRETOKENIZER_NAMES = {PRETOK_GPT2: "gpt2", PRETOK_URL: "url", PRETOK_CL100K: "cl100k", PRETOK_O200K: "o200k",
                      PRETOK_REGEX: "regex"}
# Named split patterns a tiktoken rank file can be paired with (fastenc.load(path, pattern=...));
# any other regex string is taken too.
TIKTOKEN_PATTERNS = KNOWN_PATTERNS
MERGE_RULES = {"hf": cfg.MERGE_RULE_HF, "tiktoken": cfg.MERGE_RULE_TIKTOKEN}

# Built-in vocabularies: name -> (folder in fastenc._vocab, merge rule). GPT-2 follows
# tiktoken (its reference); the URL vocabulary follows HF tokenizers (its reference).
BUILTIN = {"gpt2": ("gpt2", "tiktoken"), "urls": ("urls", "hf")}

# Built-in tiktoken rank files: name -> (folder in fastenc._vocab, split pattern, special tokens).
# The special tokens are tiktoken's (tiktoken_ext/openai_public.py): only decode emits them.
TIKTOKEN_BUILTIN = {
    "cl100k_base": ("cl100k_base", "cl100k", {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258,
                                              "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
                                              "<|endofprompt|>": 100276}),
    "o200k_base": ("o200k_base", "o200k", {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}


def builtin_tiktoken_file(name: str) -> Path:
    """The rank file of a built-in tiktoken encoding (``"cl100k_base"``, ``"o200k_base"``)."""
    folder = TIKTOKEN_BUILTIN[name][0]
    return Path(str(resources.files("fastenc._vocab") / folder / f"{name}.tiktoken"))

URL_SPLIT_PATTERN = r"https?://|%[0-9A-Fa-f]{2}|[!#$%&'()*+,\-./:;=?@\[\\\]\^_`{|}~]"


class Vocab(NamedTuple):
    """Flat tables of a byte-level BPE vocabulary; pass it whole to the kernels.

    byte_ids       int32[256]   id of each single byte (the initial BPE symbols)
    pair_table     uint64[cap]  (left, right) -> rank, see ``fastenc.kernels.tables``
    merge_result   int32[R]     rank -> id of the merged token
    token_bytes    uint8[B]     bytes of every id, concatenated (added tokens: their UTF-8 text)
    token_offsets  int64[V+1]   id -> its slice of token_bytes
    token_table    int32[cap]   bytes -> id, for whole-piece lookups
    joinable       uint8[65536] x << 8 | y -> 0 where a long piece may be cut between bytes x
                                and y, see fastenc.kernels.segments
    byte_pair_ranks int32[65536] x << 8 | y -> rank of merging byte x with byte y, or -1
    pair_filter    uint64[F]    a bit per pair in pair_table (most pairs asked about are not there)
    token_heads    uint64[V]    id -> its bytes and length in one word, for tokens of up to 7 bytes
                                (``fastenc.kernels.tables.build_token_heads``)
    config         int64[5]     see fastenc.kernels.config: merge rule, whole-piece lookup, pre-tokenizer, size,
                                rank is id
    token_prefixes uint64[cap]  hashes of every token's prefixes, for cutting long pieces where no
                                token spans (fastenc.kernels.segments.span_segment_end)
    span_pairs     uint16[65536] x << 8 | y -> the longest token starting with x, y, and a guard bit
    split_program  int32[P]     a split pattern's program (PRETOK_REGEX; fastenc.pattern.program), else [0]
    split_classes  uint8[C]     its code point -> class table (uint8[0x110000]), else [0]
    """

    byte_ids: np.ndarray
    pair_table: np.ndarray
    merge_result: np.ndarray
    token_bytes: np.ndarray
    token_offsets: np.ndarray
    token_table: np.ndarray
    joinable: np.ndarray
    byte_pair_ranks: np.ndarray
    pair_filter: np.ndarray
    token_heads: np.ndarray
    config: np.ndarray
    token_prefixes: np.ndarray
    span_pairs: np.ndarray
    split_program: np.ndarray
    split_classes: np.ndarray


class VocabInfo(NamedTuple):
    """What the Python side needs to know about a vocabulary beyond the kernel tables."""

    path: str
    sha256: str
    vocab_size: int
    merge_rule: str
    pretokenizer: str
    special_tokens: dict  # content -> id
    output_dtype: np.dtype
    split: list = []  # PRETOK_REGEX: its stages as [pattern, engine, keep_matches, keep_gaps] lists


def builtin_tokenizer_dir(name: str) -> Path:
    """The folder of a built-in vocabulary (works for editable and regular installs)."""
    folder, _ = BUILTIN[name]
    return Path(str(resources.files("fastenc._vocab") / folder))


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by ByteLevel tokenizers.

    Printable Latin-1 bytes map to themselves; the other 68 bytes map, in byte order, to
    U+0100 onwards, so that no token string contains white space or control characters.
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _refuse(field: str, found, supported: str) -> VocabError:
    shown = repr(found)
    shown = shown if len(shown) <= 240 else shown[:240] + "..."  # one readable line, whatever the field holds
    return VocabError(f"tokenizer.json field {field} = {shown} is not supported by fastenc; supported: {supported}")


def _pretokenizer_kind(spec) -> tuple[int, tuple]:
    """(pre-tokenizer code, split stages) of a tokenizer.json ``pre_tokenizer`` (fastenc.pattern)."""
    if spec is None:
        raise _refuse("pre_tokenizer", spec, "ByteLevel, Split, Digits, and Sequences of them ending in ByteLevel")
    return split_of_hf(spec)


def _check_model(model: dict) -> None:
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE":
        raise _refuse("model.type", (model or {}).get("type"), "'BPE' (byte-level)")
    if model.get("dropout") not in (None, 0, 0.0):
        raise _refuse("model.dropout", model.get("dropout"), "null (dropout makes encoding random)")
    if model.get("byte_fallback"):
        raise _refuse("model.byte_fallback", True, "false (byte-level BPE needs no fallback)")
    for field in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(field) not in (None, ""):
            raise _refuse(f"model.{field}", model.get(field), "null or empty")
    if not isinstance(model.get("vocab"), dict) or not isinstance(model.get("merges"), list):
        raise VocabError("tokenizer.json model.vocab must be an object and model.merges a list")


def _check_pipeline(spec: dict) -> None:
    normalizer = spec.get("normalizer")
    if normalizer is not None and not (
        isinstance(normalizer, dict) and normalizer.get("type") == "Sequence" and not normalizer.get("normalizers")
    ):
        raise _refuse("normalizer", normalizer, "null (a normalizer would break byte-exact round trips)")
    post = spec.get("post_processor")
    if post is not None and not (isinstance(post, dict) and post.get("type") == "ByteLevel"):
        raise _refuse("post_processor", post, "null or ByteLevel (templates that add tokens are not supported)")
    decoder = spec.get("decoder")
    if decoder is not None and not (isinstance(decoder, dict) and decoder.get("type") == "ByteLevel"):
        raise _refuse("decoder", decoder, "null or ByteLevel")
    for token in spec.get("added_tokens") or []:
        if not token.get("special", False):
            raise _refuse(
                "added_tokens[].special", False, "special added tokens only (fastenc encodes their text as ordinary text)"
            )


def _parse_merge(merge, index: int) -> tuple[str, str]:
    if isinstance(merge, str):
        parts = merge.split(" ")
    elif isinstance(merge, (list, tuple)):
        parts = list(merge)
    else:
        parts = []
    if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
        raise VocabError(f"tokenizer.json model.merges[{index}] = {merge!r} is not a pair 'a b' or [a, b]")
    return parts[0], parts[1]


def load_vocab(path, merge_rule: str = "hf", use_cache: bool = True) -> tuple[Vocab, VocabInfo]:
    """Read, validate and flatten a byte-level BPE ``tokenizer.json``.

    The flat tables are cached in ``$FASTENC_CACHE_DIR`` (default ``~/.cache/fastenc``) under
    the file's sha256, so a later process skips parsing and validation (a warm start).
    """
    path = Path(path)
    if merge_rule not in MERGE_RULES:
        raise VocabError(f"merge_rule={merge_rule!r} is unknown; use one of {sorted(MERGE_RULES)}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise VocabError(f"cannot read tokenizer file {path}: {exc.strerror}; pass a path to a tokenizer.json") from None
    sha256 = hashlib.sha256(raw).hexdigest()
    cache_file = _cache_dir() / f"vocab-{sha256[:24]}-{merge_rule}-{_builder_version()}.npz" if use_cache else None
    if cache_file is not None and cache_file.is_file():
        try:
            return _read_tables(cache_file, str(path))
        except Exception:  # a stale or damaged cache is rebuilt, never trusted
            pass
    try:
        tables_, info = _build_vocab(raw, path, merge_rule, sha256)
    except (AttributeError, TypeError, KeyError, IndexError, RecursionError) as exc:
        # a field of the wrong JSON type (a string where an object belongs, a dict for a list,
        # nesting deeper than Python recurses): one line naming the file, never a traceback
        raise VocabError(f"{path} is not a tokenizer.json that fastenc understands ({type(exc).__name__}: "
                         f"{str(exc)[:200]}): check its 'model', 'added_tokens' and 'pre_tokenizer' fields") from None
    if cache_file is not None:
        _write_tables(cache_file, tables_, info)
    return tables_, info


def load_tiktoken_vocab(path, pattern: str, special_tokens: dict | None = None,
                        use_cache: bool = True) -> tuple[Vocab, VocabInfo]:
    """Read a tiktoken rank file (``base64(token bytes) rank`` per line, rank = id) with the
    split ``pattern`` (a name in ``fastenc.pattern.KNOWN_PATTERNS``, or the regex string the model's
    code passes to tiktoken) and tiktoken's merge rule. The special
    tokens (content -> id) only serve ``decode``. Cached like ``load_vocab``."""
    path = Path(path)
    pretok, split = split_of_tiktoken(pattern)
    special_tokens = dict(special_tokens or {})
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise VocabError(f"cannot read tiktoken rank file {path}: {exc.strerror}; pass a path to a .tiktoken file") from None
    sha256 = hashlib.sha256(raw).hexdigest()
    extra = hashlib.sha256(json.dumps(sorted(special_tokens.items())).encode()).hexdigest()[:8]
    extra += hashlib.sha256(KNOWN_PATTERNS.get(pattern, pattern).encode()).hexdigest()[:12]
    cache_file = (_cache_dir() / f"vocab-{sha256[:24]}-tiktoken-{extra}-{_builder_version()}.npz"
                  if use_cache else None)
    if cache_file is not None and cache_file.is_file():
        try:
            return _read_tables(cache_file, str(path))
        except Exception:  # a stale or damaged cache is rebuilt, never trusted
            pass
    id_to_bytes = _parse_tiktoken_ranks(raw, path)
    model_ids = set(id_to_bytes)
    for content, tid in special_tokens.items():
        if tid in id_to_bytes:
            raise VocabError(f"special token {content!r} reuses id {tid} of {path}; give it an unused id")
        id_to_bytes[tid] = content.encode("utf-8")
    byte_ids = np.full(256, -1, dtype=np.int32)
    for tid in model_ids:
        if len(id_to_bytes[tid]) == 1:
            byte_ids[id_to_bytes[tid][0]] = tid
    tables_, info = _flatten(id_to_bytes, model_ids, special_tokens, byte_ids, "tiktoken", None, False,
                             pretok, path, sha256, dense=False, split=split)
    if cache_file is not None:
        _write_tables(cache_file, tables_, info)
    return tables_, info


def _parse_tiktoken_ranks(raw: bytes, path: Path) -> dict[int, bytes]:
    """id -> token bytes of a .tiktoken file, refusing malformed lines and repeated ids/tokens."""
    id_to_bytes: dict[int, bytes] = {}
    seen: set[bytes] = set()
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            token_b64, rank_text = line.split()
            token = base64.b64decode(token_b64, validate=True)
            rank = int(rank_text)
            if rank < 0:
                raise ValueError("negative rank")
        except (ValueError, binascii.Error) as exc:
            raise VocabError(f"{path}:{lineno}: not a tiktoken rank line 'base64 rank' ({exc}); pass a .tiktoken file") from None
        if rank in id_to_bytes or token in seen or not token:
            raise VocabError(f"{path}:{lineno}: rank {rank} or its token repeats an earlier line (or the token is empty)")
        id_to_bytes[rank] = token
        seen.add(token)
    if not id_to_bytes:
        raise VocabError(f"{path} holds no tiktoken rank lines; pass a .tiktoken file")
    return id_to_bytes


_BUILDER_FILES = ("vocab.py", "kernels/config.py", "kernels/tables.py", "kernels/segments.py", "kernels/pretok_regex.py",
                  "pattern/__init__.py", "pattern/parse.py", "pattern/program.py", "pattern/props.py")


@functools.lru_cache(maxsize=1)
def _builder_version() -> str:
    """The cache key of the code that builds the tables: a hash of its source files, so that any
    change to the table layout or the hash functions makes a new cache entry (nothing to bump)."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for name in _BUILDER_FILES:
        h.update((root / name).read_bytes())
    return h.hexdigest()[:12]


def _split_tables(split: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``(split_program, split_classes)``: a pattern's compiled program, or placeholders."""
    if not split:
        return np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.uint8)
    program = compile_stages([Stage(*stage) for stage in split])
    # writeable, as every table read back from the cache is: a read-only one is another Numba type
    return program.program, program.classes.copy()


def _cache_dir() -> Path:
    return Path(os.environ.get("FASTENC_CACHE_DIR") or Path.home() / ".cache" / "fastenc")


def _write_tables(cache_file: Path, tables_: Vocab, info: VocabInfo) -> None:
    meta = info._replace(output_dtype=info.output_dtype.str)._asdict()
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(f"{cache_file.name}.tmp-{os.getpid()}.npz")
        np.savez(tmp, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **tables_._asdict())
        os.replace(tmp, cache_file)
    except OSError:
        pass  # a read-only home only costs the next process a rebuild


def _read_tables(cache_file: Path, path: str) -> tuple[Vocab, VocabInfo]:
    with np.load(cache_file) as npz:
        tables_ = Vocab(**{field: npz[field] for field in Vocab._fields})
        meta = json.loads(npz["meta"].tobytes())
    meta.update(path=path, output_dtype=np.dtype(meta["output_dtype"]))
    return tables_, VocabInfo(**meta)


def _build_vocab(raw: bytes, path: Path, merge_rule: str, sha256: str) -> tuple[Vocab, VocabInfo]:
    """The kernel tables of a HF tokenizer.json: parse and check it, map every id to its bytes,
    list its merges, then flatten (``_flatten``, shared with tiktoken rank files)."""
    spec = _parse_spec(raw, path)
    if _is_tekken(spec):
        return _build_tekken(spec, path, sha256)
    pretok, split = _pretokenizer_kind(spec.get("pre_tokenizer"))
    model = spec["model"]
    id_to_bytes = _model_id_bytes(model["vocab"])
    model_ids = set(id_to_bytes)
    special_tokens = _added_tokens(spec.get("added_tokens") or [], id_to_bytes, model_ids)
    hf_merges = _hf_merges(model) if merge_rule == "hf" else _check_merges(model)
    byte_ids = _single_byte_ids(model["vocab"], id_to_bytes)
    return _flatten(id_to_bytes, model_ids, special_tokens, byte_ids, merge_rule, hf_merges,
                    bool(model.get("ignore_merges", False)), pretok, path, sha256, dense=True, split=split)


def _parse_spec(raw: bytes, path: Path) -> dict:
    """The tokenizer.json as a dict, its model and pipeline checked (one-line ``VocabError``);
    a Mistral ``tekken.json`` is returned as read (``_is_tekken``)."""
    try:
        spec = json.loads(raw)
    except ValueError as exc:
        raise VocabError(f"{path} is not valid JSON ({exc}); pass a HF tokenizer.json") from None
    except RecursionError:
        raise VocabError(f"{path} is nested too deeply to read (deeper than Python's recursion limit), which no HF "
                         "tokenizer.json is; pass a tokenizer.json saved by HF tokenizers") from None
    if _is_tekken(spec):
        return spec
    if not isinstance(spec, dict) or "model" not in spec:
        raise VocabError(f"{path} has no 'model' field; pass a HF tokenizer.json")
    _check_shapes(spec, path)
    _check_model(spec["model"])
    _check_pipeline(spec)
    return spec


# mistral-common's names for the special tokens of a tekken.json that lists none (its
# Tekkenizer.DEPRECATED_SPECIAL_TOKENS); the rest up to the file's count are "<SPECIAL_{id}>".
_TEKKEN_OLD_SPECIALS = ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                        "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
                        "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]")


def _is_tekken(spec) -> bool:
    return (isinstance(spec, dict) and isinstance(spec.get("config"), dict) and isinstance(spec.get("vocab"), list)
            and "pattern" in spec["config"])


def _build_tekken(spec: dict, path: Path, sha256: str) -> tuple[Vocab, VocabInfo]:
    """The kernel tables of a Mistral ``tekken.json``, with the ids mistral-common gives: the first
    ``default_num_special_tokens`` ids are special, then rank r is id r + that count, for the
    ranks below ``default_vocab_size`` minus it; tiktoken's merge rule and the file's pattern."""
    config = spec["config"]
    try:
        n_special = int(config["default_num_special_tokens"])
        n_ranks = int(config["default_vocab_size"]) - n_special
        pattern = config["pattern"]
        ranks = spec["vocab"][:n_ranks]
        id_to_bytes = {}
        for i, entry in enumerate(ranks):
            if entry["rank"] != i:
                raise VocabError(f"{path}: vocab[{i}] has rank {entry['rank']}; a tekken.json lists ranks in order")
            id_to_bytes[i + n_special] = base64.b64decode(entry["token_bytes"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        if isinstance(exc, VocabError):
            raise
        raise VocabError(f"{path} is not a tekken.json fastenc understands ({type(exc).__name__}: {str(exc)[:200]}); "
                         "pass the file mistral-common ships") from None
    if len(ranks) < n_ranks:
        raise VocabError(f"{path}: default_vocab_size asks for {n_ranks} ranks, the file has {len(ranks)}")
    listed = {int(t["rank"]): t["token_str"] for t in spec.get("special_tokens") or []}
    if not listed:
        listed = dict(enumerate(_TEKKEN_OLD_SPECIALS))
    special_tokens = {listed.get(i, f"<SPECIAL_{i}>"): i for i in range(n_special)}
    model_ids = set(id_to_bytes)
    for content, tid in special_tokens.items():
        id_to_bytes[tid] = content.encode("utf-8")
    byte_ids = np.full(256, -1, dtype=np.int32)
    for tid in model_ids:
        if len(id_to_bytes[tid]) == 1:
            byte_ids[id_to_bytes[tid][0]] = tid
    pretok, split = split_of_tiktoken(pattern)  # mistral-common encodes with tiktoken
    return _flatten(id_to_bytes, model_ids, special_tokens, byte_ids, "tiktoken", None, False, pretok, path, sha256,
                    dense=True, split=split)


#: The JSON type of each top-level field a HF tokenizer.json has (None: the field may be null).
_FIELD_SHAPES = {"model": (dict,), "added_tokens": (list, type(None)), "normalizer": (dict, type(None)),
                 "pre_tokenizer": (dict, type(None)), "post_processor": (dict, type(None)), "decoder": (dict, type(None))}
_JSON_NAMES = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number", bool: "true/false",
               type(None): "null"}


def _check_shapes(spec: dict, path: Path) -> None:
    """Each top-level field of the JSON type HF writes, so that a wrong one is named here and
    not met later as an AttributeError deep in the parse."""
    for key, shapes in _FIELD_SHAPES.items():
        if key in spec and not isinstance(spec[key], shapes):
            want = " or ".join(_JSON_NAMES[t] for t in shapes)
            raise VocabError(f"{path}: its {key!r} is {_JSON_NAMES.get(type(spec[key]), type(spec[key]).__name__)}, "
                             f"not {want} as in a HF tokenizer.json; pass a tokenizer.json saved by HF tokenizers")
    for i, token in enumerate(spec.get("added_tokens") or []):
        if not isinstance(token, dict):
            raise VocabError(f"{path}: added_tokens[{i}] is {_JSON_NAMES.get(type(token), type(token).__name__)}, not an "
                             "object with 'id' and 'content'; pass a tokenizer.json saved by HF tokenizers")


def _token_to_bytes(token: str, where: str, byte_of_char: dict) -> bytes:
    """A byte-level token's bytes (each character stands for one byte: ``bytes_to_unicode``)."""
    try:
        return bytes(byte_of_char[c] for c in token)
    except KeyError as exc:
        raise VocabError(
            f"tokenizer.json {where} {token!r} holds {exc.args[0]!r}, which is not a byte-level character; "
            "fastenc supports byte-level BPE vocabularies only"
        ) from None


def _model_id_bytes(vocab: dict) -> dict[int, bytes]:
    """``model.vocab`` as id -> bytes (ids non-negative integers, each given once)."""
    byte_of_char = {c: b for b, c in bytes_to_unicode().items()}
    id_to_bytes: dict[int, bytes] = {}
    for token, tid in vocab.items():
        if not isinstance(tid, int) or isinstance(tid, bool) or tid < 0:
            raise VocabError(f"tokenizer.json model.vocab[{token!r}] = {tid!r} is not a non-negative integer id")
        if tid in id_to_bytes:
            raise VocabError(f"tokenizer.json model.vocab gives id {tid} to two tokens; ids must be unique")
        id_to_bytes[tid] = _token_to_bytes(token, "model.vocab token", byte_of_char)
    return id_to_bytes


def _added_tokens(added: list, id_to_bytes: dict, model_ids: set) -> dict[str, int]:
    """``added_tokens`` as content -> id; those outside the model vocab get their UTF-8 bytes
    in ``id_to_bytes`` (updated in place)."""
    special_tokens: dict[str, int] = {}
    for i, token in enumerate(added):
        tid, content = token.get("id"), token.get("content")
        if not isinstance(tid, int) or tid < 0 or not isinstance(content, str):
            raise VocabError(f"tokenizer.json added_tokens[{i}] needs an integer 'id' and a string 'content'")
        if tid in id_to_bytes and tid not in model_ids:
            raise VocabError(f"tokenizer.json added_tokens[{i}] reuses id {tid}")
        special_tokens[content] = tid
        if tid not in model_ids:
            id_to_bytes[tid] = content.encode("utf-8")
    return special_tokens


def _hf_merges(model: dict) -> list[tuple[int, int, int]]:
    """The merges as (left, right, result) ids in rank order, each side and result in the vocab."""
    vocab = model["vocab"]
    hf_merges = []
    for index, merge in enumerate(model["merges"]):
        a, b = _parse_merge(merge, index)
        for side in (a, b):
            if side not in vocab:
                raise VocabError(f"tokenizer.json model.merges[{index}] = {merge!r} refers to {side!r}, which is not in model.vocab")
        if a + b not in vocab:
            raise VocabError(f"tokenizer.json model.merges[{index}] = {merge!r} makes {a + b!r}, which is not in model.vocab")
        hf_merges.append((vocab[a], vocab[b], vocab[a + b]))
    return hf_merges


def _check_merges(model: dict) -> None:
    """The tiktoken rule ranks merges by the merged token's id: the list is only checked."""
    for index, merge in enumerate(model["merges"]):
        _parse_merge(merge, index)


def _single_byte_ids(vocab: dict, id_to_bytes: dict) -> np.ndarray:
    """int32[256]: the first token (in vocab order) of each single byte, -1 where none."""
    byte_ids = np.full(256, -1, dtype=np.int32)
    for _, tid in vocab.items():
        raw_token = id_to_bytes[tid]
        if len(raw_token) == 1 and byte_ids[raw_token[0]] < 0:
            byte_ids[raw_token[0]] = tid
    return byte_ids


def _flatten(id_to_bytes: dict, model_ids: set, special_tokens: dict, byte_ids: np.ndarray, merge_rule: str,
             hf_merges, ignore_merges: bool, pretok: int, path: Path, sha256: str, dense: bool, split: tuple = ()):
    """The kernel tables of a vocabulary given as id -> bytes (shared by tokenizer.json and
    tiktoken rank files). ``model_ids``: the ids BPE can make (tiktoken: minus the special
    tokens); ``hf_merges``: (left, right, result) ids in rank order for the "hf" rule;
    ``dense``: refuse gaps in the ids (tiktoken's files have some between the last mergeable
    token and the special tokens: those ids get no bytes and are never emitted)."""
    vocab_size = _vocab_size(id_to_bytes, dense)
    token_bytes, token_offsets = _token_arrays(id_to_bytes, vocab_size)
    if (byte_ids < 0).any():
        missing = int(np.flatnonzero(byte_ids < 0)[0])
        raise VocabError(
            f"the vocabulary has no token for byte 0x{missing:02X}; byte-level BPE needs all 256 "
            "single-byte tokens (train with initial_alphabet=ByteLevel.alphabet())"
        )
    # The tokens merges can make and whole-piece lookups can find: tiktoken keeps special tokens
    # out of its mergeable ranks (encode_ordinary never emits them); HF's model vocab has them.
    if merge_rule == "tiktoken":
        mergeable_ids = model_ids - set(special_tokens.values())
    else:
        mergeable_ids = model_ids
    if merge_rule == "hf":
        lefts, rights, ranks, merge_result = _hf_merge_arrays(hf_merges)
        whole_piece_lookup = ignore_merges
    else:
        lefts, rights, ranks, merge_result = _tiktoken_merge_arrays(id_to_bytes, mergeable_ids, vocab_size)
        whole_piece_lookup = True
    if len(ranks) and ranks.max() > tables.MAX_RANK:
        raise VocabError(f"{path} has {len(ranks)} merges; fastenc supports at most {tables.MAX_RANK}")
    if merge_rule == "tiktoken":
        lefts, rights, ranks = _last_merges_only(lefts, rights, ranks, merge_result, byte_ids, token_bytes,
                                                 token_offsets, mergeable_ids)
    tables_ = _kernel_tables(byte_ids, lefts, rights, ranks, merge_result, token_bytes, token_offsets, mergeable_ids,
                             merge_rule, whole_piece_lookup, pretok, vocab_size, split)
    info = VocabInfo(
        path=str(path),
        sha256=sha256,
        vocab_size=vocab_size,
        merge_rule=merge_rule,
        pretokenizer=PRETOKENIZER_NAMES[pretok],
        special_tokens=special_tokens,
        output_dtype=np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32),
        split=[list(stage) for stage in split],
    )
    return tables_, info


def _vocab_size(id_to_bytes: dict, dense: bool) -> int:
    vocab_size = max(id_to_bytes) + 1 if id_to_bytes else 0
    if dense and len(id_to_bytes) != vocab_size:
        missing = next(i for i in range(vocab_size) if i not in id_to_bytes)
        raise VocabError(f"tokenizer.json ids are not dense: id {missing} is missing below the largest id {vocab_size - 1}")
    if vocab_size - 1 > tables.MAX_ID:
        raise VocabError(f"vocabulary has {vocab_size} ids; fastenc supports at most {tables.MAX_ID + 1}")
    return vocab_size


def _token_arrays(id_to_bytes: dict, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every id's bytes, concatenated (uint8), and the int64[vocab_size + 1] offsets into them
    (ids without bytes are empty)."""
    token_offsets = np.zeros(vocab_size + 1, dtype=np.int64)
    token_offsets[1:] = np.cumsum([len(id_to_bytes.get(i, b"")) for i in range(vocab_size)])
    token_bytes = np.frombuffer(b"".join(id_to_bytes.get(i, b"") for i in range(vocab_size)), dtype=np.uint8).copy()
    return token_bytes, token_offsets


def _hf_merge_arrays(hf_merges: list) -> tuple[list, list, np.ndarray, np.ndarray]:
    """HF rule: the merges as listed, ranked by their position; each has its own result id."""
    lefts = [m[0] for m in hf_merges]
    rights = [m[1] for m in hf_merges]
    ranks = np.arange(len(lefts), dtype=np.int64)
    merge_result = np.asarray([m[2] for m in hf_merges], dtype=np.int32)
    return lefts, rights, ranks, merge_result


def _tiktoken_merge_arrays(id_to_bytes: dict, mergeable_ids: set, vocab_size: int) -> tuple[list, list, np.ndarray, np.ndarray]:
    """tiktoken rule: every split of a token into two tokens is a merge, ranked by the token's id
    (the result of a merge is the id its rank names). ``_last_merges_only`` then keeps the one pair
    per token that a merge ever applies."""
    ids_of_bytes = {id_to_bytes[t]: t for t in sorted(mergeable_ids, reverse=True)}  # lowest id wins
    lefts, rights, ranks_list = [], [], []
    for tid in sorted(mergeable_ids):
        raw_token = id_to_bytes[tid]
        for k in range(1, len(raw_token)):
            left, right = ids_of_bytes.get(raw_token[:k]), ids_of_bytes.get(raw_token[k:])
            if left is not None and right is not None:
                lefts.append(left)
                rights.append(right)
                ranks_list.append(tid)
    return lefts, rights, np.asarray(ranks_list, dtype=np.int64), np.arange(vocab_size, dtype=np.int32)


def _last_merges_only(lefts, rights, ranks, merge_result, byte_ids, token_bytes, token_offsets, mergeable_ids):
    """tiktoken's rule needs only the last merge of each token's own bytes (``tables.last_merges``
    says why the ids stay the same): a pair table half the size, whose misses the pair filter
    answers more often (o200k_base: 8 MB and a 512 KB filter -> 4 MB and 256 KB)."""
    every_split = tables.build_pair_table(np.asarray(lefts, dtype=np.int64), np.asarray(rights, dtype=np.int64),
                                          ranks.astype(np.int64), tables.table_capacity(len(lefts)))
    include = np.zeros(len(token_offsets) - 1, dtype=np.bool_)
    include[list(mergeable_ids)] = True
    return tables.last_merges(every_split, merge_result, byte_ids, token_bytes, token_offsets, include)


def _kernel_tables(byte_ids, lefts, rights, ranks, merge_result, token_bytes, token_offsets, mergeable_ids,
                   merge_rule: str, whole_piece_lookup: bool, pretok: int, vocab_size: int, split: tuple = ()) -> Vocab:
    """The hash tables, the config vector and the segment tables the kernels take."""
    lefts_a = np.asarray(lefts, dtype=np.int64)
    rights_a = np.asarray(rights, dtype=np.int64)
    pair_table = tables.build_pair_table(lefts_a, rights_a, ranks.astype(np.int64),
                                         tables.table_capacity(len(lefts_a), tables.PAIR_TABLE_LOAD))
    include = np.zeros(vocab_size, dtype=np.bool_)
    include[list(mergeable_ids)] = True
    token_table = tables.build_token_table(token_bytes, token_offsets, include, tables.table_capacity(len(mergeable_ids)))

    config = np.zeros(cfg.LENGTH, dtype=np.int64)
    config[cfg.MERGE_RULE] = MERGE_RULES[merge_rule]
    config[cfg.WHOLE_PIECE_LOOKUP] = int(whole_piece_lookup)
    config[cfg.PRETOKENIZER] = pretok
    config[cfg.VOCAB_SIZE] = vocab_size
    # In a tiktoken file a merge's rank is the id of the token it makes: the merge loops then take
    # the rank as the id, one dependent load fewer per merge (first passes faster).
    config[cfg.RANK_IS_ID] = int(np.array_equal(merge_result, np.arange(len(merge_result))))
    tables_ = Vocab(byte_ids, pair_table, merge_result, token_bytes, token_offsets, token_table,
                    np.ones(1 << 16, dtype=np.uint8), tables.build_byte_pair_ranks(pair_table, byte_ids),
                    tables.build_pair_filter(pair_table), tables.build_token_heads(token_bytes, token_offsets), config,
                    *segments.never_cutting_span_tables(), *_split_tables(split))
    differs = np.zeros(vocab_size, dtype=np.bool_)
    if whole_piece_lookup:
        differs = segments.tokens_merging_differently(tables_, include)
        if not differs.any():
            # Every token's bytes merge to that token, so looking a piece up first can never
            # change its ids: skip the lookup (it costs three random reads per cache miss).
            config[cfg.WHOLE_PIECE_LOOKUP] = 0
    # Where long pieces may be cut (kernels/segments.py) depends on the tables built above.
    tables_ = tables_._replace(joinable=segments.build_joinable(tables_, include, differs))
    from fastenc.kernels.encode import takes_wide_loop

    if not takes_wide_loop(config):
        return tables_  # the narrow loop cuts by byte pairs only: the never-cutting placeholders stay
    prefixes = segments.token_prefix_table(token_bytes, token_offsets, include, tables.table_capacity)
    return tables_._replace(token_prefixes=prefixes,
                            span_pairs=segments.build_span_pairs(token_bytes, token_offsets, include, differs))
