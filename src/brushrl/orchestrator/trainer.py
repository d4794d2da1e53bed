"""The training driver, in the order it runs: build, restore, loop, stop.

1. **build**: the system prompt, the warm start (``policy.model: tiny``), the reference pool's
   version record, the actors (:class:`~brushrl.orchestrator.actors.Pipeline`) and the group
   producer;
2. **restore**: a fresh run syncs the initial adapter to the rollout engine (version 0); a resumed
   one loads the newest complete checkpoint into the learner and the rollout engine (either way the
   sync canary, ``brushrl.orchestrator.sync_check``, then checks the engine serves it), puts the
   prompt cursor and the group ledger back (:class:`~brushrl.orchestrator.state.TrainerState`;
   groups running or waiting then count as failed) and brings the judge to its curriculum stage;
3. **loop**: :class:`~brushrl.orchestrator.loop.GRPOLoop` runs learner steps while producer tasks
   fill the ready buffer (``orchestrator.max_staleness``; 0 is synchronous GRPO); each step is
   written by a :class:`~brushrl.orchestrator.writer.StepWriter` in a worker thread (and sent to the
   experiment trackers of ``logging.trackers``, opened before step 1 with the config as
   hyperparameters), and
   ``control.yaml`` (``brushrl scale``) is applied between steps; every ``run.checkpoint_every``
   steps (and at the last) the learner saves its state right after the sync and the writer
   completes the checkpoint;
4. **stop**: on the end of the run, SIGTERM (``ray job stop``) or Ctrl-C
   (:class:`~brushrl.orchestrator.stop.GracefulStop`): the renderers' browsers are closed, the
   actors killed, the gallery rewritten, the newest checkpoint's adapter sent to the trackers (a run
   that did not fail) and the trackers closed, ``status.json`` says ``finished``, ``stopped`` or
   ``failed`` and the run's summary is printed (``brushrl.artifacts.summary``). The run directory then holds every completed step and resumes from its newest
   checkpoint with the same step numbering (``Trainer(cfg, resume=True)``).
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

import ray

from brushrl.artifacts.run_dir import RunDir
from brushrl.artifacts.summary import summarize
from brushrl.artifacts.trackers import Trackers, require_trackers
from brushrl.config import BrushRLConfig
from brushrl.learner import GroupFilter
from brushrl.orchestrator.actors import Pipeline
from brushrl.orchestrator.capacity import GroupLedger
from brushrl.orchestrator.control import CONTROL_FILE, ControlFile, apply_control
from brushrl.orchestrator.loop import GRPOLoop, StepReport
from brushrl.orchestrator.metrics import PipelineMetrics
from brushrl.orchestrator.producer import GroupProducer
from brushrl.orchestrator.progress import StepLine
from brushrl.orchestrator.state import TrainerState
from brushrl.orchestrator.stop import GracefulStop
from brushrl.orchestrator.sync_check import Probe, SyncCheck
from brushrl.orchestrator.writer import StepPaintings, StepWriter, write_run_gallery
from brushrl.pool import ReferencePool
from brushrl.prompts import resolve_system_prompt
from brushrl.ray_setup import init_ray


class Trainer:
    """Runs one training run described by ``cfg`` and writes ``runs/<name>/``.

    Args:
        cfg: the validated run config.
        log: where progress lines go (a file-like object; stdout by default).
        resume: continue the run in ``<output_dir>/<name>`` from its newest complete checkpoint
            (``FileNotFoundError`` when there is none) instead of starting afresh.

    Raises:
        brushrl.artifacts.trackers.TrackerUnavailable: a tracker of ``logging.trackers`` lacks its
            package or address (before the run directory is touched).

    Attributes:
        run_dir: the run directory. checkpoint: the checkpoint resumed from (None: a fresh run).
        state: the run's :class:`TrainerState` (the resumed position, the totals so far).
        outcome: ``finished``, ``stopped`` or ``failed`` once :meth:`run` returned or raised.
        stop_signal: the signal that stopped the run (``SIGTERM``, ``SIGINT``), or None.
    """

    def __init__(self, cfg: BrushRLConfig, log=None, resume: bool = False):
        require_trackers(cfg)
        self.cfg = cfg
        self.log = log or sys.stdout
        self.run_dir = RunDir(Path(cfg.run.output_dir) / cfg.run.name, overwrite=cfg.run.overwrite, resume=resume)
        self.checkpoint = self.run_dir.latest_checkpoint() if resume else None
        if resume and self.checkpoint is None:
            raise FileNotFoundError(f"cannot resume {self.run_dir.root}: no complete checkpoint in checkpoints/")
        self.state = TrainerState.load(self.checkpoint) if self.checkpoint else TrainerState()
        if self.checkpoint:
            self.run_dir.rewind(self.state.step)
        self.run_dir.save_config(cfg)
        self.outcome, self.stop_signal = "failed", None
        #: the weight-sync canary (``orchestrator.sync_check``), built with the actors; None when disabled
        self.sync_check: SyncCheck | None = None
        #: the experiment trackers (``logging.trackers``), opened by :meth:`run`
        self.trackers = Trackers([])

    def run(self) -> Path:
        """Train up to step ``run.steps`` (module docstring); returns the gallery path."""
        cfg = self.cfg
        init_ray(cfg.ray)
        pipe, extra = Pipeline(), {}
        with GracefulStop() as stop:  # after ray.init, which installs its own SIGTERM handler
            self.run_dir.write_status("running", cfg.run.steps)
            try:
                self._open_trackers()
                producer, ledger = self._build(pipe)  # 1. build
                first_step = self._restore(pipe, producer, ledger)  # 2. restore
                pipe.wait_ready(cfg, self._say)  # reward actors loaded, judge servers healthy, before step 1
                writer = self._writer(pipe, first_step)  # 3. loop
                if first_step <= cfg.run.steps:
                    asyncio.run(self._loop(pipe, producer, ledger, writer, first_step))
                    self._say_batching(pipe)
                self.outcome = "finished"
            except KeyboardInterrupt:
                self.stop_signal = stop.received or "SIGINT"
                self.outcome, extra = "stopped", {"signal": self.stop_signal}
                self._say(f"[brushrl] stopped ({self.stop_signal}): the run directory holds every completed step")
            except BaseException as exc:
                extra = {"error": f"{type(exc).__name__}: {exc}"}
                raise
            finally:  # 4. stop
                stop.shutting_down()
                pipe.stop()
                self._finish()
                if any(self.trackers.failures.values()):
                    extra["tracker_failures"] = dict(self.trackers.failures)
                self.run_dir.write_status(self.outcome, cfg.run.steps, **extra)
                summary = summarize(self.run_dir.root, self.run_dir.rows, self.run_dir.metrics())
                self._say("\n".join(f"[brushrl] {line}" for line in summary.lines()))
        return self.run_dir.gallery

    def _open_trackers(self) -> None:
        """Start the trackers of ``logging.trackers`` (``TrackerUnavailable`` fails the run here,
        before any actor) and log the resolved config to them."""
        if not self.cfg.logging.trackers:
            return
        self.trackers = Trackers.open(self.cfg, self.run_dir.root, first_step=self.state.step + 1, say=self._say)
        self.trackers.log_params(self.cfg)
        self._say(f"[brushrl] trackers: {', '.join(t.name for t in self.trackers.trackers)}")

    # ------------------------------------------------------------------ 1. build
    def _build(self, pipe: Pipeline) -> tuple[GroupProducer, GroupLedger]:
        """Warm start, pool record, the actors (into ``pipe``), the producer and an empty ledger."""
        from brushrl.policy import warm_start_policy  # torch + transformers: only when a run starts

        cfg = self.cfg
        system_prompt = resolve_system_prompt(cfg.prompts, cfg.gate.whitelist, cfg.render.canvas_size)
        self._say(f"[brushrl] run directory {self.run_dir.root}")
        t0 = time.perf_counter()
        cfg = warm_start_policy(cfg, system_prompt)
        self._say(f"[brushrl] policy ready ({cfg.policy.model}) in {time.perf_counter() - t0:.1f} s")
        pool = ReferencePool(cfg.reward.pool.path)
        self.run_dir.save_pool(pool.version_record())
        self._say(f"[brushrl] reference pool {pool.version_id}")
        self.sync_check = self._sync_check(cfg, system_prompt)
        pipe.start(cfg, system_prompt, str(self.run_dir.root / "logs"))
        info = ray.get(pipe.learner.describe.remote())  # waits for the learner (and its workers) to be built
        self._say(f"[brushrl] learner: {info['strategy']}; {info['trainable_params']:,} of "
                  f"{info['total_params']:,} parameters trainable")
        producer = GroupProducer(cfg, pipe.rollout, pipe.render_pool, pipe.scorers, random.Random(cfg.run.seed),
                                 pipe.critic)
        return producer, GroupLedger(cfg.rollout.groups_per_step, cfg.orchestrator.max_staleness)

    def _sync_check(self, cfg: BrushRLConfig, system_prompt: str) -> SyncCheck | None:
        """The weight-sync canary of ``orchestrator.sync_check`` with its probe tokenised by the
        (warm-started) policy's tokenizer; None when disabled."""
        check_cfg = cfg.orchestrator.sync_check
        if not check_cfg.enabled:
            return None
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(cfg.policy.model)
        return SyncCheck(check_cfg, Probe.build(tokenizer, system_prompt, cfg.prompts.template, check_cfg.probe_tokens),
                         cfg.rollout.replicas)

    def _check_sync(self, pipe: Pipeline, version: int) -> None:
        """The canary on the first sync (version 0 or the resumed one); raises ``SyncCheckError``."""
        if self.sync_check is None:
            return
        gap = asyncio.run(self.sync_check.run(pipe.learner, pipe.rollout, version))
        self._say(f"[brushrl] sync check, policy version {version}: log-prob gap {gap.gap:.2e} nats/token "
                  f"(max {gap.gap_max:.2e}, tolerance {self.sync_check.cfg.tolerance:g}), learner shift "
                  f"{gap.shift:.2e}, engine shift {gap.engine_shift:.2e}")

    # ------------------------------------------------------------------ 2. restore
    def _restore(self, pipe: Pipeline, producer: GroupProducer, ledger: GroupLedger) -> int:
        """The rollout engine's first adapter and, on resume, the checkpoint; returns the first step."""
        cfg, st = self.cfg, self.state
        if self.checkpoint is None:
            if cfg.rollout.adapter_dir is None:  # by folder (vLLM): version 0 is the bare base model
                ray.get(pipe.rollout.load_adapter.remote(pipe.learner.adapter_state.remote(), 0))
            self._check_sync(pipe, 0)
            return 1
        version = ray.get(pipe.learner.load_state.remote(str(self.checkpoint)))
        assert version == st.policy_version, f"checkpoint {self.checkpoint}: learner version {version} != {st}"
        ray.get(pipe.rollout.load_adapter.remote(str(self.checkpoint), version))
        self._check_sync(pipe, version)
        first_step = st.restore(producer, ledger, cfg.orchestrator.max_staleness)
        self._say(f"[brushrl] resumed from {self.checkpoint.name}: step {st.step}, policy version {version}")
        if st.judge_curriculum_stage and "judge" in pipe.scorers:
            stage = ray.get(pipe.scorers["judge"].resume_curriculum.remote(st.judge_curriculum_stage))
            self._say(f"[brushrl] judge reference curriculum resumed at stage {stage}")
        return first_step

    # ------------------------------------------------------------------ 3. loop
    def _writer(self, pipe: Pipeline, first_step: int) -> StepWriter:
        cfg = self.cfg
        metrics = PipelineMetrics()
        pipe.render_pool.on_progress = metrics.render_queue
        metrics.renderers.set(len(pipe.render_pool.actors))
        self._say(f"[brushrl] {cfg.render.num_actors} renderers, G={cfg.rollout.group_size}, "
                  f"{cfg.rollout.groups_per_step} group(s)/step, max_staleness "
                  f"{cfg.orchestrator.max_staleness}, steps {first_step}..{cfg.run.steps}"
                  + (f", {cfg.rollout.turns} turns ({cfg.reward.critic.kind} critic)" if cfg.rollout.turns > 1 else ""))
        paintings = StepPaintings(cfg)
        self._say(f"[brushrl] paint/* measures off: {paintings.off}" if paintings.off else
                  f"[brushrl] paint/* measures against {len(paintings.pool.subjects)} pool subjects "
                  f"(subject fidelity by chance {1 / len(paintings.pool.subjects):.3f})")
        return StepWriter(cfg, self.run_dir, self.state, metrics, StepLine(cfg.run.steps, self.log, first_step),
                          self.trackers, paintings)

    async def _loop(self, pipe: Pipeline, producer: GroupProducer, ledger: GroupLedger, writer: StepWriter,
                    first_step: int) -> None:
        cfg, pool = self.cfg, pipe.render_pool
        control = ControlFile(self.run_dir.root / CONTROL_FILE)

        def checkpoint(step: int):
            """Called by the loop right after the step's sync, before the next learner call."""
            if step % cfg.run.checkpoint_every and step != cfg.run.steps:
                return None
            saved = pipe.learner.save_state.remote(str(self.run_dir.checkpoint_tmp(step)))
            return saved, self.state.at(step, loop.version, producer, loop.ledger, len(loop.ready))

        async def on_step(report: StepReport) -> None:
            writer.metrics.groups_in_flight(report.ledger.get("running", 0))
            await asyncio.to_thread(writer.write, report)
            apply_control(control, pool, self._say)
            writer.metrics.renderers.set(len(pool.actors))

        loop = GRPOLoop(ledger, GroupFilter.from_config(cfg.learner), producer.ticket, producer.produce,
                        pipe.learner_side(cfg, self.sync_check), version=self.state.policy_version, checkpoint=checkpoint,
                        max_rejected=cfg.orchestrator.max_rejected_batches * cfg.rollout.groups_per_step,
                        max_failed_steps=cfg.orchestrator.max_failed_steps)
        await loop.run(first_step, cfg.run.steps, on_step)

    def _say_batching(self, pipe: Pipeline) -> None:
        """One line per vLLM rollout engine: merged calls, sequences a call (``batch_stats``,
        ``brushrl.rollout.batching``), so a run shows whether its engines were kept busy."""
        cfg = self.cfg
        if cfg.rollout.backend != "vllm":
            return
        try:
            stats = ray.get(pipe.rollout.batch_stats.remote(), timeout=60)
        except Exception as exc:  # noqa: BLE001 - a read-out, never the run's outcome
            self._say(f"[brushrl] rollout batching: unavailable ({type(exc).__name__})")
            return
        for i, s in enumerate(stats if isinstance(stats, list) else [stats]):
            if s["calls"]:
                name = "rollout engine" if cfg.rollout.replicas == 1 else f"rollout replica {i}"
                self._say(f"[brushrl] {name}: {s['requests']} requests in {s['calls']} calls, "
                          f"{s['sequences'] / s['calls']:.1f} sequences a call (max {s['max_sequences']}, "
                          f"max_num_seqs {cfg.rollout.max_num_seqs})")

    # ------------------------------------------------------------------ 4. stop
    def _finish(self) -> None:
        """The final gallery; the newest checkpoint's adapter to the trackers (unless the run
        failed) and the trackers closed."""
        write_run_gallery(self.cfg, self.run_dir)
        if self.trackers:
            if self.outcome != "failed":
                self.trackers.log_adapter(self.run_dir.latest_checkpoint(), self.cfg.run.name)
            self.trackers.close()

    def _say(self, text: str) -> None:
        print(text, file=self.log, flush=True)
