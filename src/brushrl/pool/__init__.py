"""Reference pools: human-rated paintings in tiers (``love``, ``good``) that scorers compare against."""

from brushrl.pool.store import PoolEntry, PoolError, ReferencePool

__all__ = ["PoolEntry", "PoolError", "ReferencePool"]
