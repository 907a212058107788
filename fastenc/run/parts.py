"""The size-capped part rule shared by the gpt2 parts and the bytes shards, and the re-read
check of a finished part.

Rule: parts end at item (document) boundaries. An item goes into the open part if that part
is empty or the item still fits within ``cap``; otherwise it starts the next part. So every
part holds whole items, in order, and is at most ``cap`` long unless it holds one single
longer item. Sizes are in whatever unit ``csum`` counts (tokens, bytes).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from fastenc.errors import VerificationError

__all__ = ["CappedParts", "reread_xxh3"]


class CappedParts(ABC):
    """Base class of a writer that cuts a stream of items into parts under the rule above.

    Subclasses implement ``_open_part()``, ``_append(s, k, *args)`` (write items ``s..k-1``)
    and ``_close_part()``; ``fill`` and ``items`` are the open part's size and item count.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self.is_open = False
        self.fill = 0
        self.items = 0

    def write_items(self, csum: np.ndarray, s: int, e: int, *args) -> None:
        """Write items ``s..e-1``; item ``i`` is ``csum[i + 1] - csum[i]`` long."""
        while s < e:
            if not self.is_open:
                self._open_part()
                self.is_open, self.fill, self.items = True, 0, 0
            room = self.cap - self.fill
            k = min(e, int(np.searchsorted(csum, csum[s] + room, side="right")) - 1)
            if k <= s:
                if self.items:
                    self.close()  # the next item does not fit: it starts the next part
                    continue
                k = s + 1  # one item longer than a whole part: a part of its own
            self._append(s, k, *args)
            self.fill += int(csum[k] - csum[s])
            self.items += k - s
            s = k

    def close(self) -> None:
        """Close the open part, if any."""
        if self.is_open:
            self.is_open = False
            self._close_part()

    @abstractmethod
    def _open_part(self) -> None:
        """Start a new part."""

    @abstractmethod
    def _append(self, s: int, k: int, *args) -> None:
        """Write items ``s..k-1`` into the open part."""

    @abstractmethod
    def _close_part(self) -> None:
        """Finish the open part."""


def reread_xxh3(path: Path, written: str, what: str) -> None:
    """Read a finished (fsynced) file back from disk and compare its xxh3 with what was written."""
    import xxhash

    h = xxhash.xxh3_64()
    buffer = bytearray(4 << 20)  # one reused block: reading back never holds more than 4 MB
    view = memoryview(buffer)
    with open(path, "rb") as f:
        while n := f.readinto(buffer):
            h.update(view[:n])
    if h.hexdigest() != written:
        raise VerificationError(f"{what}: the file read back differs from what was written (xxh3 {h.hexdigest()} != "
                                f"{written}): is the disk full or failing? nothing was published")
