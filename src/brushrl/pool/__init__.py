"""Reference pools: versioned folders of human-rated paintings in tiers (``love``, ``good``,
``reject``, ``unrated``) that scorers compare against; built, rated, checked and exported with
``brushrl pool`` (docs/pool.md)."""

from brushrl.pool.store import (
    TIERS, PoolEntry, PoolError, PoolMeta, PoolProblem, PoolRow, PoolWriter, ReferencePool, init_pool, new_version,
)

__all__ = [
    "TIERS", "PoolEntry", "PoolError", "PoolMeta", "PoolProblem", "PoolRow", "PoolWriter", "ReferencePool",
    "init_pool", "new_version",
]
