"""Scorer actors: each scorer runs in its own Ray actor, so a scorer failure is isolated and
becomes None for its samples. Every actor implements ``GroupScorer.score_group``.
:func:`start_reward_actors` starts a run's reward side (scorers and the judge servers brushrl
serves) from the config, each placed by its ``resources`` field."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import ray

from brushrl.config import (POOL_ACTOR, POOL_COMPONENTS, SCORER_NUM_CPUS, ActorPlacement, JudgeConfig,
                            NoveltyConfig, PoolScorerConfig, ResourcesConfig, RewardConfig, SubjectConfig)
from brushrl.pool import ReferencePool
from brushrl.ray_setup import ray_options
from brushrl.reward.base import ScoreOut
from brushrl.reward.pool_scorer import PoolSimilarityScorer


class PoolScorerActor:
    """Loads the reference pool once and scores batches of PNGs against chosen references; gives
    ``pool_similarity``, and ``subject`` and ``novelty`` (``brushrl.reward.painting_metrics``) from
    the same features, in one call (:meth:`score_components`).

    Args:
        cfg: ``reward.pool``.
        subject: ``reward.subject``; None: this actor does not give ``subject``. Given, the pool's
            subjects are loaded here, so a pool with none fails the actor's start (named by
            ``RewardActors.wait_loaded`` before step 1) rather than scoring None every step.
        novelty: ``reward.novelty`` (None: its defaults).
    """

    def __init__(self, cfg: PoolScorerConfig, subject: SubjectConfig | None = None,
                 novelty: NoveltyConfig | None = None):
        from brushrl.reward.painting_metrics import PoolSubjects

        self.cfg = cfg
        self.pool = ReferencePool(cfg.path)
        self.scorer = PoolSimilarityScorer(self.pool.entries, cfg.tiers, cfg.copy_min_corr)
        self.subject_cfg, self.novelty_cfg = subject, novelty or NoveltyConfig()
        self.subjects = PoolSubjects.of_scorer(self.scorer) if subject is not None else None

    def score_many(self, pngs: list[bytes], ref_ids: list[str]) -> list[tuple[float, dict[str, float]] | None]:
        """See ``PoolSimilarityScorer.score_many``."""
        return self.scorer.score_many(pngs, ref_ids)

    def references(self, prompt: str, seed: int) -> list[str]:
        """``pool_similarity``'s references: the pool images of the prompt's subject
        (``PoolSimilarityScorer.subject_references``), else ``refs_per_tier`` per tier drawn with the
        group seed."""
        return self.scorer.subject_references(prompt) or [
            e.id for e in self.pool.sample(list(self.cfg.tiers), self.cfg.refs_per_tier, seed)]

    def score_group(self, pngs: Sequence[bytes], prompt: str, seed: int) -> list[ScoreOut]:
        """``GroupScorer`` (``pool_similarity`` alone): against :meth:`references`; raw = the score's
        terms (palette, shape, composition, coverage, layering, copy)."""
        return [ScoreOut(v[0], v[1]) if v is not None else ScoreOut(None, cause="bad_image")
                for v in self.score_many(list(pngs), self.references(prompt, seed))]

    def score_components(self, pngs: Sequence[bytes], prompt: str, seed: int,
                         components: Sequence[str]) -> dict[str, list[ScoreOut]]:
        """Several components of one group at once (``ScorerSet`` calls this for the pool actor):
        each PNG's features and copy correlation are computed once for all of them.

        Args:
            components: a subset of ``POOL_COMPONENTS``.

        Returns:
            component -> one ``ScoreOut`` per PNG (an unreadable PNG: None, cause ``bad_image``):
            ``pool_similarity`` as :meth:`score_group`; ``subject`` and ``novelty`` as
            ``painting_metrics.subject_values`` / ``novelty_values`` (novelty among this call's PNGs:
            the group's passing paintings).

        Raises:
            ValueError: a component this actor does not give (``subject`` needs the actor started
                with a ``SubjectConfig``).
        """
        from brushrl.reward.painting_metrics import novelty_values, subject_values
        from brushrl.reward.pool_scorer import image_features

        unknown = [c for c in components if c not in POOL_COMPONENTS or (c == "subject" and self.subjects is None)]
        if unknown:
            raise ValueError(f"the pool scorer actor does not give {unknown}")
        feats, copies = [], []
        for png in pngs:
            try:
                f, c = image_features(png), self.scorer.copy_correlation(png)
            except Exception:  # noqa: BLE001 - one bad image must not fail its group
                f, c = None, None
            feats.append(f)
            copies.append(c)
        out: dict[str, list[ScoreOut]] = {}
        if "pool_similarity" in components:
            refs = self.references(prompt, seed)
            out["pool_similarity"] = [self._pool_similarity(f, c, refs) for f, c in zip(feats, copies)]
        if "subject" in components:
            out["subject"] = subject_values(self.subjects, feats, copies, prompt, self.subject_cfg.temperature)
        if "novelty" in components:
            out["novelty"] = novelty_values(feats, self.novelty_cfg.distinct)
        return out

    def _pool_similarity(self, f, copy: float | None, refs: list[str]) -> ScoreOut:
        """``pool_similarity`` of a painting's features (None: unreadable; as ``score_many``, a
        failure is ``bad_image``, not raised)."""
        if f is None:
            return ScoreOut(None, cause="bad_image")
        try:
            return ScoreOut(*self.scorer.score_features(f, copy, refs))
        except Exception:  # noqa: BLE001 - one bad image must not fail its group
            return ScoreOut(None, cause="bad_image")


class JudgeActor:
    """The pairwise judge (``brushrl.reward.judge``) behind ``GroupScorer``.

    Args:
        judge: the judge config. pool_path: the reference pool folder.
        backend: a ready backend (tests); None: ``make_backend(judge)``.
        servers: the judge server actors brushrl serves (``reward.judge.serve``): requests go to them
            through a :class:`~brushrl.reward.judge_server.ReplicaRouter` instead of ``base_url``.
    """

    def __init__(self, judge: JudgeConfig, pool_path: str, backend=None, servers: list | None = None):
        from brushrl.reward.judge import PairwiseJudge, make_backend

        endpoints = None
        if servers:
            from brushrl.reward.judge_server import ReplicaRouter

            endpoints = ReplicaRouter(servers, refresh_timeout_s=judge.serve.startup_timeout_s)
        self.judge = PairwiseJudge(ReferencePool(pool_path), backend or make_backend(judge, endpoints), judge)

    def router_state(self) -> dict:
        """Replicas' URLs, requests in flight, which are set aside, and how many came back (tests)."""
        router = getattr(self.judge.backend, "endpoints", None)
        return {k: getattr(router, k, None) for k in ("urls", "in_flight", "down", "refreshes")}

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


class CriticActor:
    """The critic of multi-turn revision (``reward.critic.kind``) behind
    :class:`~brushrl.reward.critic.Critic`.

    Args:
        cfg: ``reward`` (``critic``, ``pool``, ``judge``). template: ``prompts.template``.
        canvas_size: ``render.canvas_size``. servers: the judge servers brushrl serves (judge critic).
    """

    def __init__(self, cfg: RewardConfig, template: str, canvas_size: int, servers: list | None = None):
        from brushrl.reward.critic import CpuCritic

        pool = ReferencePool(cfg.pool.path)
        cpu = CpuCritic([e for e in pool.entries if e.tier in cfg.pool.tiers], cfg.critic, template, canvas_size)
        if cfg.critic.kind == "cpu":
            self.critic = cpu
        else:
            from brushrl.reward.judge import OpenAIJudgeBackend
            from brushrl.reward.judge_critic import JudgeCritic

            endpoints = None
            if servers:
                from brushrl.reward.judge_server import ReplicaRouter

                endpoints = ReplicaRouter(servers, refresh_timeout_s=cfg.judge.serve.startup_timeout_s)
            self.critic = JudgeCritic(OpenAIJudgeBackend(cfg.judge, endpoints=endpoints), pool, cfg.judge,
                                      cfg.critic, cpu)

    def critique(self, samples, prompt: str, seed: int):
        """``Critic.critique``."""
        return self.critic.critique(samples, prompt, seed)


def make_scorer_actor(cfg: PoolScorerConfig, num_cpus: float = SCORER_NUM_CPUS, placement: ActorPlacement | None = None,
                      subject: SubjectConfig | None = None, novelty: NoveltyConfig | None = None):
    """Start a ``PoolScorerActor`` (restarted by Ray if it dies) with ``num_cpus`` logical CPUs and
    what ``placement`` (e.g. ``cfg.resources.scorer``) asks for; ``subject`` / ``novelty``: as the
    actor's arguments."""
    options = ray_options(placement) if placement is not None else {}
    return ray.remote(num_cpus=num_cpus, max_restarts=-1, max_task_retries=1, **options)(PoolScorerActor).remote(
        cfg, subject, novelty)


@dataclass
class RewardActors:
    """A run's reward side: the scorer actors by component name, and the judge servers.

    ``servers`` are started, not yet ready: :meth:`wait_ready` health-checks them (before the first
    step); :meth:`stop` stops their vLLM processes; ``actors`` is everything to kill at the end."""

    scorers: dict = field(default_factory=dict)
    servers: list = field(default_factory=list)
    critic: object = None
    """The :class:`CriticActor` of multi-turn revision (None: single-turn)."""

    @property
    def actors(self) -> list:
        return [*self.servers, *self.scorers.values(), *([self.critic] if self.critic is not None else [])]

    def wait_loaded(self, timeout_s: float, say: Callable[[str], None] = print) -> None:
        """Block until every scorer actor and the critic have loaded (their constructors returned).

        A scorer or critic call's timeout (``scorer_timeout_s``, ``critic.timeout_s``) would
        otherwise also count the actor's start, and a slow load would be scored as None.

        Raises:
            TimeoutError: an actor not loaded in ``timeout_s`` seconds (named).
            ray.exceptions.RayActorError: an actor whose constructor raised.
        """
        named = {**self.scorers, **({"critic": self.critic} if self.critic is not None else {})}
        if not named:
            return
        t0 = time.monotonic()
        refs = {name: a.__ray_ready__.remote() for name, a in named.items()}
        ready, pending = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
        if pending:
            late = [name for name, ref in refs.items() if ref in pending]
            raise TimeoutError(f"reward actor(s) {late} not loaded within reward.startup_timeout_s ({timeout_s:g} s)")
        ray.get(ready)  # raises a constructor's error
        say(f"[brushrl] reward actors loaded ({', '.join(named)}) in {time.monotonic() - t0:.1f} s")

    def wait_ready(self, timeout_s: float, say: Callable[[str], None] = print) -> list[str]:
        """Block until every judge server answers ``GET /health``; returns their base URLs.

        Raises:
            TimeoutError / RuntimeError (from the actor): a server not healthy in ``timeout_s``, or
                whose process exited; the message carries its log's tail.
        """
        if not self.servers:
            return []
        t0 = time.monotonic()
        refs = [s.wait_ready.remote(timeout_s) for s in self.servers]
        urls = []
        for i, ref in enumerate(refs):
            urls.append(ray.get(ref))
            say(f"[brushrl] judge server {i + 1}/{len(refs)} healthy at {urls[-1]} "
                f"({time.monotonic() - t0:.0f} s after the start)")
        return urls

    def stop(self) -> None:
        """Stop the judge servers' vLLM processes (SIGTERM, then SIGKILL); best effort."""
        refs = [s.stop.remote() for s in self.servers]
        try:
            ray.wait(refs, num_returns=len(refs), timeout=60)
        except Exception:  # noqa: BLE001 - a server that is already gone needs no stop
            pass


def start_reward_actors(cfg: RewardConfig, resources: ResourcesConfig | None = None,
                        log_dir: str | None = None, critic_template: str | None = None,
                        canvas_size: int = 600) -> RewardActors:
    """Start one actor per weighted scorer (``cfg.scorers``; the components of ``POOL_COMPONENTS``
    share one, named ``POOL_ACTOR``, which gives ``cfg.pool_components``; none weighted: none
    started), and the judge servers when brushrl serves the judge (``cfg.judge.serve``) for the
    judge scorer or the judge critic, without waiting for them. With ``critic_template``
    (``prompts.template``; multi-turn revision) also the :class:`CriticActor` of ``cfg.critic`` for
    ``canvas_size`` pixel canvases, on ``resources.scorer``.

    Placement (``resources``; None: the defaults, nothing asked beyond CPUs): the pool scorer and
    the judge's client on ``resources.scorer``; the judge servers (``serve.replicas``), or the
    in-process judge (``backend: transformers``), on ``resources.judge``; HPSv3 on ``resources.hpsv3``
    in its own env (``brushrl.reward.hpsv3``). ``log_dir``: where the judge servers write their logs.
    """
    res = resources or ResourcesConfig()
    out = RewardActors()
    judge_critic = critic_template is not None and cfg.critic.kind == "judge"
    if ("judge" in cfg.scorers or judge_critic) and cfg.judge.serve is not None:
        from brushrl.reward.judge_server import start_judge_servers

        out.servers = start_judge_servers(cfg.judge, res.judge, log_dir)
    if cfg.pool_components:
        out.scorers[POOL_ACTOR] = make_scorer_actor(
            cfg.pool, placement=res.scorer, subject=cfg.subject if "subject" in cfg.pool_components else None,
            novelty=cfg.novelty)
    for name in cfg.scorers:
        if name == "judge":
            placement = res.judge if cfg.judge.backend == "transformers" else res.scorer
            out.scorers[name] = ray.remote(num_cpus=SCORER_NUM_CPUS, max_restarts=-1, **ray_options(placement))(
                JudgeActor).remote(cfg.judge, cfg.pool.path, None, out.servers or None)
        elif name == "hpsv3":
            from brushrl.reward.hpsv3 import make_hpsv3_actor

            out.scorers[name] = make_hpsv3_actor(cfg.hpsv3, res.hpsv3)
    if critic_template is not None:
        out.critic = ray.remote(num_cpus=SCORER_NUM_CPUS, max_restarts=-1, **ray_options(res.scorer))(
            CriticActor).remote(cfg, critic_template, canvas_size, out.servers or None)
    return out
