"""The training driver: warm start, actors, the GRPO loop, artefacts, checkpoints, clean shutdown.

The loop is :class:`brushrl.orchestrator.async_loop.AsyncLoop` for every ``orchestrator.max_staleness``
(0 = synchronous GRPO on the same code). Per learner step:

    1. producer tasks turn prompts into scored groups (rollout -> gate -> render -> score) and the
       group filter sorts them (``accepted`` / ``too_few_valid`` / ``zero_variance``); failed and
       too-stale groups are dropped and counted; capacity is released on every end path;
    2. the learner takes one optimizer step on up to ``rollout.groups_per_step`` accepted groups
       (TRL GRPO loss, LoRA) while producers keep working (when ``max_staleness`` > 0);
    3. the new adapter is synced to the rollout engine (policy version += 1);
    4. in a writer thread: rows, PNGs, metrics, the gallery and, every ``run.checkpoint_every``
       steps, a full checkpoint (adapter, optimizer, scheduler, RNG, step, policy version, prompt
       cursor, group ledger), renamed into place atomically.

``Trainer(cfg, resume=True)`` continues a run from its newest complete checkpoint with the same
step numbering; groups that were running or waiting at that checkpoint are counted as failed.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import ray

from brushrl.artifacts.gallery import write_gallery
from brushrl.artifacts.run_dir import TRAINER_STATE, RunDir, sample_row
from brushrl.artifacts.summary import summarize
from brushrl.config import BrushRLConfig
from brushrl.learner import GroupFilter, TrainSample
from brushrl.metrics import PipelineMetrics, quantile
from brushrl.orchestrator.async_loop import AsyncLoop, StepReport
from brushrl.orchestrator.capacity import GroupLedger
from brushrl.orchestrator.control import CONTROL_FILE, ControlError, ControlFile
from brushrl.orchestrator.progress import StepLine
from brushrl.orchestrator.producer import GroupProducer
from brushrl.orchestrator.ray_setup import init_ray
from brushrl.orchestrator.render_dispatch import AsyncRenderer
from brushrl.orchestrator.stop import GracefulStop
from brushrl.pool import ReferencePool
from brushrl.types import Group


def system_prompt_for(cfg: BrushRLConfig) -> str:
    """The system prompt: the configured text, or the built-in whitelist + skeleton prompt."""
    from brushrl.prompts import build_system_prompt

    return cfg.prompts.system_prompt or build_system_prompt(cfg.gate.whitelist, cfg.render.canvas_size)


def warm_start_policy(cfg: BrushRLConfig, system_prompt: str) -> BrushRLConfig:
    """For ``policy.model: tiny``: build (or reuse from cache) the SFT warm-started tiny policy and
    return a config whose ``policy.model`` is its local path. Other models are returned unchanged."""
    if cfg.policy.model != "tiny":
        return cfg
    from brushrl.corpus import build_corpus
    from brushrl.policy import warm_start

    items = build_corpus(cfg.policy.sft.variations, seed=cfg.run.seed)[: cfg.policy.sft.max_examples]
    corpus = [(item.subject, item.code) for item in items]
    path = warm_start(cfg.policy, corpus, system_prompt, cfg.prompts.template)
    return cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"model": str(path)})})


class ActorLearnerSide:
    """The :class:`~brushrl.orchestrator.async_loop.LearnerSide` of the Ray learner and rollout actors.

    Args:
        learner: a learner actor (``brushrl.learner.make_learner_actor``).
        rollout: a rollout engine actor (``load_adapter.remote(state, version)``).
        sync_timeout_s: a weight sync slower than this raises ``TimeoutError`` (the run fails loudly).
    """

    def __init__(self, learner, rollout, sync_timeout_s: float, adapter_dir: str | None = None) -> None:
        self.learner, self.rollout, self.sync_timeout_s = learner, rollout, sync_timeout_s
        self.adapter_dir = Path(adapter_dir).expanduser() if adapter_dir else None

    async def train(self, groups: list[Group]) -> dict[str, float]:
        """One optimizer step; samples are stripped to ``TrainSample`` (no PNG bytes to the learner)."""
        return await self.learner.step.remote([[TrainSample.from_sample(s) for s in g.samples] for g in groups])

    async def sync(self) -> int:
        """Hand the learner's adapter to the rollout engine (the state goes actor to actor through
        the object store); returns the new policy version. Raises ``TimeoutError`` past the limit."""
        async def _sync() -> int:
            version = await self.learner.policy_version.remote()
            if self.adapter_dir is None:
                await self.rollout.load_adapter.remote(self.learner.adapter_state.remote(), version)
                return version
            # By folder (vLLM): a fresh folder per version; the one two versions back is no longer served.
            path = self.adapter_dir / f"v{version:06d}"
            await self.learner.save_adapter.remote(str(path))
            await self.rollout.load_adapter.remote(str(path), version)
            shutil.rmtree(self.adapter_dir / f"v{version - 2:06d}", ignore_errors=True)
            return version

        try:
            return await asyncio.wait_for(_sync(), timeout=self.sync_timeout_s)
        except asyncio.TimeoutError:
            raise TimeoutError(f"weight sync took over orchestrator.sync_timeout_s={self.sync_timeout_s} s") from None


class Trainer:
    """Runs one training run described by ``cfg`` and writes ``runs/<name>/``.

    Args:
        cfg: the validated run config.
        log: where progress lines go (a file-like object; stdout by default).
        resume: continue the run in ``<output_dir>/<name>`` from its newest complete checkpoint
            (``FileNotFoundError`` when there is none) instead of starting afresh.
    """

    def __init__(self, cfg: BrushRLConfig, log=None, resume: bool = False):
        self.cfg = cfg
        self.log = log or sys.stdout
        root = Path(cfg.run.output_dir) / cfg.run.name
        self.run_dir = RunDir(root, overwrite=cfg.run.overwrite, resume=resume)
        self.checkpoint = self.run_dir.latest_checkpoint() if resume else None
        if resume and self.checkpoint is None:
            raise FileNotFoundError(f"cannot resume {self.run_dir.root}: no complete checkpoint in checkpoints/")
        self.state: dict = {}
        if self.checkpoint is not None:
            self.state = json.loads((self.checkpoint / TRAINER_STATE).read_text())
            self.run_dir.rewind(self.state["step"])
        self.run_dir.save_config(cfg)
        self.group_counts: Counter = Counter(self.state.get("group_counts", {}))
        #: Policy version the rollout engine serves (0 = the warm start; +1 per learner update).
        self.policy_version = int(self.state.get("policy_version", 0))
        #: newest reference-curriculum stage a scored group was judged in (checkpointed; a resumed
        #: run's judge starts there instead of at stage 0)
        self.curriculum_stage = int(self.state.get("judge_curriculum_stage", 0))

    def _say(self, text: str) -> None:
        print(text, file=self.log, flush=True)

    def run(self) -> Path:
        """Train up to step ``run.steps``; returns the gallery path.

        SIGTERM (``ray job stop``) and Ctrl-C end the run after the current stage
        (:class:`~brushrl.orchestrator.stop.GracefulStop`): the step being written is completed, the
        renderers' browsers are closed, the actors killed, the gallery rewritten and ``status.json``
        says ``stopped``; the run directory then holds every completed step and resumes from its
        newest checkpoint. ``self.outcome`` is the final state (``finished``, ``stopped``, ``failed``).
        """
        cfg = self.cfg
        init_ray(cfg.ray)
        self._render_pool, self._actors = None, []
        self.outcome, self.stop_signal, extra = "failed", None, {}
        with GracefulStop() as stop:  # after ray.init, which installs its own SIGTERM handler
            self.run_dir.write_status("running", cfg.run.steps)
            try:
                self._train()
                self.outcome = "finished"
            except KeyboardInterrupt:
                self.stop_signal = stop.received or "SIGINT"
                self.outcome, extra = "stopped", {"signal": self.stop_signal}
                self._say(f"[brushrl] stopped ({extra['signal']}): the run directory holds every completed step")
            except BaseException as exc:
                extra = {"error": f"{type(exc).__name__}: {exc}"}
                raise
            finally:
                stop.shutting_down()
                if self._render_pool is not None:
                    self._render_pool.shutdown()
                for actor in self._actors:  # free their CPUs for the next run on this cluster (bench)
                    ray.kill(actor, no_restart=True)
                self._finish()
                self.run_dir.write_status(self.outcome, cfg.run.steps, **extra)
                summary = summarize(self.run_dir.root, self.run_dir.rows, self.run_dir.metrics())
                self._say("\n".join(f"[brushrl] {line}" for line in summary.lines()))
        return self.run_dir.gallery

    def _train(self) -> None:
        """Warm start, start the actors and run the loop. The render pool and the actors are kept in
        ``self._render_pool`` / ``self._actors`` as soon as they exist, for :meth:`run` to stop."""
        from brushrl.learner import make_learner_actor
        from brushrl.render.pool import RenderPool
        from brushrl.reward.actor import make_scorer_actors
        from brushrl.rollout import make_rollout_actor

        cfg = self.cfg
        system_prompt = system_prompt_for(cfg)
        self._say(f"[brushrl] run directory {self.run_dir.root}")
        t0 = time.perf_counter()
        cfg = warm_start_policy(cfg, system_prompt)
        self._say(f"[brushrl] policy ready ({cfg.policy.model}) in {time.perf_counter() - t0:.1f} s")
        pool = ReferencePool(cfg.reward.pool.path)
        self.run_dir.save_pool(pool.version_record())
        self._say(f"[brushrl] reference pool {pool.version_id}")
        render_pool = self._render_pool = RenderPool(cfg.render, cfg.resources.renderer)
        learner = make_learner_actor(cfg, total_steps=cfg.run.steps)
        self._actors.append(learner)
        rollout = make_rollout_actor(cfg, system_prompt)
        self._actors.append(rollout)
        scorers = make_scorer_actors(cfg.reward, placement=cfg.resources.scorer)
        self._actors.extend(scorers.values())
        info = ray.get(learner.describe.remote())  # waits for the learner (and its workers) to be built
        self._say(f"[brushrl] learner: {info['strategy']}; {info['trainable_params']:,} of "
                  f"{info['total_params']:,} parameters trainable")
        producer = GroupProducer(cfg, rollout, render_pool, scorers, pool, random.Random(cfg.run.seed))
        ledger = GroupLedger(cfg.rollout.groups_per_step, cfg.orchestrator.max_staleness)
        first_step = 1
        if self.checkpoint is not None:
            first_step = self._restore(learner, rollout, producer, ledger)
            if self.curriculum_stage and "judge" in scorers:
                stage = ray.get(scorers["judge"].resume_curriculum.remote(self.curriculum_stage))
                self._say(f"[brushrl] judge reference curriculum resumed at stage {stage}")
        elif cfg.rollout.adapter_dir is None:  # by folder (vLLM): version 0 is the bare base model
            ray.get(rollout.load_adapter.remote(learner.adapter_state.remote(), 0))
        self.metrics = PipelineMetrics()
        render_pool.on_progress = self.metrics.render_queue
        self.metrics.renderers.set(len(render_pool.actors))
        self.line = StepLine(cfg.run.steps, self.log, first_step=first_step)
        self._say(f"[brushrl] {cfg.render.num_actors} renderers, G={cfg.rollout.group_size}, "
                  f"{cfg.rollout.groups_per_step} group(s)/step, max_staleness "
                  f"{cfg.orchestrator.max_staleness}, steps {first_step}..{cfg.run.steps}")
        if first_step <= cfg.run.steps:
            side = ActorLearnerSide(learner, rollout, cfg.orchestrator.sync_timeout_s, cfg.rollout.adapter_dir)
            asyncio.run(self._loop(producer, render_pool, side, learner, ledger, first_step))

    def _restore(self, learner, rollout, producer: GroupProducer, ledger: GroupLedger) -> int:
        """Load the checkpoint into the actors, the prompt cursor and the ledger; returns the first step to run."""
        st = self.state
        version = ray.get(learner.load_state.remote(str(self.checkpoint)))
        assert version == st["policy_version"], f"checkpoint {self.checkpoint}: learner version {version} != {st}"
        ray.get(rollout.load_adapter.remote(str(self.checkpoint), version))
        producer.rng.setstate(_tuples(st["rng"]))
        producer.next_group_id = st["next_group_id"]
        restored = GroupLedger.from_dict(st["ledger"])
        restored.max_staleness = self.cfg.orchestrator.max_staleness
        restored.recover(st["ready"])
        for key, value in restored.as_dict().items():
            setattr(ledger, key, value)
        self._say(f"[brushrl] resumed from {self.checkpoint.name}: step {st['step']}, policy version {version}")
        return st["step"] + 1

    async def _loop(self, producer: GroupProducer, render_pool, side: ActorLearnerSide, learner,
                    ledger: GroupLedger, first_step: int) -> None:
        cfg = self.cfg
        renderer = AsyncRenderer(render_pool.actors, cfg.render.pages_per_actor)
        loop: AsyncLoop

        def checkpoint(step: int):
            if step % cfg.run.checkpoint_every and step != cfg.run.steps:
                return None
            # Issued before the next learner call, so the actor saves exactly this step's state.
            ref = learner.save_state.remote(str(self.run_dir.checkpoint_tmp(step)))
            state = {"step": step, "policy_version": loop.version, "rng": producer.rng.getstate(),
                     "next_group_id": producer.next_group_id, "ledger": loop.ledger.as_dict(),
                     "ready": len(loop.ready)}
            return ref, state

        loop = AsyncLoop(
            ledger,
            GroupFilter.from_config(cfg.learner),
            producer.ticket,
            lambda ticket, step: producer.produce_group(ticket, step, renderer),
            side,
            version=self.policy_version,
            checkpoint=checkpoint,
        )
        control = ControlFile(self.run_dir.root / CONTROL_FILE)

        async def on_step(report: StepReport) -> None:
            self.metrics.render_queue(renderer.waiting, 0)
            self.metrics.groups_in_flight(report.ledger.get("running", 0))
            self.metrics.renderers.set(len(render_pool.actors))
            await asyncio.to_thread(self._write_step, report, render_pool)
            if await asyncio.to_thread(self._apply_control, control, render_pool):
                renderer.sync_actors(render_pool.actors)
                self.metrics.renderers.set(len(render_pool.actors))

        await loop.run(first_step, cfg.run.steps, on_step)

    def _apply_control(self, control: ControlFile, render_pool) -> bool:
        """Apply a changed ``control.yaml`` (``brushrl scale``) between steps; a bad file is
        reported and ignored. Returns whether the renderer pool changed size."""
        try:
            wanted = control.poll()
        except ControlError as exc:
            self._say(f"[brushrl] ignoring {CONTROL_FILE}: {exc}")
            return False
        if wanted is None or wanted.render is None or wanted.render.num_actors == render_pool.size:
            return False
        self._say(f"[brushrl] renderers: {render_pool.size} -> {wanted.render.num_actors} ({CONTROL_FILE})")
        render_pool.resize(wanted.render.num_actors)
        return True

    def _write_step(self, report: StepReport, render_pool=None) -> None:
        """Artefacts of one step (runs in a worker thread, one step at a time, in order)."""
        cfg = self.cfg
        step_s = report.step_s
        rows, samples = [], []
        status_counts: Counter = Counter()
        gen_s = render_s = score_s = 0.0
        scorer_s: Counter = Counter()
        render_times: list[float] = []
        counts_all: dict[str, Counter] = defaultdict(Counter)
        for e in report.ended:
            status_counts[e.status] += 1
            if e.counts is not None:
                gen_s += e.counts.gen_s
                render_s += e.counts.render_wall_s
                score_s += e.counts.score_s
                scorer_s.update(e.counts.scorer_wall_s)
                render_times += e.counts.render_s
                for key, counter in e.counts.as_dict().items():
                    counts_all[key].update(counter)
            if e.group is None:
                continue
            for i, s in enumerate(e.group.samples):
                s.step = report.step
                if s.render is not None and s.render.png:
                    path = self.run_dir.png_path(report.step, e.group.group_id, i)
                    path.write_bytes(s.render.png)
                    s.png_path = str(path)
                rows.append(sample_row(s, i, e.status))
                samples.append(s)
        counts_all["groups"].update(status_counts)
        self.group_counts.update(status_counts)
        self.run_dir.add_rows(rows)
        valid = [s.reward for s in samples if s.reward is not None]
        stale = report.staleness
        record = {
            "step": report.step,
            "policy_version": report.version_before,  # the version the learner trained at
            "reward/mean": sum(valid) / len(valid) if valid else None,
            "gate/pass_rate": sum(s.gate.passed for s in samples) / max(len(samples), 1),
            "samples": len(samples),
            "samples/none": len(samples) - len(valid),
            "groups/accepted": len(report.trained),
            "groups/filtered": status_counts["zero_variance"] + status_counts["too_few_valid"],
            "groups/failed": status_counts["failed"],
            "groups/stale": status_counts["stale"],
            "staleness/mean": sum(stale) / len(stale) if stale else None,
            "staleness/max": max(stale) if stale else None,
            "render/per_s": len(render_times) / render_s if render_s else 0.0,
            "render/mean_s": sum(render_times) / len(render_times) if render_times else 0.0,
            "render/p50_s": quantile(render_times, 0.5),
            "render/p95_s": quantile(render_times, 0.95),
            "render/cache_hit_rate": _share([s.render.cache_hit for s in samples if s.render is not None]),
            "time/gen_s": gen_s,
            "time/render_s": render_s,
            "time/score_s": score_s,
            # each scorer's own seconds (launch to its last answer), summed over the step's groups
            **{f"time/score/{name}_s": scorer_s.get(name, 0.0) for name in cfg.reward.scorers},
            "time/wait_s": report.wait_s,
            "time/learn_s": report.learn_s,
            "time/update_s": report.learn_s,  # the optimizer step (ray_brushrl_learner_update_seconds)
            "time/sync_s": report.sync_s,
            "time/step_s": step_s,
            "learner/idle_share": max(0.0, 1.0 - report.learn_s / step_s) if step_s > 0 else 0.0,
            **{f"ledger/{k}": v for k, v in report.ledger.items()},
            "ready": report.ready,
            **{f"learner/{k}": v for k, v in report.stats.items()},
        }
        for name in cfg.reward.weights:
            vals = [s.components.get(name) for s in samples if s.reward is not None]
            vals = [v for v in vals if v is not None]
            record[f"reward/{name}"] = sum(vals) / len(vals) if vals else None
        stages = [s.raw["judge_curriculum_stage"] for s in samples if "judge_curriculum_stage" in s.raw]
        if stages:
            record["judge/curriculum_stage"] = max(stages)  # the judge's reference curriculum stage
            self.curriculum_stage = max(self.curriculum_stage, int(max(stages)))
        self.run_dir.log_metrics(record)
        self.metrics.publish(record, {k: dict(v) for k, v in counts_all.items()}, render_times)
        self.line.update(report.step, record)
        write_gallery(self.run_dir.root, self.run_dir.rows, self.run_dir.metrics(), cfg.run.name,
                      total_steps=cfg.run.steps, running=report.step < cfg.run.steps)
        if report.checkpoint is not None:
            ref, state = report.checkpoint
            ray.get(ref)
            state |= {"group_counts": dict(self.group_counts),
                      "judge_curriculum_stage": self.curriculum_stage}
            self.run_dir.commit_checkpoint(report.step, state)

    def _finish(self) -> None:
        write_gallery(self.run_dir.root, self.run_dir.rows, self.run_dir.metrics(), self.cfg.run.name,
                      total_steps=self.cfg.run.steps)


def _share(flags: list[bool]) -> float:
    """Share of true values (0.0 for none)."""
    return sum(flags) / len(flags) if flags else 0.0


def _tuples(value):
    """JSON turned ``random.Random.getstate()``'s tuples into lists; turn them back."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
