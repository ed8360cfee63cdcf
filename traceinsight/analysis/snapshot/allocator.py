"""A replay of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp) over a
snapshot's allocations and frees, to predict the memory it reserves under other settings.

The trace records each request (``alloc``, its size as asked) and each release
(``free_completed``); what the allocator did with them (``segment_alloc``, ``segment_map``)
follows from its rules, which are replayed here:

- sizes are rounded up to 512 bytes; requests up to 1 MiB come from the small pool, whose
  segments are 2 MiB; larger ones from the large pool, whose segments are 20 MiB for requests
  under 10 MiB and the request rounded up to 2 MiB above;
- a request takes the smallest free block of its pool and stream that fits (best fit); with
  ``max_split_size_mb``, a block at least that big is never given to a smaller request, and
  is given to a request that big only when it is less than 20 MiB larger;
- the block is split when what remains is at least 512 bytes (small pool, and every pool
  with expandable segments) or over 1 MiB (large pool, and only below ``max_split_size``);
- a freed block merges with free neighbours of its segment;
- when nothing fits, a new segment is reserved (``cudaMalloc``). Under a memory limit, a
  failing reservation first frees cached blocks (with ``max_split_size``: the oversize ones),
  then every free whole segment, then retries; with ``garbage_collection_threshold`` and a
  limit, the oldest free whole segments are freed before reserved memory passes the
  threshold's share of the limit;
- with ``expandable_segments``, each pool and stream has one segment that grows by mapping
  pages (2 MiB small, 20 MiB large) at its end, instead of reserving a new segment.

What it leaves out (each rarely changes a peak by much): ``roundup_power2_divisions``, blocks
used on other streams (``record_stream``), CUDA graph pools, unmapping pages in the middle of
an expandable segment, and the per-block ages that ``garbage_collection_threshold`` weighs
(oldest freed first here).

An allocator is a sequence of decisions, each depending on the last: this is one of the few
places a per-event loop is the algorithm itself, kept to plain ints and lists for speed.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, insort
from dataclasses import dataclass

MIN_BLOCK_BYTES = 512
SMALL_SIZE_BYTES = 1 << 20
SMALL_BUFFER_BYTES = 2 << 20
LARGE_BUFFER_BYTES = 20 << 20
MIN_LARGE_ALLOC_BYTES = 10 << 20
ROUND_LARGE_BYTES = 2 << 20
NO_LIMIT = 1 << 62


@dataclass(frozen=True)
class AllocatorSettings:
    """The ``PYTORCH_CUDA_ALLOC_CONF`` settings the replay knows, and the memory limit."""

    expandable_segments: bool = False
    max_split_bytes: int | None = None
    garbage_collection_threshold: float | None = None
    limit_bytes: int | None = None  # per-process cap or device memory; None: no limit

    def label(self) -> str:
        parts = []
        if self.expandable_segments:
            parts.append("expandable_segments:True")
        if self.max_split_bytes is not None:
            parts.append(f"max_split_size_mb:{self.max_split_bytes >> 20}")
        if self.garbage_collection_threshold:
            parts.append(f"garbage_collection_threshold:{self.garbage_collection_threshold:g}")
        return ",".join(parts) or "(defaults)"


@dataclass(frozen=True)
class SimulatedRun:
    settings: AllocatorSettings
    peak_reserved_bytes: int
    peak_allocated_bytes: int  # blocks handed out (rounded sizes), at their highest
    end_reserved_bytes: int
    segment_allocs: int  # cudaMalloc calls (0 with expandable segments)
    segment_maps: int  # page mappings of expandable segments
    segment_frees: int  # cudaFree calls made to retry or to collect garbage
    alloc_retries: int  # reservations that failed once under the limit, then were retried
    ooms: int  # requests that could not be served under the limit
    first_oom_request_bytes: int  # 0 when none


def round_size(size: int) -> int:
    if size < MIN_BLOCK_BYTES:
        return MIN_BLOCK_BYTES
    return -(-size // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def allocation_size(size: int) -> int:
    """The segment ``cudaMalloc`` reserves for a rounded request no free block fits."""
    if size <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return -(-size // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


class _Block:
    __slots__ = ("addr", "free", "freed_at", "key", "next", "prev", "segment", "size")

    def __init__(self, addr: int, size: int, segment: _Segment) -> None:
        self.addr = addr
        self.size = size
        self.segment = segment
        self.prev: _Block | None = None
        self.next: _Block | None = None
        self.free = True
        self.freed_at = 0
        self.key = 0


class _Segment:
    __slots__ = ("expandable", "mapped", "pool", "size", "stream")

    def __init__(self, pool: _Pool, stream: int, size: int, expandable: bool) -> None:
        self.pool = pool
        self.stream = stream
        self.size = size
        self.mapped = size
        self.expandable = expandable


# A free block's place in its pool: (size, addr) as one int, which sorts and compares faster
# than a tuple (the replay spends most of its time keeping pools sorted).
_KEY_SHIFT = 64


class _Pool:
    """The free blocks of one pool (small or large) on one stream, sorted by (size, addr)."""

    __slots__ = ("blocks", "keys", "small")

    def __init__(self, small: bool) -> None:
        self.small = small
        self.keys: list[int] = []
        self.blocks: dict[int, _Block] = {}

    def add(self, block: _Block) -> None:
        key = block.key = block.size << _KEY_SHIFT | block.addr
        insort(self.keys, key)
        self.blocks[key] = block

    def remove(self, block: _Block) -> None:
        del self.keys[bisect_left(self.keys, block.key)]
        del self.blocks[block.key]


class Simulator:
    """The allocator's state: pools, segments and live blocks, driven by ``malloc``/``free``."""

    def __init__(self, settings: AllocatorSettings) -> None:
        self.s = settings
        self.max_split = settings.max_split_bytes or NO_LIMIT
        self.limit = settings.limit_bytes or NO_LIMIT
        self.pools: dict[tuple[bool, int], _Pool] = {}
        self.small_pools: dict[int, _Pool] = {}  # the same pools by stream, for the hot path
        self.large_pools: dict[int, _Pool] = {}
        self.expandable: dict[tuple[bool, int], _Segment] = {}
        self.tails: dict[int, _Block] = {}  # id(expandable segment) -> its last block
        self.next_addr = 0
        self.clock = 0
        self.reserved = 0
        self.allocated = 0
        self.peak_reserved = 0
        self.peak_allocated = 0
        self.segment_allocs = 0
        self.segment_maps = 0
        self.segment_frees = 0
        self.retries = 0
        self.ooms = 0
        self.first_oom = 0

    # -- requests -------------------------------------------------------------------------

    def malloc(self, size: int, stream: int) -> _Block | None:
        """The block serving a request, or None when it cannot be served under the limit."""
        # Called for every request of the trace: the rounding, the pool, the best fit and the
        # split are written out here rather than called.
        self.clock += 1
        size = (
            MIN_BLOCK_BYTES
            if size < MIN_BLOCK_BYTES
            else -(-size // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES
        )
        small = size <= SMALL_SIZE_BYTES
        pool = (self.small_pools if small else self.large_pools).get(stream)
        if pool is None:
            pool = self._pool(small, stream)
        keys = pool.keys
        at = bisect_left(keys, size << _KEY_SHIFT)
        block = pool.blocks[keys[at]] if at < len(keys) else None
        if block is not None and self.max_split < NO_LIMIT:
            block = self._fits_split_rule(block, size)
        if block is None:
            block = self._grow(pool, small, stream, size)
            if block is None:
                self.ooms += 1
                if not self.first_oom:
                    self.first_oom = size
                return None
        else:
            del keys[at]
            del pool.blocks[block.key]
        remaining = block.size - size
        segment = block.segment
        if (
            remaining >= MIN_BLOCK_BYTES
            if small or segment.expandable
            else size < self.max_split and remaining > SMALL_SIZE_BYTES
        ):
            rest = _Block(block.addr + size, remaining, segment)
            after = block.next
            rest.prev, rest.next = block, after
            if after is not None:
                after.prev = rest
            block.next = rest
            block.size = size
            if segment.expandable and self.tails.get(id(segment)) is block:
                self.tails[id(segment)] = rest
            pool.add(rest)
        block.free = False
        self.allocated += block.size
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
        return block

    def free(self, block: _Block) -> None:
        self.clock += 1
        self.allocated -= block.size
        block.free = True
        block.freed_at = self.clock
        pool = block.segment.pool
        before, after = block.prev, block.next
        if before is not None and before.free:
            pool.remove(before)
            self._merge(block, before)
        if after is not None and after.free:
            pool.remove(after)
            self._merge(block, after)
        pool.add(block)

    def seed(
        self, segments: list[tuple[int, int, int, bool]], blocks: list[tuple[int, int]]
    ) -> dict[int, _Block]:
        """Start from the segments that existed before the trace began (address, size, stream,
        small pool) holding the blocks allocated before it (address, size) at their recorded
        addresses: a history cut short by ``max_entries`` starts in the middle of a run, with
        memory already reserved and split. They were not reserved by this replay: they count
        in reserved memory, not in the ``cudaMalloc`` calls. Returns the seeded blocks by address."""
        live: dict[int, _Block] = {}
        held = sorted(blocks)
        for addr, size, stream, small in sorted(segments):
            pool = self._pool(small, stream)
            segment = _Segment(pool, stream, size, expandable=False)
            self.reserved += size
            tail: _Block | None = _Block(addr, size, segment)
            pieces: list[_Block] = []
            start = bisect_left(held, (addr, -1))
            for block_addr, block_size in held[start:]:
                if tail is None or block_addr + block_size > addr + size:
                    break
                if block_addr < tail.addr:
                    continue  # overlaps a block already placed: not a layout this replay knows
                if block_addr > tail.addr:
                    gap = _Block(tail.addr, block_addr - tail.addr, segment)
                    pieces.append(gap)
                used = _Block(block_addr, block_size, segment)
                used.free = False
                pieces.append(used)
                live[block_addr] = used
                self.allocated += block_size
                end = block_addr + block_size
                tail = _Block(end, addr + size - end, segment) if end < addr + size else None
            if tail is not None:
                pieces.append(tail)
            for left, right in itertools.pairwise(pieces):
                left.next, right.prev = right, left
            for piece in pieces:
                if piece.free:
                    pool.add(piece)
            self.next_addr = max(self.next_addr, addr + size)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return live

    # -- decisions ------------------------------------------------------------------------

    def _best_fit(self, pool: _Pool, size: int) -> _Block | None:
        at = bisect_left(pool.keys, size << _KEY_SHIFT)
        if at == len(pool.keys):
            return None
        block = pool.blocks[pool.keys[at]]
        return block if self.max_split >= NO_LIMIT else self._fits_split_rule(block, size)

    def _fits_split_rule(self, block: _Block, size: int) -> _Block | None:
        # An oversize block is not split for a small request, and is rounded up to serve a
        # big one only within 20 MiB.
        if size < self.max_split and block.size >= self.max_split:
            return None
        if size >= self.max_split and block.size >= size + LARGE_BUFFER_BYTES:
            return None
        return block

    def _grow(self, pool: _Pool, small: bool, stream: int, size: int) -> _Block | None:
        """A new segment (or more pages of the expandable one) holding a free block that fits."""
        if self.s.garbage_collection_threshold and self.limit < NO_LIMIT:
            self._collect_garbage()
        for attempt in range(3):
            if self.s.expandable_segments:
                block = self._expand(pool, small, stream, size)
            else:
                block = self._new_segment(pool, small, stream, allocation_size(size))
            if block is not None:
                return block
            if attempt == 0:
                self.retries += 1
                if not self._release_oversize(pool, size):
                    continue
            elif attempt == 1:
                self._release_all()
            # Whatever was freed may have made room for the next attempt.
        return None

    def _reserve(self, nbytes: int) -> bool:
        if self.reserved + nbytes > self.limit:
            return False
        self.reserved += nbytes
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved
        return True

    def _new_segment(self, pool: _Pool, small: bool, stream: int, nbytes: int) -> _Block | None:
        if not self._reserve(nbytes):
            return None
        self.segment_allocs += 1
        segment = _Segment(pool, stream, nbytes, expandable=False)
        block = _Block(self.next_addr, nbytes, segment)
        self.next_addr += nbytes
        return block

    def _expand(self, pool: _Pool, small: bool, stream: int, size: int) -> _Block | None:
        page = SMALL_BUFFER_BYTES if small else LARGE_BUFFER_BYTES
        segment = self.expandable.get((small, stream))
        if segment is None:
            segment = _Segment(pool, stream, 0, expandable=True)
            segment.mapped = 0
            self.expandable[(small, stream)] = segment
            # Each expandable segment has its own address range, far from the others.
            base = self.next_addr
            self.next_addr += 1 << 48
            tail = _Block(base, 0, segment)
            self.tails[id(segment)] = tail
        tail = self.tails[id(segment)]
        have = tail.size if tail.free else 0
        need = -(-(size - have) // page) * page
        if not self._reserve(need):
            return None
        self.segment_maps += 1
        segment.mapped += need
        segment.size = segment.mapped
        if tail.free and tail.size:
            pool.remove(tail)
            tail.size += need
            return tail
        grown = _Block(tail.addr + tail.size, need, segment)
        if tail.size:
            grown.prev, tail.next = tail, grown
        self.tails[id(segment)] = grown
        return grown

    def _merge(self, block: _Block, other: _Block) -> None:
        if other is block.prev:
            block.addr = other.addr
            block.prev = other.prev
            if other.prev is not None:
                other.prev.next = block
        else:
            block.next = other.next
            if other.next is not None:
                other.next.prev = block
            if block.segment.expandable and self.tails.get(id(block.segment)) is other:
                self.tails[id(block.segment)] = block
        block.size += other.size

    # -- giving memory back ---------------------------------------------------------------

    def _whole_free(self) -> list[_Block]:
        return [
            b
            for pool in self.pools.values()
            for b in pool.blocks.values()
            if b.prev is None and b.next is None and not b.segment.expandable
        ]

    def _release(self, block: _Block) -> None:
        block.segment.pool.remove(block)
        self.reserved -= block.size
        self.segment_frees += 1

    def _release_oversize(self, pool: _Pool, size: int) -> bool:
        """``release_available_cached_blocks``: only with ``max_split_size``, the smallest
        whole free oversize block that fits, else oversize ones from the largest down."""
        if self.max_split >= NO_LIMIT:
            return False
        wanted = max(size, self.max_split)
        whole = sorted(
            (b for b in pool.blocks.values() if b.prev is None and b.next is None),
            key=lambda b: b.size,
        )
        fits = [b for b in whole if b.size >= wanted]
        if fits:
            self._release(fits[0])
            return True
        released = 0
        for block in reversed(whole):
            if block.size < self.max_split or released >= size:
                break
            self._release(block)
            released += block.size
        return released >= size

    def _release_all(self) -> None:
        for block in self._whole_free():
            self._release(block)
        self._unmap_tails()

    def _unmap_tails(self) -> None:
        for segment in self.expandable.values():
            tail = self.tails[id(segment)]
            if tail.free and tail.size:
                page = SMALL_BUFFER_BYTES if segment.pool.small else LARGE_BUFFER_BYTES
                unmapped = tail.size // page * page
                if unmapped:
                    segment.pool.remove(tail)
                    tail.size -= unmapped
                    segment.mapped -= unmapped
                    self.reserved -= unmapped
                    if tail.size:
                        segment.pool.add(tail)

    def _collect_garbage(self) -> None:
        threshold = (self.s.garbage_collection_threshold or 0.0) * self.limit
        if self.reserved <= threshold:
            return
        for block in sorted(self._whole_free(), key=lambda b: b.freed_at):
            if self.reserved <= threshold:
                break
            self._release(block)

    def _pool(self, small: bool, stream: int) -> _Pool:
        pool = self.pools.get((small, stream))
        if pool is None:
            pool = self.pools[(small, stream)] = _Pool(small)
            (self.small_pools if small else self.large_pools)[stream] = pool
        return pool

    def result(self) -> SimulatedRun:
        return SimulatedRun(
            settings=self.s,
            peak_reserved_bytes=self.peak_reserved,
            peak_allocated_bytes=self.peak_allocated,
            end_reserved_bytes=self.reserved,
            segment_allocs=self.segment_allocs,
            segment_maps=self.segment_maps,
            segment_frees=self.segment_frees,
            alloc_retries=self.retries,
            ooms=self.ooms,
            first_oom_request_bytes=self.first_oom,
        )
