"""The prefix cache: KV blocks of earlier prompts and outputs, kept in HBM and in slower
tiers below it (CPU memory, local SSD), looked up by prefix, evicted least recently used.

Blocks and chains. A block is `block_tokens` consecutive tokens whose KV depends on the
whole prefix before it, so a hit is always a prefix of the prompt (vLLM's automatic prefix
caching hashes each block together with its parent's hash; SGLang's radix tree is the same
idea). Prompts are described as runs over *chains*: a chain is a path of blocks that no
request leaves except by ending (a session's conversation; one hash id of a hash-id trace
where the ids branch), and a request covers a prefix of each chain it passes through
(`core.sessions` builds them). The cache therefore holds, per chain, a prefix of it, and
per tier a contiguous range of that prefix: HBM the head, CPU the next blocks, SSD the
tail.

LRU, exactly, at block granularity. Every use of a prompt touches its blocks tail first,
so within a chain the head is the most recent and the least recent block of the whole
cache is always the tail of some chain (vLLM frees a request's blocks in reverse order
for the same reason). A touch stamps a chain prefix with one clock value; a chain keeps
its stamps as a short stack of segments, and each tier keeps a heap of its chains' tail
stamps, so a touch is O(log chains) and evicting k blocks is O(segments emptied), not
O(blocks). Tiers are exclusive: a block evicted from HBM moves to the CPU tier (an
offload: LMCache, Dynamo KVBM), from the CPU tier to SSD, and from SSD it is dropped; a
hit in a lower tier is loaded back into HBM. Each tier stays LRU-ordered by the blocks'
last touch, so with fixed capacities the tiers are one LRU stack cut at their sizes, and
more capacity in any tier never lowers the hit count of a fixed sequence of requests
(LRU's inclusion property; `replay_hits` replays one).

Memory is linear in the cached blocks: a chain whose last block is dropped is forgotten,
and each tier's heap holds at most one entry per chain.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from rooftui.core.errors import SpecError

TIERS = ("hbm", "cpu", "ssd")
POLICIES = ("lru", "none")

# Host-link bandwidth per direction (GB/s = 1e9 B/s) between a GPU and its host's memory,
# by shipped GPU spec: the theoretical peak of the link named, as the rest of the specs
# give datasheet peaks. PCIe 5.0 x16: 32 GT/s x 16 lanes with 128b/130b coding = 63 GB/s
# (PCI-SIG PCIe 5.0 specification); PCIe 4.0 x16 half that. NVLink-C2C: 900 GB/s
# bidirectional (NVIDIA GB200 NVL72 and Grace Hopper datasheets), 450 per direction.
HOST_LINK_GBS = {
    **dict.fromkeys(("a100-40gb", "a100-80gb", "l40s", "l4", "rtx-4090"), 31.5),  # PCIe 4.0 x16
    **dict.fromkeys(("h100-sxm", "h100-pcie", "h100-nvl", "h200", "b200", "mi300x",
                     "mi325x", "mi355x", "gaudi3"), 63.0),  # PCIe 5.0 x16
    "gb200": 450.0,  # NVLink-C2C to the Grace CPU's memory
}
HOST_LINK_SOURCES = ("PCIe 4.0/5.0 x16 at 16/32 GT/s per lane, 128b/130b (PCI-SIG); "
                     "NVLink-C2C 900 GB/s bidirectional (NVIDIA GB200 NVL72 datasheet)")
# One datacenter NVMe drive per GPU, sequential read: Samsung PM9A3 (PCIe 4.0) datasheet,
# 6,900 MB/s. A read from SSD into HBM also crosses the host link; the slower one binds.
SSD_READ_GBS = 6.9


@dataclass(frozen=True)
class Tier:
    name: str
    capacity_blocks: float  # math.inf: no limit of its own (HBM: what the batch leaves)
    bandwidth: float  # bytes/s from this tier into HBM (HBM itself: 0, no transfer)


@dataclass(frozen=True)
class CacheConfig:
    """What `--prefix-cache lru` and the tier options set. Capacities are GB (1e9 B) of KV
    per GPU; None for HBM means all the KV memory the running batch leaves free."""

    policy: str = "lru"
    hbm_gb: float | None = None
    cpu_gb: float = 0.0
    ssd_gb: float = 0.0
    cpu_bandwidth_gbs: float | None = None  # None: HOST_LINK_GBS of the GPU
    ssd_bandwidth_gbs: float = SSD_READ_GBS

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise SpecError(f"unknown prefix-cache policy {self.policy!r}: expected "
                            f"{', '.join(POLICIES)}")

    @property
    def enabled(self) -> bool:
        return self.policy != "none"

    def host_link_gbs(self, gpu_key: str) -> float:
        """The CPU tier's bandwidth: the option, else the GPU's host link."""
        if self.cpu_bandwidth_gbs is not None:
            return self.cpu_bandwidth_gbs
        if gpu_key not in HOST_LINK_GBS:
            raise SpecError(f"no host-link bandwidth is known for GPU {gpu_key!r}: give "
                            "--cpu-tier-bandwidth-gbs")
        return HOST_LINK_GBS[gpu_key]

    def tiers(self, block_bytes: float, gpu_key: str) -> tuple[Tier, ...]:
        """HBM, then the CPU and SSD tiers that have capacity; blocks of `block_bytes`."""
        hbm = math.inf if self.hbm_gb is None else math.floor(self.hbm_gb * 1e9 / block_bytes)
        tiers = [Tier("hbm", hbm, 0.0)]
        if self.cpu_gb > 0:
            tiers.append(Tier("cpu", math.floor(self.cpu_gb * 1e9 / block_bytes),
                              self.host_link_gbs(gpu_key) * 1e9))
        if self.ssd_gb > 0:
            tiers.append(Tier("ssd", math.floor(self.ssd_gb * 1e9 / block_bytes),
                              min(self.ssd_bandwidth_gbs, self.host_link_gbs(gpu_key)) * 1e9))
        return tuple(tiers)


class PrefixCache:
    """Chains' cached prefixes in tiers, LRU (see the module doc). Block counts only: what
    a block costs in bytes and time is the caller's."""

    def __init__(self, capacities: list[float]) -> None:
        self.capacity = list(capacities)  # blocks per tier; HBM's may change every step
        self.tiers = len(capacities)
        self.ends: dict[int, list[int]] = {}  # chain -> cumulative end block of each tier
        # chain -> [[end, stamp], ...] from the tail segment (oldest) to the head (newest)
        self.segments: dict[int, list[list[int]]] = {}
        self.size = [0] * self.tiers
        # per tier, (stamp, chain) with at most one entry per chain (those in `queued`):
        # an entry's stamp is at most the chain's tail stamp there, and is corrected
        # when it comes up, so the heaps stay as large as the chains
        self.heaps: list[list[tuple[int, int]]] = [[] for _ in capacities]
        self.queued: list[set[int]] = [set() for _ in capacities]
        self.clock = 0
        self.evicted = 0  # blocks dropped from the last tier

    @property
    def cached_blocks(self) -> int:
        return sum(self.size)

    def lookup(self, runs) -> list[int]:
        """Blocks of the prefix `runs` [(chain, blocks), ...] cached, per tier; stops at the
        first block not cached. Changes nothing."""
        hit = [0] * self.tiers
        ends = self.ends
        for chain, blocks in runs:
            chain_ends = ends.get(chain)
            if chain_ends is None:
                break
            start = 0
            for tier, end in enumerate(chain_ends):
                here = min(end, blocks) - start
                if here > 0:
                    hit[tier] += here
                    start += here
            if start < blocks:
                break
        return hit

    def touch(self, runs) -> None:
        """Use the prefix `runs` now: its blocks become the most recent, in HBM (lower
        tiers' blocks are loaded back, missing ones inserted), tail first."""
        for chain, blocks in reversed(runs):
            if blocks > 0:
                self._touch_chain(chain, blocks)

    def _touch_chain(self, chain: int, blocks: int) -> None:
        self.clock += 1
        stamp = self.clock
        segments = self.segments.get(chain)
        size = self.size
        if segments is None:
            self.segments[chain] = [[blocks, stamp]]
            self.ends[chain] = [blocks] * self.tiers
            size[0] += blocks
            self._queue(0, stamp, chain)
            return
        ends = self.ends[chain]
        if blocks >= ends[-1]:  # all it caches and maybe more: one segment, all in HBM
            size[0] += blocks - ends[0]
            for tier in range(1, self.tiers):
                size[tier] -= ends[tier] - ends[tier - 1]
            segments[:] = [[blocks, stamp]]
            ends[:] = [blocks] * self.tiers
            self._queue(0, stamp, chain)
            return
        while segments[-1][0] <= blocks:  # a segment past `blocks` remains
            segments.pop()
        segments.append([blocks, stamp])
        before = 0
        for tier in range(self.tiers):  # each tier's range [before, end) loses [.., blocks)
            count = ends[tier] - before
            before = ends[tier]
            if ends[tier] < blocks:
                ends[tier] = blocks
            size[tier] += (ends[tier] - (ends[tier - 1] if tier else 0)) - count
        if ends[0] == blocks:  # the HBM tail is now the touched block
            self._queue(0, stamp, chain)

    def _queue(self, tier: int, stamp: int, chain: int) -> None:
        """Make sure `chain` has an entry in `tier`'s heap (an older one stays: it is
        corrected when it comes up)."""
        queued = self.queued[tier]
        if chain not in queued:
            queued.add(chain)
            heapq.heappush(self.heaps[tier], (stamp, chain))

    def fit(self) -> None:
        """Evict, least recent first, until every tier holds at most its capacity."""
        for tier in range(self.tiers):
            if self.size[tier] > self.capacity[tier]:
                self._evict(tier)

    def _evict(self, tier: int) -> None:
        heap, last, size = self.heaps[tier], tier == self.tiers - 1, self.size
        queued = self.queued[tier]
        all_ends, all_segments = self.ends, self.segments
        pop, push = heapq.heappop, heapq.heappush
        capacity = int(self.capacity[tier])
        while size[tier] > capacity:
            stamp, chain = pop(heap)
            ends = all_ends.get(chain)
            if ends is None:
                queued.discard(chain)
                continue  # dropped since
            start, end = (ends[tier - 1] if tier else 0), ends[tier]
            if end <= start:
                queued.discard(chain)
                continue  # nothing of it left in this tier
            segments = all_segments[chain]
            index = len(segments) - 1  # from the head: the segment holding block end - 1
            while segments[index][0] < end:
                index -= 1
            if segments[index][1] != stamp:  # touched since: queue it at its tail stamp
                push(heap, (segments[index][1], chain))
                continue
            # this segment's blocks in this tier: down to the next newer segment's end
            newer = segments[index + 1] if index + 1 < len(segments) else None
            floor = newer[0] if newer is not None and newer[0] > start else start
            movable = end - floor
            excess = size[tier] - capacity
            moved = movable if movable < excess else excess
            ends[tier] = end - moved
            size[tier] -= moved
            if last:
                self.evicted += moved
                self._drop_tail(chain)
            else:
                self._queue(tier + 1, stamp, chain)
                size[tier + 1] += moved
            if moved < movable:
                push(heap, (stamp, chain))  # the rest of the segment stays
            elif floor > start:  # the next newer segment is this tier's tail now
                push(heap, (newer[1], chain))
            else:
                queued.discard(chain)

    def _drop_tail(self, chain: int) -> None:
        """Forget the segments past the chain's last cached block, and the chain when none."""
        ends = self.ends[chain]
        cached = ends[-1]
        if cached == 0:
            del self.ends[chain], self.segments[chain]
            return
        segments = self.segments[chain]
        while len(segments) > 1 and segments[1][0] >= cached:
            segments.pop(0)
        segments[0][0] = cached
        for tier in range(self.tiers):
            ends[tier] = min(ends[tier], cached)


def replay_hits(runs, capacities: list[float]) -> list[list[int]]:
    """Per request, the blocks found in each tier when `runs` (one list of (chain, blocks)
    per request, in order) are looked up and then touched one after another: the trace
    order replay, with no timing."""
    cache = PrefixCache(capacities)
    hits = []
    for request_runs in runs:
        hits.append(cache.lookup(request_runs))
        cache.touch(request_runs)
        cache.fit()
    return hits


class ServingCache:
    """The prefix cache as the simulator uses it: per request, a lookup priced in tokens
    and load seconds, and statistics.

    HBM's share is the KV memory the running batch leaves free (capped by `hbm_gb`); the
    running batch holds its requests' whole KV, hit blocks included, as if copied out of
    the cache (an engine shares them, so this cache is smaller than an engine's by the
    running requests' hit blocks: a conservative choice). A request's blocks enter the
    cache when it finishes (vLLM frees them into its LRU then); another request can hit
    them only after that. A hit in a lower tier is loaded into HBM over that tier's
    bandwidth during the step that admits the request; the step's layers overlap those
    loads with compute (LMCache's layer-wise pipelining), so the step lasts max(compute,
    loads). Offloads (HBM to CPU, CPU to SSD) use the other direction of the link and
    cost no step time.
    """

    def __init__(self, config: CacheConfig, blocks, input_tokens: list[int],
                 kv_bytes_per_token: float, gpu_key: str) -> None:
        self.blocks = blocks
        self.block_tokens = int(blocks.block_tokens)
        self.block_bytes = self.block_tokens * float(kv_bytes_per_token)
        self.tiers = config.tiers(self.block_bytes, gpu_key)
        self.hbm_limit = self.tiers[0].capacity_blocks
        self.cache = PrefixCache([tier.capacity_blocks for tier in self.tiers])
        self.load_s_per_block = [self.block_bytes / tier.bandwidth if tier.bandwidth else 0.0
                                 for tier in self.tiers]
        self.input_tokens = input_tokens
        self.cached_tokens = [0] * len(self.tiers)  # over all admissions
        self.prompt_tokens = 0
        self.load_s = 0.0
        self.peak_blocks = 0
        self._last: tuple[int, list[int], int] | None = None

    def lookup(self, request: int, prompt_tokens: int) -> int:
        """Cached tokens of `request`'s prompt (prompt_tokens: with recomputed outputs)."""
        hit = self.cache.lookup(self.blocks.prompt_runs[request])
        blocks = sum(hit)
        cached = self.blocks.hit_tokens(blocks, prompt_tokens, self.input_tokens[request]) \
            if blocks else 0
        self._last = (request, hit, cached)
        return cached

    def admit(self, request: int, prompt_tokens: int) -> float:
        """`request` (just looked up) is admitted: count its hit, touch it; load seconds."""
        looked, hit, cached = self._last
        assert looked == request, "admit follows the lookup of the same request"
        self.prompt_tokens += prompt_tokens
        if not cached:
            return 0.0
        load = 0.0
        left = cached  # tokens by tier, head first (the cap falls on the deepest tier)
        for tier, blocks in enumerate(hit):
            tokens = min(blocks * self.block_tokens, left)
            left -= tokens
            self.cached_tokens[tier] += tokens
            if tier and tokens:
                load += -(-tokens // self.block_tokens) * self.load_s_per_block[tier]
        runs, remaining, used = self.blocks.prompt_runs[request], sum(hit), []
        for chain, blocks in runs:
            if remaining <= 0:
                break
            used.append((chain, min(blocks, remaining)))
            remaining -= blocks
        self.cache.touch(used)
        self.load_s += load
        return load

    def finish(self, request: int, free_tokens: int) -> None:
        """`request`'s last token, `free_tokens` of KV now free: its blocks enter the
        cache (the only time it grows)."""
        cache = self.cache
        cache.touch(self.blocks.finish_runs[request])
        self.fit(free_tokens)
        blocks = sum(cache.size)
        if blocks > self.peak_blocks:
            self.peak_blocks = blocks

    def fit(self, free_tokens: int) -> None:
        """HBM holds at most the free KV (and the limit); evict down to it."""
        cache = self.cache
        free_blocks = free_tokens // self.block_tokens
        cache.capacity[0] = free_blocks if free_blocks < self.hbm_limit else self.hbm_limit
        if cache.size[0] > cache.capacity[0]:  # lower tiers grow only by its evictions
            cache.fit()

    def summary(self, load_stall_s: float) -> dict:
        """The `prefix_cache` statistics of `sweep simulate --json` (without the
        comparison run)."""
        cached = sum(self.cached_tokens)
        prompt = self.prompt_tokens
        names = [tier.name for tier in self.tiers]
        by_tier = dict.fromkeys(TIERS, 0)
        by_tier.update(zip(names, self.cached_tokens, strict=True))
        return {
            "block_tokens": self.block_tokens,
            "hit_rate": cached / prompt if prompt else 0.0,
            "hit_rate_by_tier": {name: value / prompt if prompt else 0.0
                                 for name, value in by_tier.items()},
            "cached_prefill_tokens": cached,
            "computed_prefill_tokens": prompt - cached,
            "cached_prefill_tokens_by_tier": by_tier,
            "load_s": self.load_s,
            "load_stall_s": load_stall_s,
            "evicted_blocks": self.cache.evicted,
            "peak_cached_blocks": self.peak_blocks,
            "tiers": {tier.name: {
                "capacity_gb": None if not math.isfinite(tier.capacity_blocks)
                else tier.capacity_blocks * self.block_bytes / 1e9,
                "bandwidth_gbs": tier.bandwidth / 1e9 if tier.bandwidth else None}
                for tier in self.tiers},
        }
