"""Scorer actors: each scorer runs in its own Ray actor, so a scorer failure is isolated and
becomes None for its samples. Every actor implements ``GroupScorer.score_group``."""

from __future__ import annotations

from typing import Sequence

import ray

from brushrl.config import ActorPlacement, JudgeConfig, PoolScorerConfig, RewardConfig
from brushrl.plan.resources import SCORER_NUM_CPUS
from brushrl.pool import ReferencePool
from brushrl.reward.base import ScoreOut
from brushrl.reward.pool_scorer import PoolSimilarityScorer


class PoolScorerActor:
    """Loads the reference pool once and scores batches of PNGs against chosen references."""

    def __init__(self, cfg: PoolScorerConfig):
        self.cfg = cfg
        self.pool = ReferencePool(cfg.path)
        self.scorer = PoolSimilarityScorer(self.pool.entries, cfg.tiers, cfg.copy_min_corr)

    def score_many(self, pngs: list[bytes], ref_ids: list[str]) -> list[tuple[float, dict[str, float]] | None]:
        """See ``PoolSimilarityScorer.score_many``."""
        return self.scorer.score_many(pngs, ref_ids)

    def score_group(self, pngs: Sequence[bytes], prompt: str, seed: int) -> list[ScoreOut]:
        """``GroupScorer``: against the pool images of the prompt's subject
        (``PoolSimilarityScorer.subject_references``), else ``refs_per_tier`` per tier drawn with the
        group seed; raw = the score's terms (palette, shape, composition, coverage, layering, copy)."""
        refs = self.scorer.subject_references(prompt) or [
            e.id for e in self.pool.sample(list(self.cfg.tiers), self.cfg.refs_per_tier, seed)]
        return [ScoreOut(v[0], v[1]) if v is not None else ScoreOut(None, cause="bad_image")
                for v in self.score_many(list(pngs), refs)]


class JudgeActor:
    """The pairwise judge (``brushrl.reward.judge``) behind ``GroupScorer``.

    Args:
        judge: the judge config. pool_path: the reference pool folder.
    """

    def __init__(self, judge: JudgeConfig, pool_path: str, backend=None):
        from brushrl.reward.judge import PairwiseJudge, make_backend

        self.judge = PairwiseJudge(ReferencePool(pool_path), backend or make_backend(judge), judge)

    def resume_curriculum(self, stage: int) -> int:
        """Bring the reference curriculum to a resumed run's ``stage``
        (:meth:`brushrl.reward.judge.ReferenceCurriculum.resume`); returns the stage now."""
        return self.judge.curriculum.resume(stage)

    def score_group(self, pngs: Sequence[bytes], prompt: str, seed: int) -> list[ScoreOut]:
        """``GroupScorer``: value = judge score; raw = {resolved, dropped, ``dropped:<cause>`` per
        cause of a dropped comparison's failed order, curriculum_stage}; None when no comparison
        resolved (cause: the commonest failure, e.g. ``timeout``)."""
        out = []
        for r in self.judge.score_many(pngs, seed):
            raw = {"resolved": float(r.resolved), "dropped": float(sum(r.dropped.values())),
                   "curriculum_stage": float(r.stage),
                   **{f"dropped:{cause}": float(n) for cause, n in sorted(r.dropped.items())}}
            if r.score is None:
                cause = r.dropped.most_common(1)[0][0] if r.dropped else "no_comparison"
                out.append(ScoreOut(None, raw, cause))
            else:
                out.append(ScoreOut(r.score, raw))
        return out


def make_scorer_actor(cfg: PoolScorerConfig, num_cpus: float = SCORER_NUM_CPUS, placement: ActorPlacement | None = None):
    """Start a ``PoolScorerActor`` (restarted by Ray if it dies) with ``num_cpus`` logical CPUs and
    what ``placement`` (e.g. ``cfg.resources.scorer``) asks for."""
    from brushrl.plan.resources import ray_options

    options = ray_options(placement) if placement is not None else {}
    return ray.remote(num_cpus=num_cpus, max_restarts=-1, max_task_retries=1, **options)(PoolScorerActor).remote(cfg)


def make_scorer_actors(cfg: RewardConfig, placement: ActorPlacement | None = None) -> dict:
    """One actor per weighted scorer component (``cfg.scorers``): name -> actor handle.

    ``pool_similarity``: CPU; ``judge``: ``judge.num_gpus`` (in-process backend) or a light client
    (endpoint backend); ``hpsv3``: its own Python env (``brushrl.reward.hpsv3``).
    """
    actors = {}
    for name in cfg.scorers:
        if name == "pool_similarity":
            actors[name] = make_scorer_actor(cfg.pool, placement=placement)
        elif name == "judge":
            actors[name] = ray.remote(num_cpus=0.25, num_gpus=cfg.judge.num_gpus, max_restarts=-1)(
                JudgeActor).remote(cfg.judge, cfg.pool.path)
        elif name == "hpsv3":
            from brushrl.reward.hpsv3 import make_hpsv3_actor

            actors[name] = make_hpsv3_actor(cfg.hpsv3)
    return actors
