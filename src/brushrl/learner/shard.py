"""Split one learner step's samples over data-parallel workers, balancing tokens.

Every worker computes the same split from the same full batch (no communication), so each knows
its own shard and how many micro-batches the others run.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence


def shard_by_tokens(tokens: Sequence[int], workers: int) -> list[list[int]]:
    """Indices of ``tokens`` per worker, longest first to the least-loaded worker (LPT greedy,
    Graham 1969), at most ``ceil(len / workers)`` samples each so that micro-batch counts stay within
    one of each other.

    Args:
        tokens: cost of each sample (prompt + completion tokens), length B.
        workers: number of shards W >= 1.

    Returns:
        W lists of indices into ``tokens``, each ascending; together a partition of ``range(B)``.
        Deterministic: ties go to the lower index / lower rank. Shards are empty when B < W.

    Raises:
        ValueError: ``workers`` < 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, not {workers}")
    cap = math.ceil(len(tokens) / workers) if tokens else 0
    heap = [(0, rank) for rank in range(workers)]  # (tokens so far, rank)
    shards: list[list[int]] = [[] for _ in range(workers)]
    for i in sorted(range(len(tokens)), key=lambda i: (-tokens[i], i)):
        load, rank = heapq.heappop(heap)
        shards[rank].append(i)
        if len(shards[rank]) < cap:  # a full worker leaves the heap
            heapq.heappush(heap, (load + tokens[i], rank))
    return [sorted(s) for s in shards]


def micro_batch_count(shards: Sequence[Sequence[int]], micro_batch_size: int) -> int:
    """Micro-batches every worker runs: the most any shard needs, at least 1. Workers with fewer
    real ones run zero-weight micro-batches, because ZeRO's collectives (gradient reduce-scatter,
    ZeRO-3 weight gathers) and TRL's metric gathers need the same calls on every rank."""
    return max(1, max(math.ceil(len(s) / micro_batch_size) for s in shards))
