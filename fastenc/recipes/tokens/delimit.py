"""Document delimiting: which token goes before and after each document, per model and format.

A trainer reads one flat stream of ids; a document's start and end in it are the tokens the model
was trained to see there. ``--bos`` / ``--eos`` take a token (``<|begin_of_text|>``), an id
(``128000``) or ``none``; left out, each takes the default of the tokenizer's family below
(``resolve``). The defaults, checked against each model's own tokenizer files and code
(docs/trainer-formats.md, tests/test_trainer_formats.py):

================  ===============================  ====================================  ========================
family            how it is recognised             megatron / datatrove                  llmc (llm.c, modded-nanogpt)
================  ===============================  ====================================  ========================
gpt2 (r50k)       ``fastenc.load("gpt2")``         EOS ``<|endoftext|>`` 50256 after     BOS ``<|endoftext|>`` before
cl100k_base       by name                          EOS ``<|endoftext|>`` 100257 after    BOS ``<|endoftext|>`` before
o200k_base        by name                          EOS ``<|endoftext|>`` 199999 after    BOS ``<|endoftext|>`` before
qwen (2/2.5/3)    rank file sha256, or a           EOS ``<|endoftext|>`` 151643 after    BOS ``<|endoftext|>`` before
                  tokenizer.json with
                  ``<|im_start|>``
llama3 (3.x)      rank file sha256, or             BOS ``<|begin_of_text|>`` 128000 and  the same
                  ``<|begin_of_text|>``            EOS ``<|end_of_text|>`` 128001
llama4            rank file sha256                 BOS 200000 and EOS 200001 (same names) the same
mistral (tekken)  a tekken.json (``<s>``/``</s>``)   BOS ``<s>`` 1 and EOS ``</s>`` 2          the same
================  ===============================  ====================================  ========================

A family with a single end-of-text token (GPT-2, the OpenAI encodings, Qwen base models) puts it
after each document for Megatron (``preprocess_data.py --append-eod``) and datatrove
(``DocumentTokenizer``'s EOS post-processor), and before each document in llm.c's files (llm.c's
``fineweb.py`` and modded-nanogpt lead every document with it, and modded-nanogpt aligns its
batches on it). Llama 3/4 and Mistral have a BOS and an EOS: both, in every format (llm.c's own
``fineweb.py`` writes only the BOS for Llama 3: ``--eos none`` gives exactly that).

A tokenizer of none of these families has no default: ``resolve`` asks for ``--bos`` and/or
``--eos`` (``none`` for no delimiter), rather than silently writing documents that run together.

A token the vocabulary lacks, an id past the vocabulary or past the format's dtype is refused with
one line (``UsageError``, exit status 2).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from fastenc.errors import UsageError

__all__ = ["Family", "FAMILIES", "Delimiters", "family_of", "resolve", "format_dtype", "FORMATS", "DEFAULT"]

FORMATS = ("megatron", "datatrove", "llmc")
DEFAULT = "default"  # the value of an option left out: the family's default


def _llama3_specials() -> dict[str, int]:
    # llama-models 0.3.0 llama_models/llama3/tokenizer.py: 256 reserved ids after the 128,000 ranks
    named = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
             "<|eot_id|>", "<|python_tag|>", "<|image|>"]
    names = named + [f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(named))]
    return {name: 128000 + i for i, name in enumerate(names)}


def _llama4_specials() -> dict[str, int]:
    # llama-models 0.3.0 llama_models/llama4/tokenizer.py: BASIC_SPECIAL_TOKENS first, 2,048 ids
    # after the 200,000 ranks (only the basic five and the chat ones are named here; the rest of
    # the 2,048 ids are valid ids all the same, ``Family.n_ids``)
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
             "<|header_start|>", "<|header_end|>", "<|eom|>", "<|eot|>", "<|step|>"]
    return {name: 200000 + i for i, name in enumerate(names)}


@dataclass(frozen=True)
class Family:
    """A tokenizer family: its special tokens (content -> id, where the loaded vocabulary does not
    list them, as for a bare rank file), how many ids the model has (embedding rows), and its
    document convention."""

    name: str
    model: str  # the models, for the card
    bos: str | None
    eos: str | None
    specials: Mapping[str, int] = field(default_factory=dict)
    n_ids: int = 0  # ids 0..n_ids-1 exist (0: the loaded vocabulary's size)
    rank_sha256: str = ""  # the rank file that identifies it (``fastenc.load(path, pattern=...)``)

    def placement(self, fmt: str) -> tuple[str | None, str | None]:
        """(bos, eos) token strings for ``fmt``: a single end-of-text token leads each document in
        llm.c's files and ends it elsewhere."""
        if self.bos is None and self.eos is not None and fmt == "llmc":
            return self.eos, None
        return self.bos, self.eos


FAMILIES: dict[str, Family] = {
    "gpt2": Family("gpt2", "GPT-2 (r50k_base)", None, "<|endoftext|>", {"<|endoftext|>": 50256}, 50257),
    "cl100k_base": Family("cl100k_base", "GPT-3.5 / GPT-4 (cl100k_base)", None, "<|endoftext|>",
                          {"<|endoftext|>": 100257}, 100277),
    "o200k_base": Family("o200k_base", "GPT-4o (o200k_base)", None, "<|endoftext|>", {"<|endoftext|>": 199999}, 200019),
    # Qwen2's tokenizer_config: bos_token null, eos_token <|endoftext|> (base models; chat models end
    # turns with <|im_end|>); ids up to Qwen3's <|/think|> 151668 are special tokens
    "qwen": Family("qwen", "Qwen 2 / 2.5 / 3 base models", None, "<|endoftext|>",
                   {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}, 151669,
                   "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"),
    "llama3": Family("llama3", "Llama 3 / 3.1 / 3.2 / 3.3", "<|begin_of_text|>", "<|end_of_text|>", _llama3_specials(),
                     128256, "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"),
    "llama4": Family("llama4", "Llama 4", "<|begin_of_text|>", "<|end_of_text|>", _llama4_specials(), 202048,
                     "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed"),
    "mistral": Family("mistral", "Mistral (tekken)", "<s>", "</s>"),
}


def family_of(encoder) -> Family | None:
    """The family of a loaded ``fastenc.Encoder``: by built-in name, by the sha256 of a known rank
    file, else by the special tokens its tokenizer.json / tekken.json lists; None if unknown."""
    name = getattr(encoder, "name", None)
    if name in FAMILIES and name in ("gpt2", "cl100k_base", "o200k_base"):
        return FAMILIES[name]
    info = encoder.info
    for fam in FAMILIES.values():
        if fam.rank_sha256 and info.sha256 == fam.rank_sha256:
            return fam
    specials = info.special_tokens
    if "<|begin_of_text|>" in specials and "<|end_of_text|>" in specials:
        return FAMILIES["llama4"] if "<|header_start|>" in specials else FAMILIES["llama3"]
    if "<|im_start|>" in specials and "<|endoftext|>" in specials:
        return FAMILIES["qwen"]
    if specials.get("<s>") == 1 and specials.get("</s>") == 2 and "[INST]" in specials:
        return FAMILIES["mistral"]
    if set(specials) == {"<|endoftext|>"} and specials["<|endoftext|>"] == 50256 and info.vocab_size == 50257:
        return FAMILIES["gpt2"]  # GPT-2's own tokenizer.json
    return None


def format_dtype(n_ids: int, fmt: str) -> np.dtype:
    """The token dtype a format stores ids 0..n_ids-1 in: uint16 where they all fit, else uint32
    (datatrove's ``token_size`` 4, llm.c's 20240801 header) or int32 for Megatron, whose index has
    no uint32 code (``DType``: 4 int32, 8 uint16)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; pass one of {', '.join(FORMATS)}")
    if n_ids <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.int32 if fmt == "megatron" else np.uint32)


@dataclass(frozen=True)
class Delimiters:
    """The ids written before (``bos``) and after (``eos``) every document, or None.

    ``n_ids``: ids 0..n_ids-1 are the vocabulary (with its special tokens); ``dtype``: what the
    format stores them in. ``apply`` adds the delimiters to a batch of documents.
    """

    bos: int | None
    eos: int | None
    bos_text: str | None
    eos_text: str | None
    n_ids: int
    dtype: np.dtype
    fmt: str
    family: str | None = None
    source: str = "default"  # "default" or "option": for the card

    @property
    def per_document(self) -> int:
        return (self.bos is not None) + (self.eos is not None)

    def describe(self) -> str:
        """One line for the card: ``BOS <|begin_of_text|> (128000) first, EOS <|end_of_text|> (128001) last``."""
        def shown(text, tid):
            return str(tid) if not text else text if text.isprintable() else repr(text)

        parts = []
        if self.bos is not None:
            parts.append(f"{shown(self.bos_text, self.bos)} ({self.bos}) before each document")
        if self.eos is not None:
            parts.append(f"{shown(self.eos_text, self.eos)} ({self.eos}) after each document")
        return ", ".join(parts) if parts else "no delimiter (documents run together)"

    def as_dict(self) -> dict:
        """For the card and the sidecar."""
        return {"bos": self.bos_text, "bos_id": self.bos, "eos": self.eos_text, "eos_id": self.eos,
                "family": self.family, "source": self.source, "dtype": self.dtype.name, "n_ids": self.n_ids,
                "format": self.fmt, "rule": self.describe()}

    def strip(self, doc: np.ndarray) -> np.ndarray:
        """One document's ids without its delimiters (for decode and verify)."""
        start = 1 if self.bos is not None and len(doc) and doc[0] == self.bos else 0
        end = len(doc) - 1 if self.eos is not None and len(doc) > start and doc[-1] == self.eos else len(doc)
        return doc[start:end]

    def apply(self, ids: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The batch with each document's delimiters: (ids in ``dtype``, lengths int64).

        ``ids``: the documents' ids concatenated; ``lengths``: each document's count (an empty
        document becomes its delimiters alone). One pass of a compiled loop (``kernel.delimit_into``).
        """
        ids = np.asarray(ids)
        lengths = np.asarray(lengths, dtype=np.int64)
        if int(lengths.sum()) != len(ids):
            raise ValueError(f"lengths sum to {int(lengths.sum())}, the batch has {len(ids)} ids")
        check_ids(ids, self.dtype, self.n_ids)
        k = self.per_document
        if k == 0:
            return ids.astype(self.dtype, copy=False), lengths
        from fastenc.recipes.tokens.kernel import delimit_into

        out_lengths = lengths + k
        out = np.empty(int(out_lengths.sum()), dtype=self.dtype)
        bos, eos = (-1 if t is None else t for t in (self.bos, self.eos))
        if delimit_into(ids, lengths, np.int64(bos), np.int64(eos), out) != len(out):
            raise AssertionError("delimit_into wrote another count than the lengths give")
        return out, out_lengths

    def split(self, ids: np.ndarray) -> np.ndarray:
        """Document offsets (int64, n_docs + 1) of a stream written with these delimiters, from
        where the delimiters are (llm.c's files keep no index): a document starts at each BOS, or
        ends after each EOS. Only the BOS (or, without one, the EOS) is used to cut."""
        ids = np.asarray(ids)
        if self.bos is not None:
            starts = np.flatnonzero(ids == self.bos)
            if len(ids) and (len(starts) == 0 or starts[0] != 0):
                starts = np.concatenate([[0], starts])
            return np.concatenate([starts, [len(ids)]]).astype(np.int64)
        if self.eos is not None:
            ends = np.flatnonzero(ids == self.eos) + 1
            if len(ids) and (len(ends) == 0 or ends[-1] != len(ids)):
                ends = np.concatenate([ends, [len(ids)]])
            return np.concatenate([[0], ends]).astype(np.int64)
        raise ValueError("a stream without delimiters has no document boundaries")


def check_ids(ids: np.ndarray, dtype: np.dtype, n_ids: int, where: str = "the batch") -> int:
    """The largest id of ``ids`` (-1 if empty), refusing one past the vocabulary or ``dtype``."""
    if len(ids) == 0:
        return -1
    top = int(ids.max())
    low = int(ids.min()) if np.issubdtype(np.asarray(ids).dtype, np.signedinteger) else 0
    if low < 0:
        raise UsageError(f"{where} holds id {low}; token ids are non-negative")
    limit = int(np.iinfo(dtype).max)
    if top > limit:
        raise UsageError(f"{where} holds id {top}, past {dtype.name}'s {limit}; write it with a wider dtype")
    if n_ids and top >= n_ids:
        raise UsageError(f"{where} holds id {top}, past the vocabulary's {n_ids} ids; check the tokenizer")
    return top


def _vocab_lookup(encoder, family: Family | None) -> dict[str, int]:
    table = dict(family.specials) if family is not None else {}
    table.update(encoder.info.special_tokens)
    return table


def _resolve_one(value, default_text: str | None, table: dict[str, int], encoder, n_ids: int, dtype: np.dtype,
                 option: str, fmt: str) -> tuple[int | None, str | None]:
    if value is DEFAULT or value == DEFAULT:
        value = default_text
        if value is None:
            return None, None
    if value is None or (isinstance(value, str) and value.lower() == "none"):
        return None, None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        tid, text = int(value), None
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        tid, text = int(value.strip()), None
    elif isinstance(value, str) and value:
        if value in table:
            tid, text = table[value], value
        else:
            tid, text = _ordinary_token(encoder, value), value
            if tid is None:
                known = ", ".join(sorted(t for t in table if len(t) < 30)[:6])
                raise UsageError(f"--{option} {value!r}: {encoder.name} has no such token"
                                 + (f" (its special tokens include {known})" if known else "")
                                 + "; pass one of its tokens, an id, or none")
    else:
        raise UsageError(f"--{option} {value!r}: pass a token such as <|endoftext|>, an id, or none")
    if tid < 0 or tid >= n_ids:
        raise UsageError(f"--{option} {tid}: past the vocabulary of {encoder.name} (ids 0..{n_ids - 1}); "
                         "pass an id of the vocabulary")
    limit = int(np.iinfo(dtype).max)
    if tid > limit:
        raise UsageError(f"--{option} {tid}: past {dtype.name} (at most {limit}), the dtype the {fmt} "
                         "files use for this vocabulary; pass a smaller id")
    if text is None:
        text = next((t for t, i in table.items() if i == tid), None)
    if text is None:  # an ordinary token given by its id: its text, for the card
        with contextlib.suppress(Exception):
            text = encoder.decode_bytes([tid]).decode("utf-8")
    return tid, text


def _ordinary_token(encoder, text: str) -> int | None:
    """The id of an ordinary token whose bytes are ``text``'s UTF-8, if there is one."""
    try:
        ids = encoder.encode(text)
    except Exception:  # an encoder that cannot take the text has no such token
        return None
    if len(ids) == 1 and encoder.decode_bytes(ids) == text.encode("utf-8"):
        return int(ids[0])
    return None


def resolve(encoder, fmt: str, bos=DEFAULT, eos=DEFAULT, dtype: str | np.dtype | None = None) -> Delimiters:
    """The delimiters of a run: ``--bos``/``--eos`` (a token, an id as int or string, ``"none"``, or
    ``DEFAULT``) checked against ``encoder``'s vocabulary, defaults from its family for ``fmt``.

    ``dtype``: force the stored dtype (else ``format_dtype`` of the vocabulary's size).
    Raises ``UsageError`` (one line) for a token the vocabulary lacks, an id past it or past the
    dtype, or a tokenizer of no known family with neither option given.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; pass one of {', '.join(FORMATS)}")
    family = family_of(encoder)
    table = _vocab_lookup(encoder, family)
    n_ids = max(encoder.info.vocab_size, family.n_ids if family else 0, max(table.values(), default=-1) + 1)
    dt = np.dtype(dtype) if dtype is not None else format_dtype(n_ids, fmt)
    if dt not in (np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.int32)):
        raise UsageError(f"dtype {dt.name}: the trainer formats store uint16, uint32 or int32 ids")
    if fmt == "megatron" and dt == np.dtype(np.uint32):
        raise UsageError("Megatron's index has no uint32 code (DType: 4 int32, 8 uint16); use int32")
    if family is None and (bos is DEFAULT or bos == DEFAULT) and (eos is DEFAULT or eos == DEFAULT):
        raise UsageError(f"no default delimiters are known for {encoder.name}: pass --eos TOKEN (and --bos TOKEN) "
                         "as the model expects, or --bos none --eos none")
    dbos, deos = family.placement(fmt) if family is not None else (None, None)
    bos_id, bos_text = _resolve_one(bos, dbos, table, encoder, n_ids, dt, "bos", fmt)
    eos_id, eos_text = _resolve_one(eos, deos, table, encoder, n_ids, dt, "eos", fmt)
    given = not (bos is DEFAULT or bos == DEFAULT) or not (eos is DEFAULT or eos == DEFAULT)
    return Delimiters(bos_id, eos_id, bos_text, eos_text, n_ids, dt, fmt, family.name if family else None,
                      "option" if given else "default")
