"""Split one learner step's samples over data-parallel workers, balancing tokens.

Every worker computes the same split from the same full batch (no communication), so each knows
its own shard and the micro-batch shapes the others run.
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


def micro_batch_sizes(shards: Sequence[Sequence[int]], micro_batch_size: int) -> list[int]:
    """Rows of each micro-batch, the same on every rank: micro-batch k takes the next up to
    ``micro_batch_size`` samples of each shard and has as many rows as the fullest shard puts there
    (at least 1). A rank with fewer samples there fills its rows with masked-out padding. Every rank
    must run the same micro-batches with the same row counts: ZeRO's collectives (gradient
    reduce-scatter, ZeRO-3 weight gathers) run per forward/backward, and TRL's loss gathers
    per-sequence metrics with ``accelerator.gather``, which needs equal shapes on all ranks.

    Returns:
        Row counts ``b_k``, one per micro-batch (one micro-batch of 1 row when every shard is empty).
    """
    longest = max(len(s) for s in shards)
    return [max(1, min(micro_batch_size, longest - k * micro_batch_size))
            for k in range(max(1, math.ceil(longest / micro_batch_size)))]
