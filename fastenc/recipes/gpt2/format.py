"""The on-disk format of the GPT-2 recipe: names, buckets, and the checks of one part's files.

Shared by the writer (``gpt2.parts``), the recipe (``gpt2``) and the verifier (``gpt2.verify``),
so that what is written and what is re-checked come from one definition. See docs/gpt2.md and
the dataset card ``gpt2-long-context.md``::

    OUT/<bucket>/part_00.bin        uint16 GPT-2 ids, documents concatenated, no separator
    OUT/<bucket>/part_00.idx.npy    int64, ndocs + 1 offsets into the bin, idx[0] == 0
    OUT/<bucket>/part_00.meta.json  counts, provenance, tokenizer sha256, verification counters
    OUT/summary.tsv, OUT/summary.json  documents and tokens per bucket and in total (json last)
"""
from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import xxhash
from numpy.lib import format as npy_format

from fastenc.errors import UsageError

FORMAT = "fastenc-gpt2"
FORMAT_VERSION = 1
TOKENIZER = "gpt2"
VOCAB_SIZE = 50257
BUCKETS = (
    "b0_lt_4096",
    "b1_4096_8192",
    "b2_8192_16384",
    "b3_16384_32768",
    "b4_32768_65536",
    "b5_65536_131072",
    "b6_gte_131072",
)
#: bucket k holds documents with EDGES[k-1] <= tokens < EDGES[k] (b0 from 1, b6 unbounded)
EDGES = np.array([4096, 8192, 16384, 32768, 65536, 131072], dtype=np.int64)
EMPTY = len(BUCKETS)  # pseudo-bucket of empty documents (skipped)
SUMMARY_JSON = "summary.json"
SUMMARY_TSV = "summary.tsv"
PART_FILE_RE = re.compile(r"^part_(\d{2,})\.(bin|idx\.npy|meta\.json)$")
_NPY_HEADER = 128  # numpy pads a 1-D header to 128 bytes for any length (room to grow in place)
_CHUNK = 1 << 20  # re-read buffer: small, so that checking a part costs few page faults

PART_RULE = (
    "parts end at document boundaries: a document goes into its bucket's open part if that part is empty "
    "or the document still fits within part_tokens, otherwise it starts the next part; parts hold whole "
    "documents in input order and are at most part_tokens long unless a part holds a single longer document"
)
ENCODING_TEXT = (
    "tiktoken gpt2 encode_ordinary: <|endoftext|> in the text is ordinary text (id 50256 never occurs); "
    "no separator between documents"
)


class TokenFormat(NamedTuple):
    """Which encoding a run uses and how its ids are stored: recorded in summary.json and every
    meta.json (``tokenizer``, ``tokenizer_pattern`` for a rank file, ``vocab_size``, ``dtype``,
    ``encoding``), so that ``verify`` re-checks with the same encoder. GPT-2 is the default and its
    output is unchanged by the other encodings (``--encoding``)."""

    tokenizer: str  # "gpt2", "cl100k_base", "o200k_base", or the path of a tokenizer.json / .tiktoken
    vocab_size: int
    dtype: str  # "uint16" when every id fits, else "uint32" (chosen from the vocabulary size)
    encoding_text: str
    pattern: str | None = None  # the split pattern of a .tiktoken file given by path

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def disk_dtype(self) -> str:
        """The bins' little-endian numpy dtype: ``<u2`` or ``<u4``."""
        return "<u2" if self.dtype == "uint16" else "<u4"


GPT2_FORMAT = TokenFormat(TOKENIZER, VOCAB_SIZE, "uint16", ENCODING_TEXT)


def token_format(encoding: str, enc, pattern: str | None = None) -> TokenFormat:
    """The ``TokenFormat`` of a loaded encoder (``encoding`` as the user named it)."""
    if encoding == TOKENIZER:
        return GPT2_FORMAT
    split = enc.info.pretokenizer
    if split == "regex":  # the split itself, each stage's regex and the engine whose rules it follows
        split = "split " + " then ".join(f"{stage[0]!r} ({stage[1]})" for stage in enc.info.split)
    text = (f"tiktoken {encoding} encode_ordinary: special tokens' text is ordinary text (their ids never occur); "
            "no separator between documents") if encoding in ("cl100k_base", "o200k_base") else (
            f"fastenc.load({encoding!r}) (merge rule {enc.info.merge_rule}, pre-tokenizer {split}); "
            "special tokens' text is ordinary text; no separator between documents")
    return TokenFormat(encoding, enc.vocab_size, np.dtype(enc.dtype).name, text, pattern)


def bucket_range(b: int) -> tuple[int, int | None]:
    """``(lo, hi)``: bucket ``b`` holds documents with ``lo <= tokens < hi`` (``hi`` None: no limit)."""
    lo = 1 if b == 0 else int(EDGES[b - 1])
    hi = int(EDGES[b]) if b < len(EDGES) else None
    return lo, hi


def bucket_of(n_tokens: int) -> int:
    """Bucket index of a document with ``n_tokens`` tokens (``EMPTY`` for 0)."""
    return EMPTY if n_tokens == 0 else int(np.searchsorted(EDGES, n_tokens, side="right"))


def buckets_of(counts: np.ndarray) -> np.ndarray:
    """Vectorised ``bucket_of`` (int8)."""
    b = np.searchsorted(EDGES, counts, side="right").astype(np.int8)
    b[counts == 0] = EMPTY
    return b


def parse_buckets(text: str | Sequence[str] | None) -> list[int]:
    """``"b1,b2,b3"`` (short names or full names, or ``"all"``) -> sorted bucket indices."""
    if text is None:
        return list(range(len(BUCKETS)))
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if items == ["all"]:
        return list(range(len(BUCKETS)))
    out = set()
    for item in items:
        hit = [k for k, name in enumerate(BUCKETS) if item == name or item == name.split("_")[0]]
        if not hit:
            raise UsageError(f"unknown bucket {item!r}: use names from {', '.join(BUCKETS)} (or b0..b6, or 'all')")
        out.add(hit[0])
    if not out:
        raise UsageError("--buckets names no bucket: give e.g. b1,b2,b3 or all")
    return sorted(out)


def part_stem(k: int) -> str:
    """``part_07``: the file name stem of part ``k`` inside its bucket directory."""
    return f"part_{k:02d}"


def npy_header(n: int) -> bytes:
    """The 128-byte .npy v1.0 header of a 1-D int64 array of ``n`` values (same length for any ``n``)."""
    import io

    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": "<i8", "fortran_order": False, "shape": (n,)})
    h = buf.getvalue()
    if len(h) != _NPY_HEADER:  # cannot happen with numpy >= 1.24's growth padding; never write a bad file
        raise AssertionError(f"unexpected .npy header length {len(h)} for shape ({n},)")
    return h


def check_part_files(bin_path: Path, idx_path: Path, b: int, fmt: TokenFormat = GPT2_FORMAT) -> dict:
    """Re-read one part from disk and check the card's invariants (and the bucket's range).

    Returns the measured values (``bin_tokens``, ``idx_first``, ``idx_last``, ``docs``,
    ``idx_non_increasing``, ``outside_range``, ``max_token_id``, the xxh3 of each whole file
    and of each data section) and ``problems``: a list of broken invariants, empty when all hold.
    Reads in fixed-size chunks: memory does not grow with the part size.
    """
    problems: list[str] = []
    lo, hi = bucket_range(b)
    buf = bytearray(_CHUNK)
    out: dict = {"problems": problems}
    size = _scan_bin(bin_path, fmt, buf, out)
    count, first, last, non_inc, outside = _scan_idx(idx_path, lo, hi, buf, out)
    if count == 0:
        problems.append(f"{idx_path.name} is empty: it must hold at least the offset 0")
    if first is not None and first != 0:
        problems.append(f"idx[0] is {first}, not 0")
    if non_inc:
        problems.append(f"idx is not strictly increasing ({non_inc} step(s) <= 0)")
    if last is not None and last != size // fmt.itemsize:
        problems.append(f"len(bin) is {size // fmt.itemsize} tokens but idx[-1] is {last}")
    if outside:
        rng = f"[{lo}, {hi})" if hi is not None else f">= {lo}"
        problems.append(f"{outside} document(s) have a token count outside the bucket's range {rng}")
    return out


def _scan_bin(bin_path: Path, fmt: TokenFormat, buf: bytearray, out: dict) -> int:
    """The .bin (uint16 or uint32 ids, no header): its size, largest id and xxh3 into ``out``;
    returns its size in bytes."""
    problems = out["problems"]
    view = memoryview(buf)
    item = fmt.itemsize
    h = xxhash.xxh3_64()
    size = 0
    top = -1
    with open(bin_path, "rb") as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
            usable = n - (n % item)  # _CHUNK is a multiple of 4: only the file's end can be cut
            if usable:
                top = max(top, int(np.frombuffer(buf, dtype=fmt.disk_dtype, count=usable // item).max()))
            size += n
    if size % item:
        problems.append(f"{bin_path.name} has a size of {size} bytes: not a {fmt.dtype} array")
    out.update(bin_tokens=size // item, max_token_id=top if size >= item else None,
               bin_xxh3_64=h.hexdigest(), bin_data_xxh3_64=h.hexdigest())
    if top >= fmt.vocab_size:
        problems.append(f"max token id is {top}, not < {fmt.vocab_size}")
    return size


def _scan_idx(idx_path: Path, lo: int, hi: int | None, buf: bytearray, out: dict) -> tuple:
    """The .idx.npy (a 1-D little-endian int64 array of ndocs + 1 offsets): its header, hashes
    and steps into ``out``; returns ``(count, first, last, non_increasing, outside_range)``."""
    problems = out["problems"]
    whole = xxhash.xxh3_64()
    data_h = xxhash.xxh3_64()
    steps = _Steps(lo, hi)
    with open(idx_path, "rb") as f:
        shape = _npy_header(f, idx_path.name, problems)
        if shape is not None:
            header_len = f.tell()
            f.seek(0)
            whole.update(f.read(header_len))
            _scan_offsets(f, buf, (whole, data_h), steps, idx_path.name, problems)
            if len(shape) == 1 and shape[0] != steps.count:
                problems.append(f"{idx_path.name}: its header says {shape[0]} offsets, the file holds {steps.count}")
    last = steps.prev if shape is not None else None
    out.update(idx_first=steps.first, idx_last=last, docs=steps.count - 1 if steps.count else None,
               idx_non_increasing=steps.non_inc, outside_range=steps.outside, idx_xxh3_64=whole.hexdigest(),
               idx_data_xxh3_64=data_h.hexdigest())
    return steps.count, steps.first, last, steps.non_inc, steps.outside


#: numpy parses a .npy header with ``ast.literal_eval``, and CPython 3.11 keeps the AST
#: constructor's recursion depth per interpreter, not per thread: two threads parsing at once can
#: fail with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905). The
#: parts are closed and checked on a thread per core (gpt2's reduce): one header at a time.
_NPY_HEADER_LOCK = threading.Lock()


def _npy_header(f, name: str, problems: list) -> tuple | None:
    """The shape from a version 1.0 .npy header (the file is left at the data); None if unreadable."""
    try:
        version = npy_format.read_magic(f)
        if version != (1, 0):
            raise ValueError(f"npy format version {version}, expected (1, 0)")
        with _NPY_HEADER_LOCK:
            shape, fortran, dtype = npy_format.read_array_header_1_0(f)
    except (ValueError, OSError) as exc:
        problems.append(f"{name} is not a valid .npy file ({exc})")
        return None
    if dtype != np.dtype("<i8") or len(shape) != 1 or fortran:
        problems.append(f"{name} holds {dtype} of shape {shape}, expected a 1-D int64 array")
    return shape


class _Steps:
    """Running counts over a stream of offsets: how many, the first and last, and the steps
    (document lengths) that do not increase or fall outside the bucket's range."""

    def __init__(self, lo: int, hi: int | None):
        self.lo, self.hi = lo, hi
        self.count = self.non_inc = self.outside = 0
        self.first = self.prev = None

    def add(self, vals: np.ndarray) -> None:
        if self.first is None:
            self.first = int(vals[0])
        steps = np.diff(vals) if self.prev is None else np.diff(np.concatenate(([self.prev], vals)))
        self.non_inc += int(np.count_nonzero(steps <= 0))
        self.outside += int(np.count_nonzero((steps < self.lo) | ((steps >= self.hi) if self.hi is not None else False)))
        self.prev = int(vals[-1])
        self.count += int(vals.size)


def _scan_offsets(f, buf: bytearray, hashes: tuple, steps: _Steps, name: str, problems: list) -> None:
    """Stream the int64 offsets after the header into ``hashes`` and ``steps``, in chunks."""
    view = memoryview(buf)
    rest = b""
    while True:
        n = f.readinto(buf)
        if not n:
            break
        for h in hashes:
            h.update(view[:n])
        chunk = rest + bytes(view[:n]) if rest else view[:n]
        usable = len(chunk) - len(chunk) % 8
        vals = np.frombuffer(chunk, dtype="<i8", count=usable // 8)
        rest = bytes(chunk[usable:])
        if vals.size:
            steps.add(vals)
    if rest:
        problems.append(f"{name}: its data is not a whole number of int64 values")


def summary_tsv(summary: dict) -> str:
    """The text of summary.tsv, made from summary.json's dict (the recipe writes it, verify compares it)."""
    lines = ["bucket\tdocs\ttokens\tkept\tparts"]
    for name in BUCKETS:
        info = summary["buckets"][name]
        lines.append(f"{name}\t{info['docs']}\t{info['tokens']}\t{'yes' if info['kept'] else 'no'}\t{len(info['parts'])}")
    t = summary["total"]
    lines.append(f"total\t{t['docs']}\t{t['tokens']}\t\t{sum(len(summary['buckets'][n]['parts']) for n in BUCKETS)}")
    return "\n".join(lines) + "\n"
