"""The trainer file formats (issue 61, phase 1), each read back by ITS OWN reader.

- **Megatron**: megatron-core's ``IndexedDataset`` (``megatron/core/datasets/indexed_dataset.py``).
  It imports torch, which must not become a test dependency (megatron-core itself requires torch,
  so it cannot go in the ``test`` extra). The test runs the reader's own source: the file as
  megatron-core 0.16.1 ships it, committed verbatim under ``tests/data/third_party/`` (sha256
  checked below; MIT, Facebook's header kept), and also an installed megatron-core's copy when
  one is importable. It is executed with stand-ins for what its reading path imports but does not
  use: ``torch`` (only ``torch.utils.data.Dataset`` as a base class and ``torch.Tensor`` in
  annotations; with torch installed, the real one), and megatron's ``msc_utils``
  (``MultiStorageClientFeature.is_enabled() -> False``), ``utils.log_single_rank`` (a no-op) and
  ``object_storage_utils`` (``is_object_storage_path -> False``: local files). The stand-ins live in
  ``sys.modules`` only while the source is executed. ``IndexedDataset(prefix)`` then reads the
  files with its own ``_IndexReader`` and ``_MMapBinReader``.
- **datatrove / nanotron**: ``DatatroveFolderDataset`` (``datatrove/utils/dataset.py``, datatrove is
  in the test extra). It needs torch at import and for its tensors: its module source is executed
  with a numpy stand-in for the few torch functions it calls (``tensor``, ``as_tensor``, ``ones``,
  ``cat``, ``cumsum``, ``where``, ``ones_like``, dtypes), the real torch where installed. Also the
  merger's own torch-free readers (``load_doc_ends``, ``get_data_reader``, its metadata line).
- **llm.c / modded-nanogpt**: their readers are a few lines of numpy/torch, re-implemented here
  with the source cited (``_load_data_shard`` of modded-nanogpt's ``train_gpt.py``, llm.c's
  ``train_gpt2.py`` and ``train_llama3.py``), and llm.c's writer ``dev/data/data_common.py``
  ``write_datafile`` to compare the bytes.

Ids must equal the reference encoder's (tiktoken: GPT-2, cl100k_base, o200k_base, and each model's
rank file in ../shared/data/tokenizers with its oracle) with the delimiters where the format puts
them; the document count, boundaries and dtype are checked. In a fresh clone the committed
fixture (tests/data/docs_fixture.parquet) stands in for ../shared's corpus and the model rank files'
tests skip; under CI=true a missing ../shared is an error (conftest). A quarter of the corpus is ``slow``.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import struct
import subprocess
import sys
import types
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow.parquet as pq
import pytest
import tiktoken

import fastenc
from conftest import DOCS_FIXTURE, REPO, build_tiktoken_gpt2
from fastenc.errors import FastencError, UsageError
from fastenc.recipes.tokens import FORMATS, BadTokenFile, delimit, open_writer, read_tokens, resolve
from fastenc.recipes.tokens.formats import datatrove as dt_format
from fastenc.recipes.tokens.formats import llmc as llmc_format
from fastenc.recipes.tokens.formats import megatron as mg_format
from pattern_support import TOKENIZERS_DIR, model_reference_or_skip

MEGATRON_SRC = REPO / "tests" / "data" / "third_party" / "megatron_core_indexed_dataset.py"
MEGATRON_SHA256 = "86650eec71319b99e63fde40c95d38176b89cbbe7ede9581aa7c67f1334eab72"  # megatron-core 0.16.1
OPENAI = ("gpt2", "cl100k_base", "o200k_base")
MODELS = ("llama3", "qwen", "llama4")
FAST_EVERY = 80  # the fast tests take every 80th document of docs.parquet (~83 documents, ~1.2 MB)
SLOW_EVERY = 4  # the slow ones a quarter of it: the formats' bytes do not depend on the text


# ----------------------------------------------------------------------------------------------
# The readers under test, loaded as described in the module docstring
# ----------------------------------------------------------------------------------------------


def _torch_stand_in() -> dict[str, types.ModuleType]:
    """The torch functions DatatroveFolderDataset and IndexedDataset's reading path call, on numpy."""
    torch = types.ModuleType("torch")
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)  # datatrove's is_torch_available: find_spec
    utils = types.ModuleType("torch.utils")
    data = types.ModuleType("torch.utils.data")

    class Dataset:  # the base class of both readers; they define __getitem__ / __len__ themselves
        pass

    data.Dataset = Dataset
    utils.data = data
    torch.utils = utils
    torch.Tensor = np.ndarray
    torch.int, torch.int64, torch.long = np.int32, np.int64, np.int64
    torch.tensor = lambda values, dtype=None: np.array(values, dtype=dtype)
    torch.as_tensor = lambda values, dtype=None: np.asarray(values, dtype=dtype)
    torch.ones = lambda n, dtype=None: np.ones(n, dtype=dtype)
    torch.ones_like = lambda x, dtype=None: np.ones_like(x, dtype=dtype)
    torch.cat = lambda xs: np.concatenate(xs)
    torch.cumsum = lambda x, dim: np.cumsum(x, axis=dim)
    torch.where = np.where
    return {"torch": torch, "torch.utils": utils, "torch.utils.data": data}


def _torch_modules() -> dict[str, types.ModuleType]:
    if importlib.util.find_spec("torch") is not None:
        return {}  # the real torch
    return _torch_stand_in()


def _megatron_helpers() -> dict[str, types.ModuleType]:
    """megatron.core's modules that indexed_dataset.py imports names from (object storage, MSC,
    logging): none is on the path that reads local files."""
    def module(name, **names):
        m = types.ModuleType(name)
        m.__dict__.update(names)
        return m

    class MultiStorageClientFeature:
        @staticmethod
        def is_enabled():
            return False

    def unused(*args, **kwargs):
        raise AssertionError("not on the local reading path")

    storage = module("megatron.core.datasets.object_storage_utils", S3Config=object, ObjectStorageConfig=object,
                     cache_index_file=unused, dataset_exists=unused, get_index_cache_path=unused,
                     get_object_storage_access=unused, is_object_storage_path=lambda path: False,
                     parse_s3_path=unused)
    return {"megatron": module("megatron"), "megatron.core": module("megatron.core"),
            "megatron.core.datasets": module("megatron.core.datasets"),
            "megatron.core.datasets.object_storage_utils": storage,
            "megatron.core.msc_utils": module("megatron.core.msc_utils", MultiStorageClientFeature=MultiStorageClientFeature),
            "megatron.core.utils": module("megatron.core.utils", log_single_rank=lambda *a, **k: None)}


def _exec_source(path: Path, name: str, stand_ins: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(path)
    with mock.patch.dict(sys.modules, stand_ins):  # only while it imports
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


def _installed_megatron() -> Path | None:
    for entry in sys.path:
        candidate = Path(entry or ".") / "megatron" / "core" / "datasets" / "indexed_dataset.py"
        if candidate.is_file():
            return candidate
    return None


def megatron_readers() -> list[tuple[str, types.ModuleType]]:
    assert hashlib.sha256(MEGATRON_SRC.read_bytes()).hexdigest() == MEGATRON_SHA256, f"{MEGATRON_SRC} was changed"
    sources = [("megatron-core 0.16.1", MEGATRON_SRC)]
    if (installed := _installed_megatron()) is not None:
        sources.append(("installed megatron-core", installed))
    return [(label, _exec_source(src, "megatron_indexed_dataset_under_test", {**_torch_modules(), **_megatron_helpers()}))
            for label, src in sources]


def datatrove_dataset_module() -> types.ModuleType:
    spec = importlib.util.find_spec("datatrove.utils.dataset")
    stand_ins = _torch_modules()
    if not stand_ins:
        import datatrove.utils.dataset as module  # with the real torch

        return module
    return _exec_source(Path(spec.origin), "datatrove_dataset_under_test", stand_ins)


@pytest.fixture(scope="module")
def megatron():
    return megatron_readers()


@pytest.fixture(scope="module")
def datatrove_dataset():
    return datatrove_dataset_module()


# ----------------------------------------------------------------------------------------------
# The corpus, the encoders and their references
# ----------------------------------------------------------------------------------------------


def _texts(shared_data, every: int) -> list[str]:
    path = shared_data / "text" / "docs.parquet" if shared_data is not None else DOCS_FIXTURE
    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
    return texts[::every] if shared_data is not None else texts


@pytest.fixture(scope="module")
def texts(shared_data):
    return _texts(shared_data, FAST_EVERY)


def _openai_reference(name: str, shared_data, tmp_dir: Path):
    if name == "gpt2":
        return build_tiktoken_gpt2(shared_data)
    make_cache = shared_data / "tiktoken" / "make_cache.py" if shared_data is not None else None
    if make_cache is not None and make_cache.is_file():
        subprocess.run([sys.executable, str(make_cache), str(tmp_dir)], check=True, capture_output=True)
        with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": str(tmp_dir)}):
            return tiktoken.get_encoding(name)
    import tiktoken.load as tiktoken_load
    import tiktoken_ext.openai_public as op

    from fastenc.vocab import builtin_tiktoken_file

    with mock.patch.object(op, "load_tiktoken_bpe", lambda url, expected_hash=None: tiktoken_load.load_tiktoken_bpe(
            str(builtin_tiktoken_file(name)))):
        return tiktoken.Encoding(**getattr(op, name)())


_PAIRS: dict = {}


def load_pair(name: str, shared_data, tmp_dir: Path):
    """(fastenc Encoder, tiktoken reference) of ``name``; skips a model rank file in a fresh clone."""
    if name in OPENAI:
        if name not in _PAIRS:
            _PAIRS[name] = fastenc.load(name), _openai_reference(name, shared_data, tmp_dir)
        return _PAIRS[name]
    oracle = model_reference_or_skip(name)
    model = oracle.MODELS[name]
    return fastenc.load(TOKENIZERS_DIR / model["file"], pattern=model["pattern"]), oracle.reference(name)


_ENCODED: dict = {}


def encoded(name: str, texts: list[str], shared_data, tmp_path_factory):
    """(encoder, reference ids per document, fastenc ids, fastenc lengths), once per module."""
    key = (name, len(texts))
    if key not in _ENCODED:
        _ENCODED.clear()  # one tokenizer's at a time: the full corpus's ids as Python lists are large
        enc, ref = load_pair(name, shared_data, tmp_path_factory.mktemp(f"tiktoken-{name}"))
        want = ref.encode_ordinary_batch(texts, num_threads=2)
        ids, offsets = enc.encode_batch(texts)
        ids = np.array(ids)  # (kept: not a view of a reused buffer)
        _ENCODED[key] = (enc, ref, want, ids, np.diff(offsets))
    return _ENCODED[key]


def expected_stream(want: list[list[int]], delims) -> tuple[np.ndarray, np.ndarray]:
    """The reference ids with the delimiters, and the document offsets."""
    head = [delims.bos] if delims.bos is not None else []
    tail = [delims.eos] if delims.eos is not None else []
    docs = [np.array(head + w + tail, dtype=np.int64) for w in want]
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    return np.concatenate(docs), np.concatenate([[0], np.cumsum(lengths)])


def write(fmt: str, base: Path, enc, ids, lengths, delims, batches: int = 3) -> dict:
    """Write through the streaming writer in a few batches (the boundaries fall between documents)."""
    cuts = np.linspace(0, len(lengths), batches + 1).astype(int)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    with open_writer(fmt, base, delims, tokenizer_name=enc.name) as w:
        for a, b in zip(cuts[:-1], cuts[1:]):
            w.add(*delims.apply(ids[offsets[a]:offsets[b]], lengths[a:b]))
        return w.finish()


# ----------------------------------------------------------------------------------------------
# What each format's own reader sees
# ----------------------------------------------------------------------------------------------


def megatron_read(module, prefix: Path) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """Every document through IndexedDataset: (ids, offsets, dtype)."""
    ds = module.IndexedDataset(str(prefix))
    doc_index = ds.document_indices
    seqs = ds[0:len(ds)] if len(ds) else []
    docs = [np.concatenate(seqs[doc_index[j]:doc_index[j + 1]] or [np.zeros(0, ds.index.dtype)])
            for j in range(len(doc_index) - 1)]
    for j in range(min(len(docs), 5)):  # and the single-item path
        assert np.array_equal(ds[int(doc_index[j])], docs[j]) or doc_index[j + 1] - doc_index[j] != 1
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    return np.concatenate(docs), np.concatenate([[0], np.cumsum(lengths)]), np.dtype(ds.index.dtype)


def datatrove_read(module, folder: Path, token_size: int) -> tuple[np.ndarray, np.ndarray]:
    """One .ds in ``folder`` through DatatroveFolderDataset: a single window of all its ids (seq_len
    = n - 1, so nothing is cut off), and the document starts from its positions (read from
    .ds.index: 0 where a document starts)."""
    ds_files = sorted(folder.glob("*.ds"))
    assert len(ds_files) == 1
    n = ds_files[0].stat().st_size // token_size
    ds = module.DatatroveFolderDataset(str(folder), seq_len=n - 1, token_size=token_size, return_positions=True)
    assert len(ds) == 1
    item = ds[0]
    ids = np.asarray(item["input_ids"])
    starts = np.flatnonzero(np.asarray(item["positions"]) == 0)
    return ids, np.concatenate([starts, [n]])


def datatrove_merger_read(ds_path: Path) -> tuple[list[bytes], int, str]:
    """datatrove's merger reading one file: documents' bytes by load_doc_ends/get_data_reader, and
    the token size and name from the metadata's first line, as DocumentTokenizerMerger.run parses it."""
    from datatrove.pipeline.tokens.merger import get_data_reader, load_doc_ends

    with open(f"{ds_path}.metadata") as f:
        name, token_size = f.read().splitlines()[0].split("|")
    ends = load_doc_ends(open(f"{ds_path}.index", "rb"))
    docs = list(get_data_reader(open(ds_path, "rb"), ends, nb_bytes=int(token_size)))
    return docs, int(token_size), name


def llmc_write_datafile(toks, model_desc: str) -> bytes:
    """llm.c dev/data/data_common.py ``write_datafile``'s bytes (HEADERS_INFO, the 256-int32 header)."""
    info = {"gpt-2": (20240520, 1, np.uint16), "llama-3": (20240801, 7, np.uint32)}[model_desc]
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = info[0], info[1], len(toks)
    return header.tobytes() + np.array(toks, dtype=info[2]).tobytes()


def llmc_load_data_shard(path: Path) -> np.ndarray:
    """modded-nanogpt train_gpt.py ``_load_data_shard`` (uint16) / llm.c train_llama3.py (uint32),
    with numpy for torch: header = 256 int32; assert magic and version; num_tokens = header[2];
    read from byte 1024; assert nbytes == itemsize * num_tokens."""
    header = np.fromfile(path, dtype=np.int32, count=256)
    if header[0] == 20240520:
        assert header[1] == 1, "unsupported version"
        dtype = np.uint16
    else:
        assert header[0] == 20240801, "magic number mismatch in the data .bin file"
        assert header[1] == 7, "unsupported version"
        dtype = np.uint32
    num_tokens = int(header[2])
    with open(path, "rb", buffering=0) as f:
        tokens = np.empty(num_tokens, dtype=dtype)
        f.seek(256 * 4)
        nbytes = f.readinto(tokens)
        assert nbytes == np.dtype(dtype).itemsize * num_tokens, "number of tokens read does not match header"
        assert f.read(1) == b""  # (llm.c's train_llama3.py: len(np.frombuffer(f.read())) == ntok)
    return tokens


def check_format(fmt: str, tmp: Path, name: str, enc, want, ids, lengths, megatron, datatrove_dataset):
    delims = resolve(enc, fmt)
    stream, offsets = expected_stream(want, delims)
    n_ids = max(enc.vocab_size, delimit.family_of(enc).n_ids)
    assert delims.dtype == (np.uint16 if n_ids <= 65536 else np.int32 if fmt == "megatron" else np.uint32)
    counters = write(fmt, tmp / "out", enc, ids, lengths, delims)
    assert counters["documents"] == len(want) and counters["tokens"] == len(stream)
    assert counters["max_id"] == int(stream.max())
    assert not [p for p in tmp.iterdir() if ".tmp-" in p.name], "a temporary was left"
    ours = read_tokens(fmt, tmp / "out", delims)
    assert ours.ids.dtype == delims.dtype and np.array_equal(ours.ids, stream) and np.array_equal(ours.offsets, offsets)
    if fmt == "megatron":
        for label, module in megatron:
            got, got_offsets, dtype = megatron_read(module, tmp / "out")
            assert dtype == delims.dtype, label
            assert np.array_equal(got, stream), label
            assert np.array_equal(got_offsets, offsets), label
    elif fmt == "datatrove":
        got, starts = datatrove_read(datatrove_dataset, tmp, delims.dtype.itemsize)
        assert np.array_equal(got, stream)
        assert np.array_equal(starts, offsets)  # every document has its EOS: none is empty
        docs, token_size, meta_name = datatrove_merger_read(tmp / "out.ds")
        assert token_size == delims.dtype.itemsize and meta_name == enc.name
        assert len(docs) == len(offsets) - 1
        assert all(np.array_equal(np.frombuffer(d, dtype=delims.dtype), stream[a:b])
                   for d, a, b in zip(docs, offsets[:-1], offsets[1:]))
    else:
        got = llmc_load_data_shard(tmp / "out.bin")
        assert got.dtype == delims.dtype and np.array_equal(got, stream)
        assert (tmp / "out.bin").read_bytes() == llmc_write_datafile(
            stream, "gpt-2" if delims.dtype == np.uint16 else "llama-3")
        assert np.array_equal(delims.split(got), offsets)  # documents found by their leading token


# ----------------------------------------------------------------------------------------------
# Round trips
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", OPENAI + MODELS[:2])
def test_round_trip_through_the_formats_own_reader(tmp_path, tmp_path_factory, shared_data, texts, megatron,
                                                   datatrove_dataset, name, fmt):
    enc, _, want, ids, lengths = encoded(name, texts, shared_data, tmp_path_factory)
    assert [ids[a:b].tolist() for a, b in zip(np.cumsum(lengths) - lengths, np.cumsum(lengths))] == want  # fastenc == tiktoken
    check_format(fmt, tmp_path, name, enc, want, ids, lengths, megatron, datatrove_dataset)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["gpt2", "llama3"])  # one per dtype: the ids' exactness is test_encodings' and test_modern_tokenizers'
def test_round_trip_large_corpus(tmp_path, tmp_path_factory, shared_data, megatron, datatrove_dataset, name, fmt):
    texts = _texts(shared_data, SLOW_EVERY)
    enc, _, want, ids, lengths = encoded(name, texts, shared_data, tmp_path_factory)
    starts = np.cumsum(lengths) - lengths
    assert all(ids[a:a + len(w)].tolist() == w for a, w in zip(starts, want)) and len(ids) == sum(map(len, want))
    check_format(fmt, tmp_path, name, enc, want, ids, lengths, megatron, datatrove_dataset)


def test_megatron_reader_source_is_megatron_cores(megatron):
    assert MEGATRON_SRC.read_bytes().startswith(b"# Copyright (c) Facebook")
    for _, module in megatron:
        assert module._INDEX_HEADER == mg_format.HEADER
        assert {m.value: getattr(np, m.name) for m in module.DType} == mg_format.DTYPE_CODES


def test_megatron_bytes_equal_megatrons_own_writer(tmp_path, megatron):
    """megatron-core's IndexedDatasetBuilder (add_document with one sequence per document, as
    preprocess_data.py without --split-sentences) writes the same two files byte for byte."""
    docs = [np.array([5, 6, 7]), np.array([], dtype=np.int64), np.array([9]), np.arange(1000, 1300)]
    lengths = np.array([len(d) for d in docs])
    for dtype in (np.uint16, np.int32):
        for _, module in megatron:
            builder = module.IndexedDatasetBuilder(str(tmp_path / "theirs.bin"), dtype=dtype)
            for d in docs:
                builder.add_document(d, [len(d)])
            builder.finalize(str(tmp_path / "theirs.idx"))
            mg_format.write_megatron(tmp_path / "ours", np.concatenate(docs), lengths, dtype)
            for suffix in (".bin", ".idx"):
                assert (tmp_path / f"ours{suffix}").read_bytes() == (tmp_path / f"theirs{suffix}").read_bytes()
            got = mg_format.read_megatron(tmp_path / "theirs")  # and ours reads theirs
            assert got.lengths().tolist() == lengths.tolist()


def test_datatrove_bytes_equal_datatroves_own_writer(tmp_path):
    """datatrove's TokenizedFile (DocumentTokenizer's writer) writes the same three files byte for byte."""
    from datatrove.pipeline.tokens.tokenizer import TokenizedFile

    docs = [[5, 6, 7], [50256], [9, 70000 % 65536], list(range(300))]
    for size in (2, 4):
        (tmp_path / str(size)).mkdir()
        theirs = TokenizedFile(str(tmp_path / str(size)), "theirs.ds", tokenizer_name_or_path="gpt2",
                               save_final_metadata=True, token_size=size)
        for d in docs:
            theirs.write(d, None)
        theirs.close()
        dt_format.write_datatrove(tmp_path / str(size) / "ours.ds", np.concatenate(docs),
                                  [len(d) for d in docs], "gpt2", size)
        for suffix in ("", ".index", ".metadata"):
            assert (tmp_path / str(size) / f"ours.ds{suffix}").read_bytes() == \
                (tmp_path / str(size) / f"theirs.ds{suffix}").read_bytes(), (size, suffix)


def test_datatrove_metric_line_is_humanizes():
    humanize = pytest.importorskip("humanize")  # datatrove's dependency
    for v in (0, 1, 9, 999, 1000, 9995, 99999, 123456, 999500, 1234567, 10 ** 9 - 1, 3 * 10 ** 12):
        assert dt_format.metric(v, unit="T") == humanize.metric(v, unit="T")


def test_llmc_uint16_and_uint32_headers(tmp_path):
    for dtype, desc in ((np.uint16, "gpt-2"), (np.uint32, "llama-3")):
        toks = [128000, 5, 6, 128001] if dtype == np.uint32 else [50256, 5, 6]
        llmc_format.write_llmc(tmp_path / "x.bin", toks, dtype=dtype)
        assert (tmp_path / "x.bin").read_bytes() == llmc_write_datafile(toks, desc)
        assert llmc_load_data_shard(tmp_path / "x.bin").tolist() == toks


def test_empty_outputs_read_back(tmp_path):
    """fastenc's readers take an empty output (megatron-core's IndexedDataset cannot: numpy will not
    memory-map an empty .bin, so the recipe publishes no empty Megatron prefix)."""
    for fmt in FORMATS:
        delims = resolve(fastenc.load("gpt2"), fmt)
        with open_writer(fmt, tmp_path / fmt, delims, "gpt2") as w:
            w.finish()
        got = read_tokens(fmt, tmp_path / fmt, delims)
        assert len(got.ids) == 0 and got.n_docs == 0


# ----------------------------------------------------------------------------------------------
# Delimiters: the defaults against the real tokenizer files, and the refusals
# ----------------------------------------------------------------------------------------------


def test_openai_defaults_are_tiktokens_end_of_text(tmp_path, shared_data):
    for name in OPENAI:
        enc, ref = load_pair(name, shared_data, tmp_path / name)
        eot = ref._special_tokens["<|endoftext|>"]
        assert eot == ref.eot_token
        for fmt in ("megatron", "datatrove"):
            d = resolve(enc, fmt)
            assert (d.bos, d.eos, d.eos_text) == (None, eot, "<|endoftext|>")
        d = resolve(enc, "llmc")  # llm.c's fineweb.py: tokens = [eot] + encode_ordinary(text)
        assert (d.bos, d.eos, d.bos_text) == (eot, None, "<|endoftext|>")
        assert d.n_ids == ref.n_vocab


@pytest.mark.parametrize("name", MODELS)
def test_model_defaults_are_their_first_special_ids(name):
    """The rank files hold only the ranks; a model's specials follow them (oracle.py: first_special),
    Llama's <|begin_of_text|> first and <|end_of_text|> second, Qwen's <|endoftext|> first."""
    oracle = model_reference_or_skip(name)
    model = oracle.MODELS[name]
    enc = fastenc.load(TOKENIZERS_DIR / model["file"], pattern=model["pattern"])
    assert len(oracle.ranks(name)) == model["first_special"] == enc.vocab_size
    first = model["first_special"]
    for fmt in FORMATS:
        d = resolve(enc, fmt)
        if name == "qwen":
            assert (d.bos, d.eos) == ((first, None) if fmt == "llmc" else (None, first))
        else:
            assert (d.bos, d.eos, d.bos_text, d.eos_text) == (first, first + 1, "<|begin_of_text|>", "<|end_of_text|>")
        assert d.dtype == (np.int32 if fmt == "megatron" else np.uint32)
    assert resolve(enc, "megatron", eos="<|eot_id|>" if name == "llama3" else "<|im_end|>" if name == "qwen"
                   else "<|eot|>").eos == {"llama3": 128009, "qwen": 151645, "llama4": 200008}[name]


def test_tekken_defaults_are_mistral_commons_bos_eos():
    mc = pytest.importorskip("mistral_common")
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    paths = sorted(Path(mc.__file__).parent.joinpath("data").glob("tekken*.json"))
    assert paths
    for path in paths[-1:]:  # the newest (each takes mistral-common ~2 s to load)
        ref = Tekkenizer.from_file(str(path))
        d = resolve(fastenc.load(path), "megatron")
        assert (d.bos, d.eos, d.bos_text, d.eos_text) == (ref.bos_id, ref.eos_id, "<s>", "</s>")
        assert ref.encode("hi", bos=True, eos=True)[0] == d.bos and ref.encode("hi", bos=True, eos=True)[-1] == d.eos


def test_options_take_tokens_ids_and_none():
    enc = fastenc.load("gpt2")
    d = resolve(enc, "megatron", bos="<|endoftext|>", eos="none")
    assert (d.bos, d.eos, d.source) == (50256, None, "option")
    d = resolve(enc, "datatrove", eos="50256")
    assert (d.eos, d.eos_text) == (50256, "<|endoftext|>")
    d = resolve(enc, "llmc", bos=None, eos=198)  # an ordinary token by id ...
    assert (d.bos, d.eos) == (None, 198)
    assert resolve(enc, "llmc", eos="\n").eos == 198  # ... and by its text
    d = resolve(enc, "megatron", bos="none", eos="none")
    ids, lengths = d.apply(np.array([1, 2, 3], dtype=np.uint16), [2, 1])
    assert ids.tolist() == [1, 2, 3] and lengths.tolist() == [2, 1]
    d = resolve(enc, "megatron", bos=50256, eos=198)
    ids, lengths = d.apply(np.array([1, 2, 3], dtype=np.uint16), [2, 1])
    assert ids.tolist() == [50256, 1, 2, 198, 50256, 3, 198] and lengths.tolist() == [4, 3]
    assert d.strip(ids[:4]).tolist() == [1, 2] and d.strip(np.array([5], dtype=np.uint16)).tolist() == [5]
    assert d.as_dict()["rule"] == "<|endoftext|> (50256) before each document, '\\n' (198) after each document"


def _one_line_error(exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert isinstance(info.value, FastencError) and "\n" not in message and message
    return message


def test_bad_bos_eos_are_refused_with_one_line():
    gpt2 = fastenc.load("gpt2")
    assert "<|begin_of_text|>" in _one_line_error(UsageError, resolve, gpt2, "megatron", bos="<|begin_of_text|>")
    assert "0..50256" in _one_line_error(UsageError, resolve, gpt2, "megatron", eos=70000)
    assert "vocabulary" in _one_line_error(UsageError, resolve, gpt2, "llmc", eos="-1")
    cl100k = fastenc.load("cl100k_base")
    message = _one_line_error(UsageError, resolve, cl100k, "llmc", eos="<|endoftext|>", dtype="uint16")
    assert "uint16" in message and "100257" in message
    _one_line_error(UsageError, resolve, cl100k, "megatron", dtype="uint32")
    _one_line_error(UsageError, resolve, gpt2, "parquet")
    urls = fastenc.load("urls")  # a vocabulary of no known family: no silent default
    assert "--eos" in _one_line_error(UsageError, resolve, urls, "megatron")
    assert resolve(urls, "megatron", bos="none", eos="none").per_document == 0


def test_ids_past_the_dtype_are_refused_and_nothing_is_published(tmp_path):
    gpt2 = fastenc.load("gpt2")
    for fmt in FORMATS:
        delims = resolve(gpt2, fmt)
        with pytest.raises(UsageError) as info:
            with open_writer(fmt, tmp_path / fmt, delims, "gpt2") as w:
                w.add(np.array([1, 2], dtype=np.uint16), [2])
                w.add(np.array([70000], dtype=np.uint32), [1])
        assert "70000" in str(info.value) and "\n" not in str(info.value)
        _one_line_error(UsageError, delims.apply, np.array([50257], dtype=np.uint32), [1])  # past the vocabulary
    assert list(tmp_path.iterdir()) == []  # no final name, no temporary


def test_a_stop_at_any_rename_leaves_nothing_or_the_whole_output(tmp_path):
    """Ctrl-C (or a failure) before each rename of ``finish()``: nothing under any name; just after
    the last rename (the commit): the complete output, which reads back."""
    from fastenc.run import faults

    gpt2 = fastenc.load("gpt2")
    for fmt in FORMATS:
        delims = resolve(gpt2, fmt)
        n_files = {"megatron": 2, "datatrove": 3, "llmc": 1}[fmt]
        for at in range(1, n_files + 2):
            folder = tmp_path / f"{fmt}-{at}"
            folder.mkdir()
            seen = {"rename": 0, faults.RENAMED: 0}

            def hook(op, path, at=at):
                if op in seen:
                    seen[op] += 1
                    if (op == "rename" and seen[op] == at) or (op == faults.RENAMED and at > n_files and seen[op] == n_files):
                        raise KeyboardInterrupt

            w = open_writer(fmt, folder / "out", delims, "gpt2")
            w.add(*delims.apply(np.array([1, 2, 3], dtype=np.uint16), [2, 1]))
            with faults.inject(hook), pytest.raises(KeyboardInterrupt):
                w.finish()
            if at <= n_files:
                assert list(folder.iterdir()) == [], (fmt, at)
            else:
                assert read_tokens(fmt, folder / "out", delims).ids.tolist()[:1] in ([1], [50256]), (fmt, at)
                assert not [p for p in folder.iterdir() if ".tmp-" in p.name]


def _damaged(tmp_path: Path, fmt: str) -> list[tuple[Path, bytes]]:
    """(file, new content) pairs that each break one check."""
    base = tmp_path / fmt
    delims = resolve(fastenc.load("gpt2"), fmt)
    with open_writer(fmt, base, delims, "gpt2") as w:
        w.add(*delims.apply(np.arange(100, 160, dtype=np.uint16), [20, 30, 10]))
        w.finish()
    if fmt == "megatron":
        idx, bin_ = Path(f"{base}.idx"), Path(f"{base}.bin")
        i, b = idx.read_bytes(), bin_.read_bytes()
        return [(idx, b"XXIDIDX\x00\x00" + i[9:]), (idx, i[:9] + struct.pack("<Q", 2) + i[17:]), (idx, i[:-8]),
                (idx, i[:17] + b"\x09" + i[18:]), (bin_, b[:-2]), (bin_, b + b"\x00\x00"), (idx, b"")]
    if fmt == "datatrove":
        ds, index, meta = dt_format.paths(f"{base}.ds")
        d, x, m = ds.read_bytes(), index.read_bytes(), meta.read_bytes()
        return [(ds, d[:-1]), (ds, d[:-2]), (index, x[:-8]), (index, x[:-1]), (meta, b"gpt2\n63"), (meta, b"gpt2|3\n63")]
    path = Path(f"{base}.bin")
    s = path.read_bytes()
    return [(path, s[:-2]), (path, s[:100]), (path, struct.pack("<i", 20240801) + s[4:]),
            (path, s[:4] + struct.pack("<i", 2) + s[8:]), (path, s + b"\x00\x00")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_wrong_or_truncated_files_give_one_line_naming_the_file(tmp_path, fmt):
    delims = resolve(fastenc.load("gpt2"), fmt)
    for path, content in _damaged(tmp_path, fmt):
        good = path.read_bytes()
        path.write_bytes(content)
        message = _one_line_error(BadTokenFile, read_tokens, fmt, tmp_path / fmt, delims)
        assert str(path) in message and "rewrite it" in message, message
        path.write_bytes(good)
        read_tokens(fmt, tmp_path / fmt, delims)
    for path in list(tmp_path.iterdir()):
        path.unlink()
        assert str(path) in _one_line_error(BadTokenFile, read_tokens, fmt, tmp_path / fmt, delims)
        break


def test_empty_documents_without_delimiters_keep_their_place(tmp_path, megatron):
    """--bos none --eos none: an empty document is a zero-length sequence in Megatron's index (so
    document i is still sequence i) and a repeated end in datatrove's."""
    delims = {fmt: resolve(fastenc.load("gpt2"), fmt, bos="none", eos="none") for fmt in FORMATS}
    ids, lengths = np.array([1, 2, 3, 4], dtype=np.uint16), np.array([2, 0, 0, 2])
    offsets = [0, 2, 2, 2, 4]
    mg_format.write_megatron(tmp_path / "m", *delims["megatron"].apply(ids, lengths))
    for _, module in megatron:
        got, got_offsets, _ = megatron_read(module, tmp_path / "m")
        assert got.tolist() == [1, 2, 3, 4] and got_offsets.tolist() == offsets
    dt_format.write_datatrove(tmp_path / "d.ds", *delims["datatrove"].apply(ids, lengths), "gpt2")
    assert read_tokens("datatrove", tmp_path / "d").offsets.tolist() == offsets


def test_datatrove_folder_of_several_files(tmp_path, datatrove_dataset):
    """Several .ds files (with their .index and .metadata) in one folder: DatatroveFolderDataset
    finds the data files only, reads each in windows of seq_len + 1 ids, and positions restart
    at every document start (and every window start)."""
    rng = np.random.default_rng(0)
    shards = {"000_train.ds": [20, 44, 1, 63], "001_train.ds": [64, 64, 30, 34]}  # 128 and 192 ids
    stream, starts, base = [], set(), 0
    for name, lengths in shards.items():
        ids = rng.integers(0, 50000, sum(lengths)).astype(np.uint16)
        dt_format.write_datatrove(tmp_path / name, ids, lengths, "gpt2")
        stream.append(ids)
        starts |= {base + int(s) for s in np.cumsum(lengths) - lengths}
        base += len(ids)
    ds = datatrove_dataset.DatatroveFolderDataset(str(tmp_path), seq_len=63, token_size=2, return_positions=True)
    assert len(ds) == 5
    items = [ds[i] for i in range(len(ds))]
    assert np.array_equal(np.concatenate([np.asarray(it["input_ids"]) for it in items]), np.concatenate(stream))
    zeros = {64 * i + int(p) for i, it in enumerate(items) for p in np.flatnonzero(np.asarray(it["positions"]) == 0)}
    assert zeros == starts | {64 * i for i in range(5)}


def test_a_megatron_dataset_without_tokens_is_refused(tmp_path):
    """Megatron's reader cannot memory-map an empty .bin: a dataset of empty documents alone is refused, nothing left."""
    with pytest.raises(UsageError, match="empty dataset"):
        mg_format.write_megatron(tmp_path / "out", np.array([], dtype=np.uint16), np.array([0, 0]))
    assert list(tmp_path.iterdir()) == []
