"""The trainer file formats: writers (streaming, temporary names then rename) and readers.

- ``megatron``: ``PREFIX.bin`` + ``PREFIX.idx`` (Megatron-LM / NeMo / megatron-core ``IndexedDataset``)
- ``datatrove``: ``NAME.ds`` + ``.ds.index`` + ``.ds.metadata`` (datatrove, nanotron)
- ``llmc``: 1,024-byte header + ids (llm.c, modded-nanogpt)

Every writer has ``add(ids, lengths)``, ``finish() -> counters`` and ``abort()``; every reader
returns ``TokenDocs(ids, offsets, paths)`` or raises ``BadTokenFile`` (one line).
"""
from fastenc.recipes.tokens.formats._files import BadTokenFile, TokenDocs

__all__ = ["BadTokenFile", "TokenDocs"]
