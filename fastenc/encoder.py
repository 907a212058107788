"""The Python API: ``fastenc.load(name_or_path) -> Encoder``."""
from __future__ import annotations

import contextlib
import functools
import os
import threading
from pathlib import Path

import numba
import numpy as np

from fastenc.errors import InputError, VocabError
from fastenc.memory import OutputPool
from fastenc.kernels.config import WHOLE_PIECE_LOOKUP
from fastenc.kernels.decode import decode_into, decoded_length
from fastenc.kernels.encode import compact_runs, seed_piece_caches, split_by_bytes, takes_wide_loop
from fastenc.kernels.piece_cache import (
    DEFAULT_LONG_SLOTS,
    DEFAULT_SHORT_SLOTS,
    DEFAULT_TINY_SLOTS,
    LONG_WORDS,
    SHORT_WORDS,
    TINY_WORDS,
    PieceCaches,
    one_task,
)
from fastenc.kernels.piece_cache_wide import WIDE_LONG_SLOTS, WIDE_MEMO_IDS, WIDE_SHORT_SLOTS, seed_wide_cache
from fastenc.kernels.piece_memo import DEFAULT_MEMO_IDS, init_piece_memo, memo_words, set_caches_shared
from fastenc.kernels.runs import encode_docs, encode_docs_wide
from fastenc.kernels.solo import (entry, grow_lane, lane_docs, lane_one, new_lane, new_wide_lane, set_lane_out, wide_lane_docs,
                                   wide_lane_one)
from fastenc.tasks import run_tasks
from fastenc.unicode_classes import class_table_for
from fastenc.vocab import (
    BUILTIN,
    TIKTOKEN_BUILTIN,
    TIKTOKEN_PATTERNS,
    Vocab,
    VocabInfo,
    builtin_tiktoken_file,
    builtin_tokenizer_dir,
    load_tiktoken_vocab,
    load_vocab,
)

def _to_utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8: replace them with U+FFFD, as tiktoken does.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def texts_to_flat(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """(data, offsets) of a list of ``str``: their UTF-8 back to back (read-only), and where each begins.

    Each string's ``bytes``, then one join. Not ``"".join(texts).encode()`` with offsets from each
    string's ``len``: one emoji makes the joined string 4 bytes a character, and on the held-out
    documents that join and its encode took ~8x as long as this (bench/RESULTS.md, "Per-call cost and
    list[str] input"); the time here is the UTF-8 encoding of the non-ASCII strings itself."""
    try:
        encoded = list(map(str.encode, texts))
    except (UnicodeEncodeError, TypeError):
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"encode_batch: item {i} is {type(text).__name__}, not str") from None
        encoded = [_to_utf8(t) for t in texts]  # lone surrogates: each string as encode() converts it
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    return _read_only(np.frombuffer(b"".join(encoded), dtype=np.uint8)), offsets


def piece_cache_slots(config: np.ndarray) -> tuple[int, int, int]:
    """Slots of the tiny, short and long piece caches that the encode loop for a vocabulary's
    ``config`` wants: the narrow loop's defaults (``piece_cache``), or the wide loop's, which reads
    no tiny cache (one slot, a placeholder) and keeps every piece of 1..15 bytes in a short cache
    twice the size, with a long cache four times the size (``piece_cache_wide`` says why)."""
    if takes_wide_loop(config):
        return 1, WIDE_SHORT_SLOTS, WIDE_LONG_SLOTS
    return DEFAULT_TINY_SLOTS, DEFAULT_SHORT_SLOTS, DEFAULT_LONG_SLOTS


def piece_memo_ids(config: np.ndarray) -> int:
    """The memo arena (``piece_memo.memo_words``' ids) that the encode loop for a vocabulary's
    ``config`` wants: the wide loop's memo keeps each piece's bytes too (``piece_cache_wide``)."""
    return WIDE_MEMO_IDS if takes_wide_loop(config) else DEFAULT_MEMO_IDS


def _zeroed_cache_memory(shape: tuple) -> np.ndarray:
    """A zeroed uint64 array for the piece caches, on huge pages where offered (``fastenc.memory``).

    Private to the process, also in a forked ``--workers`` process (which allocates its own at its
    first call): caches shared between processes must be a ``MAP_SHARED`` mapping, which Linux backs
    with 4 kB pages unless ``shmem_enabled`` says otherwise (``never`` by default), and a lookup
    then misses the TLB. Measured on 2 workers (bench/RESULTS.md, "Forked workers fill piece caches
    of their own"): warm GPT-2 units took 8-15% more CPU in one shared set than in a set each; the
    first units did not gain (both workers' first units are cold at once either way)."""
    from fastenc.memory import huge_array

    return huge_array(shape, np.uint64)


def _read_only(data: np.ndarray) -> np.ndarray:
    # Numba compiles a separate specialization for read-only arrays (Arrow buffers, bytes):
    # handing the kernels read-only input always means one compile, not two.
    view = data.view()
    view.flags.writeable = False
    return view


_SOLO_OUT = 1 << 12  # the one-text lane's output buffer, in ids, to begin with
_SOLO_BATCH_BYTES = 1 << 16  # batches up to this size run on the one-text lane: a thread hand-off costs more
_SOLO_KEEP = 1 << 20  # the most ids the lane's buffer grows to (a longer text gets a buffer for its call)


class _Solo:
    """The one-text lane of an Encoder (``kernels.solo``): the lane; its output buffer (``out``, which
    the lane holds too, and ``view``, a memoryview of it: slicing one costs less than slicing an
    array); the lane kernels' entry points ``one(lane, data)`` and ``docs(lane, data, offsets,
    first, last, out, at, counts)``; ``grow(lane, need)``, which gives a narrow lane more merge room;
    ``caches``, the lane's ``PieceCaches`` (the same arrays), to look at."""

    __slots__ = ("lane", "caches", "out", "view", "one", "docs", "grow")

    def __init__(self, lane, caches: PieceCaches, out: np.ndarray, one, docs, grow):
        self.lane, self.caches, self.out, self.view = lane, caches, out, memoryview(out)
        self.one, self.docs, self.grow = one, docs, grow

    def _room(self, n: int) -> np.ndarray:
        """An output buffer for ``n`` ids: the lane's, grown, up to ``_SOLO_KEEP``; past that one for this call."""
        if n <= len(self.out):
            return self.out
        if n > _SOLO_KEEP:
            return np.empty(n, dtype=self.out.dtype)
        self.out = np.empty(max(n, 2 * len(self.out)), dtype=self.out.dtype)
        self.view = memoryview(self.out)
        set_lane_out(self.lane, self.out)
        return self.out

    def ids(self, data: bytes) -> np.ndarray:
        """The ids of ``data``, any length (a view of a buffer that the next call may reuse)."""
        offsets = np.array([0, len(data)], dtype=np.int64)
        ids, _ = self.batch(_read_only(np.frombuffer(data, dtype=np.uint8)), offsets, 1, len(data), copy=False)
        return ids

    def batch(self, data: np.ndarray, offsets: np.ndarray, n_docs: int, nbytes: int,
              copy: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(ids, counts) of documents ``data[offsets[i]:offsets[i + 1]]``; the ids a copy unless not ``copy``."""
        out = self._room(nbytes)
        counts = np.zeros(n_docs, dtype=np.int64)
        if not n_docs:
            return out[:0].copy(), counts
        if not (offsets.flags.writeable and offsets.flags.aligned):  # (the entry point's type)
            offsets = offsets.copy()
        while (n := self.docs(self.lane, data, offsets, 0, n_docs, out, 0, counts)) < 0:
            self.grow(self.lane, -n)  # (a long piece needs more merge room: then the documents again)
        return (out[:n].copy() if copy else out[:n]), counts


class Encoder:
    """A byte-level BPE encoder over one vocabulary.

    ``vocab`` (a ``fastenc.vocab.Vocab`` of numpy arrays) and ``classes`` are what the
    ``@njit`` kernels in ``fastenc.kernels.encode`` take, for use from your own Numba code.
    (``kernel_classes`` is what fastenc's own narrow loops get: ``None`` for a URL vocabulary, whose
    loop then compiles without GPT-2's pre-tokenizer; ``classes`` gives the same ids.)
    Added/special tokens' text is encoded as ordinary text (like tiktoken's
    ``encode_ordinary``); their ids only appear in ``decode``.
    """

    def __init__(self, vocab: Vocab, info: VocabInfo, name: str | None = None):
        self.vocab = vocab
        self.info = info
        self.name = name or info.path
        # the code-point classes its pre-tokenizer reads (a split pattern's come with its program)
        self.classes = _read_only(vocab.split_classes) if info.pretokenizer == "regex" else class_table_for(info.pretokenizer)
        # What fastenc's own narrow loops get instead: None for the URL pre-tokenizer, whose loop
        # then compiles without GPT-2's pre-tokenizer (kernels.encode.encode_narrow).
        narrow_url = info.pretokenizer == "url" and not takes_wide_loop(vocab.config)
        self.kernel_classes = None if narrow_url else self.classes
        self._caches = None  # per-task piece caches, kept between calls (they only memoize)
        self._seeded = set()  # the tasks whose piece caches hold the vocabulary's tokens (_seed)
        self._memos_ready: set[int] = set()  # the tasks whose memo is initialized (_init_memos)
        # Calls from several Python threads at once (a thread pool sharing the Encoder that
        # ``fastenc.load`` caches) each take task slots of their own (``_lanes``): no two calls
        # ever read or fill the same caches or memo, so each may evict as one thread does.
        self._lane_lock = threading.Condition(threading.Lock())
        self._free_slots: set[int] = set()  # the task slots no call holds now (all of them once allocated)
        self._outputs = OutputPool()  # id buffers that earlier results have let go of
        # One-text calls and small batches run on a lane of their own (``_Solo``), which one thread
        # holds at a time: it is taken from ``_idle`` (list.pop and append are atomic, and cost less
        # than a lock); a call that finds it busy takes a task slot instead. ``_solo_lock``: building it.
        self._solo_lock = threading.Lock()
        self._idle: list[_Solo] = []
        self._solo_built = False

    def __repr__(self) -> str:
        return f"<fastenc.Encoder {self.name!r} vocab_size={self.info.vocab_size} rule={self.info.merge_rule}>"

    @property
    def vocab_size(self) -> int:
        return self.info.vocab_size

    @property
    def sha256(self) -> str:
        """sha256 of the tokenizer.json this encoder was loaded from."""
        return self.info.sha256

    @property
    def dtype(self) -> np.dtype:
        """``uint16`` when every id fits, else ``uint32``."""
        return self.info.output_dtype

    @contextlib.contextmanager
    def _lanes(self, n_tasks: int):
        """``with enc._lanes(n) as sets:`` the piece caches of one call on ``n`` threads: ``sets[k]``
        is thread k's (``_caches_of``: one set shared by all the call's threads when there are
        several, each with a memo of its own). The call holds task slots that no other call holds
        meanwhile (``_take_slots``). Results do not depend on how many threads a call gets, so a
        busy Encoder only slows a call down."""
        slots = self._take_slots(n_tasks)
        try:
            yield self._slot_caches(slots)
        finally:
            self._give_slots(slots)

    def _take_slots(self, n_tasks: int) -> list:
        """The lowest free task slots, at most ``n_tasks`` and as many as are free (at least one: it
        waits for one), their memos initialized. A caller alone always gets slot 0, the warm one."""
        with self._lane_lock:
            # (the caches, if absent: every slot's room, reserved once; looked at again after each
            # wait, as a clear_caches in another thread may have dropped them meanwhile)
            self._allocate_caches()
            while not self._free_slots:
                self._lane_lock.wait()
                self._allocate_caches()
            free = self._free_slots
            slots = [0] if n_tasks <= 1 and 0 in free else sorted(free)[: max(1, n_tasks)]
            free.difference_update(slots)
            if not self._memos_ready.issuperset(slots):
                self._init_memos(slots)
        return slots

    def _give_slots(self, slots: list) -> None:
        with self._lane_lock:
            self._free_slots.update(slots)
            self._lane_lock.notify_all()

    def _slot_caches(self, slots: list) -> list:
        """One ``PieceCaches`` per slot: the first slot's set, seeded, shared by all when there are several."""
        caches = self._caches
        self._seed(caches, slots[0])  # (before any of the call's threads reads it)
        shared = len(slots) > 1
        return [self._caches_of(caches, t, shared=shared, lead=slots[0]) for t in slots]

    def _task_caches(self, n_tasks: int | None = None) -> PieceCaches:
        """One set of piece caches per Numba thread, stacked: ``one_task(caches, t)`` is thread t's.

        Room is reserved once for the most threads Numba may use (``NUMBA_NUM_THREADS``): the
        memory is anonymous and only the pages a task touches are ever backed, so this costs
        nothing per unused thread, and changing ``numba.set_num_threads`` keeps warm caches. A
        task's memo is initialized when the task is first used, not before: its header is on the
        row's first page (a 2 MB huge page), and a ``--workers`` process of one thread on a
        64-core machine would otherwise back 63 of them for nothing (126 MB a worker).
        """
        # (Numba never runs more threads than NUMBA_NUM_THREADS, the room reserved: the caches are
        # allocated once, never replaced under a call that holds some of them)
        n_tasks = min(numba.get_num_threads() if n_tasks is None else n_tasks, numba.config.NUMBA_NUM_THREADS)
        with self._lane_lock:
            self._allocate_caches()
            self._init_memos(range(n_tasks))
            return PieceCaches(*(tables[:n_tasks] for tables in self._caches))

    def _allocate_caches(self) -> None:
        """The caches of every slot, if there are none (with ``_lane_lock`` held)."""
        if self._caches is not None:
            return
        room = numba.config.NUMBA_NUM_THREADS
        tiny, short, long = piece_cache_slots(self.vocab.config)
        self._caches = PieceCaches(
            _zeroed_cache_memory((room, tiny, TINY_WORDS)),
            _zeroed_cache_memory((room, short, SHORT_WORDS)),
            _zeroed_cache_memory((room, long, LONG_WORDS)),
            _zeroed_cache_memory((room, memo_words(ids=piece_memo_ids(self.vocab.config)))),
        )
        self._free_slots = set(range(room))
        # what the sets below say is about these caches: none of them is initialized or seeded yet
        self._memos_ready = set()
        self._seeded = set()

    def clear_caches(self) -> None:
        """Drop the piece caches and memos: the next call starts cold, as in a new process (a benchmark's
        first pass; or memory handed back, once no result or ``thread_caches`` refers to it). Waits
        while calls in other threads hold task slots."""
        with self._lane_lock:
            while self._caches is not None and len(self._free_slots) < self._caches.memo.shape[0]:
                self._lane_lock.wait()
            self._caches = None
            self._free_slots = set()
            self._memos_ready = set()
            self._seeded = set()
        with self._solo_lock:  # (a call holding the old lane gives it back to the old list, which is dropped)
            self._idle = []
            self._solo_built = False

    def _init_memos(self, tasks) -> None:
        """Initialize the memos of ``tasks`` that are not yet (with ``_lane_lock`` held: a memo is
        initialized once, never under a call that uses it)."""
        for t in tasks:
            if t not in self._memos_ready:
                init_piece_memo(self._caches.memo[t])
                self._memos_ready.add(t)

    def thread_caches(self, task: int = 0) -> PieceCaches:
        """The piece caches of one task, for calling ``encode_text`` from your own code (slot ``task``
        as it is: not taken from this Encoder's own calls, so use it while none runs in another thread)."""
        caches = self._task_caches()
        self._seed(caches, task)
        return self._caches_of(caches, task, shared=False)

    @functools.cached_property
    def _seed_ids(self) -> np.ndarray | None:
        """The ids ``_seed`` stores, ascending, or None where the caches are not seeded: only where a
        piece that is a token encodes to that token (tiktoken's rule; a HF file while its whole-piece
        lookup, ``ignore_merges``, is on).
        ``piece_cache_wide.seed_wide_cache`` says why seed at all."""
        config = self.vocab.config
        if self.info.merge_rule != "tiktoken" and not config[WHOLE_PIECE_LOOKUP]:
            return None  # (a HF file without ignore_merges: a token's bytes may merge to other ids)
        table = self.vocab.token_table
        return np.sort(table[table >= 0]).astype(np.int64)

    def _seed(self, caches: PieceCaches, task: int) -> None:
        """Fill task ``task``'s piece caches with the vocabulary's tokens of up to 15 bytes, once
        (before any thread reads them: ``_lanes`` seeds a call's first slot, whose caches its
        threads share, before they start)."""
        if task in self._seeded or self._seed_ids is None:
            return
        self._seeded.add(task)
        if takes_wide_loop(self.vocab.config):
            seed_wide_cache(caches.short[task], self._seed_ids, self.vocab.token_bytes, self.vocab.token_offsets)
        else:
            seed_piece_caches(one_task(caches, task), self._seed_ids, self.vocab.token_bytes, self.vocab.token_offsets)

    def _caches_of(self, caches: PieceCaches, task: int, shared: bool, lead: int = 0) -> PieceCaches:
        """Task ``task``'s caches. ``shared``: task ``lead``'s tiny, short and long caches, its own memo,
        which says so (``piece_memo.set_caches_shared``: then no filled slot is rewritten while
        another thread may read it, ``piece_cache``'s "Shared caches"). Why share: with a set per
        thread, each merged every piece that the halves of a batch have in common (+21% merges on
        docs.parquet at 2 threads; N threads, N times) and zeroed its own 100 MB of cache pages on
        first touch (~0.7 GB/s on these VMs). With one set, a 2-thread o200k first pass over
        docs.parquet took a quarter less time (bench/RESULTS.md, "What changed (9c3cb18)")."""
        own = one_task(caches, task)
        set_caches_shared(own.memo, shared)
        if shared:
            return PieceCaches(caches.tiny[lead], caches.short[lead], caches.long[lead], own.memo)
        return own

    # --- encoding -----------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """The ids of one text, as a list (HF's ``encode(text).ids`` / tiktoken's ``encode_ordinary``)."""
        if not isinstance(text, str):
            raise TypeError(f"Encoder.encode takes a str, got {type(text).__name__}; use encode_bytes for bytes")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            data = _to_utf8(text)
        idle = self._idle
        try:
            solo = idle.pop()
        except IndexError:
            return self._encode_without_lane(data).tolist()
        try:
            if (n := solo.one(solo.lane, data)) >= 0:
                return solo.view[:n].tolist()
            return solo.ids(data).tolist()  # (a text longer than the buffer, or a piece that needs more merge room)
        finally:
            idle.append(solo)

    def encode_bytes(self, data: bytes) -> np.ndarray:
        """The ids of UTF-8 bytes, as an array of ``self.dtype``."""
        data = bytes(data)  # (the lane's entry point takes exactly ``bytes``)
        idle = self._idle
        try:
            solo = idle.pop()
        except IndexError:
            return self._encode_without_lane(data)
        try:
            if (n := solo.one(solo.lane, data)) >= 0:
                return solo.out[:n].copy()
            return solo.ids(data).copy()
        finally:
            idle.append(solo)

    def _encode_without_lane(self, data: bytes) -> np.ndarray:
        """``encode_bytes`` when the lane is not idle: not built yet (then it is, and encodes), or
        another thread holds it (then a task slot encodes)."""
        if not self._solo_built and self._build_solo():
            return self.encode_bytes(data)
        return self._encode_in_slot(data)

    def _encode_in_slot(self, data: bytes) -> np.ndarray:
        """``encode_bytes`` on a task slot: while another thread holds the one-text lane."""
        buf = _read_only(np.frombuffer(data, dtype=np.uint8))
        out = np.empty(len(buf), dtype=self.dtype)
        offsets = np.array([0, len(buf)], dtype=np.int64)
        slots = self._take_slots(1)  # (not ``_lanes``: a generator's cost shows on short texts)
        try:
            n = self._encode_docs(buf, offsets, 0, 1, self.vocab, self.kernel_classes, self._slot_caches(slots)[0], out, 0,
                                  np.zeros(1, dtype=np.int64), *self._docs_tail)
        finally:
            self._give_slots(slots)
        return out[:n].copy()

    def _build_solo(self) -> bool:
        """Build the one-text lane, once, and leave it idle; False if it already was (another thread
        built it meanwhile). Piece caches of its own (seeded, memo initialized; only the pages it
        touches are backed), scratch, an output buffer, and the lane kernels' entry points."""
        with self._solo_lock:
            if self._solo_built:
                return False
            tiny, short, long = piece_cache_slots(self.vocab.config)
            caches = PieceCaches(
                _zeroed_cache_memory((tiny, TINY_WORDS)),
                _zeroed_cache_memory((short, SHORT_WORDS)),
                _zeroed_cache_memory((long, LONG_WORDS)),
                _zeroed_cache_memory((memo_words(ids=piece_memo_ids(self.vocab.config)),)),
            )
            init_piece_memo(caches.memo)
            set_caches_shared(caches.memo, False)
            wide = takes_wide_loop(self.vocab.config)
            if self._seed_ids is not None:
                if wide:
                    seed_wide_cache(caches.short, self._seed_ids, self.vocab.token_bytes, self.vocab.token_offsets)
                else:
                    seed_piece_caches(caches, self._seed_ids, self.vocab.token_bytes, self.vocab.token_offsets)
            out = np.empty(_SOLO_OUT, dtype=self.dtype)
            lane = (new_wide_lane if wide else new_lane)(self.vocab, self.kernel_classes, caches, out)
            one = entry(wide_lane_one if wide else lane_one, lane, b"")
            docs = entry(wide_lane_docs if wide else lane_docs, lane, _read_only(np.zeros(0, dtype=np.uint8)),
                         np.zeros(2, dtype=np.int64), 0, 1, out, 0, np.zeros(1, dtype=np.int64))
            self._idle.append(_Solo(lane, caches, out, one, docs, None if wide else grow_lane))
            self._solo_built = True
            return True

    @functools.cached_property
    def _encode_docs(self):
        """The batch kernel for this vocabulary (``encode.takes_wide_loop``), chosen once: a run
        compiles only the loop it uses (``fastenc.kernels.runs``)."""
        return encode_docs_wide if takes_wide_loop(self.vocab.config) else encode_docs

    @functools.cached_property
    def _docs_tail(self) -> tuple:
        """The batch kernel's arguments after ``counts``: ``encode_docs`` takes ``eos`` (-1: the ids
        back to back), ``encode_docs_wide`` nothing."""
        return () if takes_wide_loop(self.vocab.config) else (-1,)

    def encode_arrays(self, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Batch-encode flat UTF-8 ``data`` cut by ``offsets`` (int64, n + 1, ascending).

        Returns ``(ids, id_offsets)``: document i's ids are ``ids[id_offsets[i]:id_offsets[i+1]]``.
        Uses every Numba thread; the result is the same for any thread count. For large batches
        ``ids`` is a view of a buffer that later calls reuse once it, and every view of it, is gone
        (``fastenc.memory.OutputPool``); results that are kept never share memory.
        """
        data = _read_only(np.ascontiguousarray(data, dtype=np.uint8))
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or len(offsets) < 1:
            raise InputError("offsets must be a 1-D int64 array of n_docs + 1 ascending positions")
        if len(offsets) > 1 and (offsets[0] < 0 or offsets[-1] > len(data) or (np.diff(offsets) < 0).any()):
            raise InputError("offsets must ascend and stay within data (0 <= offsets[0] <= ... <= offsets[-1] <= len(data))")
        return self._encode_flat(data, offsets)

    def _encode_flat(self, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``encode_arrays`` of checked input: read-only contiguous uint8 ``data``, int64 ``offsets``."""
        n_docs = len(offsets) - 1
        nbytes = int(offsets[-1] - offsets[0])
        if nbytes <= _SOLO_BATCH_BYTES and (self._idle or not self._solo_built):
            idle = self._idle
            try:
                solo = idle.pop()
            except IndexError:
                solo = None
                if self._build_solo():
                    return self._encode_flat(data, offsets)
            if solo is not None:
                try:
                    ids, counts = solo.batch(data, offsets, n_docs, nbytes)
                finally:
                    idle.append(solo)
                id_offsets = np.zeros(n_docs + 1, dtype=np.int64)
                np.cumsum(counts, out=id_offsets[1:])
                return ids, id_offsets
        # The ids are written straight into one buffer of a place per byte (an upper bound), the
        # parallel tasks' runs are moved together, and the result is that buffer's head: no second
        # buffer, no copy, no per-document gather. The buffer comes from a small pool of buffers
        # that earlier results no longer use (OutputPool): fresh memory costs a zeroed page per
        # 4 kB written, and page faults from two threads at once queue on the process's page tables.
        with self._outputs.buffer(int(offsets[-1] - offsets[0]), self.dtype) as (ids, trim):
            counts = np.zeros(n_docs, dtype=np.int64)
            total = 0
            if n_docs:
                total = self._encode_runs(data, offsets, ids, counts)
            ids = trim(total)
        id_offsets = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(counts, out=id_offsets[1:])
        return ids, id_offsets

    def _encode_runs(self, data, offsets, ids, counts) -> int:
        """``encode_batch_counts`` + ``compact_runs``, with the tasks on Python threads
        (``fastenc.tasks``: the same ids, without compiling a ``parallel=True`` kernel)."""
        with self._lanes(numba.get_num_threads()) as sets:
            n_tasks = len(sets)
            bounds = split_by_bytes(offsets, n_tasks)
            base = int(offsets[0])

            def task(t):
                first, last = int(bounds[t]), int(bounds[t + 1])
                if first < last:
                    at = int(offsets[first]) - base
                    self._encode_docs(data, offsets, first, last, self.vocab, self.kernel_classes, sets[t], ids, at, counts,
                                      *self._docs_tail)

            run_tasks(task, n_tasks)
        return compact_runs(ids, offsets, counts, n_tasks)

    def encode_batch(self, texts) -> tuple[np.ndarray, np.ndarray]:
        """Encode a list of ``str`` or a pyarrow string array; returns ``(ids, offsets)``.

        Arrow arrays are read zero-copy from their buffers. Nulls are refused.
        """
        if isinstance(texts, list):  # (first: a short list's call should not pay for the imports below)
            return self._encode_flat(*texts_to_flat(texts))
        import pyarrow as pa

        from fastenc.arrow_io import arrow_to_flat

        if isinstance(texts, (pa.Array, pa.ChunkedArray)):
            t = texts.type
            if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
                raise InputError(f"encode_batch takes a string or large_string array, got {t}; cast it first")
            if texts.null_count:
                first = next(i for i, v in enumerate(texts.is_null().to_pylist()) if v)
                raise InputError(
                    f"encode_batch got {texts.null_count} null value(s), the first at index {first}; "
                    "drop them or fill them with '' first (pyarrow.compute.fill_null)"
                )
            data, offsets = arrow_to_flat(texts)
        else:
            data, offsets = texts_to_flat(list(texts))
        return self.encode_arrays(data, offsets)

    # --- decoding -----------------------------------------------------------------------
    def decode_bytes(self, ids) -> bytes:
        """The bytes of ``ids`` (special tokens decode to their text, as in tiktoken)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        n = decoded_length(ids, self.vocab.token_offsets)
        if n < 0:
            bad = int(ids[(ids < 0) | (ids >= self.vocab_size)][0])
            raise ValueError(f"token id {bad} is out of range for this vocabulary (0..{self.vocab_size - 1})")
        out = np.empty(n, dtype=np.uint8)
        decode_into(ids, self.vocab.token_bytes, self.vocab.token_offsets, out, 0)
        return out.tobytes()

    def decode(self, ids, errors: str = "replace") -> str:
        """The text of ``ids``; invalid UTF-8 (a cut multi-byte character) becomes U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, merge_rule: str, mtime_ns: int, name: str, pattern: str | None = None) -> Encoder:
    if pattern is not None:
        specials = TIKTOKEN_BUILTIN[name][2] if name in TIKTOKEN_BUILTIN else {}
        vocab, info = load_tiktoken_vocab(path, pattern, specials)
    else:
        vocab, info = load_vocab(path, merge_rule=merge_rule)
    return Encoder(vocab, info, name=name)


def load(name_or_path: str | os.PathLike = "gpt2", merge_rule: str | None = None, pattern: str | None = None) -> Encoder:
    """An ``Encoder`` for a built-in vocabulary or a file.

    Built-in: ``"gpt2"``, ``"cl100k_base"``, ``"o200k_base"`` (ids equal tiktoken's
    ``encode_ordinary``), ``"urls"``. A path is a HF ``tokenizer.json`` (or its folder), or a
    tiktoken rank file (``*.tiktoken``, or any file when ``pattern`` is given) read with the split
    ``pattern`` (a name such as ``"cl100k"``, ``"o200k"``, ``"llama3"``, ``"qwen2"``, ``"tekken"``, or the
    regex string the model's code passes to tiktoken) and tiktoken's merge rule.
    ``merge_rule`` (tokenizer.json only) is ``"hf"`` (HF tokenizers' BPE, the default for paths)
    or ``"tiktoken"`` (the default for ``"gpt2"``, whose reference is tiktoken's ``encode_ordinary``).
    """
    key = str(name_or_path)
    if key in TIKTOKEN_BUILTIN:
        if pattern not in (None, TIKTOKEN_BUILTIN[key][1]):
            raise VocabError(f"{key} is defined with pattern {TIKTOKEN_BUILTIN[key][1]!r}; load its file by path to pair it with another")
        path = builtin_tiktoken_file(key)
        return _load_cached(str(path), "tiktoken", path.stat().st_mtime_ns, key, TIKTOKEN_BUILTIN[key][1])
    if key in BUILTIN:
        path = builtin_tokenizer_dir(key) / "tokenizer.json"
        rule = merge_rule or BUILTIN[key][1]
        name = key
    else:
        path = Path(name_or_path)
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise VocabError(
                f"no tokenizer at {name_or_path!r}: pass 'gpt2', 'cl100k_base', 'o200k_base', 'urls', the path of a "
                "tokenizer.json (or its folder), or of a .tiktoken rank file with pattern="
            )
        if pattern is not None or path.suffix == ".tiktoken":
            if pattern is None:
                raise VocabError(f"{path} is a tiktoken rank file: say which split it uses, pattern= a name "
                                 f"({', '.join(sorted(TIKTOKEN_PATTERNS))}) or the model's regex (--pattern on the command line)")
            if merge_rule not in (None, "tiktoken"):
                raise VocabError(f"a tiktoken rank file is encoded with tiktoken's merge rule, not {merge_rule!r}")
            return _load_cached(str(path), "tiktoken", path.stat().st_mtime_ns, str(path), pattern)
        rule = merge_rule or "hf"
        name = str(path)
    return _load_cached(str(path), rule, path.stat().st_mtime_ns, name)
