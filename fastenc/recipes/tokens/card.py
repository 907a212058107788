"""The dataset card of a ``fastenc tokens`` output: what the ids are, how documents are delimited,
the counters per shard, and how each trainer reads the files (from the files alone)."""
from __future__ import annotations

from pathlib import Path

from fastenc.card.common import built_section, check_size, code, layout_block, num, read_json, size_category, table, yaml_header
from fastenc.errors import InputError
from fastenc.recipes.tokens.layout import FORMAT, LLMC_NAME, MANIFEST, SPLITS

_TRAINERS = {"megatron": "Megatron-LM / NeMo (indexed dataset .bin + .idx)",
             "datatrove": "nanotron / datatrove (.ds + .ds.index + .ds.metadata)",
             "llmc": "llm.c / modded-nanogpt (256 x int32 header + ids)"}


def render(out: Path) -> str:
    m = read_json(out / MANIFEST, "the tokens recipe's manifest")
    if m.get("format") != FORMAT:
        raise InputError(f"{out / MANIFEST} is not a fastenc tokens manifest (format {m.get('format')!r})")
    try:
        for split in SPLITS:
            for s in m["splits"][split]["shards"]:
                for f, size in s["files"].items():
                    check_size(out / f, int(size), MANIFEST)
        parts = [_head(m), _layout(m), _format(m), _reading(m), _verification(m)]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{out / MANIFEST} is malformed ({type(exc).__name__}: {exc}): run `fastenc verify`") from None
    parts.append(built_section(m, "tokens", "fastenc.recipes.tokens.build.encode_tokens"))
    return "\n".join(parts).rstrip() + "\n"


def _head(m: dict) -> str:
    tok, d = m["tokenizer"], m["delimiters"]
    split = "; ".join(f"`{p}`" for p in tok["split"]) or f"{tok['pretokenizer']}'s built-in pre-tokenizer"
    return "\n".join([
        yaml_header({"pretty_name": f"Token ids for {_TRAINERS[m['trainer_format']].split(' (')[0]} (fastenc tokens)",
                     "license": "other", "tags": ["tokenized", "language-modeling", "pretraining", m["trainer_format"]],
                     "size_categories": [size_category(m["tokens"])]}),
        f"# Token ids for {_TRAINERS[m['trainer_format']]}",
        "",
        f"Documents tokenized by `fastenc tokens` (fastenc {m.get('fastenc_version', 'unknown')}), ids equal to "
        "the tokenizer's own encoding (tiktoken's `encode_ordinary` for the rank files), each document delimited "
        "as its model expects.",
        "",
        table(["", ""], [
            ("Tokenizer", f"`{tok['name']}`" + (f" with pattern `{tok['pattern']}`" if tok["pattern"] else "")
             + f" ({num(d['n_ids'])} ids; sha256 `{tok['sha256'][:16]}...`)"),
            ("Split pattern", split),
            ("Delimiters", _cell(d["rule"]) + f" ({'the ' + d['family'] + ' default' if d['source'] == 'default' and d['family'] else 'as given'})"),
            ("Format", _TRAINERS[m["trainer_format"]]),
            ("Token dtype", f"`{m['dtype']}`"),
            ("Documents", f"{num(m['documents'])} ({num(m['splits']['train']['documents'])} train, "
                          f"{num(m['splits']['val']['documents'])} val)"),
            ("Tokens", f"{num(m['tokens'])} (delimiters included)"),
            ("Bytes in", f"{num(m['bytes_in'])} of UTF-8 text"),
            ("Max id", num(m["max_id"])),
        ]),
    ])


def _cell(text: str) -> str:
    """A table cell: a token such as ``<|endoftext|>`` must not end the cell."""
    return text.replace("|", "\\|")


def _layout(m: dict) -> str:
    entries = [("README.md", "this card"), (MANIFEST, "counters per split and shard, the rules, the sources")]
    rows = []
    for split in SPLITS:
        for s in m["splits"][split]["shards"]:
            files = ", ".join(f"`{f}`" for f in s["files"])
            entries.append((next(iter(s["files"])), f"{split}: {num(s['tokens'])} tokens, {num(s['documents'])} documents"))
            rows.append((files, split, num(s["documents"]), num(s["tokens"]), num(s["bytes_in"]), num(s["max_id"])))
    shown = rows[:20] + ([("...", "", "", "", "", "")] if len(rows) > 20 else [])
    return "\n".join(["## Layout", "", layout_block(entries, keep_head=6),
                      table(["shard", "split", "documents", "tokens", "bytes in", "max id"], shown)])


def _format(m: dict) -> str:
    return "\n".join([
        "## Format", "",
        f"- Val rule: {m['val_rule']}.",
        f"- Shard rule: {m['shard_rule']}.",
        f"- Order: {m['shuffle_rule']}.",
        "- The bytes of each file: docs/trainer-formats.md of fastenc.", ""])


def _reading(m: dict) -> str:
    fmt, dtype = m["trainer_format"], m["dtype"]
    train = m["splits"]["train"]["shards"] or m["splits"]["val"]["shards"]
    base = train[0]["base"] if train else "train_00000_text_document"
    if fmt == "megatron":
        prefixes = " ".join(f"1.0 {s['base']}" for s in m["splits"]["train"]["shards"][:4])
        snippet = (f"# Megatron-LM: pretrain_gpt.py --data-path {prefixes} ...\n"
                   "from megatron.core.datasets.indexed_dataset import IndexedDataset\n\n"
                   f'ds = IndexedDataset("{base}")  # the prefix, without .bin/.idx\n'
                   "print(len(ds), ds[0][:16])          # documents; the first one's ids")
    elif fmt == "datatrove":
        snippet = ("# nanotron: data_stages.data.dataset: {dataset_folder: train, ...}\n"
                   "from datatrove.utils.dataset import DatatroveFolderDataset\n\n"
                   f'ds = DatatroveFolderDataset("train", seq_len=2048, token_size={2 if dtype == "uint16" else 4}, '
                   "return_positions=True)\nprint(len(ds), ds[0])")
    else:
        snippet = (f'# llm.c: ./train_gpt2cu -i "{LLMC_NAME}_train_*.bin" -j "{LLMC_NAME}_val_*.bin"\n'
                   f'# modded-nanogpt: train_files="{LLMC_NAME}_train_*.bin", val_files="{LLMC_NAME}_val_*.bin"\n'
                   "import numpy as np\n\n"
                   f'header = np.fromfile("{base}.bin", dtype=np.int32, count=256)\n'
                   f'ids = np.memmap("{base}.bin", dtype=np.{dtype}, mode="r", offset=1024, shape=(int(header[2]),))')
    return "\n".join(["## Reading it", "", "Run from this folder:", "", code(snippet, "python")])


def _verification(m: dict) -> str:
    n = sum(len(m["splits"][s]["shards"]) for s in SPLITS)
    return "\n".join([
        "## Verification", "",
        f"- All {n} shards were written, fsynced and re-read; the xxh3_64 of each shard's ids is in `{MANIFEST}`, "
        "and every file's size on disk matched it when this card was written.",
        f"- Documents: {num(m['documents'])}, every row of the inputs (their footers' count, checked).",
        "- `fastenc verify OUT` reads every shard back through fastenc's reader of its format, checks the "
        "counters, and re-encodes sampled documents from the source; `fastenc decode OUT` prints the documents.", ""])
