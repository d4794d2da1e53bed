"""Experiment trackers (``logging.trackers``: TensorBoard, Weights & Biases, MLflow) fed from the
run directory's own records, by the training driver only (never an actor, so ``ray job submit``
logs once, from the job's driver).

* per learner step (:meth:`Trackers.log_step`, called by the orchestrator's ``StepWriter`` right
  after it appended the ``metrics.jsonl`` line): that line's numbers under the same names, the step's
  paintings (the ``rollouts.parquet`` rows' PNGs that ``gallery.html`` shows, captioned with
  subject, gate verdict, reward and policy version) and a samples table (prompt, code, reward
  components; TensorBoard gets it as text);
* per run: the resolved config as hyperparameters (:meth:`Trackers.log_params`), the final LoRA
  adapter as an artifact (:meth:`Trackers.log_adapter`; W&B and MLflow) and, when ``brushrl eval``
  runs with trackers on, ``eval.json``'s results (:meth:`Trackers.log_eval`) into the same tracker
  run (reattached through ``RUN_DIR/trackers.json``, which a resumed run uses too).

A tracker that fails to start stops the run before it starts (:class:`TrackerUnavailable`); one
that fails later (its server gone) warns once, each failed call is counted
(:meth:`Trackers.failure_counts`: ``trackers/<name>/failures`` in the next ``metrics.jsonl`` line)
and training goes on: the run directory holds everything regardless.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

import yaml

from brushrl.artifacts.run_dir import atomic_write
from brushrl.artifacts.trackers.base import (
    SampleTable,
    StepImage,
    Tracker,
    TrackerUnavailable,
    eval_scalars,
    flat_params,
    sample_table,
    step_images,
    step_scalars,
)
from brushrl.config import BrushRLConfig

#: Tracker name -> the Python package it needs (an import name; the pip name is the same).
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
#: File in the run directory with what reattaches a process to the run's tracker runs.
STATE_FILE = "trackers.json"


def tracker_problems(cfg: BrushRLConfig) -> list[str]:
    """Why ``cfg.logging.trackers`` cannot be used in this process (a missing package, MLflow
    without a tracking URI), one line each; empty when every tracker can start. Imports nothing."""
    problems = []
    for name in cfg.logging.trackers:
        package = PACKAGES[name]
        if importlib.util.find_spec(package) is None:
            problems.append(f"logging.trackers: {name!r} needs the Python package {package!r}, which is not "
                            f"installed for {sys.executable} (pip install 'brushrl[trackers]' or pip install {package})")
    if "mlflow" in cfg.logging.trackers and not (cfg.logging.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")):
        problems.append("logging.trackers: 'mlflow' needs a tracking server: set logging.mlflow_tracking_uri or "
                        "the MLFLOW_TRACKING_URI environment variable")
    return problems


def require_trackers(cfg: BrushRLConfig) -> None:
    """Raise :class:`TrackerUnavailable` listing :func:`tracker_problems`, if any."""
    problems = tracker_problems(cfg)
    if problems:
        raise TrackerUnavailable("\n".join(problems))


def _open(name: str, cfg: BrushRLConfig, root: Path, state: dict, first_step: int) -> Tracker:
    if name == "tensorboard":
        from brushrl.artifacts.trackers.tensorboard_tracker import TensorBoardTracker

        return TensorBoardTracker(root / "tensorboard", purge_step=first_step)
    if name == "wandb":
        from brushrl.artifacts.trackers.wandb_tracker import WandbTracker

        return WandbTracker(cfg.logging, cfg.run.name, root, state)
    from brushrl.artifacts.trackers.mlflow_tracker import MlflowTracker

    return MlflowTracker(cfg.logging, cfg.run.name, state)


class Trackers:
    """The fan-out: every call goes to each tracker, a failure of one is caught, counted and
    warned about once (per tracker) and never reaches the caller.

    Args:
        trackers: the open trackers. say: where the warning goes (a line of text; stderr by default).
    """

    def __init__(self, trackers: list[Tracker], say: Callable[[str], None] | None = None):
        self.trackers = trackers
        self.failures: Counter = Counter()
        self._say = say or (lambda text: print(text, file=sys.stderr, flush=True))

    @classmethod
    def open(cls, cfg: BrushRLConfig, run_root: str | Path, first_step: int = 1,
             say: Callable[[str], None] | None = None) -> "Trackers":
        """Start (or reattach to, through ``RUN_DIR/trackers.json``) every tracker of
        ``cfg.logging.trackers`` and record their ids there.

        Args:
            first_step: the first step this process logs (a resumed run's TensorBoard drops its
                events from there on, which the run directory rewound).

        Raises:
            TrackerUnavailable: a package or the MLflow URI is missing, or a tracker did not start
                (every tracker opened so far is closed again).
        """
        require_trackers(cfg)
        root = Path(run_root)
        path = root / STATE_FILE
        saved = json.loads(path.read_text()) if path.exists() else {}
        opened: list[Tracker] = []
        for name in cfg.logging.trackers:
            try:
                opened.append(_open(name, cfg, root, saved.get(name, {}), first_step))
            except Exception as exc:
                for tracker in opened:
                    try:
                        tracker.close()
                    except Exception:  # noqa: BLE001 - already failing; the first error is the one to tell
                        pass
                raise TrackerUnavailable(f"logging.trackers: {name!r} did not start: {type(exc).__name__}: {exc}") from exc
        fan = cls(opened, say)
        if opened:
            atomic_write(path, json.dumps({**saved, **{t.name: t.state() for t in opened}}, indent=1) + "\n")
        return fan

    def __bool__(self) -> bool:
        return bool(self.trackers)

    def _each(self, what: str, call: Callable[[Tracker], None]) -> None:
        for tracker in self.trackers:
            try:
                call(tracker)
            except Exception as exc:  # noqa: BLE001 - a tracker must never stop training
                self.failures[tracker.name] += 1
                if self.failures[tracker.name] == 1:
                    self._say(f"[brushrl] warning: tracker {tracker.name} failed ({what}: {type(exc).__name__}: "
                              f"{str(exc)[:300]}); training goes on, the run directory has everything, further "
                              f"failures are counted in trackers/{tracker.name}/failures")

    def failure_counts(self) -> dict[str, int]:
        """``trackers/<name>/failures``: calls that failed so far, per open tracker (0 included)."""
        return {f"trackers/{t.name}/failures": self.failures[t.name] for t in self.trackers}

    def log_params(self, cfg: BrushRLConfig) -> None:
        """The resolved config (what ``RUN_DIR/config.yaml`` holds) as hyperparameters."""
        data = cfg.model_dump(mode="json")
        params, text = flat_params(data), yaml.safe_dump(data, sort_keys=False)
        self._each("log_params", lambda t: t.log_params(params, text))

    def log_step(self, record: dict, rows: list[dict], template: str, images_per_step: int) -> None:
        """One step: ``record`` (its ``metrics.jsonl`` line) and ``rows`` (its ``rollouts.parquet``
        rows, PNG paths filled in); ``template`` is ``prompts.template`` (for the subjects)."""
        step, scalars = int(record["step"]), step_scalars(record)
        images = step_images(rows, template, images_per_step)
        table = sample_table(rows, template)
        self._each(f"step {step}", lambda t: t.log_step(step, scalars, images, table))

    def log_eval(self, report: dict, report_path: Path, step: int) -> None:
        """``brushrl eval``'s ``eval.json`` (``report``, written at ``report_path``) at ``step``."""
        scalars = eval_scalars(report)
        self._each("eval", lambda t: t.log_summary(step, scalars, report_path))

    def log_adapter(self, checkpoint: Path | None, name: str) -> None:
        """The LoRA adapter files (``adapter_*``) of the run's newest checkpoint, as artifact
        ``<name>-adapter``; nothing when there is no checkpoint."""
        if checkpoint is None:
            return
        files = sorted(p for p in Path(checkpoint).glob("adapter_*") if p.is_file())
        if files:
            self._each("adapter", lambda t: t.log_artifact(files, f"{name}-adapter", "model"))

    def close(self) -> None:
        self._each("close", lambda t: t.close())


__all__ = ["PACKAGES", "STATE_FILE", "SampleTable", "StepImage", "Tracker", "TrackerUnavailable", "Trackers",
           "require_trackers", "tracker_problems"]
