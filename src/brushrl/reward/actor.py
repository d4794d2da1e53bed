"""The CPU pool scorer as a Ray actor, so a scorer failure is isolated and becomes None."""

from __future__ import annotations

import ray

from brushrl.config import PoolScorerConfig
from brushrl.plan.resources import SCORER_NUM_CPUS
from brushrl.pool import ReferencePool
from brushrl.reward.pool_scorer import PoolSimilarityScorer


class PoolScorerActor:
    """Loads the reference pool once and scores batches of PNGs against chosen references."""

    def __init__(self, cfg: PoolScorerConfig):
        pool = ReferencePool(cfg.path)
        self.scorer = PoolSimilarityScorer(pool.entries, cfg.tiers)

    def score_many(self, pngs: list[bytes], ref_ids: list[str]) -> list[float | None]:
        """See ``PoolSimilarityScorer.score_many``."""
        return self.scorer.score_many(pngs, ref_ids)


def make_scorer_actor(cfg: PoolScorerConfig, num_cpus: float = SCORER_NUM_CPUS, placement=None):
    """Start a ``PoolScorerActor`` (restarted by Ray if it dies) with ``num_cpus`` logical CPUs and
    what ``placement`` (a ``config.ActorPlacement``, e.g. ``cfg.resources.scorer``) asks for."""
    from brushrl.plan.resources import ray_options

    options = ray_options(placement) if placement is not None else {}
    return ray.remote(num_cpus=num_cpus, max_restarts=-1, max_task_retries=1, **options)(PoolScorerActor).remote(cfg)
