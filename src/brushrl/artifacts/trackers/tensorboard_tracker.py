"""TensorBoard: event files in ``RUN_DIR/tensorboard/`` (``tensorboard --logdir runs/``), written
with ``torch.utils.tensorboard.SummaryWriter`` (needs the ``tensorboard`` package).

Scalars under the ``metrics.jsonl`` names; each painting as image ``paintings/<k>`` (k: 00, 01, ...)
(TensorBoard images have no caption: the step's captions are the text ``paintings/captions``); the
samples table as the markdown text ``rollouts`` (``samples`` is the record's sample count); the
config as hyperparameters (the HParams tab) and as the YAML text ``config``; ``brushrl eval``'s results as ``eval/...`` scalars and ``eval.json``
as the text ``eval/report``. No artifacts: the adapter stays in ``RUN_DIR/checkpoints/``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from brushrl.artifacts.trackers.base import SampleTable, StepImage


def _cell(value) -> str:
    text = "" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")[:300]


def markdown_table(table: SampleTable) -> str:
    """``table`` as a markdown table (TensorBoard's text plugin renders it); cells cut at 300 characters."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.rows]
    return "\n".join(lines)


class TensorBoardTracker:
    """Args: logdir: the event files' folder. purge_step: a resumed run's first step (TensorBoard
    hides the older events of that step on)."""

    name = "tensorboard"

    def __init__(self, logdir: Path, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.logdir = Path(logdir)
        self.writer = SummaryWriter(log_dir=str(self.logdir), purge_step=purge_step if purge_step and purge_step > 1
                                    else None)

    def state(self) -> dict:
        return {"logdir": str(self.logdir)}

    def log_params(self, params: dict, config_yaml: str) -> None:
        from torch.utils.tensorboard.summary import hparams

        writer = self.writer._get_file_writer()  # noqa: SLF001 - add_hparams would open a second run folder
        for summary in hparams(params, {}):
            writer.add_summary(summary)
        self.writer.add_text("config", "```\n" + config_yaml + "\n```")

    def log_step(self, step: int, scalars: dict[str, float], images: list[StepImage], table: SampleTable) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        for image in images:
            with Image.open(image.path) as im:
                self.writer.add_image(image.key, np.asarray(im.convert("RGB")), step, dataformats="HWC")
        if images:
            self.writer.add_text("paintings/captions", "\n".join(f"* `{i.key}`: {i.caption}" for i in images), step)
        if table.rows:
            self.writer.add_text("rollouts", markdown_table(table), step)
        self.writer.flush()

    def log_summary(self, step: int, scalars: dict[str, float], report: Path) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        self.writer.add_text("eval/report", "```\n" + Path(report).read_text() + "\n```", step)
        self.writer.flush()

    def log_artifact(self, files: list[Path], name: str, kind: str) -> None:
        self.writer.add_text(f"artifacts/{name}", "\n".join(f"* {f}" for f in files))

    def close(self) -> None:
        self.writer.close()
