"""Weights & Biases: one W&B run per brushrl run (its id in ``RUN_DIR/trackers.json``, so a resumed
run and ``brushrl eval`` log into the same one), files under ``RUN_DIR/wandb/``.

Per step (``run.log(..., step=step)``): the ``metrics.jsonl`` numbers under the same names, the
paintings as ``paintings``, a list of ``wandb.Image`` with captions, and the samples table as the
``wandb.Table`` ``rollouts`` (not ``samples``: that is the record's sample count). The config is
the run's ``config`` (nested, as ``config.yaml``); ``brushrl eval``'s results go into the run's
summary (``eval/...``) with ``eval.json`` as an artifact of type ``eval``; the final adapter is an
artifact of type ``model``.

``WANDB_MODE=offline`` (or ``logging.wandb_mode: offline``) writes the run only to
``RUN_DIR/wandb/offline-run-*``; ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads it later.
"""

from __future__ import annotations

import re
from pathlib import Path

from brushrl.artifacts.trackers.base import SampleTable, StepImage
from brushrl.config import LoggingConfig


class WandbTracker:
    """Args: cfg: ``logging``. run_name: the brushrl run's name. root: the run directory.
    state: this tracker's entry of ``trackers.json`` (``id``: the W&B run to resume)."""

    name = "wandb"

    def __init__(self, cfg: LoggingConfig, run_name: str, root: Path, state: dict):
        import wandb

        self._wandb = wandb
        settings = wandb.Settings(console="off", silent=True, x_disable_stats=True, reinit="create_new")
        kwargs = {"mode": cfg.wandb_mode} if cfg.wandb_mode else {}
        self.run = wandb.init(project=state.get("project", cfg.wandb_project), name=run_name, id=state.get("id"),
                              resume="allow", dir=str(root), settings=settings, **kwargs)

    def state(self) -> dict:
        return {"id": self.run.id, "project": self.run.project, "dir": self.run.dir}

    def log_params(self, params: dict, config_yaml: str) -> None:
        import yaml

        self.run.config.update(yaml.safe_load(config_yaml), allow_val_change=True)

    def log_step(self, step: int, scalars: dict[str, float], images: list[StepImage], table: SampleTable) -> None:
        wandb = self._wandb
        data: dict = dict(scalars)
        if images:
            data["paintings"] = [wandb.Image(str(i.path), caption=i.caption) for i in images]
        if table.rows:
            data["rollouts"] = wandb.Table(columns=table.columns, data=table.rows)
        self.run.log(data, step=step)

    def log_summary(self, step: int, scalars: dict[str, float], report: Path) -> None:
        self.run.summary.update(scalars)
        self.log_artifact([Path(report)], f"{self.run.name}-eval", "eval")

    def log_artifact(self, files: list[Path], name: str, kind: str) -> None:
        artifact = self._wandb.Artifact(re.sub(r"[^A-Za-z0-9_.-]", "_", name), type=kind)
        for f in files:
            artifact.add_file(str(f))
        self.run.log_artifact(artifact)

    def close(self) -> None:
        """Finish the run and stop W&B's service process: wandb-core keeps the run file
        (``run-<id>.wandb``) buffered until then, so only after this is an offline run complete on
        disk (ready for ``wandb sync``) while the driver still runs."""
        self.run.finish()
        self._wandb.teardown()
