"""The run's Ray actors, started and stopped together: the renderer pool, the rollout engine, the
learner, the scorers, the critic (multi-turn revision) and the judge servers brushrl serves, and the loop's view of the learner
(:class:`ActorLearnerSide`)."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import ray

from brushrl.config import BrushRLConfig, ConfigError
from brushrl.learner import TrainSample
from brushrl.orchestrator.loop import Synced
from brushrl.orchestrator.sync_check import SyncCheck
from brushrl.render.pool import RenderPool
from brushrl.reward.actor import RewardActors
from brushrl.types import Group


@dataclass
class Pipeline:
    """Handles of a run's actors, empty until :meth:`start`; :meth:`stop` ends them all.

    Attributes:
        render_pool: the renderer actors and the render path (``brushrl.render.pool``).
        learner: the learner actor (``brushrl.learner.make_learner_actor``).
        rollout: the rollout engine actor (``brushrl.rollout.make_rollout_actor``).
        reward: the scorer actors by component name, the judge servers and, for multi-turn
            revision, the critic actor (``brushrl.reward.actor.start_reward_actors``).
    """

    render_pool: RenderPool | None = None
    learner: object = None
    rollout: object = None
    reward: RewardActors = field(default_factory=RewardActors)

    @property
    def scorers(self) -> dict:
        """Scorer name -> scorer actor."""
        return self.reward.scorers

    @property
    def critic(self):
        """The critic actor of multi-turn revision (None for ``rollout.turns: 1``)."""
        return self.reward.critic

    def start(self, cfg: BrushRLConfig, system_prompt: str, log_dir: str | None = None, learner: bool = True) -> None:
        """Start every actor of ``cfg`` (``cfg.policy.model`` already warm-started) without waiting
        for the judge servers (:meth:`wait_ready`); ``log_dir`` gets the judge servers' logs; without
        the learner when ``learner`` is False (``brushrl eval`` only samples and scores). If a
        start fails (or the run is stopped meanwhile), the actors started so far are stopped and the
        exception goes on."""
        from brushrl.learner import make_learner_actor
        from brushrl.reward.actor import start_reward_actors
        from brushrl.rollout import make_rollout_actor

        refuse_unknown_subjects(cfg)
        try:
            self.render_pool = RenderPool(cfg.render, cfg.resources.renderer)
            if learner:
                self.learner = make_learner_actor(cfg, total_steps=cfg.run.steps)
            self.rollout = make_rollout_actor(cfg, system_prompt)
            critic_template = cfg.prompts.template if cfg.rollout.turns > 1 else None
            self.reward = start_reward_actors(cfg.reward, cfg.resources, log_dir, critic_template,
                                              cfg.render.canvas_size)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, cfg: BrushRLConfig, say) -> None:
        """Wait for the scorer and critic actors to load, then health-check the judge servers
        brushrl serves; raises what ``RewardActors.wait_loaded`` / ``wait_ready`` raise."""
        self.reward.wait_loaded(cfg.reward.startup_timeout_s, say)
        if self.reward.servers:
            self.reward.wait_ready(cfg.reward.judge.serve.startup_timeout_s, say)

    def learner_side(self, cfg: BrushRLConfig, check: SyncCheck | None = None) -> ActorLearnerSide:
        """The loop's view of the learner; ``check``: the run's sync canary (None: no check)."""
        return ActorLearnerSide(self.learner, self.rollout, cfg.orchestrator.sync_timeout_s, cfg.rollout.adapter_dir,
                                check)

    def stop(self) -> None:
        """Close the renderers' browsers and kill every actor (frees their CPUs for the next run on
        this cluster). Safe to call twice."""
        if self.render_pool is not None:
            self.render_pool.shutdown()
            self.render_pool = None
        self.reward.stop()  # the judge servers' vLLM processes, before their actors go
        for actor in (self.learner, self.rollout, *self.reward.actors):
            if actor is not None:
                ray.kill(actor, no_restart=True)
        self.learner = self.rollout = None
        self.reward = RewardActors()


def refuse_unknown_subjects(cfg: BrushRLConfig) -> None:
    """With ``reward.weights.subject`` > 0, every training and held-out subject (``prompts.subjects``,
    ``eval.subjects``) must name exactly one subject of the reference pool (``reward.pool``):
    otherwise each of its paintings would score None (``unknown_subject``) and every group of it be
    dropped, found only after the actors start. Checked before any actor starts (training and
    ``brushrl eval``).

    Raises:
        brushrl.config.ConfigError: naming the field, the subjects and the pool.
    """
    if not cfg.reward.weights.get("subject"):
        return
    from brushrl.reward.painting_metrics import PoolSubjects

    pool = PoolSubjects.from_config(cfg.reward.pool)
    for name, subjects in (("prompts.subjects", cfg.prompts.subjects), ("eval.subjects", cfg.eval.subjects)):
        unknown = pool.unknown(subjects, cfg.prompts.template)
        if unknown:
            raise ConfigError(
                f"{name}: {unknown} name no subject of the reference pool {cfg.reward.pool.path} (or several), "
                f"and reward.weights.subject is {cfg.reward.weights['subject']:g}: each of their paintings would "
                f"score None (unknown_subject). Add their references to the pool, drop them, or set "
                f"reward.weights.subject to 0; the pool's subjects: {pool.subjects}")


class ActorLearnerSide:
    """The :class:`~brushrl.orchestrator.loop.LearnerSide` of the Ray learner and rollout actors.

    Args:
        learner: a learner actor (``brushrl.learner.make_learner_actor``).
        rollout: a rollout engine actor (``load_adapter.remote(state, version)``).
        sync_timeout_s: a weight sync slower than this raises ``TimeoutError`` (the run fails loudly).
        adapter_dir: sync through per-version adapter folders here (vLLM) instead of the object store.
        check: the sync canary run after every sync (``brushrl.orchestrator.sync_check``), or None.
    """

    def __init__(self, learner, rollout, sync_timeout_s: float, adapter_dir: str | None = None,
                 check: SyncCheck | None = None) -> None:
        self.learner, self.rollout, self.sync_timeout_s = learner, rollout, sync_timeout_s
        self.adapter_dir = Path(adapter_dir).expanduser() if adapter_dir else None
        self.check = check

    async def train(self, groups: list[Group]) -> dict[str, float]:
        """One optimizer step on each group's members (samples, or whole trajectories with their
        critique tokens masked), stripped to ``TrainSample`` (no PNG bytes to the learner)."""
        return await self.learner.step.remote([[TrainSample.from_trajectory(t) for t in g.members] for g in groups])

    async def sync(self) -> Synced:
        """Hand the learner's adapter to the rollout engine (the state goes actor to actor through
        the object store, or by folder), then run the sync canary; returns the new policy version
        and the canary's ``sync/*`` metrics ({} without a check).

        Raises:
            TimeoutError: sync and check took over ``sync_timeout_s``.
            brushrl.orchestrator.sync_check.SyncCheckError: the engine does not serve the learner's policy.
        """
        async def _sync() -> Synced:
            version = await self.learner.policy_version.remote()
            if self.adapter_dir is None:
                await self.rollout.load_adapter.remote(self.learner.adapter_state.remote(), version)
            else:
                # By folder (vLLM): a fresh folder per version; the one two versions back is no longer served.
                path = self.adapter_dir / f"v{version:06d}"
                await self.learner.save_adapter.remote(str(path))
                await self.rollout.load_adapter.remote(str(path), version)
                shutil.rmtree(self.adapter_dir / f"v{version - 2:06d}", ignore_errors=True)
            if self.check is None:
                return Synced(version)
            return Synced(version, (await self.check.run(self.learner, self.rollout, version)).metrics())

        try:
            return await asyncio.wait_for(_sync(), timeout=self.sync_timeout_s)
        except asyncio.TimeoutError:
            raise TimeoutError(f"weight sync took over orchestrator.sync_timeout_s={self.sync_timeout_s} s") from None
