"""MLflow: one MLflow run per brushrl run on a tracking server (``logging.mlflow_tracking_uri``, else
``MLFLOW_TRACKING_URI``), in experiment ``logging.mlflow_experiment``; its id is kept in
``RUN_DIR/trackers.json`` so a resumed run and ``brushrl eval`` log into the same one. Talks to the
server through ``MlflowClient`` with explicit run ids (no process-global active run).

Per step: the ``metrics.jsonl`` numbers (``log_batch`` at ``step``; names MLflow refuses are
sanitised, :func:`~brushrl.artifacts.trackers.base.mlflow_name`: brushrl's own names pass as they
are), each painting as a time-stepped image (``log_image(key=paintings/<k>, step=)``, k: 00, 01, ...),
their captions as ``paintings/captions_step_NNNN.json`` and the samples table as
``rollouts/step_NNNN.json`` (``log_table``). Per run: the config as params (flat dotted keys,
values cut at MLflow's 6000 characters; a param already set is not set again: MLflow params are
immutable) and as ``config.yaml``; the final adapter under ``<run>-adapter/``; ``brushrl eval``'s
results as ``eval/...`` metrics at the run's last step and ``eval/eval.json``.

A dead server must not stall training: unless the environment says otherwise, MLflow's HTTP client
is set to 2 retries with backoff factor 1 (0 s, then 2 s) and a 30 s timeout (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``,
``..._BACKOFF_FACTOR``, ``..._BACKOFF_JITTER``, ``..._TIMEOUT``), and a step's calls stop at its first
failure (the fan-out counts it), so a killed server costs about two seconds per step (MLflow's own
defaults: 7 retries, backoff factor 2, minutes).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from brushrl.artifacts.trackers.base import SampleTable, StepImage, mlflow_name
from brushrl.config import LoggingConfig

#: MLflow's HTTP client settings brushrl sets when the environment leaves them unset (module docstring).
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
#: MLflow's longest param value.
MAX_PARAM_CHARS = 6000


class MlflowTracker:
    """Args: cfg: ``logging``. run_name: the brushrl run's name. state: this tracker's entry of
    ``trackers.json`` (``run_id``: the MLflow run to log into again)."""

    name = "mlflow"

    def __init__(self, cfg: LoggingConfig, run_name: str, state: dict):
        for key, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(key, value)
        from mlflow.tracking import MlflowClient

        self.uri = cfg.mlflow_tracking_uri or os.environ["MLFLOW_TRACKING_URI"]
        self.client = MlflowClient(tracking_uri=self.uri)
        if state.get("run_id") and state.get("tracking_uri") == self.uri:
            self.run_id = state["run_id"]
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            experiment = self.client.get_experiment_by_name(cfg.mlflow_experiment)
            experiment_id = (experiment.experiment_id if experiment is not None
                             else self.client.create_experiment(cfg.mlflow_experiment))
            self.run_id = self.client.create_run(experiment_id, run_name=run_name).info.run_id

    def state(self) -> dict:
        return {"run_id": self.run_id, "tracking_uri": self.uri}

    def _metrics(self, scalars: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(mlflow_name(k), v, now, step) for k, v in scalars.items()])

    def log_params(self, params: dict, config_yaml: str) -> None:
        from mlflow.entities import Param

        known = self.client.get_run(self.run_id).data.params
        new = [Param(mlflow_name(k)[:250], str(v)[:MAX_PARAM_CHARS]) for k, v in params.items()
               if mlflow_name(k)[:250] not in known]
        if new:
            self.client.log_batch(self.run_id, params=new)
        self.client.log_text(self.run_id, config_yaml, "config.yaml")

    def log_step(self, step: int, scalars: dict[str, float], images: list[StepImage], table: SampleTable) -> None:
        from PIL import Image

        self._metrics(scalars, step)
        for image in images:
            with Image.open(image.path) as im:
                self.client.log_image(self.run_id, im.convert("RGB"), key=image.key, step=step)
        if images:
            self.client.log_dict(self.run_id, {i.key: i.caption for i in images},
                                 f"paintings/captions_step_{step:04d}.json")
        if table.rows:
            self.client.log_table(self.run_id, table.as_dict(), f"rollouts/step_{step:04d}.json")

    def log_summary(self, step: int, scalars: dict[str, float], report: Path) -> None:
        self._metrics(scalars, step)
        self.client.log_artifact(self.run_id, str(report), "eval")

    def log_artifact(self, files: list[Path], name: str, kind: str) -> None:
        for f in files:
            self.client.log_artifact(self.run_id, str(f), name)

    def close(self) -> None:
        self.client.set_terminated(self.run_id, "FINISHED")


__all__ = ["HTTP_DEFAULTS", "MlflowTracker"]
