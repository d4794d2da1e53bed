"""Everything one learner step leaves behind, written in order, one step at a time: PNGs,
``rollouts.parquet`` rows, the ``metrics.jsonl`` line, the Ray metrics, the progress line, the
experiment trackers (``logging.trackers``, ``brushrl.artifacts.trackers``: the same record and rows),
the gallery and, when due, the checkpoint (``brushrl.artifacts.run_dir`` for the files)."""

from __future__ import annotations

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


class StepWriter:
    """Writes each :class:`StepReport` (call :meth:`write` from one thread, in step order).

    Args:
        cfg: the run config. run_dir: the run directory. state: the run's totals (updated here).
        metrics: the Ray metrics. line: the progress line. trackers: the experiment trackers
        (None or empty: none); their failures so far go into each record as ``trackers/<name>/failures``.
    """

    def __init__(self, cfg: BrushRLConfig, run_dir: RunDir, state: TrainerState, metrics: PipelineMetrics,
                 line: StepLine, trackers: Trackers | None = None) -> None:
        self.cfg, self.run_dir, self.state, self.metrics, self.line = cfg, run_dir, state, metrics, line
        self.trackers = trackers

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
