"""Everything one learner step leaves behind, written in order, one step at a time: PNGs,
``rollouts.parquet`` rows, the ``metrics.jsonl`` line (with the step's ``paint/*`` measures), the
Ray metrics, the progress line, the experiment trackers (``logging.trackers``,
``brushrl.artifacts.trackers``: the same record and rows), the gallery and, when due, the checkpoint
(``brushrl.artifacts.run_dir`` for the files)."""

from __future__ import annotations

import time

import ray

from brushrl.artifacts.gallery import write_gallery
from brushrl.artifacts.run_dir import RunDir, sample_row
from brushrl.artifacts.trackers import Trackers
from brushrl.config import BrushRLConfig
from brushrl.orchestrator.loop import StepReport
from brushrl.orchestrator.metrics import PipelineMetrics
from brushrl.orchestrator.progress import StepLine
from brushrl.orchestrator.record import step_record
from brushrl.orchestrator.state import TrainerState
from brushrl.prompts import subject_of
from brushrl.reward.painting_metrics import Painting, PoolSubjects, step_measures


class StepPaintings:
    """What a step's passing paintings look like against the reference pool (``reward.pool``):
    the ``paint/*`` keys of :func:`brushrl.reward.painting_metrics.step_measures` and
    ``time/paint_s``, the seconds they took (~0.1-0.2 s a painting on one core).

    Measured on every step whatever the reward's scorers are, so that a run that learns to paint
    every subject alike shows it while it trains (issue 24). A pool that does not load, or has no
    subject, leaves the keys out of every record and says so once, in ``off``.

    Args:
        cfg: the run config (``reward.pool``: path, tiers, ``copy_min_corr``; ``prompts.template``).
    """

    def __init__(self, cfg: BrushRLConfig) -> None:
        from brushrl.pool.store import PoolError

        self.template = cfg.prompts.template
        self.pool: PoolSubjects | None = None
        #: why the measures are off (None: on)
        self.off: str | None = None
        try:
            self.pool = PoolSubjects.from_config(cfg.reward.pool)
        except (PoolError, ValueError, OSError) as e:
            self.off = f"reference pool {cfg.reward.pool.path}: {e}"

    def measures(self, samples: list) -> dict:
        """The record keys for ``StepRecord.samples`` (``(sample, index, status, trajectory)``);
        ``{}`` when off. A sample counts when the gate passed, it has a PNG, and it ends its
        trajectory (single-turn samples always do)."""
        if self.pool is None:
            return {}
        t = time.perf_counter()
        paintings = [Painting(subject_of(s.completion.prompt, self.template) or s.completion.prompt, s.render.png,
                              str(s.group_id))
                     for s, _, _, traj in samples
                     if s.gate.passed and s.render is not None and s.render.png
                     and (traj is None or s is traj.turns[-1])]
        return {**step_measures(self.pool, paintings), "time/paint_s": time.perf_counter() - t}


class StepWriter:
    """Writes each :class:`StepReport` (call :meth:`write` from one thread, in step order).

    Args:
        cfg: the run config. run_dir: the run directory. state: the run's totals (updated here).
        metrics: the Ray metrics. line: the progress line. trackers: the experiment trackers
        (None or empty: none); their failures so far go into each record as ``trackers/<name>/failures``.
        paintings: the step's ``paint/*`` measures (None: built from ``cfg``).
    """

    def __init__(self, cfg: BrushRLConfig, run_dir: RunDir, state: TrainerState, metrics: PipelineMetrics,
                 line: StepLine, trackers: Trackers | None = None, paintings: StepPaintings | None = None) -> None:
        self.cfg, self.run_dir, self.state, self.metrics, self.line = cfg, run_dir, state, metrics, line
        self.trackers = trackers
        self.paintings = paintings or StepPaintings(cfg)

    def write(self, report: StepReport) -> None:
        """The step's artefacts; a checkpoint (``report.checkpoint``: the learner's save call and
        the loop's :class:`TrainerState` position) is completed once the learner has saved."""
        step = step_record(report, self.cfg.reward)
        rows = []
        for s, i, status, trajectory in step.samples:
            if s.render is not None and s.render.png:
                path = self.run_dir.png_path(report.step, s.group_id, i, s.turn)
                path.write_bytes(s.render.png)
                s.png_path = str(path)
            rows.append(sample_row(s, i, status, trajectory))
        self.run_dir.add_rows(rows)
        step.record.update(self.paintings.measures(step.samples))
        self.state.count(step.group_ends, step.record.get("judge/curriculum_stage"))
        if self.trackers:
            step.record.update(self.trackers.failure_counts())
        self.run_dir.log_metrics(step.record)  # first: the run directory is the source of truth
        if self.trackers:
            self.trackers.log_step(step.record, rows, self.cfg.prompts.template, self.cfg.logging.images_per_step)
        self.metrics.publish(step.record, step.counts, step.render_times)
        self.line.update(report.step, step.record)
        write_run_gallery(self.cfg, self.run_dir, running=report.step < self.cfg.run.steps)
        if report.checkpoint is not None:
            saved, position = report.checkpoint
            ray.get(saved)
            position.with_totals(self.state).save(self.run_dir)


def write_run_gallery(cfg: BrushRLConfig, run_dir: RunDir, running: bool = False) -> None:
    """Rewrite ``gallery.html`` from the run's rows and metrics so far (``running``: more steps come)."""
    write_gallery(run_dir.root, run_dir.rows, run_dir.metrics(), cfg.run.name, total_steps=cfg.run.steps,
                  running=running)
